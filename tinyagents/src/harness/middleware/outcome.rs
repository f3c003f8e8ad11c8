//! What wrap middleware resolve to: [`MiddlewareModelOutcome`] and [`MiddlewareToolOutcome`].

use crate::harness::model::ModelResponse;
use crate::harness::tool::ToolResult;

/// The result of a `wrap_model` layer. Build it with `.into()` from a [`ModelResponse`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MiddlewareModelOutcome {
    /// The resolved response.
    Response(ModelResponse),
}

impl MiddlewareModelOutcome {
    /// The response.
    pub fn into_response(self) -> ModelResponse {
        match self {
            Self::Response(r) => r,
        }
    }

    /// The response, borrowed.
    pub fn response(&self) -> &ModelResponse {
        match self {
            Self::Response(r) => r,
        }
    }
}

impl From<ModelResponse> for MiddlewareModelOutcome {
    fn from(response: ModelResponse) -> Self {
        Self::Response(response)
    }
}

/// The result of a `wrap_tool` layer. Build it with `.into()` from a [`ToolResult`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum MiddlewareToolOutcome {
    /// The resolved result.
    Result(ToolResult),
}

impl MiddlewareToolOutcome {
    /// The result.
    pub fn into_result(self) -> ToolResult {
        match self {
            Self::Result(r) => r,
        }
    }

    /// The result, borrowed.
    pub fn result(&self) -> &ToolResult {
        match self {
            Self::Result(r) => r,
        }
    }
}

impl From<ToolResult> for MiddlewareToolOutcome {
    fn from(result: ToolResult) -> Self {
        Self::Result(result)
    }
}
