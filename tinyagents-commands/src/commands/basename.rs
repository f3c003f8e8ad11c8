//! `basename`: prints the last component of names; never opens them.

use super::{flag, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "basename",
    opts: &[
        flag(&["-a", "--multiple"]),
        req(&["-s", "--suffix"], Val::Text),
        flag(&["-z", "--zero"]),
    ],
    operands: Operands::Text,
    ..BASE
};
