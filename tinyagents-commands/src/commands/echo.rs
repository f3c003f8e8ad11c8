//! `echo`: prints its arguments (every one is text; globs are still
//! expanded and confined by the shell check).

use super::{Operands, Parse, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "echo",
    parse: Parse::Raw,
    operands: Operands::Text,
    ..BASE
};
