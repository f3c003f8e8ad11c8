//! `pwd`: prints the working directory.

use super::{flag, Operands, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "pwd",
    opts: &[flag(&["-L", "--logical"]), flag(&["-P", "--physical"])],
    operands: Operands::None,
    ..BASE
};
