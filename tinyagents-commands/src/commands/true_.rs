//! `true`: does nothing and succeeds (its arguments are ignored).

use super::{Operands, Parse, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "true",
    parse: Parse::Raw,
    operands: Operands::Text,
    ..BASE
};
