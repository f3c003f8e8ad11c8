//! [`ContextClippingMiddleware`]: when a trigger fires, older long messages in the
//! model-visible context are clipped to a head/tail excerpt, message by
//! message, keeping the conversation's structure.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::summarization::SummaryTrigger;
use super::window::is_boundary;
use crate::config::ConfigViolation;
use crate::harness::cache;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::message::{ContentPart, MessageId, Role};
use crate::harness::model::ModelRequest;
use crate::harness::provenance::CompressionProvenance;
use crate::harness::tokens::{default_counter, TokenCounter};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`ContextClippingMiddleware`] (`type = "context_clipping"`). At
/// least one trigger is required; `trigger_fraction` needs `context_window`.
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::ContextClippingConfig;
///
/// let c: ContextClippingConfig = from_toml_str("trigger_tokens = 50000\nmax_message_tokens = 200").unwrap();
/// assert_eq!(c.keep_messages, 10);
/// assert!(from_toml_str::<ContextClippingConfig>("keep_messages = 3").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "context_clipping", builds = ContextClippingMiddleware, validate = check_compression)]
pub struct ContextClippingConfig {
    /// Compress when the conversation has more messages than this.
    #[config(range = 1..)]
    pub trigger_messages: Option<u32>,
    /// Compress when the request's estimated tokens exceed this.
    #[config(range = 1..)]
    pub trigger_tokens: Option<u64>,
    /// Compress when the request fills more than this fraction of `context_window`.
    #[config(range = 0.0..=1.0, finite)]
    pub trigger_fraction: Option<f64>,
    /// The model's context window, in tokens.
    #[config(range = 1..)]
    pub context_window: Option<u64>,
    /// The newest messages never compressed (rounded up so a tool call keeps its results).
    #[config(default = 10)]
    pub keep_messages: u32,
    /// Older messages above this many estimated tokens are clipped to about this size.
    #[config(default = 300, range = 16..)]
    pub max_message_tokens: u64,
}

fn check_compression(c: &ContextClippingConfig) -> std::result::Result<(), ConfigViolation> {
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
    Ok(())
}

impl From<ContextClippingConfig> for ContextClippingMiddleware {
    fn from(c: ContextClippingConfig) -> Self {
        let trigger = SummaryTrigger {
            messages: c.trigger_messages.map(|n| n as usize),
            tokens: c.trigger_tokens,
            fraction: c.trigger_fraction.zip(c.context_window),
        };
        Self::new(trigger)
            .keep_messages(c.keep_messages as usize)
            .max_message_tokens(c.max_message_tokens)
    }
}

/// Per-run: the messages already recorded as compressed.
#[derive(Debug, Default)]
struct Recorded(Mutex<HashSet<MessageId>>);

/// Compresses the older conversation message by message when a trigger
/// fires: every non-system message older than the newest `keep_messages`
/// whose text is above `max_message_tokens` is clipped to its start and end
/// (three quarters head, one quarter tail) with a marker saying how much was
/// left out. Messages, ids, roles, tool calls and their pairing are kept, so
/// the model still sees the whole shape of the conversation; the request is a
/// copy, the stored history keeps every original. Provenance per message.
///
/// Where [`SummarizationMiddleware`](super::SummarizationMiddleware) replaces the older
/// conversation with one summary, this keeps every turn and shortens the long ones.
///
/// ```
/// use tinyagents::middleware::{ContextClippingMiddleware, SummaryTrigger};
/// use tinyagents::prelude::*;
///
/// let compress = ContextClippingMiddleware::new(SummaryTrigger::tokens(60_000)).max_message_tokens(200);
/// let _stack: MiddlewareStack<()> = MiddlewareStack::new().with(compress).unwrap();
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct ContextClippingMiddleware {
    trigger: SummaryTrigger,
    keep_messages: usize,
    max_message_tokens: u64,
    #[educe(Debug(ignore))]
    counter: Arc<dyn TokenCounter>,
}

impl ContextClippingMiddleware {
    /// The provenance policy version.
    pub const POLICY: &'static str = "context_clipping/head_tail/1";

    /// Compression on `trigger`, keeping 10 messages, clipping to 300 tokens.
    pub fn new(trigger: SummaryTrigger) -> Self {
        Self {
            trigger,
            keep_messages: 10,
            max_message_tokens: 300,
            counter: default_counter(),
        }
    }

    /// The same, never compressing the newest `n` messages.
    pub fn keep_messages(mut self, n: usize) -> Self {
        self.keep_messages = n;
        self
    }

    /// The same, clipping older messages to about `n` tokens (at least 16).
    pub fn max_message_tokens(mut self, n: u64) -> Self {
        self.max_message_tokens = n.max(16);
        self
    }

    /// The same, measuring with `counter`.
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// `text` clipped to about `budget` tokens of head and tail, when that is shorter.
    fn clip(&self, text: &str, tokens: u64) -> Option<String> {
        let chars: Vec<char> = text.chars().collect();
        let keep = (chars.len() as u64 * self.max_message_tokens / tokens.max(1)) as usize;
        let head = keep * 3 / 4;
        let tail = keep - head;
        let omitted = chars.len().checked_sub(head + tail)?;
        let clipped = format!(
            "{}\n[… {omitted} characters compressed …]\n{}",
            chars[..head].iter().collect::<String>(),
            chars[chars.len() - tail..].iter().collect::<String>()
        );
        (clipped.len() < text.len()).then_some(clipped)
    }
}

/// Clips older long messages to a head/tail excerpt when a message, token or fraction trigger fires.
#[middleware(
    builtin,
    name = "context_clipping",
    config = ContextClippingConfig,
    doc(
        mutation = "Replaces the text of older non-system messages above `max_message_tokens` in `request.messages` (a copy; stored history keeps them) with a head/tail excerpt and a marker; ids, roles, tool calls and tool-call/result pairs are kept. The agent attaches the provenance to `AgentRun::compressions` when the run ends.",
        events = "`Compressed` with provenance (message id, its tool call ids, tokens before and after, prefix fingerprints) the first time each message is compressed in a run.",
        failure = "Cannot fail; below every trigger, or with nothing long enough outside the kept window, the request goes unchanged.",
        streaming = "None: it edits the request before the stream starts.",
        cache = "Never touches system segments, tools or leading system messages (stable prefix preserved); clipping is deterministic, so once a message is clipped it is sent the same way on later calls.",
        retries = "Runs in `before_model`, outside the model onion: retries and fallbacks reuse the compressed request."
    )
)]
impl ContextClippingMiddleware {
    #[before_model]
    fn compress<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        if !self.trigger.fires(request, &*self.counter) {
            return Ok(());
        }
        let latest = request.messages.len().saturating_sub(self.keep_messages);
        let cut = (0..=latest)
            .rev()
            .find(|&i| is_boundary(&request.messages, i))
            .unwrap_or(0);
        let before = cache::fingerprint(request);
        let mut changed = Vec::new();
        for m in request.messages[..cut].iter_mut().filter(|m| m.role != Role::System) {
            let tokens = self.counter.count_message(m);
            if tokens <= self.max_message_tokens {
                continue;
            }
            let text = m.text().into_owned();
            let text_tokens = self.counter.count_text(&text);
            let Some(clipped) = self.clip(&text, text_tokens) else {
                continue;
            };
            if let Some(ContentPart::Text { text }) =
                m.content.iter_mut().find(|p| matches!(p, ContentPart::Text { .. }))
            {
                *text = clipped;
            }
            changed.push((
                m.id.clone(),
                m.tool_calls
                    .iter()
                    .map(|c| c.id.clone())
                    .chain(m.tool_call_id.clone())
                    .collect::<Vec<_>>(),
                tokens,
                self.counter.count_message(m),
            ));
        }
        if changed.is_empty() {
            return Ok(());
        }
        let after = cache::fingerprint(request);
        let segments: Vec<String> = request.system.iter().map(|s| s.id.clone()).collect();
        let recorded = ctx.locals().local::<Recorded>();
        for (id, artifacts, original, compressed) in changed {
            if !recorded.0.lock().expect("recorded lock").insert(id.clone()) {
                continue;
            }
            let mut p = CompressionProvenance::new("context_clipping", Self::POLICY).with_prefix(before, after);
            p.source_message_ids.push(id);
            p.source_artifact_ids = artifacts;
            p.original_tokens = original;
            p.compressed_tokens = compressed;
            p.prompt_segment_ids = segments.clone();
            crate::harness::compression::record(ctx, p);
        }
        Ok(())
    }
}
