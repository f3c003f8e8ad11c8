//! `test`: evaluates an expression. Operands of the file tests (`-e`,
//! `-f`, `-d`, ..., `-nt`, `-ot`, `-ef`) are paths read (even whether a
//! file exists outside the root is not disclosed); the rest is text.

use super::{Ctx, Operands, Parse, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "test",
    parse: Parse::Custom(parse),
    operands: Operands::Text,
    ..BASE
};

const UNARY_FILE: &[&str] = &[
    "-b", "-c", "-d", "-e", "-f", "-g", "-G", "-h", "-k", "-L", "-N", "-O", "-p", "-r", "-s", "-S", "-u", "-w", "-x",
];
const BINARY_FILE: &[&str] = &["-nt", "-ot", "-ef"];

fn parse(_spec: &'static Spec, args: &[String], cx: &Ctx<'_>) -> Result<(), String> {
    for (i, a) in args.iter().enumerate() {
        if UNARY_FILE.contains(&a.as_str())
            && let Some(path) = args.get(i + 1)
        {
            cx.read(path)?;
        }
        if BINARY_FILE.contains(&a.as_str()) {
            for side in [i.checked_sub(1).and_then(|j| args.get(j)), args.get(i + 1)]
                .into_iter()
                .flatten()
            {
                cx.read(side)?;
            }
        }
    }
    Ok(())
}
