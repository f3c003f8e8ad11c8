//! `mkdir`: creates directories (every operand is written).

use super::{flag, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "mkdir",
    opts: &[
        req(&["-m", "--mode"], Val::Text),
        flag(&["-p", "--parents"]),
        flag(&["-v", "--verbose"]),
    ],
    operands: Operands::Write,
    writes: true,
    ..BASE
};
