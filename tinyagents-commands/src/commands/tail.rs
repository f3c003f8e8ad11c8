//! `tail`: prints the last lines of files. Following a file (`-f`, `-F`)
//! never ends and is refused.

use super::{flag, req, Operands, Spec, Val, BASE};

const FOREVER: &str = "it follows the file forever (the command would never end): read it again later instead";

pub(crate) const SPEC: Spec = Spec {
    name: "tail",
    opts: &[
        req(&["-n", "--lines"], Val::Num),
        req(&["-c", "--bytes"], Val::Num),
        flag(&["-q", "--quiet", "--silent"]),
        flag(&["-v", "--verbose"]),
        flag(&["-z", "--zero-terminated"]),
    ],
    deny: &[
        ("-f", FOREVER),
        ("-F", FOREVER),
        ("--follow", FOREVER),
        ("--retry", FOREVER),
        ("--pid", FOREVER),
        ("-s", FOREVER),
        ("--sleep-interval", FOREVER),
    ],
    operands: Operands::Read,
    numeric: Some("-n"),
    ..BASE
};
