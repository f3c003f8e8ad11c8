//! The built-in middleware library. Every built-in is declared with the DSL
//! and documented; [`catalog`] lists them all.

use super::MiddlewareDoc;

/// The documentation of every built-in middleware, in a stable order.
pub fn catalog() -> Vec<&'static MiddlewareDoc> {
    Vec::new()
}
