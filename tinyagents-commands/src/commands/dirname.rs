//! `dirname`: strips the last component of names; never opens them.

use super::{flag, Operands, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "dirname",
    opts: &[flag(&["-z", "--zero"])],
    operands: Operands::Text,
    ..BASE
};
