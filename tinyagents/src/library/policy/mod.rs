//! Tool policy and tool exposure built-ins: see the table in [the library docs](super).

mod contextual_tool_selection;
mod dynamic_tool_selection;
mod human_in_the_loop;
mod tool_allowlist;
mod tool_policy;

/// Tool allow and deny lists (they live in [`crate::harness::tool`], with the restrictions they make).
pub use crate::harness::tool::ToolLists;
pub use contextual_tool_selection::{
    ContextualToolSelectionConfig, ContextualToolSelectionMiddleware, ToolSelectionContext,
};
pub use dynamic_tool_selection::{DynamicToolSelectionConfig, DynamicToolSelectionMiddleware, SELECTOR_PROMPT};
pub(crate) use human_in_the_loop::replays_next_turn;
pub use human_in_the_loop::{
    ApprovalRequest, BoundDecision, ChildApproval, CompletedCall, Decision, DecisionKind, HitlInterrupt, HitlResume,
    HumanInTheLoopConfig, HumanInTheLoopMiddleware, InterruptOn,
};
pub use tool_allowlist::{ToolAllowlistConfig, ToolAllowlistMiddleware, ALLOW_TAG, DENY_TAG};
pub use tool_policy::{ToolPolicyConfig, ToolPolicyMiddleware};

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<ToolPolicyMiddleware>(),
    doc_of::<ContextualToolSelectionMiddleware>(),
    doc_of::<ToolAllowlistMiddleware>(),
    doc_of::<DynamicToolSelectionMiddleware>(),
    doc_of::<HumanInTheLoopMiddleware>(),
];
