//! `printf`: formats its arguments (every one is text).

use super::{Operands, Parse, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "printf",
    parse: Parse::Raw,
    operands: Operands::Text,
    ..BASE
};
