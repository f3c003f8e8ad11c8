//! [`DynamicPromptMiddleware`]: renders a template from the run context and the run's
//! explicit state into a system prompt segment before each model call.

use serde_json::Value;

use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::model::{ModelRequest, PromptSegment, SegmentStability};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`DynamicPromptMiddleware`] (`type = "dynamic_prompt"`).
///
/// The template's placeholders: `{run_id}`, `{parent_run_id}`, `{depth}`,
/// `{tags}` (comma-separated), `{model}` (the requested model), `{step}`,
/// `{model_calls}`, `{tool_calls}`, and `{state.KEY}`: the latest explicit
/// state update of `KEY` in the run (a string as is, anything else as JSON;
/// empty until the key is set). `{{` and `}}` are literal braces.
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::DynamicPromptConfig;
///
/// let c: DynamicPromptConfig = from_toml_str("template = \"Step {step} in mode {state.mode}.\"").unwrap();
/// assert_eq!(c.segment, "dynamic_prompt");
/// let err = from_toml_str::<DynamicPromptConfig>("template = \"Hello {name}\"").unwrap_err();
/// assert!(err.to_string().contains("unknown placeholder `{name}`"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "dynamic_prompt", builds = DynamicPromptMiddleware, validate = check_template)]
pub struct DynamicPromptConfig {
    /// The template rendered before each model call.
    pub template: String,
    /// The id of the system prompt segment it writes.
    #[config(default = "dynamic_prompt")]
    pub segment: String,
    /// Write a stable segment (part of the cached prefix) instead of a volatile one.
    /// Only for text that does not change between calls of a run.
    #[config(default = false)]
    pub stable: bool,
}

fn check_template(c: &DynamicPromptConfig) -> std::result::Result<(), ConfigViolation> {
    parse(&c.template)
        .map(|_| ())
        .map_err(|rule| ConfigViolation::new("template", rule).with_value(&c.template))?;
    if c.segment.trim().is_empty() {
        return Err(ConfigViolation::new("segment", "must not be empty").with_value(&c.segment));
    }
    Ok(())
}

/// A template variable.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Var {
    RunId,
    ParentRunId,
    Depth,
    Tags,
    Model,
    Step,
    ModelCalls,
    ToolCalls,
    State(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Var(Var),
}

const VARIABLES: &str = "`{run_id}`, `{parent_run_id}`, `{depth}`, `{tags}`, `{model}`, `{step}`, `{model_calls}`, \
                         `{tool_calls}`, `{state.KEY}`";

fn parse(template: &str) -> std::result::Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                let mut name = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(c) => name.push(c),
                        None => return Err(format!("placeholder `{{{name}` is not closed with `}}`")),
                    }
                }
                let var = match name.trim() {
                    "run_id" => Var::RunId,
                    "parent_run_id" => Var::ParentRunId,
                    "depth" => Var::Depth,
                    "tags" => Var::Tags,
                    "model" => Var::Model,
                    "step" => Var::Step,
                    "model_calls" => Var::ModelCalls,
                    "tool_calls" => Var::ToolCalls,
                    other => match other.strip_prefix("state.") {
                        Some(key) if !key.is_empty() => Var::State(key.to_owned()),
                        _ => {
                            return Err(format!(
                                "unknown placeholder `{{{name}}}`; the placeholders are {VARIABLES}"
                            ))
                        }
                    },
                };
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Var(var));
            }
            '}' => return Err("a lone `}` must be written `}}`".to_owned()),
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Ok(pieces)
}

/// Renders a template from the run context and the run's explicit state into
/// one system prompt segment before each model call: the volatile tail by
/// default, so the provider's cached prefix is untouched.
///
/// For a prompt computed from your own typed state, write a `#[dynamic_prompt]`
/// fn instead (the DSL's sugar for the same thing).
///
/// ```
/// use tinyagents::middleware::DynamicPromptMiddleware;
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let prompt = DynamicPromptMiddleware::new("Run {run_id}, step {step}.")?;
/// let mut stack: MiddlewareStack<()> = MiddlewareStack::new();
/// stack.add(prompt)?;
/// let mut ctx: RunContext = RunContext::new(RunConfig::new("r-7"), ());
/// let mut request = ModelRequest::default();
/// stack.run_before_model(&mut ctx, &(), &mut request).await?;
/// assert_eq!(request.system_prompt(), "Run r-7, step 0.");
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicPromptMiddleware {
    pieces: Vec<Piece>,
    segment: String,
    stable: bool,
}

impl DynamicPromptMiddleware {
    /// A dynamic prompt writing the volatile segment `dynamic_prompt`; an
    /// invalid template is a `Config` error naming the rule.
    pub fn new(template: &str) -> Result<Self> {
        let pieces = parse(template).map_err(|rule| {
            crate::harness::error::TinyAgentsError::config_at("template", format!("{template:?}: {rule}"))
        })?;
        Ok(Self {
            pieces,
            segment: "dynamic_prompt".to_owned(),
            stable: false,
        })
    }

    /// The same prompt written to segment `id`.
    pub fn with_segment(mut self, id: impl Into<String>) -> Self {
        self.segment = id.into();
        self
    }

    /// The same prompt written as a stable segment (part of the cached prefix).
    pub fn stable(mut self, stable: bool) -> Self {
        self.stable = stable;
        self
    }

    /// Renders the template for `ctx`.
    pub fn render<C>(&self, ctx: &RunContext<C>) -> String {
        let mut out = String::new();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Var(v) => match v {
                    Var::RunId => out.push_str(ctx.run_id()),
                    Var::ParentRunId => out.push_str(ctx.config().parent_run_id.as_deref().unwrap_or("")),
                    Var::Depth => out.push_str(&ctx.depth().to_string()),
                    Var::Tags => out.push_str(&ctx.tags().join(", ")),
                    Var::Model => out.push_str(ctx.requested_model().unwrap_or("")),
                    Var::Step => out.push_str(&ctx.counters().steps.to_string()),
                    Var::ModelCalls => out.push_str(&ctx.counters().model_calls.to_string()),
                    Var::ToolCalls => out.push_str(&ctx.counters().tool_calls.to_string()),
                    Var::State(key) => {
                        if let Some(u) = ctx.flow().state_updates().iter().rev().find(|u| &u.key == key) {
                            match &u.value {
                                Value::String(s) => out.push_str(s),
                                other => out.push_str(&other.to_string()),
                            }
                        }
                    }
                },
            }
        }
        out
    }
}

impl From<DynamicPromptConfig> for DynamicPromptMiddleware {
    fn from(c: DynamicPromptConfig) -> Self {
        Self {
            // `validate` already parsed it.
            pieces: parse(&c.template).unwrap_or_default(),
            segment: c.segment,
            stable: c.stable,
        }
    }
}

/// Renders a template from the run context and explicit state into a system prompt segment.
#[middleware(
    builtin,
    name = "dynamic_prompt",
    config = DynamicPromptConfig,
    doc(
        mutation = "Sets one system prompt segment of the request (id `segment`, default `dynamic_prompt`): replaced in place when present, else appended (volatile) or inserted after the last stable segment (`stable = true`).",
        events = "None of its own.",
        failure = "An invalid template (unknown placeholder, unclosed brace) is rejected when the middleware is built; rendering cannot fail (a state key not yet set renders empty).",
        streaming = "None: it edits the request before the stream starts.",
        cache = "Writes the volatile tail by default, so the stable prefix keeps its fingerprint; with `stable = true` it writes the cached prefix, which costs a cache miss whenever the rendered text changes.",
        retries = "Runs once per turn in `before_model`, outside the model onion: retries and fallbacks send the same rendered text."
    )
)]
impl DynamicPromptMiddleware {
    #[before_model]
    fn apply<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let text = self.render(ctx);
        let stability = if self.stable {
            SegmentStability::Stable
        } else {
            SegmentStability::Volatile
        };
        match request.system.iter_mut().find(|s| s.id == self.segment) {
            Some(seg) => {
                seg.text = text;
                seg.stability = stability;
            }
            None if self.stable => {
                let at = request
                    .system
                    .iter()
                    .rposition(|s| s.stability == SegmentStability::Stable)
                    .map_or(0, |i| i + 1);
                request
                    .system
                    .insert(at, PromptSegment::stable(self.segment.clone(), text));
            }
            None => request.system.push(PromptSegment::volatile(self.segment.clone(), text)),
        }
        Ok(())
    }
}
