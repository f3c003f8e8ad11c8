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
