//! [`OutputLimitRecoveryMiddleware`]: recovers when a reply is cut
//! off by the output-token limit, instead of ending the run.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::message::{Message, MessageId};
use crate::harness::middleware::ModelHandler;
use crate::harness::model::{
    known_output_limit, DeltaContent, FinishReason, ModelDelta, ModelRequest, ModelResponse, ReasoningEffort,
};
use crate::harness::tokens::{default_counter, TokenCounter};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// The instruction sent with a continuation; `{cap}` expands to the cap that was hit.
pub const DEFAULT_CONTINUATION_INSTRUCTION: &str = "Your previous response was cut off by the output-token limit \
({cap} tokens). Continue directly from where you stopped without repeating or summarising earlier output. Split \
large file writes or edits into several smaller tool calls, and keep reasoning brief.";

/// Options of [`OutputLimitRecoveryMiddleware`] (`type = "output_limit_recovery"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::OutputLimitRecoveryConfig;
///
/// let c: OutputLimitRecoveryConfig = from_toml_str("max_continuations = 2\nmodel_output_limit = 64000").unwrap();
/// assert!(c.escalate);
/// let err = from_toml_str::<OutputLimitRecoveryConfig>("instruction = \"\"").unwrap_err();
/// assert!(err.to_string().contains("instruction"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "output_limit_recovery", builds = OutputLimitRecoveryMiddleware, validate = check_recovery)]
pub struct OutputLimitRecoveryConfig {
    /// Retry a cut-off reply once at the ceiling (the cut reply discarded, its usage counted).
    #[config(default = true)]
    pub escalate: bool,
    /// Continuations per turn after escalation (or when it is not possible).
    #[config(default = 3, range = 0..=20)]
    pub max_continuations: u32,
    /// Continue a reasoning-only cut-off at one reasoning effort lower (medium when none was set, never below low).
    #[config(default = true)]
    pub lower_effort_on_thinking_only: bool,
    /// The temporary instruction of a continuation; `{cap}` expands to the cap that was hit.
    #[config(default = DEFAULT_CONTINUATION_INSTRUCTION.to_owned())]
    pub instruction: String,
    /// The model's output-token limit (the ceiling when no `max_tokens` is configured): overrides the
    /// known limit of the run's model (`OUTPUT_LIMIT_TABLE`); 32000 when neither is known.
    #[config(range = 1..)]
    pub model_output_limit: Option<u32>,
    /// The first cap when no `max_tokens` is configured: `min(default_cap, model_output_limit)`.
    #[config(default = 32000, range = 1..)]
    pub default_cap: u32,
    /// The model's context window in tokens, when known: escalation never asks for more than the room left.
    #[config(range = 1..)]
    pub context_window: Option<u64>,
}

fn check_recovery(c: &OutputLimitRecoveryConfig) -> std::result::Result<(), ConfigViolation> {
    if c.instruction.trim().is_empty() {
        return Err(
            ConfigViolation::new("instruction", "must not be empty: a continuation needs an instruction")
                .with_value(&c.instruction),
        );
    }
    Ok(())
}

impl From<OutputLimitRecoveryConfig> for OutputLimitRecoveryMiddleware {
    fn from(config: OutputLimitRecoveryConfig) -> Self {
        Self {
            config,
            counter: default_counter(),
            limits: Vec::new(),
        }
    }
}

/// Per-run: how many tool calls the current attempt's stream started.
#[derive(Debug, Default)]
struct StreamWatch {
    tool_calls_started: AtomicU32,
}

/// Recovers when a model reply is cut off by the output-token limit
/// ([`FinishReason::Length`]), in this order, per turn:
///
/// 1. **Escalate** (once): when the request was sent below the ceiling, the
///    cut reply is discarded (it never reaches history; its usage was already
///    counted by the model call) and the same request is retried with
///    `max_tokens` at the ceiling. The ceiling is an explicit `max_tokens`
///    when one is configured (so escalation never goes past it), else the
///    model's output limit; it is capped by the room left in the context window.
/// 2. **Continue** (up to `max_continuations`): the partial reply is kept and
///    the model is asked to continue with a temporary instruction (`{cap}`
///    expanded). The instruction lives only in the continuation requests: it is
///    gone from the next reply that is not cut off on. The parts are merged into
///    one reply. A cut-off holding only reasoning is not kept, and its
///    continuation uses a lower reasoning effort.
///
/// After `max_continuations` the turn fails with `LimitExceeded`
/// (`model_token_limit`). A reply cut inside a tool call never runs that call
/// (the accumulator drops unfinished calls; the partial reply's complete calls
/// are dropped too, as the model is told to redo its writes in smaller calls).
/// Each escalation and continuation emits one durable `OutputLimitRecovery` event.
///
/// ```
/// use tinyagents::config::{BuildMiddleware, MiddlewareConfig};
/// use tinyagents::middleware::{OutputLimitRecoveryConfig, OutputLimitRecoveryMiddleware};
/// use tinyagents::prelude::*;
///
/// let recovery: OutputLimitRecoveryMiddleware = OutputLimitRecoveryConfig::defaults().unwrap().build();
/// let stack: MiddlewareStack<()> = MiddlewareStack::new().with(recovery).unwrap();
/// assert_eq!(stack.implementors(HookKind::WrapModel), ["output_limit_recovery"]);
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct OutputLimitRecoveryMiddleware {
    config: OutputLimitRecoveryConfig,
    #[educe(Debug(ignore))]
    counter: Arc<dyn TokenCounter>,
    /// Output limits given in code, overriding the known ones.
    limits: Vec<(String, u32)>,
}

/// The output limit used when the model's is unknown.
const UNKNOWN_LIMIT: u32 = 32_000;

impl OutputLimitRecoveryMiddleware {
    /// The same middleware knowing `model`'s output limit (`model` a name
    /// or a prefix, as in [`OUTPUT_LIMIT_TABLE`](crate::harness::model::OUTPUT_LIMIT_TABLE)): overrides the table for
    /// it. A configured `model_output_limit` still overrides every model.
    ///
    /// ```
    /// use tinyagents::config::MiddlewareConfig;
    /// use tinyagents::middleware::{OutputLimitRecoveryConfig, OutputLimitRecoveryMiddleware};
    ///
    /// let m = OutputLimitRecoveryMiddleware::from(OutputLimitRecoveryConfig::defaults().unwrap())
    ///     .with_output_limit("my-local-model", 8_000);
    /// assert_eq!(m.output_limit(Some("my-local-model-q4")), 8_000);
    /// assert_eq!(m.output_limit(Some("claude-3-5-haiku-latest")), 8_192);
    /// assert_eq!(m.output_limit(Some("unheard-of")), 32_000);
    /// assert_eq!(m.output_limit(None), 32_000);
    /// ```
    pub fn with_output_limit(mut self, model: impl Into<String>, limit: u32) -> Self {
        self.limits.push((model.into(), limit.max(1)));
        self
    }

    /// The output-token limit this middleware uses for `model`: the
    /// configured `model_output_limit`, else a limit given with
    /// [`with_output_limit`](Self::with_output_limit) (longest prefix), else
    /// the known one ([`known_output_limit`]), else 32,000.
    pub fn output_limit(&self, model: Option<&str>) -> u32 {
        if let Some(limit) = self.config.model_output_limit {
            return limit;
        }
        let Some(model) = model else {
            return UNKNOWN_LIMIT;
        };
        let bare = model.split_once(':').map_or(model, |(_, m)| m);
        self.limits
            .iter()
            .filter(|(prefix, _)| bare.starts_with(prefix.as_str()) || model.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, limit)| *limit)
            .or_else(|| known_output_limit(model))
            .unwrap_or(UNKNOWN_LIMIT)
    }
}

/// One step down, medium when none was set, never below low.
fn lower(effort: Option<ReasoningEffort>) -> ReasoningEffort {
    match effort {
        None | Some(ReasoningEffort::High) => ReasoningEffort::Medium,
        Some(ReasoningEffort::Medium | ReasoningEffort::Low) => ReasoningEffort::Low,
    }
}

impl OutputLimitRecoveryMiddleware {
    /// The same middleware measuring the context room with `counter`.
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// The config.
    pub fn config(&self) -> &OutputLimitRecoveryConfig {
        &self.config
    }

    #[allow(clippy::too_many_arguments)]
    fn emit<C>(
        ctx: &RunContext<C>,
        attempt: u32,
        action: &'static str,
        cap_before: u32,
        cap_after: u32,
        thinking_only: bool,
        discarded: Option<MessageId>,
    ) {
        // Durable: emitted whenever the sink wants it, and kept as an explicit state update.
        ctx.events()
            .emit_with(EventKind::OutputLimitRecovery, || AgentEvent::OutputLimitRecovery {
                run_id: ctx.run_id().clone(),
                turn: ctx.counters().steps,
                attempt,
                action,
                cap_before,
                cap_after,
                thinking_only,
                discarded_message_id: discarded,
            });
    }
}

/// Recovers from replies cut off by the output-token limit: escalate once, then continue.
#[middleware(
    builtin,
    name = "output_limit_recovery",
    config = OutputLimitRecoveryConfig,
    before_if_present = ["model_retry", "model_fallback", "timeout"],
    doc(
        mutation = "Sets `request.params.max_tokens` (the first cap when none is configured; the ceiling on escalation); on continuation sends the partial reply plus a temporary user instruction (never stored), may lower `reasoning_effort`, and returns one reply merging the parts' text with the last part's tool calls.",
        events = "One durable `OutputLimitRecovery { turn, attempt, action: escalate|continue, cap_before, cap_after, thinking_only, discarded_message_id }` per escalation or continuation (an escalation names the discarded message); `AttemptDiscarded` for the escalated attempt's streamed deltas; an explicit state update `output_limit_recovery` per step.",
        failure = "After `max_continuations` in one turn the turn fails with `LimitExceeded` (`model_token_limit`), as a cut-off would end the run without it; model errors pass through untouched.",
        streaming = "Deltas of every attempt stream as usual; a discarded (escalated) attempt is announced with `AttemptDiscarded` so clients drop its deltas. A sync `on_model_delta` hook notes tool-call starts (only for tool-call deltas) to tell a cut inside a tool call.",
        cache = "The stable prefix is untouched; continuation requests append the partial reply and the instruction at the tail, so they reuse the cached prefix of the turn.",
        retries = "A wrap ordered outside retry, fallback and timeout (it declares `before` them), so each attempt it makes is retried or falls back on errors; a `Length` reply is not an error, so retry middleware never sees it. Structured output orders itself outside it and validates the merged reply."
    )
)]
impl OutputLimitRecoveryMiddleware {
    #[on_model_delta]
    fn watch<C>(&self, ctx: &mut RunContext<C>, delta: &mut ModelDelta) -> Result<()> {
        if let DeltaContent::ToolCall { index, .. } = &delta.content {
            ctx.locals()
                .local::<StreamWatch>()
                .tool_calls_started
                .fetch_max(index + 1, Ordering::Relaxed);
        }
        Ok(())
    }

    #[wrap_model]
    async fn recover<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        mut request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<ModelResponse> {
        let c = &self.config;
        let limit = self.output_limit(ctx.requested_model().or(request.model.as_deref()));
        let explicit = request.params.max_tokens;
        let mut ceiling = explicit.unwrap_or(limit);
        if let Some(window) = c.context_window {
            let room = window.saturating_sub(self.counter.count_request(&request));
            ceiling = ceiling.min(u32::try_from(room).unwrap_or(u32::MAX));
        }
        let mut cap = explicit.unwrap_or_else(|| c.default_cap.min(limit));
        request.params.max_tokens = Some(cap);

        let watch = ctx.locals().local::<StreamWatch>();
        let mut escalated = false;
        let mut continuations = 0u32;
        let mut recovery_attempt = 0u32;
        let mut prefix = String::new();
        let mut usage = crate::harness::model::Usage::default();
        let mut effort = request.params.reasoning_effort;
        let mut continuation = request.clone();
        loop {
            watch.tool_calls_started.store(0, Ordering::Relaxed);
            let response = next.run(ctx, state, continuation.clone()).await?.into_response();
            usage += response.usage;
            if response.finish_reason != FinishReason::Length {
                let mut merged = response;
                if !prefix.is_empty() {
                    let text = format!("{prefix}{}", merged.message.text());
                    merged.message.set_text(text);
                }
                merged.usage = usage;
                return Ok(merged);
            }
            let thinking_only = response.message.text().trim().is_empty()
                && response.message.tool_calls.is_empty()
                && !response.message.reasoning().is_empty();
            let cut_in_tool_call =
                watch.tool_calls_started.load(Ordering::Relaxed) as usize > response.message.tool_calls.len();
            recovery_attempt += 1;

            // 1. Escalate once, when the cap is below the ceiling.
            if c.escalate && !escalated && cap < ceiling {
                escalated = true;
                Self::emit(
                    ctx,
                    recovery_attempt,
                    "escalate",
                    cap,
                    ceiling,
                    thinking_only,
                    Some(response.message.id.clone()),
                );
                let attempt = ctx.counters().model_calls;
                ctx.events()
                    .emit_with(EventKind::AttemptDiscarded, || AgentEvent::AttemptDiscarded {
                        run_id: ctx.run_id().clone(),
                        attempt,
                        reason: "the reply was cut off by the output limit and is retried at a higher cap".into(),
                    });
                ctx.flow_mut().update_state(
                    "output_limit_recovery",
                    serde_json::json!({"action": "escalate", "cap_before": cap, "cap_after": ceiling}),
                );
                cap = ceiling;
                request.params.max_tokens = Some(cap);
                continuation.params.max_tokens = Some(cap);
                continue;
            }

            // 2. Continue, up to max_continuations.
            if continuations >= c.max_continuations {
                return Err(TinyAgentsError::limit(
                    "model_token_limit",
                    format!(
                        "the reply was cut off by the output limit ({cap} tokens) {} time(s) in this turn \
                         ({continuations} continuation(s), max_continuations = {}); {} characters of partial reply \
                         were produced; raise max_tokens or ask for shorter output",
                        recovery_attempt,
                        c.max_continuations,
                        prefix.len() + response.message.text().len()
                    ),
                ));
            }
            continuations += 1;
            Self::emit(ctx, recovery_attempt, "continue", cap, cap, thinking_only, None);
            ctx.flow_mut().update_state(
                "output_limit_recovery",
                serde_json::json!({"action": "continue", "cap": cap, "thinking_only": thinking_only,
                    "cut_in_tool_call": cut_in_tool_call}),
            );
            if thinking_only {
                if c.lower_effort_on_thinking_only {
                    effort = Some(lower(effort));
                }
            } else {
                prefix.push_str(&response.message.text());
            }
            let mut next_request = request.clone();
            next_request.params.reasoning_effort = effort;
            if !prefix.is_empty() {
                next_request.messages.push(Message::assistant(prefix.clone()));
            }
            next_request
                .messages
                .push(Message::user(c.instruction.replace("{cap}", &cap.to_string())));
            continuation = next_request;
        }
    }
}
