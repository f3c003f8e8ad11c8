//! QueryMT Agent's middleware API over tinyagents: bring a QueryMT
//! middleware across by changing its crate path
//! (`querymt_agent::…` → `tinyagents::compat::querymt::…`).
//!
//! * [`MiddlewareDriver`]: the synchronous driver trait (`process_request`,
//!   `process_response`, `process_tool_call`, `process_tool_result`,
//!   `on_prepared_tool_calls`), run in a native stack by
//!   [`DriverMiddleware`] with the native hooks' ordering, events, errors
//!   and fail-closed behaviour.
//! * [`CompositeDriver`]: an ordered chain of drivers and native middleware.
//! * [`MiddlewareError`] and [`Result`]: QueryMT's five error kinds, each
//!   becoming a classified native error.
//! * [`Request`], [`Response`], [`ToolCall`], [`ToolResult`]: the hooks'
//!   values, with QueryMT's field names, over the native values.
//! * [`MiddlewareFactory`], [`MIDDLEWARE_REGISTRY`] and [`AgentConfig`]:
//!   drivers built from `[[middleware]]` tables.
//!
//! The paths QueryMT code imports are here too: [`middleware`]
//! (with [`middleware::state`]), [`agent::agent_config`] and [`prelude`].
//! `docs/querymt.md` ("Coming from QueryMT") walks through a migration.
//!
//! ```
//! use tinyagents::compat::querymt::middleware::{MiddlewareDriver, MiddlewareError, Result};
//! use tinyagents::compat::querymt::middleware::state::ToolCall;
//!
//! struct NoShell;
//!
//! impl MiddlewareDriver for NoShell {
//!     fn name(&self) -> &str {
//!         "no_shell"
//!     }
//!
//!     fn process_tool_call(&self, tool_call: &mut ToolCall) -> Result<()> {
//!         if tool_call.function.name == "shell" {
//!             return Err(MiddlewareError::permission_denied(tool_call.function.name.clone()));
//!         }
//!         Ok(())
//!     }
//! }
//! ```

mod composite;
mod config;
mod driver;
mod error;
mod factory;
pub mod prelude;
mod views;

pub use composite::CompositeDriver;
pub use config::AgentConfig;
pub use driver::{DriverMiddleware, MiddlewareDriver};
pub use error::{MiddlewareError, Result};
pub use factory::{DriverRegistry, MiddlewareFactory, MIDDLEWARE_REGISTRY};
pub use views::{ExecutionState, FunctionCall, Request, Response, ToolCall, ToolResult};

pub use crate::harness::middleware::{PreparedBatch, PreparedCallVerdict, PreparedToolCall};

/// QueryMT's `middleware` module path: the driver API.
pub mod middleware {
    pub use super::{
        CompositeDriver, DriverMiddleware, DriverRegistry, MiddlewareDriver, MiddlewareError, MiddlewareFactory,
        PreparedBatch, PreparedCallVerdict, PreparedToolCall, Result, MIDDLEWARE_REGISTRY,
    };

    /// QueryMT's `middleware::state` module path: the values hooks receive.
    pub mod state {
        pub use super::super::{ExecutionState, FunctionCall, Request, Response, ToolCall, ToolResult};
    }
}

/// QueryMT's `agent` module path.
pub mod agent {
    pub use crate::harness::agent::Agent;

    /// QueryMT's `agent::agent_config` module path.
    pub mod agent_config {
        pub use super::super::AgentConfig;
    }
}
