//! [`SummarizationMiddleware`]: when a trigger fires, the older part of the
//! model-visible conversation is replaced by one summary message.

use std::sync::Arc;

use super::summarizer::{ConcatSummarizer, Summarizer};
use super::window::{compact, Summary};
use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::model::ModelRequest;
use crate::harness::tokens::{default_counter, TokenCounter};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// When [`SummarizationMiddleware`] summarises: any trigger that is set and fires (they combine with "or").
///
/// ```
/// use tinyagents::middleware::SummaryTrigger;
///
/// let t = SummaryTrigger::messages(40).or_tokens(6_000).or_fraction(0.8, 32_000);
/// assert_eq!(t.messages, Some(40));
/// assert_eq!(t.fraction, Some((0.8, 32_000)));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SummaryTrigger {
    /// More than this many messages in the conversation.
    pub messages: Option<usize>,
    /// More than this many estimated tokens in the whole request.
    pub tokens: Option<u64>,
    /// More than this fraction of a context window of this many tokens.
    pub fraction: Option<(f64, u64)>,
}

impl SummaryTrigger {
    /// Fires above `n` messages.
    pub fn messages(n: usize) -> Self {
        Self::default().or_messages(n)
    }

    /// Fires above `n` estimated request tokens.
    pub fn tokens(n: u64) -> Self {
        Self::default().or_tokens(n)
    }

    /// Fires above `fraction` of a `window`-token context.
    pub fn fraction(fraction: f64, window: u64) -> Self {
        Self::default().or_fraction(fraction, window)
    }

    /// Also fires above `n` messages.
    pub fn or_messages(mut self, n: usize) -> Self {
        self.messages = Some(n);
        self
    }

    /// Also fires above `n` estimated request tokens.
    pub fn or_tokens(mut self, n: u64) -> Self {
        self.tokens = Some(n);
        self
    }

    /// Also fires above `fraction` of a `window`-token context.
    pub fn or_fraction(mut self, fraction: f64, window: u64) -> Self {
        self.fraction = Some((fraction, window));
        self
    }

    /// Whether the trigger fires for `request`.
    pub fn fires(&self, request: &ModelRequest, counter: &dyn TokenCounter) -> bool {
        if self.messages.is_some_and(|n| request.messages.len() > n) {
            return true;
        }
        if self.tokens.is_none() && self.fraction.is_none() {
            return false;
        }
        let tokens = counter.count_request(request);
        self.tokens.is_some_and(|n| tokens > n)
            || self
                .fraction
                .is_some_and(|(f, window)| tokens as f64 > f * window as f64)
    }
}

/// Options of [`SummarizationMiddleware`] (`type = "summarization"`). At least one
/// trigger is required; `trigger_fraction` needs `context_window`.
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::SummarizationConfig;
///
/// let c: SummarizationConfig = from_toml_str("trigger_messages = 50\nkeep_messages = 10").unwrap();
/// assert_eq!(c.keep_messages, 10);
/// // the default bound of the concatenating summariser's summary
/// assert_eq!(c.max_summary_chars as usize, tinyagents::middleware::ConcatSummarizer::DEFAULT_MAX_SUMMARY_CHARS);
/// let err = from_toml_str::<SummarizationConfig>("trigger_fraction = 0.8").unwrap_err();
/// assert!(err.to_string().contains("context_window"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "summarization", builds = SummarizationMiddleware, validate = check_summarization)]
pub struct SummarizationConfig {
    /// Summarise when the conversation has more messages than this.
    #[config(range = 1..)]
    pub trigger_messages: Option<u32>,
    /// Summarise when the request's estimated tokens exceed this.
    #[config(range = 1..)]
    pub trigger_tokens: Option<u64>,
    /// Summarise when the request fills more than this fraction of `context_window`.
    #[config(range = 0.0..=1.0, finite)]
    pub trigger_fraction: Option<f64>,
    /// The model's context window, in tokens.
    #[config(range = 1..)]
    pub context_window: Option<u64>,
    /// The newest messages kept verbatim (rounded up to keep tool calls with their results).
    #[config(default = 20, range = 1..)]
    pub keep_messages: u32,
    /// Characters kept per message by the concatenating summariser.
    #[config(default = 200, range = 1..)]
    pub max_chars_per_message: u32,
    /// Characters the concatenating summariser's whole summary may hold:
    /// past it, its oldest lines give way to the newest (a test holds this
    /// default equal to `ConcatSummarizer::DEFAULT_MAX_SUMMARY_CHARS`).
    #[config(default = 8000, range = 1..)]
    pub max_summary_chars: u32,
}

fn check_summarization(c: &SummarizationConfig) -> std::result::Result<(), ConfigViolation> {
    if c.trigger_messages.is_none() && c.trigger_tokens.is_none() && c.trigger_fraction.is_none() {
        return Err(ConfigViolation::new(
            "trigger_messages",
            "at least one trigger is required: set `trigger_messages`, `trigger_tokens` or `trigger_fraction`",
        ));
    }
    if c.trigger_fraction.is_some() && c.context_window.is_none() {
        return Err(
            ConfigViolation::new("context_window", "is required when `trigger_fraction` is set")
                .with_value(c.trigger_fraction),
        );
    }
    if let Some(n) = c.trigger_messages
        && c.keep_messages >= n
    {
        return Err(ConfigViolation::new(
            "keep_messages",
            format!("must be below `trigger_messages` ({n}), or a summary could never shorten the conversation"),
        )
        .with_value(c.keep_messages));
    }
    Ok(())
}

impl From<SummarizationConfig> for SummarizationMiddleware {
    fn from(c: SummarizationConfig) -> Self {
        let trigger = SummaryTrigger {
            messages: c.trigger_messages.map(|n| n as usize),
            tokens: c.trigger_tokens,
            fraction: c.trigger_fraction.zip(c.context_window),
        };
        Self::new(trigger)
            .keep_messages(c.keep_messages as usize)
            .with_summarizer(Arc::new(
                ConcatSummarizer::new(c.max_chars_per_message as usize)
                    .with_max_summary_chars(c.max_summary_chars as usize),
            ))
    }
}

/// Summarises the older conversation when a trigger fires, keeping the newest
/// messages and every system message verbatim.
///
/// The summary is one user message (headed `[Summary of the earlier
/// conversation]`) placed after the system messages; it stands in for the
/// older messages in the request (a copy: the stored history is untouched).
/// An assistant tool-call message and its tool results are never separated.
/// Within a run the summary is reused while it covers the same messages and
/// extended (not redone) when more messages age out, so a model-backed
/// summariser is called only when there is something new to summarise.
///
/// ```
/// use std::sync::Arc;
/// use tinyagents::middleware::{ConcatSummarizer, SummarizationMiddleware, SummaryTrigger};
/// use tinyagents::prelude::*;
///
/// let summarize = SummarizationMiddleware::new(SummaryTrigger::messages(30))
///     .keep_messages(8)
///     .with_summarizer(Arc::new(ConcatSummarizer::default()));
/// let stack: MiddlewareStack<()> = MiddlewareStack::new().with(summarize).unwrap();
/// assert!(stack.names().contains(&"summarization"));
/// ```
pub struct SummarizationMiddleware {
    trigger: SummaryTrigger,
    keep_messages: usize,
    summarizer: Arc<dyn Summarizer>,
    counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for SummarizationMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SummarizationMiddleware")
            .field("trigger", &self.trigger)
            .field("keep_messages", &self.keep_messages)
            .field("summarizer", &self.summarizer.id())
            .finish_non_exhaustive()
    }
}

impl SummarizationMiddleware {
    /// The provenance policy version (the summariser's id is appended).
    pub const POLICY: &'static str = "summarization/1";

    /// Summarisation on `trigger`, keeping 20 messages, with the concatenating summariser.
    pub fn new(trigger: SummaryTrigger) -> Self {
        Self {
            trigger,
            keep_messages: 20,
            summarizer: Arc::new(ConcatSummarizer::default()),
            counter: default_counter(),
        }
    }

    /// The same, keeping at least `n` of the newest messages verbatim.
    pub fn keep_messages(mut self, n: usize) -> Self {
        self.keep_messages = n;
        self
    }

    /// The same, summarising with `summarizer`.
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

/// Replaces the older conversation with a summary when a message, token or fraction trigger fires.
#[middleware(
    builtin,
    name = "summarization",
    run_state = Summary,
    config = SummarizationConfig,
    doc(
        mutation = "Replaces the older non-system messages of `request.messages` (a copy; stored history is untouched) with one user message holding the summary; keeps leading and other system messages and the newest `keep_messages` (rounded up so a tool call keeps its results). The agent attaches the provenance to `AgentRun::compressions` when the run ends.",
        events = "`Compressed` with provenance (the ids of the messages it replaced — the newly summarised messages and, when it extends the run's previous summary, that summary's id — their tool call ids, the summary message id, token estimates before and after, segment ids, prefix fingerprints, `summarization/1+<summariser>`) each time a summary is made or extended; a reused summary emits nothing.",
        failure = "Fails clearly: a summariser error ends the run with that error (a model-backed summariser's classified model error); nothing is silently dropped.",
        streaming = "None on deltas; a model-backed summariser's own call is not streamed to the run's sink. Its usage is added to the run's usage.",
        cache = "Keeps the stable prefix (system segments, tools, leading system messages): the summary is a user message after them, and provenance records the fingerprint before and after. The conversation cache restarts at the summary when it is made or extended.",
        retries = "Runs in `before_model`, outside the model onion: retries and fallbacks reuse the summarised request; the summariser is not retried by model retry middleware."
    )
)]
impl SummarizationMiddleware {
    #[before_model]
    async fn summarize<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        summary: &mut Summary,
        request: &mut ModelRequest,
    ) -> Result<()> {
        if !self.trigger.fires(request, &*self.counter) {
            return Ok(());
        }
        compact(
            ctx,
            state,
            request,
            summary,
            self.keep_messages,
            &*self.summarizer,
            &*self.counter,
            "summarization",
            Self::POLICY,
        )
        .await?;
        Ok(())
    }
}
