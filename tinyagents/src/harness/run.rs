//! What a run starts from and produced: [`AgentInput`], [`AgentRun`] (the accumulated result), [`StopReason`]
//! and [`RunCounters`]. Plain data: the agent loop fills it, middleware
//! reads it in `after_agent`.

use std::sync::Arc;

use serde_json::Value;

use crate::harness::error::ErrorKind;
use crate::harness::message::Message;
use crate::harness::model::Usage;

/// What a run starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInput(pub Vec<Message>);

impl From<&str> for AgentInput {
    fn from(text: &str) -> Self {
        Self(vec![Message::user(text)])
    }
}

impl From<String> for AgentInput {
    fn from(text: String) -> Self {
        Self(vec![Message::user(text)])
    }
}

impl From<Message> for AgentInput {
    fn from(message: Message) -> Self {
        Self(vec![message])
    }
}

impl From<Vec<Message>> for AgentInput {
    fn from(messages: Vec<Message>) -> Self {
        Self(messages)
    }
}

/// A run's history, to go on from it (`run.messages` of a finished run:
/// copied only when something else still shares it).
impl From<crate::harness::model::SharedList<Message>> for AgentInput {
    fn from(messages: crate::harness::model::SharedList<Message>) -> Self {
        Self(messages.into_vec())
    }
}

/// Why a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// The model answered without asking for tools.
    Finished,
    /// A middleware asked to stop with a final text (`StopWithFinal`).
    StoppedByMiddleware,
    /// A middleware jumped to the end.
    JumpedToEnd,
    /// The run failed with an error of this class (seen by `after_agent` only).
    Failed(ErrorKind),
}

/// The accumulated result of a run, threaded through `after_agent`.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRun {
    /// The run's id.
    pub run_id: Arc<str>,
    /// The whole conversation, input included (each model request shares it
    /// until a middleware changes the request's copy: see [`SharedList`]).
    ///
    /// [`SharedList`]: crate::harness::model::SharedList
    pub messages: crate::harness::model::SharedList<Message>,
    /// The final assistant message.
    pub final_message: Option<Message>,
    /// Structured output, when a middleware produced and validated one.
    pub structured_output: Option<Value>,
    /// Token usage of the run, sub-agent runs included.
    pub usage: Usage,
    /// Steps, model calls and tool calls.
    pub counters: RunCounters,
    /// Why the run ended.
    pub stop: StopReason,
    /// The compressions of the model-visible context made during the run, in
    /// order (attached by compression middleware in `after_agent`), for replay.
    pub compressions: Vec<crate::harness::provenance::CompressionProvenance>,
}

impl AgentRun {
    /// An empty run record.
    pub fn new(run_id: Arc<str>) -> Self {
        Self {
            run_id,
            messages: crate::harness::model::SharedList::new(),
            final_message: None,
            structured_output: None,
            usage: Usage::default(),
            counters: RunCounters::default(),
            stop: StopReason::Finished,
            compressions: Vec::new(),
        }
    }

    /// The structured output as a `T` (set by `StructuredOutputMiddleware`; with
    /// `StructuredOutputMiddleware::for_type::<T>()` it is known to deserialise).
    ///
    /// # Errors
    /// A `Validation` error when the run has no structured output (no
    /// `StructuredOutputMiddleware` in the stack, or the run did not end on a
    /// validated reply) or it is not a valid `T`.
    pub fn structured<T: serde::de::DeserializeOwned>(&self) -> crate::harness::error::Result<T> {
        let name = std::any::type_name::<T>();
        let value = self.structured_output.as_ref().ok_or_else(|| {
            crate::harness::error::TinyAgentsError::validation(format!(
                "run `{}` has no structured output to read as `{name}`: register \
                 `StructuredOutputMiddleware::for_type::<{name}>()` in the stack, and read it from a run that ended on the \
                 model's final reply",
                self.run_id
            ))
        })?;
        T::deserialize(value).map_err(|e| {
            crate::harness::error::TinyAgentsError::validation(format!(
                "the structured output of run `{}` is not a valid `{name}`: {e}; validate with \
                 `StructuredOutputMiddleware::for_type::<{name}>()`, which asks the model again until it is",
                self.run_id
            ))
        })
    }

    /// The final assistant text (empty when there is none).
    pub fn final_text(&self) -> String {
        self.final_message
            .as_ref()
            .map(|m| m.text().into_owned())
            .unwrap_or_default()
    }
}

/// Counters of a run, maintained by the agent loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunCounters {
    /// Loop steps (model turns) started.
    pub steps: u32,
    /// Model calls dispatched (attempts, retries included).
    pub model_calls: u32,
    /// Tool calls executed.
    pub tool_calls: u32,
}

/// The last model attempt of a run that failed (its `model_calls` number; 0
/// when none has): its streamed deltas were discarded, so what a middleware
/// held back from them belongs to no reply.
#[derive(Default)]
pub(crate) struct LastFailedAttempt(pub(crate) std::sync::atomic::AtomicU32);

/// Usage that failed model attempts of a run reported before failing, not
/// yet charged: the price budget takes it when it settles the failed attempt.
#[derive(Default)]
pub(crate) struct FailedAttemptUsage(pub(crate) std::sync::Mutex<Usage>);
