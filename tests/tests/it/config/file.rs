//! Stacks built from agent files: built-ins and user factories in one
//! registry, entries in order with ordering constraints, defaults replaced or
//! removed, every error located by line and column, nothing half-built.

use serde_json::json;
use tinyagents::config::{ConfigFile, MiddlewareRegistry, BUILTIN_TYPES};
use tinyagents::prelude::*;
use tinyagents::MiddlewareConfig;

/// Caps continuations.
#[derive(Debug, Clone, MiddlewareConfig)]
#[config(type = "recovery", builds = Recovery)]
struct RecoveryConfig {
    /// Continuations after a length stop.
    #[config(default = 3, range = 0..=10)]
    max_continuations: u8,
}

struct Recovery;

impl From<RecoveryConfig> for Recovery {
    fn from(_: RecoveryConfig) -> Self {
        Recovery
    }
}

#[middleware(name = "recovery", after_if_present = ["audit"])]
impl Recovery {
    #[after_model]
    fn check(&self, _response: &mut ModelResponse) -> Result<()> {
        Ok(())
    }
}

/// Audits.
#[derive(Debug, Clone, MiddlewareConfig)]
#[config(type = "audit", builds = Audit)]
struct AuditConfig {
    /// A label.
    #[config(default = "a")]
    label: String,
}

struct Audit;

impl From<AuditConfig> for Audit {
    fn from(c: AuditConfig) -> Self {
        assert!(!c.label.is_empty());
        Audit
    }
}

#[middleware(name = "audit")]
impl Audit {
    #[before_model]
    fn audit(&self, _request: &mut ModelRequest) -> Result<()> {
        Ok(())
    }
}

fn registry() -> MiddlewareRegistry<()> {
    let mut registry = MiddlewareRegistry::with_builtins();
    registry.register::<RecoveryConfig>().unwrap();
    registry.register::<AuditConfig>().unwrap();
    registry
}

/// The registry's default-on built-ins, then `names`.
fn after_defaults(registry: &MiddlewareRegistry<()>, names: &[&'static str]) -> Vec<&'static str> {
    registry.defaults().chain(names.iter().copied()).collect()
}

/// The registry with no middleware on by default.
fn without_defaults(mut registry: MiddlewareRegistry<()>) -> MiddlewareRegistry<()> {
    for t in registry.defaults().collect::<Vec<_>>() {
        registry.clear_default(t);
    }
    registry
}

fn build(registry: &MiddlewareRegistry<()>, text: &str) -> Result<MiddlewareStack<()>, tinyagents::config::FileErrors> {
    registry.build_file(&ConfigFile::parse("agent.toml", text).unwrap())
}

#[test]
fn entries_keep_their_order_and_ordering_constraints_apply() {
    let text = r#"
[[middleware]]
type = "logging"

[[middleware]]
type = "recovery"
max_continuations = 2

[[middleware]]
type = "tool_allowlist"
deny = ["rm"]

[[middleware]]
type = "audit"
"#;
    let stack = build(&registry(), text).unwrap();
    // the default-on built-ins first; `recovery` must run after `audit`: the only move from file order
    assert_eq!(
        stack.names(),
        after_defaults(&registry(), &["logging", "tool_allowlist", "audit", "recovery"])
    );
    assert!(registry().defaults().any(|t| t == "output_limit_recovery"));
}

#[test]
fn the_same_stack_in_code_and_from_the_file_resolves_to_the_same_order() {
    let text =
        "[[middleware]]\ntype = \"recovery\"\n[[middleware]]\ntype = \"logging\"\n[[middleware]]\ntype = \"audit\"\n";
    let code = |stack: MiddlewareStack<()>| {
        stack
            .with(Recovery)
            .unwrap()
            .with(tinyagents::middleware::LoggingMiddleware::new())
            .unwrap()
            .with(Audit)
            .unwrap()
    };
    // with nothing on by default: `MiddlewareStack::empty()` is a registry without defaults
    let from_file = build(&without_defaults(registry()), text).unwrap();
    let in_code = code(MiddlewareStack::empty());
    assert_eq!(from_file.names(), in_code.names());
    assert_eq!(from_file.names(), ["logging", "audit", "recovery"]);
    // with the defaults: `MiddlewareStack::new()` holds what a file's stack holds, built the same way
    let from_file = build(&registry(), text).unwrap();
    let in_code = code(MiddlewareStack::new());
    assert_eq!(
        from_file.names(),
        [
            "parallel_edit_guard",
            "output_limit_recovery",
            "logging",
            "audit",
            "recovery"
        ]
    );
    assert_eq!(from_file.names(), in_code.names());
    for hook in HookKind::ALL {
        assert_eq!(from_file.implementors(hook), in_code.implementors(hook), "{hook:?}");
    }
    // an instance of a default's type replaces the default at its own place, in code as in the file
    let text = "[[middleware]]\ntype = \"logging\"\n[[middleware]]\ntype = \"parallel_edit_guard\"\nmode = \"deny\"\n";
    let from_file = build(&registry(), text).unwrap();
    let in_code: MiddlewareStack<()> = MiddlewareStack::new()
        .with(tinyagents::middleware::LoggingMiddleware::new())
        .unwrap()
        .with(tinyagents::middleware::ParallelEditGuardMiddleware::deny())
        .unwrap();
    assert_eq!(
        from_file.names(),
        ["output_limit_recovery", "logging", "parallel_edit_guard"]
    );
    assert_eq!(from_file.names(), in_code.names());
    // and `enabled = false` is `without(name)`
    let text = "[[middleware]]\ntype = \"output_limit_recovery\"\nenabled = false\n";
    let from_file = build(&registry(), text).unwrap();
    let in_code: MiddlewareStack<()> = MiddlewareStack::new().without("output_limit_recovery").unwrap();
    assert_eq!(from_file.names(), ["parallel_edit_guard"]);
    assert_eq!(from_file.names(), in_code.names());
}

#[test]
fn a_default_is_replaced_by_an_entry_of_its_type_and_removed_by_enabled_false() {
    let mut registry = without_defaults(registry());
    registry.set_default("audit", json!({ "label": "default" })).unwrap();
    registry.set_default("logging", json!({})).unwrap();
    assert_eq!(registry.defaults().collect::<Vec<_>>(), ["audit", "logging"]);

    // no entries: the defaults, in order
    assert_eq!(build(&registry, "").unwrap().names(), ["audit", "logging"]);
    // an entry of the same type replaces the default instance, at the entry's place
    let text = "[[middleware]]\ntype = \"recovery\"\n[[middleware]]\ntype = \"logging\"\nlevel = \"debug\"\n";
    assert_eq!(
        build(&registry, text).unwrap().names(),
        ["audit", "recovery", "logging"]
    );
    // `enabled = false` removes it
    let text = "[[middleware]]\ntype = \"audit\"\nenabled = false\n";
    assert_eq!(build(&registry, text).unwrap().names(), ["logging"]);
}

#[test]
fn an_unknown_type_lists_the_valid_ones_and_suggests_the_nearest() {
    let err = build(&registry(), "[[middleware]]\ntype = \"loging\"\n").unwrap_err();
    let shown = err.to_string();
    assert!(
        shown.starts_with(
            "agent.toml:2:8: `middleware[0].type` = \"loging\": unknown middleware type; the registered types are "
        ),
        "{shown}"
    );
    for t in BUILTIN_TYPES.iter().chain(&["recovery", "audit"]) {
        assert!(shown.contains(&format!("`{t}`")), "{t} missing from {shown}");
    }
    assert!(shown.ends_with("did you mean `logging`?"), "{shown}");
}

#[test]
fn every_mistake_of_a_file_is_reported_with_its_line_and_column() {
    let text = r#"[[middleware]]
type = "logging"

[[middleware]]
type = "tool_allowlist"

[[middleware]]
type = "recovery"
max_continuations = 42

[[middleware]]
type = "audit"
lable = "x"

[[middleware]]
type = "nope"

[[hooks]]
event = "pre_tool_use"
matcher = "("
command = "true"

[agnet]
"#;
    let err = build(&registry(), text).unwrap_err();
    let lines: Vec<String> = err.to_string().lines().map(str::to_owned).collect();
    assert_eq!(err.len(), 5, "{lines:#?}");
    assert_eq!(lines[0], "agent.toml:23:1: `agnet` = {}: unknown section; the sections of an agent file are `middleware`, `hooks`, `store`, `agent`, `model`, `script`, `preset`; did you mean `agent`?");
    assert_eq!(
        lines[1],
        "agent.toml:9:21: `middleware[2].max_continuations` = 42: must be in 0..=10"
    );
    assert!(
        lines[2].starts_with("agent.toml:13:9: `middleware[3].lable` = \"x\": unknown key"),
        "{}",
        lines[2]
    );
    assert!(lines[2].ends_with("did you mean `label`?"), "{}", lines[2]);
    assert!(
        lines[3].starts_with("agent.toml:16:8: `middleware[4].type` = \"nope\": unknown middleware type"),
        "{}",
        lines[3]
    );
    assert!(
        lines[4].starts_with("agent.toml:20:11: `hooks[0].matcher` = \"(\": must be a valid regex"),
        "{}",
        lines[4]
    );
}

#[test]
fn a_missing_key_points_at_its_table_and_bad_toml_at_the_syntax_error() {
    let err = build(&registry(), "[[hooks]]\nevent = \"stop\"\n").unwrap_err();
    assert_eq!(err.errors[0].location.map(|l| l.line), Some(1));
    assert!(err.to_string().contains("`hooks[0].command`: required key is missing"));

    let err = ConfigFile::parse("agent.toml", "[[middleware]]\ntype = \"logging\"\nlevel = \n").unwrap_err();
    assert!(err.to_string().starts_with("agent.toml:3:"), "{err}");
    assert!(err.to_string().contains("invalid TOML"), "{err}");
}

#[test]
fn hooks_entries_become_one_external_hooks_middleware_ordered_before_every_other() {
    let text = "[[hooks]]\nevent = \"stop\"\ncommand = \"true\"\n\n[[middleware]]\ntype = \"logging\"\n";
    let stack = build(&registry(), text).unwrap();
    // listed last, it runs first (`before = ["*"]`): the guards judge what a hook rewrites;
    // the default `parallel_edit_guard` reviews the prepared calls, after every
    // `on_tool_batch` and `before_tool`: it sees the hooks' rewritten arguments
    let mut expected = vec!["external_hooks"];
    expected.extend(after_defaults(&registry(), &["logging"]));
    assert_eq!(stack.names(), expected);
    assert_eq!(stack.implementors(HookKind::OnToolBatch), ["external_hooks"]);
    assert_eq!(
        stack.implementors(HookKind::OnPreparedToolCalls),
        ["parallel_edit_guard"]
    );
}

#[test]
fn every_catalog_built_in_with_a_config_type_is_registered() {
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    let types: Vec<&str> = registry.types().collect();
    for doc in tinyagents::middleware::catalog() {
        if let Some(t) = doc.config_type {
            assert!(
                types.contains(&t) || tinyagents::config::CODE_ONLY.contains(&t),
                "built-in `{}` (type `{t}`) is missing from `MiddlewareRegistry::with_builtins()`: \
                 add its config type to the `builtins!` list in tinyagents/src/config/builtins.rs",
                doc.name
            );
        }
    }
    for doc in tinyagents::external_hooks::CATALOG {
        assert!(types.contains(&doc.config_type.unwrap()));
    }
}

#[test]
fn a_registered_type_cannot_be_registered_twice_and_a_default_must_be_valid() {
    let mut registry = registry();
    assert!(registry.register::<AuditConfig>().is_err());
    let err = registry.set_default("audti", json!({})).unwrap_err().to_string();
    assert!(err.contains("did you mean `audit`?"), "{err}");
    let err = registry
        .set_default("recovery", json!({ "max_continuations": 11 }))
        .unwrap_err()
        .to_string();
    assert!(err.contains("defaults.recovery.max_continuations"), "{err}");
}

#[test]
fn an_external_hooks_entry_places_the_hooks_itself() {
    let text = r#"
[[middleware]]
type = "external_hooks"
hooks = [{ event = "stop", command = "true" }]

[[middleware]]
type = "logging"
"#;
    let registry = without_defaults(registry());
    assert_eq!(build(&registry, text).unwrap().names(), ["external_hooks", "logging"]);

    let text = r#"
[[middleware]]
type = "external_hooks"
hook = []
hooks = [{ event = "stop", command = "true", matcher = "^shell$", timeout_ms = 0 }]
"#;
    let err = build(&registry, text).unwrap_err().to_string();
    assert!(err.contains("`middleware[0].hook` = []: unknown key"), "{err}");
    assert!(err.contains("did you mean `hooks`?"), "{err}");
    assert!(
        err.contains("`middleware[0].hooks[0].matcher` = \"^shell$\": `stop` concerns no tool"),
        "{err}"
    );
    assert!(
        err.contains("`middleware[0].hooks[0].timeout_ms` = 0: must be in 1..=3600000"),
        "{err}"
    );
}

#[test]
fn a_built_in_only_code_can_build_says_so() {
    let err = build(&registry(), "[[middleware]]\ntype = \"dynamic_tool_selection\"\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "`middleware[0].type` = \"dynamic_tool_selection\": this built-in needs something only code can give"
        ),
        "{err}"
    );
}

#[test]
fn every_built_in_builds_from_its_defaults_or_says_which_key_to_set() {
    let registry = without_defaults(MiddlewareRegistry::<()>::with_builtins());
    let mut built = 0;
    for t in BUILTIN_TYPES {
        let text = format!("[[middleware]]\ntype = \"{t}\"\n");
        match build(&registry, &text) {
            Ok(stack) => {
                assert_eq!(stack.len(), 1, "{t}");
                built += 1;
            }
            // a key with no default (`dynamic_prompt.template`) or a cross-field rule (`timeout`)
            Err(errors) => {
                for e in &errors.errors {
                    assert!(e.error.path.starts_with("middleware[0]."), "`{t}`: {}", e.error);
                    assert_eq!(e.location.map(|l| l.line), Some(1), "`{t}`: {}", e.error);
                }
            }
        }
    }
    assert!(
        built * 2 > BUILTIN_TYPES.len(),
        "most built-ins build from their defaults alone"
    );
}
