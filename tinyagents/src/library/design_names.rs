//! The names the design documents use for the built-ins, and former names:
//! the paths re-exported at `tinyagents::harness::middleware`, and the list
//! of every alias that `docs/names.md` is rendered from. One place, in the
//! library, so the runtime names no built-in.

use crate::docs::NameAlias;

/// The built-ins the `harness::middleware` design names, at the paths it
/// writes (`tinyagents::harness::middleware::ToolPolicyMiddleware`, …).
pub use super::{
    summarization, ContextCompressionMiddleware, ContextualToolSelectionMiddleware, LoggingMiddleware,
    MessageTrimMiddleware, PromptCacheGuardMiddleware, ToolPolicyMiddleware, UsageAccountingMiddleware,
};

/// The alias of a type: its path is checked by the compiler, and what it
/// names is read from the type itself, so the list cannot name a type that is
/// not there or say the wrong one.
macro_rules! type_alias {
    ($alias:ty, $why:expr) => {
        NameAlias {
            alias: stringify!($alias),
            is: canonical(std::any::type_name::<$alias>()),
            why: $why,
        }
    };
}

/// A type's public path from its defining one: a built-in is defined in a
/// private module of the library and has one public path,
/// `tinyagents::middleware::…`.
fn canonical(defined: &str) -> String {
    match defined.strip_prefix("tinyagents::library::") {
        Some(rest) => format!("tinyagents::middleware::{}", rest.rsplit("::").next().unwrap_or(rest)),
        None => defined.to_owned(),
    }
}

/// Every alias of a Rust path the crate keeps (see [`crate::docs::aliases`]).
pub(crate) fn design_aliases() -> Vec<NameAlias> {
    const DESIGN: &str = "the path the `harness::middleware` design writes";
    vec![
        type_alias!(tinyagents::harness::middleware::ToolPolicyMiddleware, "the path the tool-policy design writes"),
        type_alias!(
            tinyagents::harness::middleware::ContextualToolSelectionMiddleware,
            "the path the tool-exposure design writes"
        ),
        type_alias!(tinyagents::harness::middleware::LoggingMiddleware, DESIGN),
        type_alias!(tinyagents::harness::middleware::MessageTrimMiddleware, DESIGN),
        type_alias!(
            tinyagents::harness::middleware::ContextCompressionMiddleware,
            "the path and name the `harness::middleware` design writes for the summarising compression"
        ),
        type_alias!(tinyagents::harness::middleware::PromptCacheGuardMiddleware, DESIGN),
        type_alias!(
            tinyagents::harness::middleware::UsageAccountingMiddleware,
            DESIGN
        ),
        type_alias!(
            tinyagents::middleware::ContextCompressionMiddleware,
            "the design's name for the summarising compression (a policy, a `Summarizer`, a summary message, provenance, `Compressed`); config `type = \"context_compression\"` is a deprecated alias of `summarization`"
        ),
        type_alias!(tinyagents::middleware::SummarizationPolicy, "the design's name: when the summarising compression runs"),
        type_alias!(
            tinyagents::middleware::SummaryRecord,
            "the design's name: the record of one compression (`AgentEvent::Compressed`, `AgentRun::compressions`)"
        ),
        type_alias!(
            tinyagents::middleware::ContextMiddleware,
            "the former name, and the QueryMT middleware docs' (config `type = \"context\"`): \"context\" alone names a run's `RunContext`"
        ),
        type_alias!(tinyagents::middleware::ContextConfig, "the former name of its options"),
    ]
}

/// Declares [`DESIGN_PATHS`] and has the compiler resolve each path (a `use`
/// of it, in a block of its own), so the list names only what is there.
macro_rules! design_paths {
    ($($doc:literal: [$(crate $(:: $segment:ident)+),* $(,)?])*) => {
        /// Every name the design documents use (the `harness::middleware`
        /// design, its module description, QueryMT's middleware docs), at the path that resolves:
        /// `(document, path)`, in the documents' order.
        pub(crate) const DESIGN_PATHS: &[(&str, &str)] =
            &[$($(($doc, concat!("tinyagents" $(, "::", stringify!($segment))+))),*),*];

        #[allow(unused_imports, dead_code)]
        fn design_paths_resolve() {
            $($({ use crate $(:: $segment)+; })*)*
        }
    };
}

design_paths! {
    "middleware design": [
        crate::harness::middleware::Middleware,
        crate::harness::context::RunContext,
        crate::harness::middleware::AgentRun,
        crate::harness::steering::SteeringCommand,
        crate::harness::steering::SteeringOutcome,
        crate::harness::model::ModelRequest,
        crate::harness::model::ModelDelta,
        crate::harness::model::ModelResponse,
        crate::harness::tool::ToolCall,
        crate::harness::tool::ToolDelta,
        crate::harness::tool::ToolResult,
        crate::harness::error::TinyAgentsError,
        crate::harness::error::Result,
        crate::harness::middleware::ModelMiddleware,
        crate::harness::middleware::ModelHandler,
        crate::harness::middleware::MiddlewareModelOutcome,
        crate::harness::middleware::ToolMiddleware,
        crate::harness::middleware::ToolHandler,
        crate::harness::middleware::MiddlewareToolOutcome,
        crate::harness::middleware::ModelBaseCall,
        crate::harness::middleware::ToolBaseCall,
        crate::harness::middleware::MiddlewareStack,
        crate::graph::Command,
        crate::harness::middleware::ToolPolicyMiddleware,
        crate::harness::tool::ToolRegistry,
        crate::harness::tool::SandboxMode,
        crate::harness::tool::ToolPolicy,
        crate::harness::tool::ToolRuntime,
        crate::harness::context::RunConfig,
        crate::harness::workspace::WorkspaceDescriptor,
        crate::harness::middleware::ContextualToolSelectionMiddleware,
        crate::harness::tool::ToolSchema,
        crate::middleware::ToolSelectionContext,
        crate::harness::event::AgentEvent,
        crate::middleware::ToolAllowlistMiddleware,
        crate::harness::context::MiddlewareControl,
        crate::harness::provenance::CompressionProvenance,
    ]
    "harness::middleware module": [
        crate::harness::middleware::LoggingMiddleware,
        crate::middleware::HookCounts,
        crate::harness::middleware::MessageTrimMiddleware,
        crate::harness::middleware::summarization::trim_messages,
        crate::middleware::TrimStrategy,
        crate::harness::middleware::ContextCompressionMiddleware,
        crate::middleware::SummarizationPolicy,
        crate::middleware::Summarizer,
        crate::middleware::ConcatSummarizer,
        crate::middleware::SummaryRecord,
        crate::harness::middleware::PromptCacheGuardMiddleware,
        crate::harness::cache::PromptCacheLayout,
        crate::harness::cache::CacheLayoutEvent,
        crate::harness::middleware::UsageAccountingMiddleware,
        crate::middleware::UsageTotals,
    ]
    "QueryMT middleware docs": [
        crate::compat::querymt::middleware::MiddlewareDriver,
        crate::compat::querymt::middleware::MiddlewareError,
        crate::compat::querymt::middleware::Result,
        crate::compat::querymt::middleware::MiddlewareFactory,
        crate::compat::querymt::middleware::MIDDLEWARE_REGISTRY,
        crate::compat::querymt::middleware::CompositeDriver,
        crate::compat::querymt::middleware::state::ExecutionState,
        crate::compat::querymt::middleware::state::ToolCall,
        crate::compat::querymt::middleware::state::ToolResult,
        crate::compat::querymt::PreparedToolCall,
        crate::compat::querymt::PreparedCallVerdict,
        crate::compat::querymt::agent::agent_config::AgentConfig,
        crate::compat::querymt::prelude,
        crate::harness::event::HookNotice,
        crate::middleware::LoggingMiddleware,
        crate::middleware::AgentModeMiddleware,
        crate::middleware::AgentMode,
        crate::middleware::LimitsMiddleware,
        crate::middleware::ContextMiddleware,
        crate::middleware::DedupCheckMiddleware,
        crate::middleware::OutputLimitRecoveryMiddleware,
        crate::middleware::ParallelEditGuardMiddleware,
    ]
}
