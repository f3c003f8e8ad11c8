//! [`WrapOnly`]: a wrap-only [`ModelMiddleware`] or [`ToolMiddleware`] as the
//! [`Middleware`] the stack dispatches (what `push_model`/`push_tool` register).

use std::sync::Arc;

use async_trait::async_trait;

use super::{
    HookSet, Middleware, MiddlewareModelOutcome, MiddlewareToolOutcome, ModelHandler, ModelMiddleware, ToolHandler,
    ToolMiddleware,
};
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::model::ModelRequest;
use crate::harness::tool::ToolCall;

/// A wrap-only middleware, in the one role it has.
pub(crate) enum WrapOnly<S, C> {
    /// Around each model call.
    Model(Arc<dyn ModelMiddleware<S, C>>),
    /// Around each tool call.
    Tool(Arc<dyn ToolMiddleware<S, C>>),
}

// The generic names are the DSL's: rustc then lists this type among a
// `Middleware` error's implementors by its name alone, like the others.
#[async_trait]
impl<__TinyState, __TinyCtx> Middleware<__TinyState, __TinyCtx> for WrapOnly<__TinyState, __TinyCtx>
where
    __TinyState: Send + Sync + 'static,
    __TinyCtx: Send + Sync + 'static,
{
    fn name(&self) -> &str {
        match self {
            Self::Model(m) => m.name(),
            Self::Tool(t) => t.name(),
        }
    }

    fn hooks(&self) -> HookSet {
        match self {
            Self::Model(_) => HookSet::WRAP_MODEL,
            Self::Tool(_) => HookSet::WRAP_TOOL,
        }
    }

    async fn wrap_model(
        &self,
        ctx: &mut RunContext<__TinyCtx>,
        state: &__TinyState,
        request: ModelRequest,
        next: ModelHandler<'_, __TinyState, __TinyCtx>,
    ) -> Result<MiddlewareModelOutcome> {
        match self {
            Self::Model(m) => m.wrap_model(ctx, state, request, next).await,
            Self::Tool(_) => next.run(ctx, state, request).await,
        }
    }

    async fn wrap_tool(
        &self,
        ctx: &mut RunContext<__TinyCtx>,
        state: &__TinyState,
        call: ToolCall,
        next: ToolHandler<'_, __TinyState, __TinyCtx>,
    ) -> Result<MiddlewareToolOutcome> {
        match self {
            Self::Tool(t) => t.wrap_tool(ctx, state, call, next).await,
            Self::Model(_) => next.run(ctx, state, call).await,
        }
    }
}
