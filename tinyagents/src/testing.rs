//! Testing kit: how to test your own middleware with fake models, tools and
//! event sinks, without a real provider.
//!
//! * [`ScriptedModel`] replays scripted replies as real delta streams.
//! * [`RecordingTool`] is a fake tool that records every call it gets.
//! * [`CollectingSink`] keeps every event; [`trace`] turns events into short
//!   readable lines to assert on.
//! * [`MiddlewareHarness`] runs one middleware's hooks in isolation (a stack
//!   of one, a context with a collecting sink) and hands back the edited value.
//! * [`model_base`] and [`tool_base`] make the innermost call of a wrap onion
//!   from a closure, to test wrap middleware.
//! * [`check_transcript`] and [`assert_valid_transcript`] check a run's
//!   messages against the tool-call rules OpenAI and Anthropic enforce.
//!
//! ```
//! use tinyagents::prelude::*;
//! use tinyagents::testing::{trace, MiddlewareHarness};
//!
//! struct Upper;
//! #[async_trait::async_trait]
//! impl Middleware<()> for Upper {
//!     fn hooks(&self) -> HookSet { HookSet::AFTER_MODEL }
//!     async fn after_model(&self, _: &mut RunContext, _: &(), r: &mut ModelResponse) -> Result<()> {
//!         let t = r.message.text().to_uppercase();
//!         r.message.set_text(t);
//!         Ok(())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut h = MiddlewareHarness::new(Upper);
//! let response = h.after_model(ModelResponse::text("hi")).await.unwrap();
//! assert_eq!(response.message.text(), "HI");
//! assert_eq!(trace(&h.events()), ["started Upper.after_model", "completed Upper.after_model ok"]);
//! # });
//! ```

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;

pub use crate::harness::event::CollectingSink;
pub use crate::harness::model::{ScriptedModel, ScriptedTurn};

use crate::harness::context::{RunConfig, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, HookOutcome};
use crate::harness::middleware::{Middleware, MiddlewareStack, ModelBaseCall, PreparedBatch, ToolBaseCall};
use crate::harness::model::{DeltaContent, ModelDelta, ModelRequest, ModelResponse};
use crate::harness::run::AgentRun;
use crate::harness::tool::{Tool, ToolCall, ToolContext, ToolOutput, ToolPolicy, ToolResult, ToolSchema};

/// One short line per event, for asserting on sequences:
/// `started NAME.HOOK`, `completed NAME.HOOK ok|error:KIND|panicked|cancelled`,
/// `model_call step=N attempt=N`, `delta "TEXT"`, `tool_call NAME`, `tool_done NAME [error]`,
/// `control KIND`, `suppressed NAME`, `notice SOURCE: MESSAGE`, `run_started`, `run_completed [error:KIND]`, …
pub fn trace(events: &[AgentEvent]) -> Vec<String> {
    events.iter().filter_map(trace_line).collect()
}

/// The [`trace`] line of one event (`None` for kinds it does not describe).
pub fn trace_line(event: &AgentEvent) -> Option<String> {
    Some(match event {
        AgentEvent::RunStarted { depth, .. } if *depth > 0 => format!("run_started depth={depth}"),
        AgentEvent::RunStarted { .. } => "run_started".to_owned(),
        AgentEvent::RunCompleted { error: None, .. } => "run_completed".to_owned(),
        AgentEvent::RunCompleted { error: Some(k), .. } => format!("run_completed error:{k}"),
        AgentEvent::MiddlewareStarted { middleware, hook, .. } => format!("started {middleware}.{hook}"),
        AgentEvent::MiddlewareCompleted {
            middleware,
            hook,
            outcome,
            ..
        } => {
            let outcome = match outcome {
                HookOutcome::Ok => "ok".to_owned(),
                HookOutcome::Error(k) => format!("error:{k}"),
                HookOutcome::Panicked => "panicked".to_owned(),
                HookOutcome::Cancelled => "cancelled".to_owned(),
            };
            format!("completed {middleware}.{hook} {outcome}")
        }
        AgentEvent::ModelCallStarted { step, attempt, .. } => format!("model_call step={step} attempt={attempt}"),
        AgentEvent::ModelRequest { request, .. } => {
            format!("model_request kept={} new={}", request.kept, request.messages.len())
        }
        AgentEvent::ModelCallCompleted { error: Some(k), .. } => format!("model_done error:{k}"),
        AgentEvent::ModelCallCompleted { .. } => "model_done".to_owned(),
        AgentEvent::ModelDelta { delta, .. } => match &delta.content {
            DeltaContent::Text { text } => format!("delta {text:?}"),
            DeltaContent::Reasoning { text } => format!("reasoning {text:?}"),
            DeltaContent::ToolCall { arguments, .. } => format!("tool_call_delta {arguments:?}"),
            DeltaContent::Usage { .. } => "usage".to_owned(),
            DeltaContent::Finish { reason } => format!("finish {reason:?}"),
        },
        AgentEvent::AttemptDiscarded { attempt, .. } => format!("discarded attempt={attempt}"),
        AgentEvent::DeltaSuppressed { middleware, .. } => format!("suppressed {middleware}"),
        AgentEvent::ToolCallStarted { tool, .. } => format!("tool_call {tool}"),
        AgentEvent::ToolCallRefused { tool, .. } => format!("tool_refused {tool}"),
        AgentEvent::ToolDelta { delta, .. } => format!("tool_delta {:?}", delta.content),
        AgentEvent::ToolCallCompleted {
            tool, is_error: false, ..
        } => format!("tool_done {tool}"),
        AgentEvent::ToolCallCompleted {
            tool, is_error: true, ..
        } => format!("tool_done {tool} error"),
        AgentEvent::ControlApplied { control, .. } => format!("control {control}"),
        AgentEvent::StateUpdated { key, .. } => format!("state {key}"),
        AgentEvent::Steering {
            command_id,
            action,
            decision,
            transformed,
            ..
        } => {
            format!(
                "steering {command_id} {action} {decision}{}",
                if *transformed { " transformed" } else { "" }
            )
        }
        AgentEvent::ToolsFiltered { by, excluded, .. } => format!("tools_filtered {by} -{}", excluded.join(",")),
        AgentEvent::Notice { source, message, .. } => format!("notice {source}: {message}"),
        AgentEvent::Compressed { provenance, .. } => format!(
            "compressed {} {} messages {}->{} tokens",
            provenance.middleware,
            provenance.source_message_ids.len(),
            provenance.original_tokens,
            provenance.compressed_tokens
        ),
        AgentEvent::CacheLayoutChanged { event, .. } => {
            format!("cache_layout step={} by={}", event.step, event.changed_by.join(","))
        }
        AgentEvent::OutputLimitRecovery {
            action,
            attempt,
            cap_before,
            cap_after,
            ..
        } => format!("output_limit_recovery {action} attempt={attempt} cap={cap_before}->{cap_after}"),
        AgentEvent::Custom { middleware, name, .. } => format!("custom {middleware}.{name}"),
        AgentEvent::Retry {
            target,
            attempt,
            max_attempts,
            delay,
            error,
            ..
        } => format!("retry {target} attempt={attempt}/{max_attempts} delay={delay:?} error:{error}"),
        AgentEvent::Fallback { from, to, error, .. } => format!("fallback {from} -> {to} error:{error}"),
        AgentEvent::RateLimited {
            key, rejected: true, ..
        } => format!("rate_limited {key} rejected"),
        AgentEvent::RateLimited { key, waited, .. } => format!("rate_limited {key} waited={waited:?}"),
    })
}

/// A fake tool that records every call's arguments and answers with a fixed
/// output (or a fixed error).
///
/// ```
/// use tinyagents::testing::RecordingTool;
/// let search = RecordingTool::new("search").returning("3 results");
/// assert_eq!(search.calls().len(), 0);
/// ```
#[derive(Clone)]
pub struct RecordingTool {
    schema: ToolSchema,
    policy: ToolPolicy,
    output: std::result::Result<String, String>,
    progress: Vec<String>,
    calls: Arc<Mutex<Vec<Value>>>,
}

impl std::fmt::Debug for RecordingTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingTool")
            .field("name", &self.schema.name)
            .finish_non_exhaustive()
    }
}

impl RecordingTool {
    /// A tool named `name` answering `"ok"`.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            schema: ToolSchema::new(name.clone(), format!("The fake tool `{name}`.")),
            policy: ToolPolicy::default(),
            output: Ok("ok".to_owned()),
            progress: Vec::new(),
            calls: Arc::default(),
        }
    }

    /// The same tool answering `output`.
    pub fn returning(mut self, output: impl Into<String>) -> Self {
        self.output = Ok(output.into());
        self
    }

    /// The same tool failing with a `Tool` error carrying `message`.
    pub fn failing(mut self, message: impl Into<String>) -> Self {
        self.output = Err(message.into());
        self
    }

    /// The same tool reporting these progress texts before it answers.
    pub fn with_progress(mut self, progress: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.progress = progress.into_iter().map(Into::into).collect();
        self
    }

    /// The same tool with a policy.
    pub fn with_policy(mut self, policy: ToolPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The arguments of every call so far (shared by clones of this tool).
    pub fn calls(&self) -> Vec<Value> {
        self.calls.lock().expect("recording tool lock").clone()
    }
}

#[async_trait]
impl Tool for RecordingTool {
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    fn policy(&self) -> ToolPolicy {
        self.policy.clone()
    }

    async fn call(&self, cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        self.calls.lock().expect("recording tool lock").push(arguments);
        for p in &self.progress {
            cx.progress(p.clone());
        }
        match &self.output {
            Ok(out) => Ok(out.as_str().into()),
            Err(msg) => Err(TinyAgentsError::tool(&self.schema.name, msg.clone())),
        }
    }
}

/// The innermost model call of a wrap onion, from a closure. See [`model_base`].
pub struct FnModelBase<F>(F);

/// Makes the innermost model call of an onion from a closure over the request.
pub fn model_base<F>(f: F) -> FnModelBase<F>
where
    F: Fn(ModelRequest) -> Result<ModelResponse> + Send + Sync,
{
    FnModelBase(f)
}

#[async_trait]
impl<S, C, F> ModelBaseCall<S, C> for FnModelBase<F>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
    F: Fn(ModelRequest) -> Result<ModelResponse> + Send + Sync,
{
    async fn call(&self, _ctx: &mut RunContext<C>, _state: &S, request: ModelRequest) -> Result<ModelResponse> {
        (self.0)(request)
    }
}

/// The innermost tool call of a wrap onion, from a closure. See [`tool_base`].
pub struct FnToolBase<F>(F);

/// Makes the innermost tool call of an onion from a closure over the call.
pub fn tool_base<F>(f: F) -> FnToolBase<F>
where
    F: Fn(ToolCall) -> Result<ToolResult> + Send + Sync,
{
    FnToolBase(f)
}

#[async_trait]
impl<S, C, F> ToolBaseCall<S, C> for FnToolBase<F>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
    F: Fn(ToolCall) -> Result<ToolResult> + Send + Sync,
{
    async fn call(&self, _ctx: &mut RunContext<C>, _state: &S, call: ToolCall) -> Result<ToolResult> {
        (self.0)(call)
    }
}

/// Runs one middleware's hooks in isolation: a stack holding only it, a run
/// context reporting to a [`CollectingSink`], and a default state.
pub struct MiddlewareHarness<S = (), C = ()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// The stack of one.
    pub stack: MiddlewareStack<S, C>,
    /// The run context the hooks get.
    pub ctx: RunContext<C>,
    /// The state the hooks get.
    pub state: S,
    sink: Arc<CollectingSink>,
}

impl<S, C> MiddlewareHarness<S, C>
where
    S: Default + Send + Sync + 'static,
    C: Default + Send + Sync + 'static,
{
    /// A harness around `middleware`, with default state and context.
    ///
    /// # Panics
    /// If the middleware cannot be registered (it cannot fail for one middleware).
    pub fn new(middleware: impl Middleware<S, C> + 'static) -> Self {
        let mut stack = MiddlewareStack::empty();
        stack
            .add(middleware)
            .expect("a stack of one middleware always registers");
        Self::with_stack(stack, S::default(), C::default())
    }
}

impl<S, C> MiddlewareHarness<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// A harness around a whole stack, with a given state and context.
    pub fn with_stack(stack: MiddlewareStack<S, C>, state: S, context: C) -> Self {
        let sink = Arc::new(CollectingSink::new());
        let ctx = RunContext::new(RunConfig::new("test-run"), context).with_sink(sink.clone());
        Self {
            stack,
            ctx,
            state,
            sink,
        }
    }

    /// The events emitted so far.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.sink.events()
    }

    /// The [`trace`] of the events so far.
    pub fn trace(&self) -> Vec<String> {
        trace(&self.sink.events())
    }

    /// Runs `before_agent`.
    pub async fn before_agent(&mut self) -> Result<()> {
        self.stack.run_before_agent(&mut self.ctx, &self.state).await
    }

    /// Runs `before_model` on `request` and returns the edited request.
    pub async fn before_model(&mut self, mut request: ModelRequest) -> Result<ModelRequest> {
        self.stack
            .run_before_model(&mut self.ctx, &self.state, &mut request)
            .await?;
        Ok(request)
    }

    /// Runs `after_model` on `response` and returns the edited response.
    pub async fn after_model(&mut self, mut response: ModelResponse) -> Result<ModelResponse> {
        self.stack
            .run_after_model(&mut self.ctx, &self.state, &mut response)
            .await?;
        Ok(response)
    }

    /// Runs `on_model_delta` on each text, returning the deltas that were not suppressed
    /// (and any a hook released ahead of one, in the order the loop would forward them).
    pub async fn model_deltas(&mut self, texts: impl IntoIterator<Item = &str>) -> Result<Vec<ModelDelta>> {
        let mut out = Vec::new();
        for text in texts {
            let mut delta = ModelDelta::text(text);
            self.stack
                .run_on_model_delta(&mut self.ctx, &self.state, &mut delta)
                .await?;
            out.extend(delta.take_released());
            if !delta.is_suppressed() {
                out.push(delta);
            }
        }
        Ok(out)
    }

    /// Runs `on_tool_batch` on `batch` and returns it with its verdicts.
    pub async fn tool_batch(&mut self, mut batch: PreparedBatch) -> Result<PreparedBatch> {
        self.stack
            .run_on_tool_batch(&mut self.ctx, &self.state, &mut batch)
            .await?;
        Ok(batch)
    }

    /// Runs `before_tool` on `call` and returns the edited call.
    pub async fn before_tool(&mut self, mut call: ToolCall) -> Result<ToolCall> {
        self.stack
            .run_before_tool(&mut self.ctx, &self.state, &mut call)
            .await?;
        Ok(call)
    }

    /// Runs `after_tool` on `result` and returns the edited result.
    pub async fn after_tool(&mut self, mut result: ToolResult) -> Result<ToolResult> {
        self.stack
            .run_after_tool(&mut self.ctx, &self.state, &mut result)
            .await?;
        Ok(result)
    }

    /// Runs `after_agent` on `run` and returns it, with the run's
    /// compressions attached as the agent attaches them.
    pub async fn after_agent(&mut self, mut run: AgentRun) -> Result<AgentRun> {
        crate::harness::compression::attach(&self.ctx, &mut run);
        self.stack.run_after_agent(&mut self.ctx, &self.state, &mut run).await?;
        crate::harness::compression::attach(&self.ctx, &mut run);
        Ok(run)
    }

    /// Runs the model onion around `base`.
    pub async fn wrap_model(
        &mut self,
        request: ModelRequest,
        base: &(dyn ModelBaseCall<S, C> + '_),
    ) -> Result<ModelResponse> {
        self.stack
            .run_wrapped_model(&mut self.ctx, &self.state, request, base)
            .await
    }

    /// Runs the tool onion around `base`.
    pub async fn wrap_tool(&mut self, call: ToolCall, base: &(dyn ToolBaseCall<S, C> + '_)) -> Result<ToolResult> {
        self.stack
            .run_wrapped_tool(&mut self.ctx, &self.state, call, base)
            .await
    }
}

/// One rule of the tool-call protocol that a transcript breaks (see [`check_transcript`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptViolation {
    /// The index of the offending message.
    pub index: usize,
    /// What is wrong, naming the rule and the call id.
    pub message: String,
}

impl std::fmt::Display for TranscriptViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "message #{}: {}", self.index, self.message)
    }
}

/// Checks a transcript against the tool-call rules that OpenAI and Anthropic
/// enforce when a conversation is sent again:
///
/// * every tool call of an assistant message is answered by exactly one tool
///   message, and those answers come right after that assistant message, before
///   any other assistant, user or system message (the transcript may not end
///   with a call unanswered);
/// * a tool message answers a call of the assistant message just before its
///   run of tool messages: no tool message without its call, none twice;
/// * a tool call id is used by one call only.
///
/// Returns every violation found (an empty list: the transcript is well formed).
///
/// ```
/// use serde_json::json;
/// use tinyagents::prelude::*;
/// use tinyagents::testing::check_transcript;
///
/// let mut ask = Message::assistant("");
/// ask.tool_calls = vec![ToolCall::new("c1", "t", json!({})), ToolCall::new("c2", "t", json!({}))];
/// let good = vec![
///     Message::user("hi"),
///     ask.clone(),
///     Message::tool("c1", "t", "one"),
///     Message::tool("c2", "t", "two"),
///     Message::assistant("final"),
/// ];
/// assert!(check_transcript(&good).is_empty());
///
/// // the final answer lands before the results: providers reject this
/// let bad = vec![
///     Message::user("hi"),
///     ask,
///     Message::assistant("final"),
///     Message::tool("c1", "t", "one"),
///     Message::tool("c2", "t", "two"),
/// ];
/// // two calls unanswered before "final", then two results without their call
/// assert_eq!(check_transcript(&bad).len(), 4);
/// ```
pub fn check_transcript(messages: &[crate::harness::message::Message]) -> Vec<TranscriptViolation> {
    use crate::harness::message::Role;
    use std::collections::HashSet;

    let mut out = Vec::new();
    let mut seen_ids: HashSet<&str> = HashSet::new();
    // The calls of the current assistant message still waiting for their answer,
    // in order, and the ones already answered.
    let mut pending: Vec<&str> = Vec::new();
    let mut answered: HashSet<&str> = HashSet::new();
    let mut open_at: Option<usize> = None;
    let close = |pending: &mut Vec<&str>, open_at: Option<usize>, at: usize, out: &mut Vec<TranscriptViolation>| {
        for id in pending.drain(..) {
            out.push(TranscriptViolation {
                index: at,
                message: format!(
                    "tool call `{id}` of the assistant message #{} has no result before this message; \
                     every call must be answered right after its assistant message",
                    open_at.unwrap_or_default()
                ),
            });
        }
    };
    for (i, m) in messages.iter().enumerate() {
        if m.role == Role::Tool {
            let Some(id) = m.tool_call_id.as_deref() else {
                out.push(TranscriptViolation {
                    index: i,
                    message: "a tool message without a `tool_call_id`: every tool message answers one call".to_owned(),
                });
                continue;
            };
            if let Some(pos) = pending.iter().position(|p| *p == id) {
                pending.remove(pos);
                answered.insert(id);
            } else if answered.contains(id) {
                out.push(TranscriptViolation {
                    index: i,
                    message: format!("tool call `{id}` is answered twice: each call gets exactly one result"),
                });
            } else {
                out.push(TranscriptViolation {
                    index: i,
                    message: format!(
                        "tool message for `{id}` does not answer a call of the assistant message just before it \
                         (no tool message without its call)"
                    ),
                });
            }
            continue;
        }
        close(&mut pending, open_at, i, &mut out);
        answered.clear();
        open_at = None;
        if m.role == Role::Assistant && !m.tool_calls.is_empty() {
            open_at = Some(i);
            for call in &m.tool_calls {
                if !seen_ids.insert(call.id.as_str()) {
                    out.push(TranscriptViolation {
                        index: i,
                        message: format!("tool call id `{}` is used by more than one call", call.id),
                    });
                    continue;
                }
                pending.push(call.id.as_str());
            }
        }
    }
    close(&mut pending, open_at, messages.len(), &mut out);
    out
}

/// Panics, listing every violation, when `messages` break the tool-call rules
/// of [`check_transcript`].
///
/// # Panics
/// When the transcript is not well formed.
#[track_caller]
pub fn assert_valid_transcript(messages: &[crate::harness::message::Message]) {
    let violations = check_transcript(messages);
    if !violations.is_empty() {
        let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
        let roles: Vec<String> = messages
            .iter()
            .map(|m| match (&m.tool_call_id, m.tool_calls.is_empty()) {
                (Some(id), _) => format!("tool({id})"),
                (None, false) => format!(
                    "assistant(tool_calls {})",
                    m.tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(",")
                ),
                (None, true) => format!("{:?}", m.role).to_lowercase(),
            })
            .collect();
        panic!(
            "the transcript breaks the tool-call rules providers enforce:\n  {}\ntranscript: [{}]",
            lines.join("\n  "),
            roles.join(", ")
        );
    }
}
