//! `head`: prints the first lines of files.

use super::{flag, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "head",
    opts: &[
        req(&["-n", "--lines"], Val::Num),
        req(&["-c", "--bytes"], Val::Num),
        flag(&["-q", "--quiet", "--silent"]),
        flag(&["-v", "--verbose"]),
        flag(&["-z", "--zero-terminated"]),
    ],
    operands: Operands::Read,
    numeric: Some("-n"),
    ..BASE
};
