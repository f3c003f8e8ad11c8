//! `date`: prints the date. Only a `+FORMAT` operand is admitted (any other
//! operand sets the clock), `-s`/`--set` is refused; `-r FILE` and
//! `-f FILE` read.

use super::{flag, opt, req, Ctx, Operands, Parsed, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "date",
    opts: &[
        req(&["-d", "--date"], Val::Text),
        req(&["-f", "--file"], Val::Read),
        opt(
            &["-I", "--iso-8601"],
            Val::OneOf(&["date", "hours", "minutes", "seconds", "ns"]),
        ),
        flag(&["-R", "--rfc-email"]),
        req(&["--rfc-3339"], Val::OneOf(&["date", "seconds", "ns"])),
        req(&["-r", "--reference"], Val::Read),
        flag(&["-u", "--utc", "--universal"]),
        flag(&["--debug"]),
    ],
    deny: &[
        ("-s", "it sets the system clock"),
        ("--set", "it sets the system clock"),
    ],
    operands: Operands::Text,
    check: Some(only_format),
    ..BASE
};

fn only_format(parsed: &Parsed, cx: &Ctx<'_>) -> Result<(), String> {
    match parsed.operands.as_slice() {
        [] => Ok(()),
        [format] if format.starts_with('+') => Ok(()),
        [other, ..] => Err(cx.refuse(
            other,
            "an operand that is not `+FORMAT` sets the system clock (fix: `date +%Y-%m-%d`)",
        )),
    }
}
