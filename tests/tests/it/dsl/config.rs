//! `#[derive(MiddlewareConfig)]` and the registry: parsing with unknown keys
//! rejected, every rule checked, every error reported with its path, value
//! and rule, the field table for the docs, and stacks built from TOML.

use serde_json::json;
use tinyagents::config::{
    from_toml_str, from_value, BuildMiddleware, ConfigViolation, MiddlewareConfig, MiddlewareRegistry,
};
use tinyagents::docs::MiddlewareMetadata;
use tinyagents::prelude::*;
use tinyagents::MiddlewareConfig;

/// Limits on a run's model turns and context.
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "limits", builds = Limits, validate = warn_below_compact)]
struct LimitsConfig {
    /// Most model turns per run.
    #[config(default = 25, range = 1..=1000)]
    max_steps: u32,
    /// Continuations after a length stop.
    #[config(default = 2, range = 0..=10)]
    max_continuations: u8,
    /// Fraction of the window at which to warn.
    #[config(default = 0.7, range = 0.0..=1.0, finite)]
    warn_at: f64,
    /// Fraction of the window at which to compact.
    #[config(default = 0.9, finite, non_negative)]
    compact_at: f32,
    /// What to do at the limit.
    #[config(default = "stop", one_of = ["stop", "error"])]
    on_limit: String,
    /// Nudges per run.
    #[config(default = 3, one_of = [1, 3, 5])]
    nudges: i32,
    /// A minimum, open above.
    #[config(default = 1, range = 1..)]
    floor: i64,
    /// An optional model override.
    model: Option<String>,
    /// An optional temperature.
    #[config(range = 0.0..=2.0)]
    temperature: Option<f64>,
    /// Who to blame (required).
    owner: String,
}

fn warn_below_compact(c: &LimitsConfig) -> Result<(), ConfigViolation> {
    if c.warn_at >= f64::from(c.compact_at) {
        return Err(ConfigViolation::new("warn_at", "must be below `compact_at`").with_value(c.warn_at));
    }
    Ok(())
}

/// The middleware the config builds.
struct Limits {
    config: LimitsConfig,
}

impl From<LimitsConfig> for Limits {
    fn from(config: LimitsConfig) -> Self {
        Self { config }
    }
}

#[middleware(name = "limits", config = LimitsConfig, doc(summary = "Caps steps."))]
impl Limits {
    #[before_model]
    fn stamp(&self, request: &mut ModelRequest) -> Result<()> {
        request.set_volatile("limits", format!("at most {} steps", self.config.max_steps));
        Ok(())
    }
}

#[test]
fn defaults_fill_every_key_not_given() {
    let c: LimitsConfig = from_toml_str("owner = \"ops\"").unwrap();
    assert_eq!(
        c,
        LimitsConfig {
            max_steps: 25,
            max_continuations: 2,
            warn_at: 0.7,
            compact_at: 0.9,
            on_limit: "stop".into(),
            nudges: 3,
            floor: 1,
            model: None,
            temperature: None,
            owner: "ops".into(),
        }
    );
    let c: LimitsConfig = from_toml_str(
        "owner = \"ops\"\nmax_steps = 7\nmodel = \"small\"\ntemperature = 0.5\non_limit = \"error\"\nenabled = true",
    )
    .unwrap();
    assert_eq!(
        (c.max_steps, c.model.as_deref(), c.temperature),
        (7, Some("small"), Some(0.5))
    );
    assert_eq!(c.on_limit, "error");
}

#[test]
fn every_error_is_reported_with_path_value_and_rule() {
    let text = r#"
        max_steps = 0
        max_continuations = "many"
        warn_at = nan
        compact_at = -0.5
        on_limit = "explode"
        nudges = 4
        floor = 0
        temperature = 3.0
        max_step = 1
    "#;
    let errors = from_toml_str::<LimitsConfig>(text).unwrap_err();
    let lines: Vec<String> = errors.errors().iter().map(ToString::to_string).collect();
    // unknown keys first, then each field in declaration order: type errors and rule errors alike
    let expect = [
        "`max_step` = 1: unknown key; the valid keys are `max_steps`, `max_continuations`, `warn_at`, \
         `compact_at`, `on_limit`, `nudges`, `floor`, `model`, `temperature`, `owner`, `type`, `enabled`; \
         did you mean `max_steps`?",
        "`max_steps` = 0: must be in 1..=1000",
        "`max_continuations` = \"many\": must be a `u8` (invalid type: string \"many\", expected u8)",
        "`warn_at` = \"NaN\": must be in 0.0..=1.0",
        "`warn_at` = \"NaN\": must be a finite number (not NaN or infinite)",
        "`compact_at` = -0.5: must not be negative",
        "`on_limit` = \"explode\": must be one of \"stop\", \"error\"",
        "`nudges` = 4: must be one of 1, 3, 5",
        "`floor` = 0: must be in 1..",
        "`temperature` = 3.0: must be in 0.0..=2.0",
        "`owner`: required key is missing: add `owner = …` (a `String`)",
    ];
    assert_eq!(lines, expect);
    assert!(errors
        .to_string()
        .starts_with("11 configuration errors:\n  - `max_step` = 1"));
}

#[test]
fn the_cross_field_check_runs_once_the_fields_are_valid() {
    let errors = from_toml_str::<LimitsConfig>("owner = \"ops\"\nwarn_at = 0.95").unwrap_err();
    assert_eq!(
        errors.to_string(),
        "invalid configuration: `warn_at` = 0.95: must be below `compact_at`"
    );
    // a config built in code is checked the same way
    let mut c: LimitsConfig = from_toml_str("owner = \"ops\"").unwrap();
    c.max_steps = 0;
    let err = c.check("middleware[3]").unwrap_err();
    assert_eq!(err.errors()[0].path, "middleware[3].max_steps");
}

#[test]
fn errors_are_prefixed_with_the_tables_path() {
    let err = from_value::<LimitsConfig>(&json!({"owner": "x", "max_continuations": 11}), "middleware[2]").unwrap_err();
    assert_eq!(err.errors()[0].path, "middleware[2].max_continuations");
    assert_eq!(err.errors()[0].value, Some(json!(11)));
    assert_eq!(err.errors()[0].rule, "must be in 0..=10");
    let as_runtime: TinyAgentsError = err.into();
    assert_eq!(
        as_runtime.to_string(),
        "configuration error at `middleware[2].max_continuations`: got 11: must be in 0..=10"
    );
    let err = from_value::<LimitsConfig>(&json!([1, 2]), "middleware[0]").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid configuration: `middleware[0]` = [1,2]: must be a table of keys (`key = value`)"
    );
    let err = from_value::<LimitsConfig>(&json!({"owner": "x", "type": "other", "enabled": "yes"}), "m").unwrap_err();
    let rules: Vec<&str> = err.errors().iter().map(|e| e.rule.as_str()).collect();
    assert_eq!(
        rules,
        [
            "must be `true` or `false`",
            "this table configures `limits`: write `type = \"limits\"` or remove it"
        ]
    );
}

#[test]
fn the_field_table_comes_from_the_struct() {
    assert_eq!(LimitsConfig::TYPE, "limits");
    let fields = LimitsConfig::FIELDS;
    assert_eq!(fields.len(), 10);
    let f = &fields[0];
    assert_eq!(
        (f.name, f.ty, f.default, f.rules),
        ("max_steps", "u32", "25", "range = 1..=1000")
    );
    assert_eq!(f.doc, "Most model turns per run.");
    assert_eq!(fields[2].rules, "range = 0.0..=1.0, finite");
    assert_eq!(fields[3].rules, "finite, non_negative");
    assert_eq!(fields[4].default, "\"stop\"");
    assert_eq!(fields[4].rules, "one_of = [\"stop\", \"error\"]");
    assert_eq!((fields[7].ty, fields[7].default), ("Option<String>", "None"));
    assert_eq!((fields[9].name, fields[9].default), ("owner", ""));
    // and reaches the middleware's doc through `config = LimitsConfig`
    let doc = Limits::DOC.unwrap();
    assert_eq!(doc.config_type, Some("limits"));
    assert_eq!(doc.config, LimitsConfig::FIELDS);
}

#[test]
fn builds_makes_the_config_a_factory() {
    let c: LimitsConfig = from_toml_str("owner = \"ops\"\nmax_steps = 4").unwrap();
    let m: Limits = c.build();
    assert_eq!(m.config.max_steps, 4);
}

// ----- the registry -----

#[derive(Debug, MiddlewareConfig)]
#[config(type = "tag", builds = Tag)]
struct TagConfig {
    /// The tag's text.
    text: String,
}

struct Tag(String);

impl From<TagConfig> for Tag {
    fn from(c: TagConfig) -> Self {
        Self(c.text)
    }
}

#[middleware(name = "tag")]
impl Tag {
    #[before_model]
    fn tag(&self, request: &mut ModelRequest) -> Result<()> {
        request.set_volatile("tag", self.0.clone());
        Ok(())
    }
}

fn registry() -> MiddlewareRegistry<()> {
    MiddlewareRegistry::new()
        .with::<LimitsConfig>()
        .unwrap()
        .with::<TagConfig>()
        .unwrap()
}

#[tokio::test]
async fn a_registry_builds_a_stack_from_toml() {
    let stack = registry()
        .stack_from_toml(
            r#"
            [[middleware]]
            type = "tag"
            text = "hello"

            [[middleware]]
            type = "limits"
            enabled = false

            [[middleware]]
            type = "limits"
            owner = "ops"
            max_steps = 3
            "#,
        )
        .unwrap();
    assert_eq!(stack.names(), ["tag", "limits"]);
    let mut request = ModelRequest::default();
    stack
        .run_before_model(&mut RunContext::new(RunConfig::new("r"), ()), &(), &mut request)
        .await
        .unwrap();
    assert_eq!(request.system_prompt(), "hello\n\nat most 3 steps");
}

#[test]
fn registry_errors_name_each_entry() {
    let err = registry()
        .stack_from_toml(
            r#"
            [[middleware]]
            type = "limit"

            [[middleware]]
            text = "x"

            [[middleware]]
            type = "limits"
            owner = "ops"
            max_continuations = 99
            "#,
        )
        .unwrap_err();
    let lines: Vec<String> = err.errors().iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "`middleware[0].type` = \"limit\": unknown middleware type; the registered types are `limits`, `tag`; \
             did you mean `limits`?",
            "`middleware[1].type`: required key is missing: name the middleware with `type = \"…\"`; the \
             registered types are `limits`, `tag`",
            "`middleware[2].max_continuations` = 99: must be in 0..=10",
        ]
    );
    let mut twice = registry();
    assert_eq!(twice.register::<TagConfig>().unwrap_err().kind(), ErrorKind::Config);
    assert_eq!(twice.types().collect::<Vec<_>>(), ["limits", "tag"]);
    assert_eq!(twice.fields("tag").unwrap()[0].name, "text");
}
