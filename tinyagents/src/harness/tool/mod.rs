//! Tools: what the model may call ([`ToolSchema`]), what it asked for
//! ([`ToolCall`]), what came back ([`ToolResult`], exactly one per call),
//! progress while it runs ([`ToolDelta`]), per-tool metadata ([`ToolPolicy`]),
//! the [`Tool`] trait, fn-tools, typed tools ([`typed`], the `#[tool]`
//! attribute) and the [`ToolRegistry`].

mod arguments;
pub(crate) mod batch;
mod call;
mod lists;
mod policy;
mod registry;
mod restrictions;
pub mod typed;

pub use arguments::{check_argument_text, check_argument_value, MAX_ARGUMENT_BYTES, MAX_ARGUMENT_DEPTH};
pub use call::{FileAccess, FileAccessMode, ToolCall, ToolDelta, ToolResult, ToolSchema};
pub use lists::ToolLists;
pub use policy::{SandboxMode, SideEffects, ToolAccess, ToolPolicy, ToolRuntime};
pub use registry::{tool_fn, FnTool, ParentRun, Tool, ToolContext, ToolOutput, ToolRegistry};
pub use restrictions::{
    call_digest, Approval, AsyncCallGuard, CallGuard, GuardedRun, PolicyRules, Restriction, RunRestrictions,
};
pub(crate) use restrictions::{declares_read_only, SIDE_EFFECT_NAMES};
