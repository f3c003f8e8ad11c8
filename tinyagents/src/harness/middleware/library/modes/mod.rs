//! Agent-mode and edit-review built-ins: see the table in [the library docs](super).

mod agent_mode;
mod dedup_check;
mod parallel_edit_guard;

pub use agent_mode::{
    AgentMode, AgentModeConfig, AgentModeMiddleware, MODE_KEY, MODE_TAG, PLAN_REMINDER, REVIEW_REMINDER,
};
pub use dedup_check::{DedupCheckConfig, DedupCheckMiddleware, SimilarPlace};
pub use parallel_edit_guard::{EditGuardMode, ParallelEditGuardConfig, ParallelEditGuardMiddleware};

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<AgentModeMiddleware>(),
    doc_of::<ParallelEditGuardMiddleware>(),
    doc_of::<DedupCheckMiddleware>(),
];
