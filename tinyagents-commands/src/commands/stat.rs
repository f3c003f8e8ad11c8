//! `stat`: file status (operands are resolved, so `-L` follows only what
//! the guard already confined).

use super::{flag, opt, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "stat",
    opts: &[
        flag(&["-L", "--dereference"]),
        flag(&["-f", "--file-system"]),
        req(&["-c", "--format"], Val::Text),
        req(&["--printf"], Val::Text),
        flag(&["-t", "--terse"]),
        opt(&["--cached"], Val::OneOf(&["always", "never", "default"])),
    ],
    operands: Operands::Read,
    ..BASE
};
