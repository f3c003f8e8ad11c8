//! Cross-cutting extension points that wrap agent, model and tool execution.
//!
//! Two shapes of middleware compose in one [`MiddlewareStack`]:
//!
//! * **Lifecycle middleware** ([`Middleware`]) observes and may mutate the
//!   values flowing past fixed points: `before_agent`/`after_agent`,
//!   `before_model`/`on_model_delta`/`after_model`, `on_tool_batch`,
//!   `before_tool`, `on_prepared_tool_calls`, `on_tool_delta`/`after_tool`,
//!   steering, and `on_error`.
//! * **Wrap middleware** ([`ModelMiddleware`], [`ToolMiddleware`]) surrounds
//!   the call with a `next` handler it may run zero, one or many times: the
//!   shape of retry, fallback, caching and short-circuits.
//!
//! `before_*` hooks run in registration order and `after_*` hooks in reverse,
//! so the first-registered middleware is the outermost layer of the onion.
//! Every invoked hook is bracketed by balanced
//! [`MiddlewareStarted`](crate::harness::event::AgentEvent::MiddlewareStarted)/
//! [`MiddlewareCompleted`](crate::harness::event::AgentEvent::MiddlewareCompleted)
//! events (the per-delta hooks excepted). The first error short-circuits, every
//! `on_error` sees it, and the original error is returned.
//!
//! Write middleware with the DSL (`#[before_model]`, `#[wrap_tool]`,
//! `#[middleware]`, …, re-exported from the crate root); the built-ins are in
//! [`crate::middleware`](mod@crate::middleware).

mod dispatch;
mod handler;
mod hook_result;
mod info;
mod invoke;
mod observe;
mod order;
mod outcome;
pub(crate) mod run_state;
pub mod shape;
mod stack;
mod sync_forms;
mod traits;
mod wrap_only;

#[cfg(test)]
mod tests;

pub use crate::harness::hooks::{hook, HookKind, HookSet};
pub use crate::harness::tool::batch::{AccessFn, PreparedBatch, PreparedCallVerdict, PreparedToolCall};
pub use dispatch::{pre_compact, HookDispatch};
pub use handler::{ModelHandler, ToolHandler};
pub use hook_result::HookResult;
pub use info::{ConfigFieldDoc, MiddlewareDoc, MiddlewareInfo};
pub use observe::{observe_hook, HookObserver};
pub use outcome::{MiddlewareModelOutcome, MiddlewareToolOutcome};
pub use run_state::{RunState, RunStateGuard};
pub use stack::MiddlewareStack;
pub use traits::{HookValue, Middleware, ModelBaseCall, ModelMiddleware, ToolBaseCall, ToolMiddleware};

pub use crate::harness::run::AgentRun;

/// The built-ins the `harness::middleware` design names, at the paths it
/// writes (`tinyagents::harness::middleware::ToolPolicyMiddleware`, …). Each
/// one's one path is [`crate::middleware`](mod@crate::middleware); `docs/names.md` lists every alias.
#[doc(no_inline)]
pub use crate::library::design_names::*;
