//! `cut`: prints selected parts of lines of files.

use super::{flag, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "cut",
    opts: &[
        req(&["-b", "--bytes"], Val::Text),
        req(&["-c", "--characters"], Val::Text),
        req(&["-d", "--delimiter"], Val::Text),
        req(&["-f", "--fields"], Val::Text),
        flag(&["-n"]),
        flag(&["--complement"]),
        flag(&["-s", "--only-delimited"]),
        req(&["--output-delimiter"], Val::Text),
        flag(&["-z", "--zero-terminated"]),
    ],
    operands: Operands::Read,
    ..BASE
};
