//! [`DynamicToolSelectionMiddleware`]: narrows the tools shown on each turn to
//! those relevant to it, by a predicate over the request or by asking a
//! (small) chat model to pick at most `max_tools`.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use serde_json::{json, Value};
use tinyagents_macros::{middleware, MiddlewareConfig};

use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::message::{Message, Role};
use crate::harness::model::{ChatModel, DeltaContent, ModelRequest, PromptSegment, ResponseAccumulator, Usage};
use crate::harness::tool::ToolSchema;

use super::super::limits::PriceBudget;

/// The default instruction given to the selector model.
pub const SELECTOR_PROMPT: &str = "Your goal is to select the tools most relevant to the user's query. \
Answer with a JSON object {\"tools\": [\"name\", ...]} listing at most {max} tool names from the list, most relevant first.";

/// Options of the model-based [`DynamicToolSelectionMiddleware`]
/// (`type = "dynamic_tool_selection"`); the selector model is given in code
/// ([`DynamicToolSelectionMiddleware::from_config`]).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::DynamicToolSelectionConfig;
///
/// let c: DynamicToolSelectionConfig = from_toml_str("max_tools = 3\nalways_include = [\"search\"]").unwrap();
/// assert_eq!(c.max_tools, 3);
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "dynamic_tool_selection")]
pub struct DynamicToolSelectionConfig {
    /// The most tools the selector may pick (tools always included do not count).
    #[config(default = 5, range = 1..=128)]
    pub max_tools: usize,
    /// Tools always shown, whatever the selector says.
    #[config(default = Vec::new())]
    pub always_include: Vec<String>,
    /// The selector's instruction (`{max}` is replaced by `max_tools`).
    #[config(default = SELECTOR_PROMPT.to_owned())]
    pub prompt: String,
}

type Predicate = dyn Fn(&ToolSchema, &ModelRequest) -> bool + Send + Sync;

#[derive(Clone)]
enum Selector {
    Predicate(Arc<Predicate>),
    Model {
        model: Arc<dyn ChatModel>,
        max_tools: usize,
        prompt: String,
    },
}

/// Shows, on each turn, only the tools relevant to it.
///
/// Two forms: a predicate over each tool and the request
/// ([`from_predicate`](Self::from_predicate)), or a selector model that is
/// shown the tool list and the latest user message and answers with at most
/// `max_tools` names ([`from_model`](Self::from_model)). Tools in
/// `always_include` are always kept; names the selector invents are ignored
/// (and reported). Selection narrows exposure only: pair it with
/// `tool_policy` or `tool_allowlist` for enforcement.
///
/// ```
/// use tinyagents::middleware::DynamicToolSelectionMiddleware;
///
/// // math tools only when the user talks about numbers
/// let mw = DynamicToolSelectionMiddleware::from_predicate(|tool, request| {
///     let last = request.messages.last().map(|m| m.text().into_owned()).unwrap_or_default();
///     !tool.name.starts_with("math_") || last.chars().any(|c| c.is_ascii_digit())
/// });
/// # let _ = mw;
/// ```
#[derive(Clone)]
pub struct DynamicToolSelectionMiddleware {
    selector: Selector,
    always: BTreeSet<String>,
}

impl std::fmt::Debug for DynamicToolSelectionMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let form = match &self.selector {
            Selector::Predicate(_) => "predicate".to_owned(),
            Selector::Model { model, max_tools, .. } => format!("model {} (max {max_tools})", model.id()),
        };
        f.debug_struct("DynamicToolSelectionMiddleware")
            .field("selector", &form)
            .field("always_include", &self.always)
            .finish()
    }
}

impl DynamicToolSelectionMiddleware {
    /// Keeps a tool when `predicate(tool, request)` is true.
    pub fn from_predicate(predicate: impl Fn(&ToolSchema, &ModelRequest) -> bool + Send + Sync + 'static) -> Self {
        Self {
            selector: Selector::Predicate(Arc::new(predicate)),
            always: BTreeSet::new(),
        }
    }

    /// Asks `model` to pick at most `max_tools` tools (at least 1).
    pub fn from_model(model: Arc<dyn ChatModel>, max_tools: usize) -> Self {
        Self {
            selector: Selector::Model {
                model,
                max_tools: max_tools.max(1),
                prompt: SELECTOR_PROMPT.to_owned(),
            },
            always: BTreeSet::new(),
        }
    }

    /// The model form from a checked config.
    pub fn from_config(config: DynamicToolSelectionConfig, model: Arc<dyn ChatModel>) -> Self {
        Self::from_model(model, config.max_tools)
            .with_prompt(config.prompt)
            .always_include(config.always_include)
    }

    /// The same middleware always keeping these tools.
    pub fn always_include<I: IntoIterator<Item = S>, S: Into<String>>(mut self, tools: I) -> Self {
        self.always.extend(tools.into_iter().map(Into::into));
        self
    }

    /// The same middleware with another selector instruction (`{max}` is replaced).
    pub fn with_prompt(mut self, prompt: impl Into<String>) -> Self {
        if let Selector::Model { prompt: p, .. } = &mut self.selector {
            *p = prompt.into();
        }
        self
    }

    /// Asks the selector model; returns the names it picked (in its order) and its usage.
    async fn ask<C>(
        &self,
        ctx: &mut RunContext<C>,
        model: &Arc<dyn ChatModel>,
        max_tools: usize,
        prompt: &str,
        request: &ModelRequest,
    ) -> Result<Vec<String>> {
        let candidates: Vec<&ToolSchema> = request
            .tools
            .iter()
            .filter(|t| !self.always.contains(&t.name))
            .collect();
        let list: String = candidates
            .iter()
            .map(|t| format!("- {}: {}\n", t.name, t.description))
            .collect();
        let query = request
            .messages
            .iter()
            .rev()
            .find(|m| m.role == Role::User)
            .map(|m| m.text().into_owned())
            .unwrap_or_default();
        let ask = ModelRequest::new(vec![Message::user(query)]).with_system(PromptSegment::stable(
            "tool_selector",
            format!("{}\n\nTools:\n{list}", prompt.replace("{max}", &max_tools.to_string())),
        ));
        // A paid call like any other: checked against the run's price budget
        // before it is made, and its usage (also what a failed stream
        // reported before failing) charged to it.
        let ticket = PriceBudget::of(ctx).dispatch(ctx, false)?;
        let mut acc = ResponseAccumulator::new();
        let mut streamed = Usage::default();
        let answer = async {
            let mut stream = model.stream(&ask).await?;
            while let Some(delta) = stream.next().await {
                let delta = delta?;
                if let DeltaContent::Usage { usage } = &delta.content {
                    streamed += *usage;
                }
                acc.push_owned(delta);
            }
            Ok::<_, TinyAgentsError>(())
        }
        .await;
        match answer.and_then(|()| acc.finish()) {
            Ok(response) => {
                ctx.add_usage(response.usage);
                ticket.settle(ctx, model.id(), response.usage)?;
                Ok(parse_names(&response.message.text()))
            }
            Err(e) => {
                ctx.add_usage(streamed);
                if streamed.is_zero() {
                    ticket.settle_unknown(ctx, &e);
                } else {
                    ticket.settle_failed(ctx, model.id(), streamed, &e)?;
                }
                Err(e)
            }
        }
    }
}

/// Tool names from the selector's answer: `{"tools": [...]}`, a JSON array, or one name per line or comma.
fn parse_names(text: &str) -> Vec<String> {
    let trimmed = text.trim();
    let json_part = trimmed
        .find(['{', '['])
        .and_then(|start| serde_json::from_str::<Value>(&trimmed[start..]).ok());
    let from_json = match json_part {
        Some(Value::Object(o)) => o.get("tools").and_then(Value::as_array).cloned(),
        Some(Value::Array(a)) => Some(a),
        _ => None,
    };
    match from_json {
        Some(items) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        None => trimmed
            .split([',', '\n'])
            .map(|s| s.trim_matches(|c: char| c.is_whitespace() || matches!(c, '-' | '*' | '`' | '"')))
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
    }
}

/// Shows each turn only the relevant tools: chosen by a predicate over the request, or by a selector model that picks at most `max_tools` (tools always included are kept; invented names ignored and reported).
#[middleware(
    builtin,
    name = "dynamic_tool_selection",
    config = DynamicToolSelectionConfig,
    doc(
        mutation = "Removes the tools not selected from `request.tools`.",
        events = "`ToolsFiltered { by: \"dynamic_tool_selection\", excluded, remaining }` when it hides tools; `Custom { name: \"unknown_tools_selected\", data: { names } }` when the selector names tools that do not exist; `Custom { name: \"selection_truncated\", data: { dropped } }` when it picks more than `max_tools`.",
        failure = "Fails clearly: a selector model error ends the turn with that error (classified, so retries apply). The selector is a paid call: `limits` checks it against `max_price_usd` before it is made (at the cap it is not asked and the turn fails with `LimitExceeded`) and charges its usage, also what a failed stream reported. An answer naming no known tool leaves only `always_include`. Exposure only: pair it with `tool_policy` or `tool_allowlist`.",
        streaming = "The selector's reply is consumed whole (not forwarded); the main call streams as usual.",
        cache = "The tool list changes from turn to turn, which changes the cached prefix of providers that put tools first: a trade of cache hits for a shorter prompt.",
        retries = "Selects once per turn in `before_model`, outside the model onion: retries and fallbacks of the main call reuse the selection; the selector's usage is added to the run."
    )
)]
impl DynamicToolSelectionMiddleware {
    #[before_model]
    async fn select<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let keep: BTreeSet<String> = match &self.selector {
            Selector::Predicate(p) => request
                .tools
                .iter()
                .filter(|t| p(t, request))
                .map(|t| t.name.clone())
                .collect(),
            Selector::Model {
                model,
                max_tools,
                prompt,
            } => {
                if request.tools.iter().all(|t| self.always.contains(&t.name)) {
                    return Ok(());
                }
                let picked = self.ask(ctx, model, *max_tools, prompt, request).await.map_err(|e| {
                    // a model's failure, a limit, a retryable error and a
                    // pause or cancellation keep their class
                    if matches!(e, TinyAgentsError::Model { .. } | TinyAgentsError::LimitExceeded { .. })
                        || e.is_retryable()
                        || e.is_control_flow()
                    {
                        e
                    } else {
                        TinyAgentsError::middleware("dynamic_tool_selection", format!("the tool selector failed: {e}"))
                    }
                })?;
                let known: BTreeSet<&str> = request
                    .tools
                    .iter()
                    .filter(|t| !self.always.contains(&t.name))
                    .map(|t| t.name.as_str())
                    .collect();
                let mut unknown = Vec::new();
                let mut chosen: Vec<String> = Vec::new();
                for name in picked {
                    if !known.contains(name.as_str()) {
                        if !self.always.contains(&name) {
                            unknown.push(name);
                        }
                    } else if !chosen.contains(&name) {
                        chosen.push(name);
                    }
                }
                if !unknown.is_empty() {
                    ctx.events().emit_with(EventKind::Custom, || AgentEvent::Custom {
                        middleware: "dynamic_tool_selection".into(),
                        name: "unknown_tools_selected".into(),
                        data: json!({ "names": unknown }),
                    });
                }
                if chosen.len() > *max_tools {
                    let dropped = chosen.split_off(*max_tools);
                    ctx.events().emit_with(EventKind::Custom, || AgentEvent::Custom {
                        middleware: "dynamic_tool_selection".into(),
                        name: "selection_truncated".into(),
                        data: json!({ "dropped": dropped }),
                    });
                }
                chosen.into_iter().collect()
            }
        };
        let mut excluded = Vec::new();
        request.tools.retain(|t| {
            let k = self.always.contains(&t.name) || keep.contains(&t.name);
            if !k {
                excluded.push(t.name.clone());
            }
            k
        });
        if !excluded.is_empty() {
            ctx.events()
                .emit_with(EventKind::ToolsFiltered, || AgentEvent::ToolsFiltered {
                    by: "dynamic_tool_selection".to_owned(),
                    excluded,
                    remaining: request.tools.iter().map(|t| t.name.clone()).collect(),
                });
        }
        Ok(())
    }
}
