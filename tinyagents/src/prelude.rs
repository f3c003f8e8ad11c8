//! Everything a middleware author needs: `use tinyagents::prelude::*;`.

pub use crate::harness::agent::{Agent, AgentInput, AgentRun, AgentTool, StopReason, ToolErrorPolicy};
pub use crate::harness::context::{JumpSet, JumpTarget, MiddlewareControl, RunConfig, RunContext};
pub use crate::harness::error::{ErrorKind, Result, TinyAgentsError};
pub use crate::harness::event::{AgentEvent, CollectingSink, EventKind, EventSink, NullSink};
pub use crate::harness::message::{Message, Role};
// `ModelMiddleware` and `ToolMiddleware` are not here: for a type that
// implements one of them and `Middleware`, `mw.name()` would be ambiguous
// with both in scope. Import them from `tinyagents::harness::middleware`.
pub use crate::harness::middleware::{
    HookKind, HookSet, Middleware, MiddlewareInfo, MiddlewareModelOutcome, MiddlewareStack, MiddlewareToolOutcome,
    ModelHandler, PreparedBatch, RunState, ToolHandler,
};
pub use crate::harness::model::{
    ChatModel, ModelDelta, ModelRequest, ModelResponse, PromptSegment, ScriptedModel, ScriptedTurn, Usage,
};
pub use crate::harness::provenance::CompactionPlan;
pub use crate::harness::steering::{SteeringCommand, SteeringOutcome};
pub use crate::harness::tool::{tool_fn, Tool, ToolCall, ToolDelta, ToolRegistry, ToolResult, ToolSchema};

#[cfg(feature = "macros")]
pub use tinyagents_macros::*;
