//! `sh SCRIPT [ARGS]` (**`workspace` profile only**): runs a script file of
//! the workspace — the project's build script — where the OS sandbox
//! confines the run. The first argument must be a regular file inside the
//! root; every option (`-c` runs its argument as code, `-s` reads code from
//! stdin) is refused, and so is `sh` without a script.

use super::{Ctx, Operands, Parse, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "sh",
    parse: Parse::Custom(parse),
    operands: Operands::Text,
    writes: true,
    ..BASE
};

fn parse(_spec: &'static Spec, args: &[String], cx: &Ctx<'_>) -> Result<(), String> {
    let Some(script) = args.first() else {
        return Err("`sh` without a script: name a script file of the workspace (`sh build.sh`)".to_owned());
    };
    if script.starts_with('-') || script.starts_with('+') {
        return Err(cx.refuse(
            script,
            "`sh` runs a script file of the workspace here; its options (`-c` runs its argument as code) are refused",
        ));
    }
    let path = cx.read(script)?;
    if !path.is_file() {
        return Err(cx.refuse(script, "this is not a script file of the workspace"));
    }
    Ok(())
}
