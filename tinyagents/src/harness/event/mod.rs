//! What a run reports: [`AgentEvent`]s, delivered to an [`EventSink`].
//!
//! A sink declares which kinds it wants ([`EventSink::interest`]); the runtime
//! builds no event for a kind nobody wants, so a run with a [`NullSink`] pays
//! nothing for observability.

mod hook_notice;
pub mod record;
pub mod request;
mod sink;
pub mod view;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

pub use hook_notice::HookNotice;
pub use record::{
    RecordError, RecordHeader, RecordedEvent, RecordedRun, RunRecorder, MAX_RECORD_LINE, RECORD_FORMAT, RECORD_VERSION,
};
pub use request::RequestDelta;
pub use sink::{ChannelSink, CollectingSink, EventMask, EventSink, FnSink, NullSink, TracingSink};
pub use view::{embed_json, live_html, render_html};

use crate::harness::error::ErrorKind;
use crate::harness::hooks::HookKind;
use crate::harness::model::{FinishReason, ModelDelta, Usage};
use crate::harness::tool::ToolDelta;

/// How one middleware hook invocation ended.
///
/// Serialized as `{"status": "ok"}`, `{"status": "error", "error": "<kind>"}`,
/// `{"status": "panicked"}` or `{"status": "cancelled"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(tag = "status", content = "error", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HookOutcome {
    /// It returned `Ok`.
    Ok,
    /// It returned an error of this class.
    Error(ErrorKind),
    /// It panicked (the panic was caught).
    Panicked,
    /// Its future was dropped before it finished (a timeout or cancellation outside it).
    Cancelled,
}

/// Something that happened in a run.
///
/// `#[non_exhaustive]`: new kinds are added as the runtime grows; match with a
/// wildcard arm.
///
/// # JSON shape
///
/// `AgentEvent` serializes (serde) to one JSON object per event, the shape
/// `tinyagents run --json` prints and `docs/events.md` documents: a `"type"`
/// member naming the kind in snake case (`run_started`, `model_delta`,
/// `tool_call_completed`, …) beside the variant's fields under their Rust
/// names; durations are whole milliseconds in a field whose name ends in
/// `_ms` (`delay_ms`, `waited_ms`). The shape is stable: a field is only ever
/// added, never renamed or removed, within a minor version.
///
/// ```
/// use std::sync::Arc;
/// use tinyagents::harness::event::AgentEvent;
///
/// let event = AgentEvent::ToolCallStarted {
///     run_id: Arc::from("run-1"),
///     call_id: "call-1".into(),
///     tool: "search".into(),
///     arguments: serde_json::json!({"q": "rust"}),
/// };
/// assert_eq!(
///     serde_json::to_value(&event).unwrap(),
///     serde_json::json!({"type": "tool_call_started", "run_id": "run-1", "call_id": "call-1", "tool": "search", "arguments": {"q": "rust"}}),
/// );
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// A run started.
    RunStarted {
        /// The run's id.
        run_id: Arc<str>,
        /// The parent run, for a sub-agent run.
        parent_run_id: Option<Arc<str>>,
        /// Nesting depth (0 for a top-level run).
        depth: u32,
    },
    /// A run ended.
    RunCompleted {
        /// The run's id.
        run_id: Arc<str>,
        /// `None` on success, else the class of the error that ended it.
        error: Option<ErrorKind>,
    },
    /// A middleware hook is about to run.
    MiddlewareStarted {
        /// The run's id.
        run_id: Arc<str>,
        /// The middleware's name.
        middleware: Arc<str>,
        /// The hook.
        hook: HookKind,
    },
    /// A middleware hook finished (always paired with a `MiddlewareStarted`).
    MiddlewareCompleted {
        /// The run's id.
        run_id: Arc<str>,
        /// The middleware's name.
        middleware: Arc<str>,
        /// The hook.
        hook: HookKind,
        /// How it ended.
        outcome: HookOutcome,
    },
    /// A model call is about to be dispatched (one per attempt, retries included).
    ModelCallStarted {
        /// The run's id.
        run_id: Arc<str>,
        /// The loop step.
        step: u32,
        /// The attempt within the step (1 for the first; retries and fallbacks count up).
        attempt: u32,
        /// The model's id.
        model: Arc<str>,
    },
    /// The request of a model call attempt as the model receives it, after
    /// every hook, as a change to the run's previous request
    /// ([`RequestDelta`]; emitted right after `ModelCallStarted`).
    ///
    /// Opt-in: [`EventMask::ALL`] leaves it out (it carries the
    /// conversation), so only a sink that names it gets it —
    /// [`RunRecorder`] does by default.
    ModelRequest {
        /// The run's id.
        run_id: Arc<str>,
        /// The loop step.
        step: u32,
        /// The attempt within the step (as in `ModelCallStarted`).
        attempt: u32,
        /// What changed since the previous request of the run.
        request: Box<RequestDelta>,
    },
    /// A streamed delta, after the delta hooks, before it is accumulated.
    ModelDelta {
        /// The run's id.
        run_id: Arc<str>,
        /// The attempt it belongs to, within the current step (as in `ModelCallStarted`): deltas of an attempt that later failed can be dropped by a client.
        attempt: u32,
        /// The delta.
        delta: ModelDelta,
    },
    /// A model call attempt ended.
    ModelCallCompleted {
        /// The run's id.
        run_id: Arc<str>,
        /// The loop step.
        step: u32,
        /// The attempt within the step (as in `ModelCallStarted`).
        attempt: u32,
        /// Its usage (zero when it failed before reporting any).
        usage: Usage,
        /// Whether the provider reported the usage; `false` means `usage` is
        /// unknown, not zero (a server that sends no usage, a failed attempt
        /// that reported none).
        usage_reported: bool,
        /// Why the model stopped; `None` when the attempt failed.
        finish_reason: Option<FinishReason>,
        /// The class of the error that ended it, when it failed.
        error: Option<ErrorKind>,
    },
    /// An attempt's deltas must be discarded (it failed and is being retried, or was escalated).
    AttemptDiscarded {
        /// The run's id.
        run_id: Arc<str>,
        /// The discarded attempt, within the current step (as in `ModelCallStarted`).
        attempt: u32,
        /// Why.
        reason: Cow<'static, str>,
    },
    /// A delta hook suppressed a delta.
    DeltaSuppressed {
        /// The middleware that suppressed it.
        middleware: Arc<str>,
        /// The hook (model or tool delta).
        hook: HookKind,
    },
    /// A tool call is about to run (every hook before it admitted it).
    ToolCallStarted {
        /// The run's id.
        run_id: Arc<str>,
        /// The call's id.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// The arguments it runs with: the effective ones, after every
        /// `before_tool` hook (a guard's rewrite, a redaction); `null` for a
        /// call the batch review rejected before any hook saw it.
        arguments: Value,
    },
    /// A tool call was answered without running: refused by a `before_tool`
    /// hook (`tool_policy`, a limit under the tool error policy) or rejected
    /// by the batch review. No `ToolCallStarted` or `ToolCallCompleted` is
    /// emitted for it; its error result goes to the model as usual.
    ToolCallRefused {
        /// The run's id.
        run_id: Arc<str>,
        /// The call's id.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// Why it did not run (the text of its error result).
        reason: String,
    },
    /// Progress from a running tool, after the delta hooks.
    ToolDelta {
        /// The run's id.
        run_id: Arc<str>,
        /// The delta.
        delta: ToolDelta,
    },
    /// A tool call produced its result.
    ToolCallCompleted {
        /// The run's id.
        run_id: Arc<str>,
        /// The call's id.
        call_id: String,
        /// The tool's name.
        tool: String,
        /// Whether the result is an error result.
        is_error: bool,
        /// The result's content as the model sees it, after every
        /// `after_tool` hook; empty when the call ended the run.
        content: String,
    },
    /// The loop honoured a control request or a jump.
    ControlApplied {
        /// The control's kind label (`stop_with_final`, `interrupt`, `jump_to_end`, …).
        control: &'static str,
        /// What happened.
        detail: String,
    },
    /// Middleware made an explicit state update.
    StateUpdated {
        /// The updated key.
        key: String,
        /// The middleware that made it, when known.
        by: Option<Arc<str>>,
        /// The new value.
        value: Value,
    },
    /// A steering command was decided at a safe point.
    Steering {
        /// The run that decided it.
        run_id: Arc<str>,
        /// The command's id.
        command_id: String,
        /// The action's label (`inject_message`, `pause`, …), after any transformation.
        action: &'static str,
        /// The decision's label (`accept`, `reject`, `defer`).
        decision: &'static str,
        /// Whether a `before_steering` hook changed the action.
        transformed: bool,
    },
    /// Tool-exposure middleware hid tools from the model.
    ToolsFiltered {
        /// The middleware that filtered.
        by: String,
        /// The hidden tools.
        excluded: Vec<String>,
        /// The tools still exposed.
        remaining: Vec<String>,
    },
    /// A notice for people (a warning that needs no acknowledgement).
    /// QueryMT's `HookNotice` is this event ([`HookNotice::of`]: its
    /// `event_name` is `source`).
    Notice {
        /// What raised it (a middleware name or hook event name).
        source: Cow<'static, str>,
        /// The text.
        message: String,
        /// Whether it reports an error.
        is_error: bool,
    },
    /// A retry middleware will try a failed model or tool call again.
    Retry {
        /// The run's id.
        run_id: Arc<str>,
        /// What is retried: `model` or `tool`.
        target: &'static str,
        /// The attempt that failed (1 for the first call), counted by the retry middleware.
        attempt: u32,
        /// The most attempts it makes.
        max_attempts: u32,
        /// How long it waits before the next attempt (JSON: `delay_ms`).
        #[serde(rename = "delay_ms", serialize_with = "millis")]
        delay: Duration,
        /// The class of the error that failed the attempt.
        error: ErrorKind,
    },
    /// A fallback middleware moved a failed model call to another model.
    Fallback {
        /// The run's id.
        run_id: Arc<str>,
        /// The model that failed.
        from: Arc<str>,
        /// The model tried next.
        to: Arc<str>,
        /// The class of the error that triggered the fallback.
        error: ErrorKind,
    },
    /// A rate limiter delayed or refused a call.
    RateLimited {
        /// The run's id.
        run_id: Arc<str>,
        /// The bucket's key (`global`, `model:NAME`, `tool:NAME`).
        key: String,
        /// How long the call waited (zero when refused; JSON: `waited_ms`).
        #[serde(rename = "waited_ms", serialize_with = "millis")]
        waited: Duration,
        /// Whether the call was refused instead of delayed.
        rejected: bool,
    },
    /// A compression changed the model-visible context; the provenance says what it replaced.
    Compressed {
        /// The run's id.
        run_id: Arc<str>,
        /// What was replaced, by what, and how.
        provenance: Box<crate::harness::provenance::CompressionProvenance>,
    },
    /// The cacheable prompt prefix changed between two model calls of a run.
    CacheLayoutChanged {
        /// The run's id.
        run_id: Arc<str>,
        /// The change and who made it.
        event: Box<crate::harness::cache::CacheLayoutEvent>,
    },
    /// Output-limit recovery escalated the output cap or continued a cut-off reply (durable).
    OutputLimitRecovery {
        /// The run's id.
        run_id: Arc<str>,
        /// The loop step (turn) of the cut-off reply.
        turn: u32,
        /// The recovery attempt within the turn (1 for the first).
        attempt: u32,
        /// `escalate` or `continue`.
        action: &'static str,
        /// The output cap that was hit.
        cap_before: u32,
        /// The cap of the next request.
        cap_after: u32,
        /// Whether the cut-off reply held only reasoning.
        thinking_only: bool,
        /// For an escalation: the id of the discarded streamed message (clients drop it).
        discarded_message_id: Option<crate::harness::message::MessageId>,
    },
    /// An event of a middleware's own.
    Custom {
        /// The middleware that emitted it.
        middleware: Cow<'static, str>,
        /// The event's name.
        name: Cow<'static, str>,
        /// Its data.
        data: Value,
    },
}

/// A duration as whole milliseconds (saturating), the JSON form of every
/// duration in an [`AgentEvent`].
fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The kind of an [`AgentEvent`], without its data (for filtering).
///
/// Serialized as the event's `type` tag (`run_started`, `model_delta`, …):
/// the same snake-case rule names both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[allow(missing_docs)]
pub enum EventKind {
    RunStarted,
    RunCompleted,
    MiddlewareStarted,
    MiddlewareCompleted,
    ModelCallStarted,
    ModelRequest,
    ModelDelta,
    ModelCallCompleted,
    AttemptDiscarded,
    DeltaSuppressed,
    ToolCallStarted,
    ToolCallRefused,
    ToolDelta,
    ToolCallCompleted,
    ControlApplied,
    StateUpdated,
    Steering,
    ToolsFiltered,
    Notice,
    Custom,
    Retry,
    Fallback,
    RateLimited,
    Compressed,
    CacheLayoutChanged,
    OutputLimitRecovery,
}

impl AgentEvent {
    /// The event's kind.
    pub const fn kind(&self) -> EventKind {
        match self {
            Self::RunStarted { .. } => EventKind::RunStarted,
            Self::RunCompleted { .. } => EventKind::RunCompleted,
            Self::MiddlewareStarted { .. } => EventKind::MiddlewareStarted,
            Self::MiddlewareCompleted { .. } => EventKind::MiddlewareCompleted,
            Self::ModelCallStarted { .. } => EventKind::ModelCallStarted,
            Self::ModelRequest { .. } => EventKind::ModelRequest,
            Self::ModelDelta { .. } => EventKind::ModelDelta,
            Self::ModelCallCompleted { .. } => EventKind::ModelCallCompleted,
            Self::AttemptDiscarded { .. } => EventKind::AttemptDiscarded,
            Self::DeltaSuppressed { .. } => EventKind::DeltaSuppressed,
            Self::ToolCallStarted { .. } => EventKind::ToolCallStarted,
            Self::ToolCallRefused { .. } => EventKind::ToolCallRefused,
            Self::ToolDelta { .. } => EventKind::ToolDelta,
            Self::ToolCallCompleted { .. } => EventKind::ToolCallCompleted,
            Self::ControlApplied { .. } => EventKind::ControlApplied,
            Self::StateUpdated { .. } => EventKind::StateUpdated,
            Self::Steering { .. } => EventKind::Steering,
            Self::ToolsFiltered { .. } => EventKind::ToolsFiltered,
            Self::Notice { .. } => EventKind::Notice,
            Self::Custom { .. } => EventKind::Custom,
            Self::Retry { .. } => EventKind::Retry,
            Self::Fallback { .. } => EventKind::Fallback,
            Self::RateLimited { .. } => EventKind::RateLimited,
            Self::Compressed { .. } => EventKind::Compressed,
            Self::CacheLayoutChanged { .. } => EventKind::CacheLayoutChanged,
            Self::OutputLimitRecovery { .. } => EventKind::OutputLimitRecovery,
        }
    }
}
