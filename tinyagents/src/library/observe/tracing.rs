//! [`TracingMiddleware`]: a `tracing` span per run, model call and tool call,
//! with attributes named after the OpenTelemetry GenAI semantic conventions.

use tracing::field::Empty;
use tracing::{Instrument, Span};

use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::middleware::{MiddlewareModelOutcome, MiddlewareToolOutcome, ModelHandler, RunState, ToolHandler};
use crate::harness::model::{FinishReason, ModelRequest};
use crate::harness::run::{AgentRun, StopReason};
use crate::harness::tool::ToolCall;
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`TracingMiddleware`] (`type = "tracing"`).
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::TracingConfig;
///
/// let config: TracingConfig = from_toml_str("record_content = true").unwrap();
/// assert!(config.record_content);
/// let _tracing = config.build();
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "tracing", builds = TracingMiddleware)]
pub struct TracingConfig {
    /// Record prompts, completions, tool arguments and tool results on the spans (off: never).
    #[config(default = false)]
    pub record_content: bool,
    /// The `gen_ai.provider.name` to record (`openai`, `anthropic`, …), when known.
    pub provider: Option<String>,
}

impl From<TracingConfig> for TracingMiddleware {
    fn from(c: TracingConfig) -> Self {
        let mut m = Self::new().record_content(c.record_content);
        m.provider = c.provider;
        m
    }
}

/// Its run state: the run's span, from `before_agent` to `after_agent`.
#[derive(Default)]
struct RunSpan(Option<Span>);

/// The run's span, the parent of a call's (tracing never fails a call: a
/// state it cannot read leaves the current span the parent).
fn run_span(state: &RunState<RunSpan>) -> Option<Span> {
    state.lock().ok().and_then(|s| s.0.clone())
}

/// Splits a model id of this crate's providers (`openai:gpt-4o`) into the
/// GenAI provider name and the model name; any other id is the model name alone.
fn split_model_id(id: &str) -> (Option<&str>, &str) {
    match id.split_once(':') {
        Some((provider @ ("openai" | "anthropic"), model)) if !model.is_empty() => (Some(provider), model),
        _ => (None, id),
    }
}

/// The OpenTelemetry span name `{operation} {target}`, or the operation alone
/// when the target is unknown (the GenAI conventions' naming rule).
fn otel_name(operation: &str, target: Option<&str>) -> String {
    match target {
        Some(t) if !t.is_empty() => format!("{operation} {t}"),
        _ => operation.to_owned(),
    }
}

fn finish_reason(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Length => "length",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(s) => s,
    }
}

/// Opens a `tracing` span per run (`invoke_agent`), model call (`chat`) and
/// tool call (`execute_tool`), with OpenTelemetry GenAI attribute names. Each
/// span's `otel.name` (the name an OpenTelemetry exporter such as
/// `tracing-opentelemetry` gives it) follows the conventions' rule:
/// `chat {model}` and `execute_tool {tool}`; `otel.kind` is `client` for a
/// model call and `internal` otherwise. A model id of this crate's providers
/// (`openai:gpt-4o`) is recorded as `gen_ai.provider.name = "openai"` and
/// `gen_ai.request.model = "gpt-4o"`
/// (`gen_ai.operation.name`, `gen_ai.request.model`,
/// `gen_ai.usage.input_tokens`, `gen_ai.usage.output_tokens`,
/// `gen_ai.tool.name`, `gen_ai.tool.call.id`, …) and errors recorded as
/// `error.type` with `otel.status_code = "ERROR"`.
///
/// Prompt and completion text, tool arguments and tool results are never
/// recorded unless [`record_content`](TracingMiddleware::record_content) is on.
/// The spans nest: model and tool spans are children of their run's span, and
/// a sub-agent run started by a tool call is a child of that call's span.
///
/// ```
/// use tinyagents::middleware::TracingMiddleware;
/// use tinyagents::prelude::*;
///
/// let stack: MiddlewareStack<()> = MiddlewareStack::new().with(TracingMiddleware::new()).unwrap();
/// assert!(stack.names().contains(&"tracing"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct TracingMiddleware {
    record_content: bool,
    provider: Option<String>,
}

impl TracingMiddleware {
    /// Spans without message content.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same middleware, recording message content when `on` (opt-in).
    pub fn record_content(mut self, on: bool) -> Self {
        self.record_content = on;
        self
    }

    /// The same middleware recording `gen_ai.provider.name = provider`.
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = Some(provider.into());
        self
    }
}

/// Opens OpenTelemetry-GenAI-named `tracing` spans per run, model call and tool call; no prompt or completion text unless opted in.
#[middleware(
    builtin,
    name = "tracing",
    config = TracingConfig,
    run_state = RunSpan,
    doc(
        mutation = "None: it only reads.",
        events = "No `AgentEvent`s; `tracing` spans `invoke_agent` (per run), `chat` (per model call, OpenTelemetry name `chat {model}`) and `execute_tool` (per tool call, `execute_tool {tool}`) with `gen_ai.*` attributes, `error.type` and `otel.status_code` on failure. Content attributes (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) only with `record_content = true`.",
        failure = "Never fails; errors of the calls it wraps pass through unchanged after being recorded on the span.",
        streaming = "The `chat` span covers the whole streamed call (deltas are emitted inside it); it implements no delta hook, so streaming pays nothing per delta.",
        cache = "Records `gen_ai.usage.cache_read.input_tokens` and `gen_ai.usage.cache_creation.input_tokens`; it does not touch the request.",
        retries = "A wrap layer: placed outside retry and fallback, one `chat` span covers every attempt (the attempts' `ModelCallStarted` events fall inside it); placed inside, each attempt gets its own span."
    )
)]
impl TracingMiddleware {
    #[before_agent]
    fn open_run<C>(&self, ctx: &mut RunContext<C>, run_span: &mut RunSpan) -> Result<()> {
        let span = tracing::info_span!(
            "invoke_agent",
            "otel.name" = "invoke_agent",
            "otel.kind" = "internal",
            "gen_ai.operation.name" = "invoke_agent",
            "gen_ai.provider.name" = self.provider.as_deref(),
            "gen_ai.agent.id" = %ctx.run_id(),
            "gen_ai.conversation.id" = ctx.config().thread_id.as_deref(),
            "gen_ai.request.model" = ctx.requested_model(),
            "tinyagents.depth" = ctx.depth(),
            "gen_ai.usage.input_tokens" = Empty,
            "gen_ai.usage.output_tokens" = Empty,
            "error.type" = Empty,
            "otel.status_code" = Empty,
        );
        run_span.0 = Some(span);
        Ok(())
    }

    #[after_agent]
    fn close_run(&self, run_span: &mut RunSpan, run: &mut AgentRun) -> Result<()> {
        let Some(span) = run_span.0.take() else {
            return Ok(());
        };
        span.record("gen_ai.usage.input_tokens", run.usage.total_input());
        span.record("gen_ai.usage.output_tokens", run.usage.output_tokens);
        if let StopReason::Failed(kind) = &run.stop {
            span.record("error.type", kind.as_str());
            span.record("otel.status_code", "ERROR");
        }
        Ok(())
    }

    #[wrap_model]
    async fn chat_span<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        spans: &RunState<RunSpan>,
        request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<MiddlewareModelOutcome> {
        let id = request
            .route
            .as_ref()
            .map(|r| r.0.id().to_owned())
            .or_else(|| request.model.clone());
        let (provider, model) = match id.as_deref().map(split_model_id) {
            Some((provider, model)) => (provider, Some(model)),
            None => (None, None),
        };
        let provider = self.provider.as_deref().or(provider);
        let parent = run_span(spans).unwrap_or_else(Span::current);
        let span = tracing::info_span!(
            parent: &parent,
            "chat",
            "otel.name" = otel_name("chat", model).as_str(),
            "otel.kind" = "client",
            "gen_ai.operation.name" = "chat",
            "gen_ai.provider.name" = provider,
            "gen_ai.request.model" = model,
            "gen_ai.request.max_tokens" = request.params.max_tokens,
            "gen_ai.request.temperature" = request.params.temperature.map(f64::from),
            "gen_ai.response.model" = Empty,
            "gen_ai.response.finish_reasons" = Empty,
            "gen_ai.usage.input_tokens" = Empty,
            "gen_ai.usage.output_tokens" = Empty,
            "gen_ai.usage.cache_read.input_tokens" = Empty,
            "gen_ai.usage.cache_creation.input_tokens" = Empty,
            "gen_ai.input.messages" = Empty,
            "gen_ai.system_instructions" = Empty,
            "gen_ai.output.messages" = Empty,
            "error.type" = Empty,
            "otel.status_code" = Empty,
        );
        if self.record_content {
            let messages = serde_json::to_string(&request.messages).unwrap_or_default();
            span.record("gen_ai.input.messages", messages.as_str());
            span.record("gen_ai.system_instructions", request.system_prompt().as_str());
        }
        let result = next.run(ctx, state, request).instrument(span.clone()).await;
        match &result {
            Ok(outcome) => {
                let response = outcome.response();
                let u = response.usage;
                span.record("gen_ai.usage.input_tokens", u.total_input());
                span.record("gen_ai.usage.output_tokens", u.output_tokens);
                span.record("gen_ai.usage.cache_read.input_tokens", u.cache_read_tokens);
                span.record("gen_ai.usage.cache_creation.input_tokens", u.cache_write_tokens);
                span.record("gen_ai.response.finish_reasons", finish_reason(&response.finish_reason));
                if let Some(m) = &response.model {
                    span.record("gen_ai.response.model", m.as_str());
                }
                if self.record_content {
                    let out = serde_json::to_string(&response.message).unwrap_or_default();
                    span.record("gen_ai.output.messages", out.as_str());
                }
            }
            Err(e) => {
                span.record("error.type", e.kind().as_str());
                span.record("otel.status_code", "ERROR");
            }
        }
        result
    }

    #[wrap_tool]
    async fn tool_span<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        spans: &RunState<RunSpan>,
        call: ToolCall,
        next: ToolHandler<'_, S, C>,
    ) -> Result<MiddlewareToolOutcome> {
        let parent = run_span(spans).unwrap_or_else(Span::current);
        let span = tracing::info_span!(
            parent: &parent,
            "execute_tool",
            "otel.name" = otel_name("execute_tool", Some(call.name.as_str())).as_str(),
            "otel.kind" = "internal",
            "gen_ai.operation.name" = "execute_tool",
            "gen_ai.tool.name" = call.name.as_str(),
            "gen_ai.tool.call.id" = call.id.as_str(),
            "gen_ai.tool.type" = "function",
            "gen_ai.tool.call.arguments" = Empty,
            "gen_ai.tool.call.result" = Empty,
            "error.type" = Empty,
            "otel.status_code" = Empty,
        );
        if self.record_content {
            span.record("gen_ai.tool.call.arguments", call.arguments.to_string().as_str());
        }
        let result = next.run(ctx, state, call).instrument(span.clone()).await;
        match &result {
            Ok(outcome) => {
                let r = outcome.result();
                if r.is_error() {
                    span.record("error.type", "tool_error");
                    span.record("otel.status_code", "ERROR");
                }
                if self.record_content {
                    span.record("gen_ai.tool.call.result", r.content.as_str());
                }
            }
            Err(e) => {
                span.record("error.type", e.kind().as_str());
                span.record("otel.status_code", "ERROR");
            }
        }
        result
    }
}
