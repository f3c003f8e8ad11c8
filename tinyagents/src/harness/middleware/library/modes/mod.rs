//! Agent-mode and edit-review built-ins: see the table in [the library docs](super).

mod agent_mode;
mod dedup_check;
mod parallel_edit_guard;

pub use agent_mode::{
    AgentMode, AgentModeConfig, AgentModeMiddleware, MODE_KEY, MODE_TAG, PLAN_REMINDER, REVIEW_REMINDER,
};
pub use dedup_check::{DedupCheckConfig, DedupCheckMiddleware, SimilarPlace};
pub use parallel_edit_guard::{EditGuardMode, ParallelEditGuardConfig, ParallelEditGuardMiddleware};

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
    doc_of::<AgentModeMiddleware>(),
    doc_of::<ParallelEditGuardMiddleware>(),
    doc_of::<DedupCheckMiddleware>(),
];
