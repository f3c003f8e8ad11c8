//! `false`: does nothing and fails (its arguments are ignored).

use super::{Operands, Parse, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "false",
    parse: Parse::Raw,
    operands: Operands::Text,
    ..BASE
};
