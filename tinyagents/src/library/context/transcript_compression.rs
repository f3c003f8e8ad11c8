//! [`TranscriptCompressionMiddleware`]: at the end of a run, the older part of the
//! run's transcript is replaced by a durable summary message.

use std::sync::Arc;

use super::summarizer::{ConcatSummarizer, Summarizer};
use super::window::{compact, Summary};
use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::model::ModelRequest;
use crate::harness::run::{AgentRun, StopReason};
use crate::harness::tokens::{default_counter, TokenCounter};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`TranscriptCompressionMiddleware`] (`type = "transcript_compression"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::TranscriptCompressionConfig;
///
/// let c: TranscriptCompressionConfig = from_toml_str("trigger_messages = 60\nkeep_messages = 20").unwrap();
/// assert_eq!(c.keep_messages, 20);
/// assert!(from_toml_str::<TranscriptCompressionConfig>("trigger_messages = 10\nkeep_messages = 10").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "transcript_compression", builds = TranscriptCompressionMiddleware, validate = check_transcript)]
pub struct TranscriptCompressionConfig {
    /// Compress a finished run's transcript when it has more messages than this.
    #[config(default = 80, range = 2..)]
    pub trigger_messages: u32,
    /// The newest messages kept verbatim (rounded up so a tool call keeps its results).
    #[config(default = 30, range = 1..)]
    pub keep_messages: u32,
    /// Characters kept per message by the concatenating summariser.
    #[config(default = 200, range = 1..)]
    pub max_chars_per_message: u32,
}

fn check_transcript(c: &TranscriptCompressionConfig) -> std::result::Result<(), ConfigViolation> {
    if c.keep_messages >= c.trigger_messages {
        return Err(ConfigViolation::new(
            "keep_messages",
            format!(
                "must be below `trigger_messages` ({}), or a summary could never shorten the transcript",
                c.trigger_messages
            ),
        )
        .with_value(c.keep_messages));
    }
    Ok(())
}

impl From<TranscriptCompressionConfig> for TranscriptCompressionMiddleware {
    fn from(c: TranscriptCompressionConfig) -> Self {
        Self {
            trigger_messages: c.trigger_messages as usize,
            keep_messages: c.keep_messages as usize,
            summarizer: Arc::new(ConcatSummarizer::new(c.max_chars_per_message as usize)),
            counter: default_counter(),
        }
    }
}

/// Compresses the transcript a run hands back: in `after_agent`, when a
/// finished run's `AgentRun::messages` exceed `trigger_messages`, the older
/// messages are replaced *durably* by one summary message (the newest
/// `keep_messages` and every system message kept, tool calls kept with their
/// results). The caller that carries the transcript into the next run carries
/// the summary, so the next run starts small. A failed run's transcript is
/// left whole for debugging. Each summary is recorded as provenance, attached
/// to the run.
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::{TranscriptCompressionMiddleware, TranscriptCompressionConfig};
/// use tinyagents::prelude::*;
///
/// let t: TranscriptCompressionMiddleware =
///     from_toml_str::<TranscriptCompressionConfig>("trigger_messages = 40\nkeep_messages = 10").unwrap().build();
/// let _stack: MiddlewareStack<()> = MiddlewareStack::new().with(t).unwrap();
/// ```
pub struct TranscriptCompressionMiddleware {
    trigger_messages: usize,
    keep_messages: usize,
    summarizer: Arc<dyn Summarizer>,
    counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for TranscriptCompressionMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TranscriptCompressionMiddleware")
            .field("trigger_messages", &self.trigger_messages)
            .field("keep_messages", &self.keep_messages)
            .field("summarizer", &self.summarizer.id())
            .finish_non_exhaustive()
    }
}

impl TranscriptCompressionMiddleware {
    /// The provenance policy version (the summariser's id is appended).
    pub const POLICY: &'static str = "transcript_compression/1";

    /// The same, summarising with `summarizer` (a [`ModelSummarizer`](super::ModelSummarizer), say).
    pub fn with_summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> Self {
        self.summarizer = summarizer;
        self
    }

    /// The same, measuring with `counter`.
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }
}

/// Replaces the older part of a finished run's transcript with a durable summary, in `after_agent`.
#[middleware(
    builtin,
    name = "transcript_compression",
    run_state = Summary,
    config = TranscriptCompressionConfig,
    doc(
        mutation = "In `after_agent`, durably replaces the older non-system messages of `AgentRun::messages` with one summary user message (newest `keep_messages`, system messages and tool-call/result pairs kept); its provenance is on `AgentRun::compressions` (the agent attaches it after `after_agent`). Requests during the run are not touched.",
        events = "`Compressed` with provenance (replaced message ids and tool call ids, the summary message id, token estimates, prefix fingerprints) when it summarises.",
        failure = "A summariser error fails `after_agent` and so the run (with the summariser's error); the transcript is then left whole. A failed run is not compressed.",
        streaming = "None: it runs after the run.",
        cache = "The next run's conversation starts with the summary after the system messages: the stable prefix (system segments, tools, leading system messages) is untouched; the conversation cache restarts at the summary once.",
        retries = "Runs once per run in `after_agent`, outside every retry and fallback."
    )
)]
impl TranscriptCompressionMiddleware {
    #[after_agent]
    async fn commit<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        summary: &mut Summary,
        run: &mut AgentRun,
    ) -> Result<()> {
        if !matches!(run.stop, StopReason::Failed(_)) && run.messages.len() > self.trigger_messages {
            let mut transcript = ModelRequest::new(std::mem::take(&mut run.messages));
            let result = compact(
                ctx,
                state,
                &mut transcript,
                summary,
                self.keep_messages,
                &*self.summarizer,
                &*self.counter,
                "transcript_compression",
                Self::POLICY,
            )
            .await;
            run.messages = transcript.into_fields().messages;
            result?;
        }
        Ok(())
    }
}
