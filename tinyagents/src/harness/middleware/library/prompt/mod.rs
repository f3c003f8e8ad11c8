//! Prompt built-ins (dynamic prompt, prompt-cache layout guard): see the
//! table in [the library docs](super).

mod cache_layout_guard;
mod dynamic_prompt;

pub use cache_layout_guard::{CacheLayoutLog, OnPrefixChange, PromptCacheGuardConfig, PromptCacheGuardMiddleware};
pub use dynamic_prompt::{DynamicPromptConfig, DynamicPromptMiddleware};

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
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<DynamicPromptMiddleware>(),
    doc_of::<PromptCacheGuardMiddleware>(),
];
