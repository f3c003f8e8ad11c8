//! The middleware traits: [`Middleware`] (lifecycle hooks), [`ModelMiddleware`]
//! and [`ToolMiddleware`] (wraps), and the innermost calls [`ModelBaseCall`] and [`ToolBaseCall`].

use std::sync::Arc;

use async_trait::async_trait;

use super::hook::{self, Hook};
use super::{
    HookKind, HookSet, MiddlewareInfo, MiddlewareModelOutcome, MiddlewareToolOutcome, ModelHandler, PreparedBatch,
    ToolHandler,
};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::model::{ModelDelta, ModelRequest, ModelResponse};
use crate::harness::provenance::CompactionPlan;
use crate::harness::run::AgentRun;
use crate::harness::steering::{SteeringCommand, SteeringOutcome};
use crate::harness::tool::{ToolCall, ToolDelta, ToolResult};

/// The short name of a type (`LoggingMiddleware` for `my::LoggingMiddleware<T>`).
fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

/// Derives the [`Middleware`] trait and [`HookValue`] from the hook table.
macro_rules! define_middleware {
    (lifecycle { $($(#[$doc:meta])* $kind:ident $method:ident $run:ident $flag:ident $order:ident ($($arg:ident : $value:ty)?) $([$sync:ident $sync_flag:ident])?;)* }
     error { $(#[$edoc:meta])* $ekind:ident $emethod:ident $erun:ident $eflag:ident ($earg:ident : $evalue:ty); }
     wraps { $($(#[$wdoc:meta])* $wkind:ident $wmethod:ident $wflag:ident;)* }) => {
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
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a middleware for a `MiddlewareStack<{State}, {Ctx}>` (it does not implement `Middleware<{State}, {Ctx}>`)",
    label = "not a `Middleware<{State}, {Ctx}>`",
    note = "a hook attribute on a fn (`#[before_model] async fn stamp_date(…)`) generates a unit struct named after it: register that type (`.with(StampDate)`), not the fn",
    note = "a DSL middleware implements `Middleware` for the state its hooks take: a hook with `state: &App` registers on a `MiddlewareStack<App>` only; to fit any stack, make the hook generic (`fn hook<S>(state: &S)`) or leave the state out"
)]
pub trait Middleware<State, Ctx = ()>: Send + Sync
where
    State: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    /// The middleware's name (default: the type's short name).
    fn name(&self) -> &str {
        short_type_name::<Self>()
    }

    /// The hooks this value really implements (default: every hook, the
    /// wraps included: always correct, never fastest; narrow it to what the
    /// type overrides).
    fn hooks(&self) -> HookSet {
        HookSet::EVERY
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

    /// Wraps one model call, as [`ModelMiddleware::wrap_model`] does:
    /// `next` is the rest of the onion, called zero times (short-circuit),
    /// once (proceed) or many times (retry, fallback). The stack calls it
    /// when [`hooks`](Middleware::hooks) contains [`HookSet::WRAP_MODEL`]
    /// (the default of a hand-written impl). The default proceeds once.
    ///
    /// A type may write its wrap here, or implement [`ModelMiddleware`]
    /// separately and register with
    /// [`MiddlewareStack::add_with_model_wrap`](super::MiddlewareStack::add_with_model_wrap)
    /// (or [`add_layers`](super::MiddlewareStack::add_layers)): one entry,
    /// both roles, the separate wrap in this method's place in the onion.
    /// `add`/`with`/`push` of such a type do not compile (see
    /// [`shape`](super::shape)).
    async fn wrap_model(
        &self,
        ctx: &mut RunContext<Ctx>,
        state: &State,
        request: ModelRequest,
        next: ModelHandler<'_, State, Ctx>,
    ) -> Result<MiddlewareModelOutcome> {
        next.run(ctx, state, request).await
    }

    /// Wraps one tool call; see [`wrap_model`](Middleware::wrap_model).
    /// Called when [`hooks`](Middleware::hooks) contains [`HookSet::WRAP_TOOL`].
    /// The default proceeds once.
    async fn wrap_tool(
        &self,
        ctx: &mut RunContext<Ctx>,
        state: &State,
        call: ToolCall,
        next: ToolHandler<'_, State, Ctx>,
    ) -> Result<MiddlewareToolOutcome> {
        next.run(ctx, state, call).await
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

    $(
        $(#[$doc])*
        async fn $method(&self, ctx: &mut RunContext<Ctx>, state: &State $(, $arg: &mut $value)?) -> Result<()> {
            Ok(())
        }

        $(
            #[doc = concat!("The synchronous form of `", stringify!($method), "`, called instead of it when ",
                "[`hooks`](Middleware::hooks) contains [`HookSet::", stringify!($sync_flag), "`]: no boxed future per delta.")]
            fn $sync(&self, ctx: &mut RunContext<Ctx>, state: &State, delta: &mut <hook::$kind as Hook>::Value) -> Result<()> {
                Ok(())
            }
        )?
    )*

    $(#[$edoc])*
    async fn $emethod(&self, ctx: &mut RunContext<Ctx>, state: &State, $earg: &$evalue) -> Result<()> {
        Ok(())
    }
}

/// The value a lifecycle hook passes, for [`Middleware::on_sync`].
#[derive(Debug)]
#[non_exhaustive]
pub enum HookValue<'a> {
    $(
        #[doc = concat!("`", stringify!($method), "`.")]
        $kind $((&'a mut $value))?,
    )*
    #[doc = concat!("`", stringify!($emethod), "`.")]
    $ekind(&'a $evalue),
}

impl HookValue<'_> {
    /// The hook this value is passed to.
    pub const fn hook(&self) -> HookKind {
        match self {
            $( Self::$kind $((underscore!($value)))? => HookKind::$kind, )*
            Self::$ekind(_) => HookKind::$ekind,
        }
    }
}
    };
}

/// The pattern `_`, for one field of a tuple variant.
macro_rules! underscore {
    ($value:ty) => {
        _
    };
}

crate::harness::hooks::hook_table!(define_middleware);

/// Wrap middleware around each model call.
///
/// `next` is the rest of the onion; call [`next.run`](ModelHandler::run)
/// zero times (short-circuit), once (proceed) or many times (retry, fallback).
///
/// Register a wrap-only type with
/// [`MiddlewareStack::push_model`](super::MiddlewareStack::push_model). A
/// type may implement both this trait and [`Middleware`] (the design's
/// shape: lifecycle hooks in one impl, the wrap in another): register it
/// with [`add_with_model_wrap`](super::MiddlewareStack::add_with_model_wrap)
/// (with a separate [`ToolMiddleware`] too:
/// [`add_layers`](super::MiddlewareStack::add_layers)), one entry with both
/// roles. `add`, `with` and `push` refuse such a type at compile time
/// (`E0283`, naming [`HasSeparateModelWrap`](super::shape::HasSeparateModelWrap)):
/// through `Middleware` alone its wrap would never run. (A value already
/// erased to `Arc<dyn Middleware>` is beyond that check: `push` it, then
/// `push_model` it under the same name.)
///
/// ```
/// use std::sync::Arc;
/// use tinyagents::prelude::*;
/// use tinyagents::harness::middleware::ModelMiddleware;
///
/// /// Calls the model a second time when the first call fails.
/// struct RetryOnce;
///
/// #[async_trait::async_trait]
/// impl ModelMiddleware<()> for RetryOnce {
///     async fn wrap_model(
///         &self,
///         ctx: &mut RunContext,
///         state: &(),
///         request: ModelRequest,
///         next: ModelHandler<'_, ()>,
///     ) -> Result<MiddlewareModelOutcome> {
///         match next.run(ctx, state, request.clone()).await {
///             Ok(outcome) => Ok(outcome),
///             Err(_) => next.run(ctx, state, request).await,
///         }
///     }
/// }
///
/// let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
/// stack.try_push_model(Arc::new(RetryOnce))?;
/// assert_eq!(stack.implementors(HookKind::WrapModel), ["RetryOnce"]);
/// # Ok::<(), TinyAgentsError>(())
/// ```
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a model wrap for a `MiddlewareStack<{State}, {Ctx}>` (it does not implement `ModelMiddleware<{State}, {Ctx}>`)",
    label = "not a `ModelMiddleware<{State}, {Ctx}>`",
    note = "`#[wrap_model] async fn retry(…)` generates a unit struct named after the fn (`Retry`): register that type, not the fn; a type with a `Middleware` impl registers with `.with(..)`"
)]
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

/// Wrap middleware around each tool call; see [`ModelMiddleware`]
/// (register a wrap-only type with
/// [`MiddlewareStack::push_tool`](super::MiddlewareStack::push_tool), a
/// type with a `Middleware` impl too with
/// [`add_with_tool_wrap`](super::MiddlewareStack::add_with_tool_wrap) or
/// [`add_layers`](super::MiddlewareStack::add_layers)).
#[async_trait]
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a tool wrap for a `MiddlewareStack<{State}, {Ctx}>` (it does not implement `ToolMiddleware<{State}, {Ctx}>`)",
    label = "not a `ToolMiddleware<{State}, {Ctx}>`",
    note = "`#[wrap_tool] async fn guard(…)` generates a unit struct named after the fn (`Guard`): register that type, not the fn; a type with a `Middleware` impl registers with `.with(..)`"
)]
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
