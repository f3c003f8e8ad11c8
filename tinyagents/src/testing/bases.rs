//! The innermost call of a wrap onion, from a closure, to test wrap middleware.

use async_trait::async_trait;

use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::middleware::{ModelBaseCall, ToolBaseCall};
use crate::harness::model::{ModelRequest, ModelResponse};
use crate::harness::tool::{ToolCall, ToolResult};

/// The innermost model call of a wrap onion, from a closure. See [`model_base`].
pub struct FnModelBase<F>(F);

/// Makes the innermost model call of an onion from a closure over the request.
pub fn model_base<F>(f: F) -> FnModelBase<F>
where
    F: Fn(ModelRequest) -> Result<ModelResponse> + Send + Sync,
{
    FnModelBase(f)
}

#[async_trait]
impl<S, C, F> ModelBaseCall<S, C> for FnModelBase<F>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
    F: Fn(ModelRequest) -> Result<ModelResponse> + Send + Sync,
{
    async fn call(&self, _ctx: &mut RunContext<C>, _state: &S, request: ModelRequest) -> Result<ModelResponse> {
        (self.0)(request)
    }
}

/// The innermost tool call of a wrap onion, from a closure. See [`tool_base`].
pub struct FnToolBase<F>(F);

/// Makes the innermost tool call of an onion from a closure over the call.
pub fn tool_base<F>(f: F) -> FnToolBase<F>
where
    F: Fn(ToolCall) -> Result<ToolResult> + Send + Sync,
{
    FnToolBase(f)
}

#[async_trait]
impl<S, C, F> ToolBaseCall<S, C> for FnToolBase<F>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
    F: Fn(ToolCall) -> Result<ToolResult> + Send + Sync,
{
    async fn call(&self, _ctx: &mut RunContext<C>, _state: &S, call: ToolCall) -> Result<ToolResult> {
        (self.0)(call)
    }
}
