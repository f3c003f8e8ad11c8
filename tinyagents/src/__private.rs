//! Paths the DSL's generated code names. Not a public API: it may change in any release.

pub use ::async_trait::async_trait;
pub use ::futures::future::BoxFuture;
pub use ::std::sync::Arc;

pub use crate::harness::context::{JumpSet, RunContext};
pub use crate::harness::error::{Result, TinyAgentsError};
pub use crate::harness::middleware::run_state::{assert_run_state, lend_run_state, run_state_of, Lent, RunState};
pub use crate::harness::middleware::{
    ConfigFieldDoc, HookKind, HookResult, HookSet, HookValue, Middleware, MiddlewareDoc, MiddlewareInfo,
    MiddlewareModelOutcome, MiddlewareToolOutcome, ModelHandler, ModelMiddleware, PreparedBatch, ToolHandler,
    ToolMiddleware,
};
pub use crate::harness::model::{ModelDelta, ModelRequest, ModelResponse};
pub use crate::harness::provenance::CompactionPlan;
pub use crate::harness::run::AgentRun;
pub use crate::harness::steering::{SteeringCommand, SteeringOutcome};
pub use crate::harness::tool::{ToolCall, ToolDelta, ToolResult};

pub use ::core::assert;
pub use ::core::clone::Clone;
pub use ::core::cmp::{Eq, PartialEq};
pub use ::core::convert::{From, Into};
pub use ::core::default::Default;
pub use ::core::fmt::Debug;
pub use ::core::hash::Hash;
pub use ::core::marker::{Copy, Send, Sync};
pub use ::core::mem::size_of;
pub use ::core::option::Option;
pub use ::serde_json::Value as JsonValue;
pub use ::std::string::String;

pub use ::serde;

pub use crate::config::choice::choice_index;
pub use crate::config::reader::{ConfigChecker, ConfigNumber, ConfigReader, ConfigValue};
pub use crate::config::{BuildMiddleware, ConfigEnum, ConfigErrors, ConfigViolation, MiddlewareConfig};
pub use crate::docs::{info_of, MiddlewareMetadata};

// `#[tool]`
pub use crate::harness::tool::typed::{
    check_whole_keys, declared_paths, parameters_schema, whole_schema, FailDisplay, FailKeep, Failed, ReturnDirect,
    ReturnJson, Returned, ToolArg, ToolArgs,
};
pub use crate::harness::tool::{FileAccess, FileAccessMode, Tool, ToolContext, ToolOutput, ToolPolicy, ToolSchema};
pub use ::core::result::Result as StdResult;
pub use ::schemars;
pub use ::std::sync::OnceLock;
pub use ::std::vec::Vec;
