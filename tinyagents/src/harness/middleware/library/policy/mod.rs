//! Tool policy and tool exposure built-ins: see the table in [the library docs](super).

mod tool_policy;

pub use tool_policy::{ToolPolicyConfig, ToolPolicyMiddleware};

use crate::docs::MiddlewareMetadata;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of a DSL built-in (every built-in has one: `builtin` requires it).
const fn doc_of<M: MiddlewareMetadata>() -> &'static MiddlewareDoc {
    match M::DOC {
        Some(doc) => doc,
        None => panic!("a built-in always has a doc"),
    }
}

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[doc_of::<ToolPolicyMiddleware>()];
