//! Names and defaults of every built-in (issue #17, items 3 and 4):
//! config `type` = catalog name = stack name; renamed config types still load,
//! with a notice; enum config fields take only their names; and a built-in
//! made in code with its constructor's defaults is the one its config's
//! defaults build.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use tinyagents::config::{
    from_toml_str, BuildMiddleware, ConfigEnum, MiddlewareConfig, MiddlewareRegistry, BUILTIN_TYPES, CODE_ONLY,
    DEPRECATED_TYPES,
};
use tinyagents::middleware::*;

/// Config `type` = catalog name = stack name, for every catalog entry.
#[test]
fn config_type_catalog_name_and_stack_name_are_one_name() {
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    let mut with_config = 0;
    for doc in catalog() {
        let Some(config_type) = doc.config_type else {
            continue;
        };
        with_config += 1;
        assert_eq!(
            config_type, doc.name,
            "catalog entry `{}` has config type `{config_type}`",
            doc.name
        );
        if CODE_ONLY.contains(&config_type) {
            continue;
        }
        let fields = registry
            .fields(config_type)
            .unwrap_or_else(|| panic!("`{config_type}` is not registered"));
        assert_eq!(
            fields, doc.config,
            "`{config_type}`: the registry's fields are the catalog's"
        );
    }
    assert!(
        with_config >= 30,
        "only {with_config} catalog entries have a config type"
    );
    // every registered type is a catalog name
    let names: BTreeSet<&str> = catalog().iter().map(|d| d.name).collect();
    for t in BUILTIN_TYPES {
        assert!(names.contains(t), "registered type `{t}` is not in the catalog");
    }
}

/// The name a stack gives a built-in built from a table of its `type` is that `type`.
#[test]
fn a_stack_built_from_each_type_names_it_by_that_type() {
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    // the least each type needs to build
    let needs: HashMap<&str, &str> = HashMap::from([
        ("model_call_limit", "run_limit = 3"),
        ("timeout", "model_ms = 1000"),
        ("tool_call_limit", "run_limit = 3"),
        ("summarization", "trigger_messages = 30"),
        ("context_clipping", "trigger_messages = 30"),
        ("dynamic_prompt", "template = \"Hi.\""),
        ("structured_output", "schema = '{\"type\": \"object\"}'"),
        ("human_in_the_loop", "interrupt_on = { shell = [\"approve\"] }"),
        ("retrieval_compression", "tools = [\"search\"]"),
        ("external_hooks", ""),
    ]);
    let mut built = 0;
    let mut wrong: Vec<String> = Vec::new();
    for t in BUILTIN_TYPES.iter().filter(|t| **t != "external_hooks") {
        let text = format!(
            "[[middleware]]\ntype = \"{t}\"\n{}",
            needs.get(t).copied().unwrap_or("")
        );
        let mut registry_without_defaults: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
        registry_without_defaults.clear_default("parallel_edit_guard");
        registry_without_defaults.clear_default("output_limit_recovery");
        match registry_without_defaults.stack_from_toml(&text) {
            Ok(stack) if stack.names() == [*t] => built += 1,
            Ok(stack) => wrong.push(format!("`{t}` builds a stack named {:?}", stack.names())),
            Err(e) => wrong.push(format!("`{t}` does not build from `{text}`: {e}")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert_eq!(built, BUILTIN_TYPES.len() - 1);
    drop(registry);
}

/// A `tracing` subscriber keeping every event's message, for the deprecation notices.
#[derive(Clone, Default)]
struct Notices(Arc<Mutex<Vec<String>>>);

impl tracing::Subscriber for Notices {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Message<'a>(&'a mut String);
        impl tracing::field::Visit for Message<'_> {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                if field.name() == "message" {
                    *self.0 = format!("{value:?}");
                }
            }
        }
        let mut text = String::new();
        event.record(&mut Message(&mut text));
        if event.metadata().target() == "tinyagents::config" {
            self.0.lock().unwrap().push(text);
        }
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Every renamed `type` still builds, as the new one, with a notice naming the entry, the new key and the fix.
#[test]
fn renamed_types_still_load_with_a_deprecation_notice() {
    let mut registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    registry.clear_default("parallel_edit_guard");
    registry.clear_default("output_limit_recovery");
    assert_eq!(DEPRECATED_TYPES.len(), 6);
    for (old, new, _) in DEPRECATED_TYPES {
        assert!(
            !BUILTIN_TYPES.contains(old),
            "`{old}` is both a type and a deprecated alias"
        );
        assert!(
            BUILTIN_TYPES.contains(new),
            "`{old}` is an alias of `{new}`, which is not registered"
        );
        let extra = if *new == "context_clipping" || *new == "summarization" {
            "trigger_messages = 30\n"
        } else {
            ""
        };
        let text = format!("[[middleware]]\ntype = \"{old}\"\n{extra}");
        let notices = Notices::default();
        let stack = tracing::subscriber::with_default(notices.clone(), || registry.stack_from_toml(&text))
            .unwrap_or_else(|e| panic!("`{old}` no longer loads: {e}"));
        assert_eq!(stack.names(), [*new]);
        let seen = notices.0.lock().unwrap().clone();
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(
            seen[0].contains(&format!("`middleware[0].type` = \"{old}\" is deprecated")),
            "{}",
            seen[0]
        );
        assert!(seen[0].contains(&format!("write `type = \"{new}\"`")), "{}", seen[0]);
        // the new key builds with no notice
        let notices = Notices::default();
        let text = format!("[[middleware]]\ntype = \"{new}\"\n{extra}");
        tracing::subscriber::with_default(notices.clone(), || registry.stack_from_toml(&text)).unwrap();
        assert!(notices.0.lock().unwrap().is_empty());
    }
    // an alias entry replaces the default instance of its new type, as the new key would
    let mut registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    registry.clear_default("output_limit_recovery");
    registry
        .set_default("prompt_cache_guard", serde_json::json!({}))
        .unwrap();
    let stack = registry
        .stack_from_toml("[[middleware]]\ntype = \"prompt_cache_layout\"\non_change = \"error\"")
        .unwrap();
    assert_eq!(stack.names(), ["parallel_edit_guard", "prompt_cache_guard"]);
    // an unknown key is still an error that suggests the registered name
    let err = registry
        .stack_from_toml("[[middleware]]\ntype = \"context_clip\"")
        .unwrap_err();
    assert!(err.to_string().contains("did you mean `context_clipping`?"), "{err}");
}

/// An enum field takes only its names: a near miss gets a did-you-mean, a non-string the list.
#[test]
fn enum_fields_take_only_their_names() {
    let err = from_toml_str::<ToolCallLimitConfig>("run_limit = 1\nexit_behavior = \"ned\"").unwrap_err();
    assert_eq!(err.len(), 1);
    let e = &err.errors()[0];
    assert_eq!(e.path, "exit_behavior");
    assert_eq!(e.value, Some(serde_json::json!("ned")));
    assert_eq!(
        e.rule,
        "must be one of \"continue\", \"end\", \"error\"; did you mean `end`?"
    );

    let err = from_toml_str::<ModelCallLimitConfig>("run_limit = 1\nexit_behavior = \"continue\"").unwrap_err();
    assert_eq!(err.errors()[0].rule, "must be one of \"end\", \"error\"");

    let err = from_toml_str::<RateLimiterConfig>("key = 3\nmode = \"rejct\"").unwrap_err();
    assert_eq!(err.len(), 2, "{err}");
    assert_eq!(err.errors()[0].rule, "must be one of \"global\", \"model\", \"tool\"");
    assert_eq!(
        err.errors()[1].rule,
        "must be one of \"wait\", \"reject\"; did you mean `reject`?"
    );

    // every name of every enum reads back as its variant, and the docs list the names
    fn round_trip<T: ConfigEnum + std::fmt::Debug + std::str::FromStr>() {
        for (v, n) in T::ALL.iter().zip(T::NAMES) {
            assert_eq!(v.name(), *n);
            assert_eq!(T::from_name(n), Some(*v));
            assert!(n.parse::<T>().is_ok());
        }
        assert_eq!(T::ALL.len(), T::NAMES.len());
    }
    round_trip::<ExitBehavior>();
    round_trip::<ModelExitBehavior>();
    round_trip::<LogLevel>();
    round_trip::<OnPrefixChange>();
    round_trip::<AgentMode>();
    round_trip::<EditGuardMode>();
    round_trip::<OnFailure>();
    round_trip::<RateKey>();
    round_trip::<RateLimitMode>();
    round_trip::<PiiStrategy>();
    round_trip::<TrimKind>();
    let level = LoggingConfig::FIELDS.iter().find(|f| f.name == "level").unwrap();
    assert_eq!(level.choices, ["trace", "debug", "info", "warn", "error"]);
    assert_eq!(level.default, "\"info\"");
    // no built-in config field is a string restricted by `one_of` any more
    for doc in catalog() {
        for f in doc.config {
            assert!(
                !f.rules.contains("one_of"),
                "`{}.{}` is still `one_of`: {}",
                doc.name,
                f.name,
                f.rules
            );
        }
    }
}

/// `Debug` without the per-instance keys (fresh for every instance).
fn shape(value: &impl std::fmt::Debug) -> String {
    let text = format!("{value:?}");
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(i) = rest.find("key: ") {
        out.push_str(&rest[..i + 5]);
        rest = rest[i + 5..].trim_start_matches(|c: char| c.is_ascii_digit());
        out.push('_');
    }
    out.push_str(rest);
    out
}

fn built<T: BuildMiddleware>(toml: &str) -> Result<T::Middleware, String> {
    from_toml_str::<T>(toml)
        .map(BuildMiddleware::build)
        .map_err(|e| format!("`{}` with `{toml}`: {e}", T::TYPE))
}

/// A built-in made in code with its constructor's defaults equals the one its
/// config's defaults build (the config carrying only what the constructor takes),
/// for every registered built-in.
#[test]
fn code_defaults_are_config_defaults() {
    let mut checked: BTreeSet<&str> = BTreeSet::new();
    let mut wrong: Vec<String> = Vec::new();
    macro_rules! same {
        ($config:ty, $toml:expr, $code:expr) => {{
            let from_code = $code;
            match built::<$config>($toml) {
                Ok(from_config) if shape(&from_code) == shape(&from_config) => {}
                Ok(from_config) => wrong.push(format!(
                    "`{}`: the constructor and the config's defaults disagree:\n  code:   {}\n  config: {}",
                    <$config as MiddlewareConfig>::TYPE,
                    shape(&from_code),
                    shape(&from_config)
                )),
                Err(e) => wrong.push(e),
            }
            checked.insert(<$config as MiddlewareConfig>::TYPE);
        }};
    }
    same!(TracingConfig, "", TracingMiddleware::new());
    same!(LoggingConfig, "", LoggingMiddleware::new());
    same!(LoggingConfig, "", LoggingMiddleware::default());
    same!(
        TimeoutConfig,
        "model_ms = 1000",
        TimeoutMiddleware::new().model(std::time::Duration::from_secs(1))
    );
    same!(ModelRetryConfig, "", ModelRetryMiddleware::new());
    same!(ToolRetryConfig, "", ToolRetryMiddleware::new());
    same!(RateLimiterConfig, "", RateLimiterMiddleware::new(1.0, 1));
    same!(
        ModelCallLimitConfig,
        "run_limit = 4",
        ModelCallLimitMiddleware::per_run(4)
    );
    same!(
        ToolCallLimitConfig,
        "run_limit = 4",
        ToolCallLimitMiddleware::per_run(None, 4)
    );
    same!(LimitsConfig, "", LimitsMiddleware::new());
    same!(ToolPolicyConfig, "", ToolPolicyMiddleware::new(HashMap::new()));
    same!(
        HumanInTheLoopConfig,
        "interrupt_on = {}",
        HumanInTheLoopMiddleware::new()
    );
    same!(ShellFsGuardConfig, "", ShellFsGuardMiddleware::new());
    same!(PiiConfig, "", PiiMiddleware::new(PiiStrategy::Redact));
    same!(AgentModeConfig, "", AgentModeMiddleware::new(AgentMode::Build));
    same!(ParallelEditGuardConfig, "", ParallelEditGuardMiddleware::default());
    same!(DedupCheckConfig, "", DedupCheckMiddleware::default());
    same!(
        DynamicPromptConfig,
        "template = \"Hi {step}.\"",
        DynamicPromptMiddleware::new("Hi {step}.").unwrap()
    );
    same!(PromptCacheGuardConfig, "", PromptCacheGuardMiddleware::new());
    same!(
        MessageTrimConfig,
        "",
        MessageTrimMiddleware::new(TrimStrategy::LastMessages(40))
    );
    same!(
        SummarizationConfig,
        "trigger_messages = 30",
        SummarizationMiddleware::new(SummaryTrigger::messages(30))
    );
    same!(
        ContextClippingConfig,
        "trigger_messages = 30",
        ContextClippingMiddleware::new(SummaryTrigger::messages(30))
    );
    same!(
        StructuredOutputConfig,
        "schema = '{\"type\": \"object\"}'",
        StructuredOutputMiddleware::new(serde_json::json!({ "type": "object" })).unwrap()
    );
    same!(DeltaCompressionConfig, "", DeltaCompressionMiddleware::new(64));
    // Built only from their config (`From<Config>` is their only constructor),
    // or from something only code can give, so code and config cannot differ:
    let config_only = [
        "contextual_tool_selection", // a predicate, or lists through the config
        "tool_allowlist",            // `ToolLists`, which the config holds
        "context_editing",
        "transcript_compression",
        "output_compression",
        "retrieval_compression",
        "context_window",
        "output_limit_recovery",
        "external_hooks",
    ];
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    let mut covered: BTreeSet<&str> = checked.clone();
    covered.extend(config_only);
    let registered: BTreeSet<&str> = BUILTIN_TYPES.iter().copied().collect();
    assert_eq!(covered, registered, "every registered built-in is checked here");
}
