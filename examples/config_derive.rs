//! A middleware config struct parsed from TOML: defaults, validation, a
//! cross-field rule, the errors a bad table gets, the field table for the
//! docs, and a registry building a stack from `[[middleware]]` entries.
//!
//! Run it with `cargo run -p tinyagents-examples --example config_derive`.

use tinyagents::config::{from_toml_str, ConfigViolation, MiddlewareConfig, MiddlewareRegistry};
use tinyagents::prelude::*;
use tinyagents::MiddlewareConfig;

/// Keeps replies within a token budget.
#[derive(Debug, MiddlewareConfig)]
#[config(type = "reply_budget", builds = ReplyBudget, validate = warn_below_max)]
struct ReplyBudgetConfig {
    /// The most tokens a reply may use.
    #[config(default = 1024, range = 16..=32_768)]
    max_tokens: u32,
    /// Warn when a reply uses this many tokens.
    #[config(default = 768, range = 1..)]
    warn_tokens: u32,
    /// Sampling temperature.
    #[config(default = 0.7, range = 0.0..=2.0, finite)]
    temperature: f64,
    /// What to do when a reply is cut off.
    #[config(default = "continue", one_of = ["continue", "stop", "error"])]
    on_cutoff: String,
    /// A model to use instead of the agent's.
    model: Option<String>,
}

/// A cross-field rule: the warning must come before the limit.
fn warn_below_max(c: &ReplyBudgetConfig) -> Result<(), ConfigViolation> {
    if c.warn_tokens >= c.max_tokens {
        return Err(
            ConfigViolation::new("warn_tokens", format!("must be below `max_tokens` ({})", c.max_tokens))
                .with_value(c.warn_tokens),
        );
    }
    Ok(())
}

/// The middleware the config builds.
struct ReplyBudget(ReplyBudgetConfig);

impl From<ReplyBudgetConfig> for ReplyBudget {
    fn from(config: ReplyBudgetConfig) -> Self {
        Self(config)
    }
}

#[middleware(name = "reply_budget", config = ReplyBudgetConfig, doc(summary = "Caps reply length."))]
impl ReplyBudget {
    #[before_model]
    fn cap(&self, request: &mut ModelRequest) -> Result<()> {
        request.params.max_tokens = Some(self.0.max_tokens);
        request.params.temperature = Some(self.0.temperature as f32);
        if let Some(model) = &self.0.model {
            request.model = Some(model.clone());
        }
        Ok(())
    }
}

fn main() {
    println!("== a good table (missing keys take their defaults)");
    let good: ReplyBudgetConfig = from_toml_str("max_tokens = 2048\nmodel = \"small\"").expect("valid");
    println!("{good:#?}");

    println!("\n== a bad table: every problem is reported, with path, value and rule");
    let bad = "max_tokens = 8\ntemprature = 0.5\non_cutoff = \"retry\"\ntemperature = nan";
    match from_toml_str::<ReplyBudgetConfig>(bad) {
        Ok(c) => println!("unexpectedly valid: {c:?}"),
        Err(errors) => println!("{errors}"),
    }

    println!("\n== a cross-field rule");
    match from_toml_str::<ReplyBudgetConfig>("max_tokens = 512") {
        Ok(c) => println!("unexpectedly valid: {c:?}"),
        Err(errors) => println!("{errors}"),
    }

    println!("\n== the field table (for docs/middleware.md)");
    for f in ReplyBudgetConfig::FIELDS {
        println!(
            "  {:<12} {:<15} default {:<12} {:<28} {}",
            f.name,
            f.ty,
            if f.default.is_empty() { "(required)" } else { f.default },
            f.rules,
            f.doc
        );
    }

    println!("\n== a stack from `[[middleware]]` entries, through a registry");
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::new()
        .with::<ReplyBudgetConfig>()
        .expect("one registration");
    let toml = r#"
        [[middleware]]
        type = "reply_budget"
        max_tokens = 4096

        [[middleware]]
        type = "reply_budget"
        enabled = false
    "#;
    let stack = registry.stack_from_toml(toml).expect("valid stack");
    println!("built: {:?}", stack.names());
    let typo = "[[middleware]]\ntype = \"reply_budgt\"\n\n[[middleware]]\ntype = \"reply_budget\"\nmax_tokens = 0";
    match registry.stack_from_toml(typo) {
        Ok(s) => println!("unexpectedly built: {:?}", s.names()),
        Err(errors) => println!("{errors}"),
    }
}
