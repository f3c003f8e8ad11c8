//! Presets: named middleware stacks for common agents, each declared once
//! (as the `[[middleware]]` tables an agent file would hold) in [`PRESETS`],
//! and used from code (`Agent::single().preset(Preset::Coding)` or
//! `.preset("coding")`), from an agent file (`preset = "coding"`) and by
//! `tinyagents check`, which shows the stack a preset gives.
//!
//! In an agent file the `[[middleware]]` entries after `preset` override or
//! extend it: an entry whose `type` the preset has changes that entry (its
//! keys replace the preset's, `enabled = false` removes it, its place stays
//! the preset's); any other entry is added after the preset's.
//!
//! | preset | for | workspace |
//! | --- | --- | --- |
//! | `coding` | a coding agent: the shell/filesystem guard in its `workspace` profile, approval before every write, limits, PII redaction, output-limit recovery | sandbox required |
//! | `research` | a read-only research agent: writes, execution and unclassified tools refused, the guard read-only, limits | read-only |
//! | `chat` | a production chat service: model retries, a rate limit, a per-run budget and turn limit, a timeout, tracing spans (fallback models are given in code: [`ModelFallbackMiddleware`](crate::middleware::ModelFallbackMiddleware)) | not used |

use std::fmt;

use serde_json::Value;

use crate::config::MiddlewareRegistry;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::middleware::MiddlewareStack;
use crate::harness::tool::{SandboxMode, ToolRegistry};
use crate::harness::workspace::WorkspaceDescriptor;

/// A named stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Preset {
    /// `coding`: a safe coding agent.
    Coding,
    /// `research`: a read-only research agent.
    Research,
    /// `chat`: a production chat service.
    Chat,
}

/// One preset's declaration: every fact about it, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PresetDecl {
    /// The preset.
    pub preset: Preset,
    /// Its name (`coding`).
    pub name: &'static str,
    /// What it is for, in one line.
    pub summary: &'static str,
    /// How its runs' workspace is isolated.
    pub sandbox: SandboxMode,
    /// Whether its runs' workspace is read-only.
    pub read_only: bool,
    /// Its stack, as the `[[middleware]]` tables of an agent file.
    pub toml: &'static str,
}

/// Every preset.
pub const PRESETS: &[PresetDecl] = &[
    PresetDecl {
        preset: Preset::Coding,
        name: "coding",
        summary: "a safe coding agent: guard in its sandbox profile, approval for writes, limits, PII, output recovery",
        sandbox: SandboxMode::Required,
        read_only: false,
        toml: r#"[[middleware]]
type = "shell_fs_guard"
profile = "workspace"

[[middleware]]
type = "human_in_the_loop"
interrupt_on = { write_file = ["approve", "edit", "reject"], edit = ["approve", "edit", "reject"], apply_patch = ["approve", "edit", "reject"] }
description = "Approve this change to the workspace"

[[middleware]]
type = "limits"
max_steps = 200
max_turns = 50

[[middleware]]
type = "pii"

[[middleware]]
type = "output_limit_recovery"
"#,
    },
    PresetDecl {
        preset: Preset::Research,
        name: "research",
        summary: "a read-only research agent: no writes, no execution, unclassified tools refused",
        sandbox: SandboxMode::Off,
        read_only: true,
        toml: r#"[[middleware]]
type = "tool_policy"
require_classification = true
deny_side_effects = ["write", "execute", "destructive", "payment", "external_communication"]

[[middleware]]
type = "shell_fs_guard"
read_only = true

[[middleware]]
type = "limits"
max_steps = 100
max_turns = 30
"#,
    },
    PresetDecl {
        preset: Preset::Chat,
        name: "chat",
        summary: "a production chat service: retries, rate limit, budget, timeout, tracing (fallback models in code)",
        sandbox: SandboxMode::Off,
        read_only: false,
        toml: r#"[[middleware]]
type = "tracing"

[[middleware]]
type = "rate_limiter"
rate_per_second = 5.0
burst = 10

[[middleware]]
type = "model_retry"
max_attempts = 3

[[middleware]]
type = "timeout"
model_ms = 60000

[[middleware]]
type = "limits"
max_turns = 20
max_price_usd = 1.0
"#,
    },
];

/// The preset names, in [`PRESETS`] order.
pub fn names() -> impl Iterator<Item = &'static str> {
    PRESETS.iter().map(|d| d.name)
}

/// Why `name` names no preset, and the presets.
pub(crate) fn unknown(name: &str) -> String {
    format!(
        "unknown preset `{name}`{}; the presets are {}",
        crate::config::suggest::did_you_mean(name, names()),
        crate::config::suggest::list(names())
    )
}

impl Preset {
    /// Its declaration.
    pub fn decl(self) -> &'static PresetDecl {
        // `PRESETS` lists the variants in declaration order (a test holds it)
        &PRESETS[self as usize]
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        self.decl().name
    }

    /// The preset named `name`; an unknown name is a `Config` error listing the presets.
    pub fn from_name(name: &str) -> Result<Self> {
        PRESETS
            .iter()
            .find(|d| d.name == name)
            .map(|d| d.preset)
            .ok_or_else(|| TinyAgentsError::config(unknown(name)))
    }

    /// Its `[[middleware]]` tables.
    pub fn entries(self) -> Vec<Value> {
        // each declaration is checked to parse and build by the tests
        let value: Value = toml::from_str(self.decl().toml).unwrap_or_default();
        match value.get("middleware") {
            Some(Value::Array(tables)) => tables.clone(),
            _ => Vec::new(),
        }
    }

    /// Its stack (with the built-ins on by default), as an agent file
    /// holding only `preset = "…"` builds it. Its tables' paths in errors
    /// are `preset.middleware[i]`.
    pub fn stack(self) -> Result<MiddlewareStack<()>> {
        let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
        registry
            .build_stack(&serde_json::json!({ "preset": self.name() }))
            .map_err(TinyAgentsError::from)
    }

    /// Its stack for an agent with `tools`: as [`stack`](Self::stack), with
    /// the tools' declared policies given to its `tool_policy` (so a
    /// classified built-in tool is judged by its side effects, not refused
    /// as unknown).
    pub fn stack_for(self, tools: &ToolRegistry) -> Result<MiddlewareStack<()>> {
        let has_policy = self
            .entries()
            .iter()
            .any(|t| t.get("type").and_then(Value::as_str) == Some("tool_policy"));
        let mut config = serde_json::json!({ "preset": self.name() });
        if has_policy {
            let policies: std::collections::BTreeMap<String, _> = tools.policies().into_iter().collect();
            config["middleware"] = serde_json::json!([{ "type": "tool_policy", "policies": policies }]);
        }
        let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
        registry.build_stack(&config).map_err(TinyAgentsError::from)
    }

    /// The workspace of its runs at `root`.
    pub fn workspace(self, root: impl Into<std::path::PathBuf>) -> WorkspaceDescriptor {
        let decl = self.decl();
        WorkspaceDescriptor::new(root)
            .with_sandbox(decl.sandbox)
            .read_only(decl.read_only)
    }

    /// The preset's tables with a file's `entries` laid over them: an entry
    /// of a type the preset has replaces that table's keys in place (so
    /// `enabled = false` removes it); the others follow. Each table comes
    /// with the path errors name (`preset.middleware[i]` or `middleware[i]`).
    pub fn merge(self, entries: &[Value]) -> Vec<(String, Value)> {
        let mut merged: Vec<(String, Value)> = self
            .entries()
            .into_iter()
            .enumerate()
            .map(|(i, t)| (format!("preset.middleware[{i}]"), t))
            .collect();
        let preset_len = merged.len();
        let mut overridden = vec![false; preset_len];
        for (i, entry) in entries.iter().enumerate() {
            let path = format!("middleware[{i}]");
            let kind = entry.get("type").and_then(Value::as_str);
            let slot = (0..preset_len)
                .find(|&j| !overridden[j] && kind.is_some() && merged[j].1.get("type").and_then(Value::as_str) == kind);
            match (slot, entry.as_object()) {
                (Some(j), Some(keys)) => {
                    overridden[j] = true;
                    if let Value::Object(table) = &mut merged[j].1 {
                        for (k, v) in keys {
                            table.insert(k.clone(), v.clone());
                        }
                    }
                    merged[j].0 = path;
                }
                _ => merged.push((path, entry.clone())),
            }
        }
        merged
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A preset given to [`SingleAgentBuilder::preset`](crate::single::SingleAgentBuilder::preset):
/// the value, or a name checked when the agent is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PresetChoice {
    /// A preset.
    Preset(Preset),
    /// A preset's name.
    Name(String),
}

impl PresetChoice {
    /// The preset.
    pub fn resolve(&self) -> Result<Preset> {
        match self {
            Self::Preset(p) => Ok(*p),
            Self::Name(n) => Preset::from_name(n),
        }
    }
}

impl fmt::Display for PresetChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Preset(p) => write!(f, "Preset::{p:?}"),
            Self::Name(n) => write!(f, "\"{n}\""),
        }
    }
}

impl From<Preset> for PresetChoice {
    fn from(p: Preset) -> Self {
        Self::Preset(p)
    }
}

impl From<&str> for PresetChoice {
    fn from(n: &str) -> Self {
        Self::Name(n.to_owned())
    }
}

impl From<String> for PresetChoice {
    fn from(n: String) -> Self {
        Self::Name(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_listed_in_variant_order_and_each_builds() {
        for (i, decl) in PRESETS.iter().enumerate() {
            assert_eq!(decl.preset as usize, i, "{} is out of place in PRESETS", decl.name);
            assert_eq!(Preset::from_name(decl.name).unwrap(), decl.preset);
            assert!(!decl.preset.entries().is_empty(), "{} does not parse", decl.name);
            match decl.preset.stack() {
                Ok(stack) => assert!(stack.len() >= decl.preset.entries().len(), "{}", decl.name),
                // A build without an engine feature: the preset names one of its
                // built-ins, and the error says which feature to turn on.
                Err(e) => {
                    let missing = crate::config::NOT_COMPILED.iter().find(|(ty, _)| {
                        decl.preset
                            .entries()
                            .iter()
                            .any(|entry| entry.get("type").and_then(|t| t.as_str()) == Some(*ty))
                    });
                    let Some((ty, feature)) = missing else {
                        panic!("{}: {e}", decl.name)
                    };
                    let msg = e.to_string();
                    assert!(msg.contains(ty) && msg.contains(feature), "{}: {msg}", decl.name);
                }
            }
        }
    }
}
