//! Agent modes (build, plan, review): see the table in [the library docs](super).

mod agent_mode;

pub use agent_mode::{
    AgentMode, AgentModeConfig, AgentModeMiddleware, MODE_KEY, MODE_TAG, PLAN_REMINDER, REVIEW_REMINDER,
};

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[doc_of::<AgentModeMiddleware>()];
