//! `npm run SCRIPT [-- ARGS]` (**`workspace` profile only**): runs a script
//! of the project's `package.json`, code from the workspace, where the OS
//! sandbox confines the run. Only `run` (or `run-script`), with
//! `--if-present` or `--silent`, a script name, and after `--` its
//! arguments; no other npm subcommand (install, publish, exec, …) and no
//! option that points npm elsewhere (`--prefix`, `--workspace`, `--userconfig`).

use super::{Ctx, Operands, Parse, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "npm",
    parse: Parse::Custom(parse),
    operands: Operands::Text,
    writes: true,
    ..BASE
};

fn parse(_spec: &'static Spec, args: &[String], cx: &Ctx<'_>) -> Result<(), String> {
    match args.first().map(String::as_str) {
        Some("run" | "run-script") => {}
        Some(other) => {
            return Err(cx.refuse(
                other,
                "only `npm run SCRIPT` is admitted (installing, publishing or `exec` fetch and run code from the \
                 network)",
            ))
        }
        None => return Err("`npm` without a subcommand: write `npm run SCRIPT`".to_owned()),
    }
    let mut name = None;
    for arg in &args[1..] {
        if arg == "--" {
            break;
        }
        match arg.as_str() {
            "--if-present" | "--silent" | "-s" => {}
            a if a.starts_with('-') => {
                return Err(cx.refuse(
                    a,
                    "not an option `npm run` is admitted with (`--if-present`, `--silent`); give the script's own \
                     arguments after `--`",
                ))
            }
            a if name.is_none() => name = Some(a),
            a => return Err(cx.refuse(a, "a second script name: give the script's arguments after `--`")),
        }
    }
    if name.is_none() {
        return Err("`npm run` without a script name".to_owned());
    }
    Ok(())
}
