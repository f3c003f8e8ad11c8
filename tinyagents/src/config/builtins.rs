//! Every built-in config type, registered by
//! [`MiddlewareRegistry::with_builtins`](super::MiddlewareRegistry::with_builtins),
//! and the built-ins that are on by default.
//!
//! Adding a built-in is one line in the [`builtins!`] list below; a test
//! checks that every `catalog()` entry with a `config_type` is listed.

use crate::config::MiddlewareConfig;
use crate::harness::middleware::{MiddlewareDoc, MiddlewareStack};
use crate::middleware::*;

/// The documentation of every built-in, as the library lists it
/// ([`catalog`](crate::middleware::catalog)): what the generated
/// documentation page is rendered from.
pub(crate) fn builtin_docs() -> Vec<&'static MiddlewareDoc> {
    catalog()
}

/// Lists the built-in config types once, for both the registration and the
/// list of their `type` keys.
macro_rules! builtins {
    ($($(#[$cfg:meta])* $config:ty),* $(,)?) => {
        /// The `type` key of every built-in the registry knows, in registration order.
        pub const BUILTIN_TYPES: &[&str] = &[$($(#[$cfg])* <$config as MiddlewareConfig>::TYPE),*];

        impl<S, C> super::MiddlewareRegistry<S, C>
        where
            S: Send + Sync + 'static,
            C: Send + Sync + 'static,
        {
            /// Registers every built-in config type (see [`BUILTIN_TYPES`]).
            fn register_builtins(&mut self) -> crate::Result<()> {
                $($(#[$cfg])* self.register::<$config>()?;)*
                Ok(())
            }
        }
    };
}

builtins![
    // observe
    TracingConfig,
    LoggingConfig,
    // resilience
    TimeoutConfig,
    ModelRetryConfig,
    ToolRetryConfig,
    RateLimiterConfig,
    // limits
    ModelCallLimitConfig,
    ToolCallLimitConfig,
    LimitsConfig,
    // policy
    ToolPolicyConfig,
    ContextualToolSelectionConfig,
    ToolAllowlistConfig,
    HumanInTheLoopConfig,
    // guard
    #[cfg(feature = "commands")]
    ShellFsGuardConfig,
    #[cfg(feature = "pii")]
    PiiConfig,
    // modes
    AgentModeConfig,
    ParallelEditGuardConfig,
    DedupCheckConfig,
    // prompt
    DynamicPromptConfig,
    PromptCacheGuardConfig,
    // context
    MessageTrimConfig,
    SummarizationConfig,
    ContextEditingConfig,
    TranscriptCompressionConfig,
    DeltaCompressionConfig,
    OutputCompressionConfig,
    ContextClippingConfig,
    RetrievalCompressionConfig,
    ContextWindowConfig,
    // output
    OutputLimitRecoveryConfig,
    StructuredOutputConfig,
    // hooks
    crate::external_hooks::ExternalHooksConfig,
];

/// Config `type` keys that were renamed, still accepted by a registry's
/// [`build_into`](super::MiddlewareRegistry::build_into) (and so by every
/// stack built from a file): each is read as its new key, with a deprecation
/// notice (a `tracing` warning, target `tinyagents::config`) naming the entry,
/// the new key and the fix. Entries are `(old, new, note)`.
///
/// A built-in's config `type`, its catalog name and its stack name are one
/// name; these old keys differed from it.
///
/// ```
/// use tinyagents::config::{MiddlewareRegistry, DEPRECATED_TYPES};
///
/// let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
/// for (old, new, _) in DEPRECATED_TYPES {
///     assert_eq!(registry.canonical_type(old), Some(*new));
/// }
/// ```
pub const DEPRECATED_TYPES: &[(&str, &str, &str)] = &[
    ("tool_selection", "contextual_tool_selection", ""),
    ("prompt_cache_layout", "prompt_cache_guard", ""),
    ("prompt_cache_layout_guard", "prompt_cache_guard", ""),
    ("message_trimming", "message_trim", ""),
    (
        "context",
        "context_window",
        " (\"context\" alone names a run's `RunContext`; this built-in watches the model's context window)",
    ),
    (
        "context_compression",
        "summarization",
        " (the summarising compression, `ContextCompressionMiddleware`; before, this key built the clipping \
         compressor, whose one name is `context_clipping`)",
    ),
];
/// Built-ins with a config type that a file cannot build, because they need
/// something only code can give (a model, a predicate): build them in code
/// from their config (their docs say how). A file naming one gets an error saying so.
pub const CODE_ONLY: &[&str] = &[
    // needs the selector model: `DynamicToolSelectionMiddleware::from_config(config, model)`
    <DynamicToolSelectionConfig as MiddlewareConfig>::TYPE,
];

/// Built-ins this build left out, with the cargo feature that brings each
/// back: `(type, feature)`. A file naming one gets an error saying so.
pub const NOT_COMPILED: &[(&str, &str)] = &[
    #[cfg(not(feature = "pii"))]
    ("pii", "pii"),
    #[cfg(not(feature = "commands"))]
    ("shell_fs_guard", "commands"),
];

/// The rules a [`ShellTool`](crate::sandbox::ShellTool) reads a command
/// line no guard admitted with, unless given others: the default
/// `shell_fs_guard`'s.
#[cfg(all(unix, feature = "commands"))]
pub(crate) fn default_shell_rules() -> std::sync::Arc<dyn crate::sandbox::ShellRules> {
    std::sync::Arc::new(ShellFsGuardMiddleware::new())
}

/// The built-ins on by default in a stack built from a file by a registry
/// made with [`with_builtins`](super::MiddlewareRegistry::with_builtins), with
/// the options they get (a TOML table; empty: every option at its default).
/// A `[[middleware]]` entry of the same `type` replaces the default instance
/// (at the entry's position); `enabled = false` removes it.
///
/// * `parallel_edit_guard` in `warn` mode: a model response that writes one
///   file with several tool calls gets guidance toward one multi-edit call.
/// * `output_limit_recovery`: a reply cut off by the output-token limit is
///   escalated once, then continued, instead of ending the run.
pub const DEFAULT_ON: &[(&str, &str)] = &[
    ("parallel_edit_guard", "mode = \"warn\""),
    ("output_limit_recovery", ""),
];

impl<S, C> MiddlewareStack<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// A stack holding the built-ins on by default for every agent, the same
    /// ones (with the same options) a stack built from a file holds: see
    /// [`DEFAULT_ON`]. Registering a middleware of a default's name replaces
    /// it at the new registration's place (as a file's entry of its `type`
    /// does); [`without`](Self::without) removes one (a file's `enabled =
    /// false`); [`empty`](Self::empty) starts with none.
    ///
    /// ```
    /// use tinyagents::middleware::ParallelEditGuardMiddleware;
    /// use tinyagents::prelude::*;
    ///
    /// let stack: MiddlewareStack<()> = MiddlewareStack::new();
    /// assert_eq!(stack.names(), ["parallel_edit_guard", "output_limit_recovery"]);
    /// // your own instance of a default replaces it, at your registration's place
    /// let stack: MiddlewareStack<()> = MiddlewareStack::new().with(ParallelEditGuardMiddleware::deny())?;
    /// assert_eq!(stack.names(), ["output_limit_recovery", "parallel_edit_guard"]);
    /// # Ok::<(), TinyAgentsError>(())
    /// ```
    pub fn new() -> Self {
        super::MiddlewareRegistry::<S, C>::with_builtins()
            .build_stack(&serde_json::Value::Null)
            .expect("the default-on built-ins build with their default options")
    }
}

impl<S, C> Default for MiddlewareStack<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// [`MiddlewareStack::new`]: the default-on built-ins.
    fn default() -> Self {
        Self::new()
    }
}

impl<S, C> super::MiddlewareRegistry<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// A registry holding every built-in's factory (see [`BUILTIN_TYPES`]),
    /// with the built-ins of [`DEFAULT_ON`] on by default. Register your own
    /// config types on it with [`register`](Self::register).
    ///
    /// ```
    /// use tinyagents::config::{MiddlewareRegistry, BUILTIN_TYPES};
    ///
    /// let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    /// assert_eq!(registry.types().count(), BUILTIN_TYPES.len());
    /// assert_eq!(registry.defaults().collect::<Vec<_>>(), ["parallel_edit_guard", "output_limit_recovery"]);
    /// let stack = registry.stack_from_toml("[[middleware]]\ntype = \"logging\"").unwrap();
    /// assert_eq!(stack.names(), ["parallel_edit_guard", "output_limit_recovery", "logging"]);
    /// // an entry of a default's type replaces it, at the entry's place; `enabled = false` removes it
    /// let text = "[[middleware]]\ntype = \"logging\"\n[[middleware]]\ntype = \"parallel_edit_guard\"\nmode = \"deny\"\n\
    ///             [[middleware]]\ntype = \"output_limit_recovery\"\nenabled = false";
    /// assert_eq!(registry.stack_from_toml(text).unwrap().names(), ["logging", "parallel_edit_guard"]);
    /// ```
    pub fn with_builtins() -> Self {
        let mut registry = Self::new();
        registry
            .register_builtins()
            .expect("every built-in config type has its own `type` key");
        // The built-ins whose state an agent file's `[store]` shares.
        registry.share::<crate::middleware::RateLimiterConfig>();
        registry.share::<crate::middleware::LimitsConfig>();
        registry.share::<crate::middleware::ModelCallLimitConfig>();
        registry.share::<crate::middleware::ToolCallLimitConfig>();
        for (type_key, table) in DEFAULT_ON {
            let table = super::traits::toml_to_value(table).expect("a built-in default is valid TOML");
            registry
                .set_default(type_key, table)
                .expect("a default-on built-in is registered");
        }
        registry
    }
}

#[cfg(test)]
mod tests {
    /// A file naming a built-in this build left out is told which feature
    /// brings it back (run by CI without default features).
    #[cfg(not(feature = "pii"))]
    #[test]
    fn a_built_in_left_out_of_the_build_names_its_feature() {
        let registry: super::super::MiddlewareRegistry<()> = super::super::MiddlewareRegistry::with_builtins();
        let Err(err) = registry.build_stack(&serde_json::json!({"middleware": [{"type": "pii"}]})) else {
            panic!("`pii` is not in this build, yet a file naming it built a stack");
        };
        let shown = err.to_string();
        assert!(shown.contains("built without its `pii` feature"), "{shown}");
    }

    /// The same for the shell guard, whose engine is the `commands` feature.
    #[cfg(not(feature = "commands"))]
    #[test]
    fn the_shell_guard_left_out_names_the_commands_feature() {
        let registry: super::super::MiddlewareRegistry<()> = super::super::MiddlewareRegistry::with_builtins();
        let Err(err) = registry.build_stack(&serde_json::json!({"middleware": [{"type": "shell_fs_guard"}]})) else {
            panic!("`shell_fs_guard` is not in this build, yet a file naming it built a stack");
        };
        let shown = err.to_string();
        assert!(shown.contains("built without its `commands` feature"), "{shown}");
    }

    /// Every built-in of [`NOT_COMPILED`](super::NOT_COMPILED) is one a
    /// default build registers: the list names real built-ins.
    #[test]
    fn what_a_build_leaves_out_is_a_built_in_of_the_full_build() {
        for (ty, feature) in super::NOT_COMPILED {
            assert!(
                !super::BUILTIN_TYPES.contains(ty),
                "`{ty}` is both registered and left out"
            );
            assert!(!feature.is_empty());
        }
    }
}
