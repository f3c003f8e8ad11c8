//! `wc`: counts lines, words and bytes of files; `--files0-from` (names
//! from a file) is refused.

use super::{flag, opt, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "wc",
    opts: &[
        flag(&["-c", "--bytes"]),
        flag(&["-m", "--chars"]),
        flag(&["-l", "--lines"]),
        flag(&["-L", "--max-line-length"]),
        flag(&["-w", "--words"]),
        opt(&["--total"], Val::OneOf(&["auto", "always", "only", "never"])),
    ],
    deny: &[(
        "--files0-from",
        "it takes the names to count from a file, which the guard cannot check",
    )],
    operands: Operands::Read,
    ..BASE
};
