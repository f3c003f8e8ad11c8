//! Prompt built-ins (dynamic prompt, prompt-cache layout guard): see the
//! table in [the library docs](super).

mod dynamic_prompt;
mod prompt_cache_guard;

pub use dynamic_prompt::{DynamicPromptConfig, DynamicPromptMiddleware};
pub use prompt_cache_guard::{CacheLayoutLog, OnPrefixChange, PromptCacheGuardConfig, PromptCacheGuardMiddleware};

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<DynamicPromptMiddleware>(),
    doc_of::<PromptCacheGuardMiddleware>(),
];
