//! Everything QueryMT code uses: `use tinyagents::compat::querymt::prelude::*;`.

pub use super::{
    AgentConfig, CompositeDriver, DriverMiddleware, ExecutionState, FunctionCall, MiddlewareDriver, MiddlewareError,
    MiddlewareFactory, PreparedBatch, PreparedCallVerdict, PreparedToolCall, Request, Response, Result, ToolCall,
    ToolResult, MIDDLEWARE_REGISTRY,
};
pub use crate::harness::agent::Agent;
