//! The middleware traits: [`Middleware`] (lifecycle hooks), [`ModelMiddleware`]
//! and [`ToolMiddleware`] (wraps), and the innermost calls [`ModelBaseCall`] and [`ToolBaseCall`].

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    HookKind, HookSet, MiddlewareInfo, MiddlewareModelOutcome, MiddlewareToolOutcome, ModelHandler, PreparedBatch,
    ToolHandler,
};
use crate::harness::agent::AgentRun;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::model::{ModelDelta, ModelRequest, ModelResponse};
use crate::harness::steering::{SteeringCommand, SteeringOutcome};
use crate::harness::tool::{ToolCall, ToolDelta, ToolResult};

/// The short name of a type (`LoggingMiddleware` for `my::LoggingMiddleware<T>`).
fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// Lifecycle middleware: hooks that observe, and may mutate, the values flowing
/// past fixed points of a run.
///
/// Every hook is an async no-op by default and takes, in this order, the run
/// context, the (read-only) state, then the value. An `Err` short-circuits the
/// stack; every middleware's [`on_error`](Middleware::on_error) then sees it.
///
/// Most middleware is written with the DSL (`#[before_model]`,
/// `#[middleware]`), which also reports the exact [`HookSet`]. A hand-written
/// impl works too:
///
/// ```
/// use tinyagents::prelude::*;
///
/// struct Shout;
///
/// #[async_trait::async_trait]
/// impl Middleware<()> for Shout {
///     fn hooks(&self) -> HookSet {
///         HookSet::AFTER_MODEL // only this hook is dispatched
///     }
///     async fn after_model(&self, _ctx: &mut RunContext, _state: &(), response: &mut ModelResponse) -> Result<()> {
///         let loud = response.message.text().to_uppercase();
///         response.message.set_text(loud);
///         Ok(())
///     }
/// }
///
/// let mut stack: MiddlewareStack<()> = MiddlewareStack::new();
/// stack.add(Shout).unwrap();
/// assert!(stack.names().contains(&"Shout"));
/// ```
#[async_trait]
#[allow(unused_variables)]
pub trait Middleware<State, Ctx = ()>: Send + Sync
where
    State: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    /// The middleware's name (default: the type's short name).
    fn name(&self) -> &str {
        short_type_name::<Self>()
    }

    /// The hooks this value really implements (default: every lifecycle hook).
    fn hooks(&self) -> HookSet {
        HookSet::LIFECYCLE
    }

    /// Name, hooks, ordering constraints, allowed jumps and documentation.
    /// Read once, at registration.
    fn info(&self) -> MiddlewareInfo {
        MiddlewareInfo::new(self.name().to_owned()).with_hooks(self.hooks())
    }

    /// The tools this middleware contributes (default: none). Read once,
    /// when the middleware is registered: the stack keeps them, and an
    /// agent offers them next to its own tools. Two contributions of one
    /// tool name are a registration error naming both middleware. With the
    /// DSL: `#[middleware(tools = Self::my_tools)]`.
    fn tools(&self) -> Vec<Arc<dyn crate::harness::tool::Tool>> {
        Vec::new()
    }

    /// This value as wrap-model middleware, when it is one (so one
    /// `stack.add(value)` registers it in the model onion too).
    fn model_middleware(self: Arc<Self>) -> Option<Arc<dyn ModelMiddleware<State, Ctx>>> {
        None
    }

    /// This value as wrap-tool middleware, when it is one.
    fn tool_middleware(self: Arc<Self>) -> Option<Arc<dyn ToolMiddleware<State, Ctx>>> {
        None
    }

    /// The synchronous form of every lifecycle hook whose
    /// [`HookSet::sync_of`] flag is in [`hooks`](Middleware::hooks) (the
    /// delta hooks excepted: they have typed sync methods). The stack calls it
    /// instead of the async hook, with no future. The DSL implements it for
    /// plain (non-async) hook fns.
    fn on_sync(&self, ctx: &mut RunContext<Ctx>, state: &State, value: HookValue<'_>) -> Result<()> {
        Err(TinyAgentsError::middleware(
            self.name(),
            format!(
                "`on_sync` was called for `{}`, which has no synchronous form",
                value.hook()
            ),
        ))
    }

    /// Once, when a run starts.
    async fn before_agent(&self, ctx: &mut RunContext<Ctx>, state: &State) -> Result<()> {
        Ok(())
    }

    /// Once, when a run ends (also after a failed run), with its result.
    async fn after_agent(&self, ctx: &mut RunContext<Ctx>, state: &State, run: &mut AgentRun) -> Result<()> {
        Ok(())
    }

    /// Before a steering command is applied: edit it (transform), or
    /// [`reject`](SteeringCommand::reject) or [`defer`](SteeringCommand::defer) it.
    async fn before_steering(
        &self,
        ctx: &mut RunContext<Ctx>,
        state: &State,
        command: &mut SteeringCommand,
    ) -> Result<()> {
        Ok(())
    }

    /// After a steering command was decided.
    async fn after_steering(
        &self,
        ctx: &mut RunContext<Ctx>,
        state: &State,
        outcome: &mut SteeringOutcome,
    ) -> Result<()> {
        Ok(())
    }

    /// Before each model call.
    async fn before_model(&self, ctx: &mut RunContext<Ctx>, state: &State, request: &mut ModelRequest) -> Result<()> {
        Ok(())
    }

    /// Before each streaming model call, after every `before_model`.
    async fn before_model_stream(
        &self,
        ctx: &mut RunContext<Ctx>,
        state: &State,
        request: &mut ModelRequest,
    ) -> Result<()> {
        Ok(())
    }

    /// For each streamed delta, before it is forwarded or accumulated. May
    /// edit it or [`suppress`](ModelDelta::suppress) it. Emits no bracketing events.
    async fn on_model_delta(&self, ctx: &mut RunContext<Ctx>, state: &State, delta: &mut ModelDelta) -> Result<()> {
        Ok(())
    }

    /// The synchronous form of `on_model_delta`, called instead of it when
    /// [`hooks`](Middleware::hooks) contains [`HookSet::SYNC_MODEL_DELTA`]: no boxed future per delta.
    fn on_model_delta_sync(&self, ctx: &mut RunContext<Ctx>, state: &State, delta: &mut ModelDelta) -> Result<()> {
        Ok(())
    }

    /// After each model call.
    async fn after_model(&self, ctx: &mut RunContext<Ctx>, state: &State, response: &mut ModelResponse) -> Result<()> {
        Ok(())
    }

    /// Once per reply with tool calls: review the prepared batch and reject calls.
    async fn on_tool_batch(&self, ctx: &mut RunContext<Ctx>, state: &State, batch: &mut PreparedBatch) -> Result<()> {
        Ok(())
    }

    /// Before each tool call. A `Validation` error refuses the call: by
    /// default it becomes the call's error result for the model.
    async fn before_tool(&self, ctx: &mut RunContext<Ctx>, state: &State, call: &mut ToolCall) -> Result<()> {
        Ok(())
    }

    /// For each tool progress delta.
    async fn on_tool_delta(&self, ctx: &mut RunContext<Ctx>, state: &State, delta: &mut ToolDelta) -> Result<()> {
        Ok(())
    }

    /// The synchronous form of `on_tool_delta` (see [`HookSet::SYNC_TOOL_DELTA`]).
    fn on_tool_delta_sync(&self, ctx: &mut RunContext<Ctx>, state: &State, delta: &mut ToolDelta) -> Result<()> {
        Ok(())
    }

    /// After each tool call.
    async fn after_tool(&self, ctx: &mut RunContext<Ctx>, state: &State, result: &mut ToolResult) -> Result<()> {
        Ok(())
    }

    /// When a hook, the model or a tool failed. Best effort: errors returned
    /// here are ignored and never replace the original error.
    async fn on_error(&self, ctx: &mut RunContext<Ctx>, state: &State, error: &TinyAgentsError) -> Result<()> {
        Ok(())
    }
}

/// The value a lifecycle hook passes, for [`Middleware::on_sync`].
#[derive(Debug)]
#[non_exhaustive]
pub enum HookValue<'a> {
    /// `before_agent` (no value).
    BeforeAgent,
    /// `after_agent`.
    AfterAgent(&'a mut AgentRun),
    /// `before_steering`.
    BeforeSteering(&'a mut SteeringCommand),
    /// `after_steering`.
    AfterSteering(&'a mut SteeringOutcome),
    /// `before_model`.
    BeforeModel(&'a mut ModelRequest),
    /// `before_model_stream`.
    BeforeModelStream(&'a mut ModelRequest),
    /// `after_model`.
    AfterModel(&'a mut ModelResponse),
    /// `on_tool_batch`.
    OnToolBatch(&'a mut PreparedBatch),
    /// `before_tool`.
    BeforeTool(&'a mut ToolCall),
    /// `after_tool`.
    AfterTool(&'a mut ToolResult),
    /// `on_error`.
    OnError(&'a TinyAgentsError),
}

impl HookValue<'_> {
    /// The hook this value is passed to.
    pub const fn hook(&self) -> HookKind {
        match self {
            Self::BeforeAgent => HookKind::BeforeAgent,
            Self::AfterAgent(_) => HookKind::AfterAgent,
            Self::BeforeSteering(_) => HookKind::BeforeSteering,
            Self::AfterSteering(_) => HookKind::AfterSteering,
            Self::BeforeModel(_) => HookKind::BeforeModel,
            Self::BeforeModelStream(_) => HookKind::BeforeModelStream,
            Self::AfterModel(_) => HookKind::AfterModel,
            Self::OnToolBatch(_) => HookKind::OnToolBatch,
            Self::BeforeTool(_) => HookKind::BeforeTool,
            Self::AfterTool(_) => HookKind::AfterTool,
            Self::OnError(_) => HookKind::OnError,
        }
    }
}

/// Wrap middleware around each model call.
///
/// `next` is the rest of the onion; call [`next.run`](ModelHandler::run)
/// zero times (short-circuit), once (proceed) or many times (retry, fallback).
#[async_trait]
pub trait ModelMiddleware<State, Ctx = ()>: Send + Sync
where
    State: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    /// The middleware's name.
    fn name(&self) -> &str {
        short_type_name::<Self>()
    }

    /// Wraps one model call.
    async fn wrap_model(
        &self,
        ctx: &mut RunContext<Ctx>,
        state: &State,
        request: ModelRequest,
        next: ModelHandler<'_, State, Ctx>,
    ) -> Result<MiddlewareModelOutcome>;
}

/// Wrap middleware around each tool call; see [`ModelMiddleware`].
#[async_trait]
pub trait ToolMiddleware<State, Ctx = ()>: Send + Sync
where
    State: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    /// The middleware's name.
    fn name(&self) -> &str {
        short_type_name::<Self>()
    }

    /// Wraps one tool call.
    async fn wrap_tool(
        &self,
        ctx: &mut RunContext<Ctx>,
        state: &State,
        call: ToolCall,
        next: ToolHandler<'_, State, Ctx>,
    ) -> Result<MiddlewareToolOutcome>;
}

/// The innermost layer of the model onion: the real model call.
#[async_trait]
pub trait ModelBaseCall<State, Ctx = ()>: Send + Sync
where
    State: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    /// Calls the model.
    async fn call(&self, ctx: &mut RunContext<Ctx>, state: &State, request: ModelRequest) -> Result<ModelResponse>;
}

/// The innermost layer of the tool onion: the real tool call.
#[async_trait]
pub trait ToolBaseCall<State, Ctx = ()>: Send + Sync
where
    State: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    /// Calls the tool.
    async fn call(&self, ctx: &mut RunContext<Ctx>, state: &State, call: ToolCall) -> Result<ToolResult>;
}
