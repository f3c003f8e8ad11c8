//! [`MessageTrimMiddleware`]: keeps the newest messages of the model-visible
//! conversation within a budget ([`TrimStrategy`]), always keeping system
//! messages and never separating a tool call from its results.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use super::window::units;
use crate::harness::cache;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::message::{Message, MessageId, Role};
use crate::harness::model::{ModelRequest, SharedList};
use crate::harness::provenance::CompressionProvenance;
use crate::harness::tokens::{default_counter, TokenCounter};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Per-run: the messages already recorded as dropped.
#[derive(Debug, Default)]
struct Dropped(Mutex<HashSet<MessageId>>);

/// What [`MessageTrimMiddleware`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimStrategy {
    /// The last N non-system messages (rounded up to keep a tool call with its results).
    LastMessages(usize),
    /// The newest non-system messages that fit in N estimated tokens (the newest
    /// unit is kept even when it alone is larger).
    LastTokens(u64),
}

crate::config_enum! {
    /// Which budget [`MessageTrimConfig`] trims to (`strategy = "…"`); the
    /// budget itself is `max_messages` or `max_tokens`.
    pub enum TrimKind {
        /// Keep `max_messages` ([`TrimStrategy::LastMessages`]).
        LastMessages = "last_messages",
        /// Keep `max_tokens` ([`TrimStrategy::LastTokens`]).
        LastTokens = "last_tokens",
    }
}

/// Options of [`MessageTrimMiddleware`] (`type = "message_trim"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::MessageTrimConfig;
///
/// let c: MessageTrimConfig = from_toml_str("strategy = \"last_tokens\"\nmax_tokens = 2000").unwrap();
/// assert_eq!(c.max_tokens, 2000);
/// let err = from_toml_str::<MessageTrimConfig>("strategy = \"first\"").unwrap_err();
/// assert!(err.to_string().contains("strategy"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "message_trim", builds = MessageTrimMiddleware)]
pub struct MessageTrimConfig {
    /// `last_messages` (keep `max_messages`) or `last_tokens` (keep `max_tokens`).
    #[config(default = "last_messages")]
    pub strategy: TrimKind,
    /// Non-system messages kept by `last_messages`.
    #[config(default = 40, range = 1..)]
    pub max_messages: u32,
    /// Estimated tokens of non-system messages kept by `last_tokens`.
    #[config(default = 8000, range = 1..)]
    pub max_tokens: u64,
}

/// Trims the model-visible conversation to a budget before each model call.
///
/// It edits the request (a copy): the run's stored history is never changed,
/// so the next call trims from the full history again. Every system message
/// is kept; an assistant message and the tool results answering its calls
/// are kept or dropped together. Each time the cut moves (a message is
/// dropped for the first time in the run) it is recorded as compression provenance.
///
/// ```
/// use tinyagents::middleware::{MessageTrimMiddleware, TrimStrategy};
/// use tinyagents::prelude::*;
///
/// let stack: MiddlewareStack<()> =
///     MiddlewareStack::new().with(MessageTrimMiddleware::new(TrimStrategy::LastMessages(10))).unwrap();
/// assert!(stack.names().contains(&"message_trim"));
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct MessageTrimMiddleware {
    strategy: TrimStrategy,
    #[educe(Debug(ignore))]
    counter: Arc<dyn TokenCounter>,
}

impl MessageTrimMiddleware {
    /// The provenance policy version.
    pub const POLICY: &'static str = "message_trimming/1";

    /// Trimming with this strategy and the default token counter.
    pub fn new(strategy: TrimStrategy) -> Self {
        Self {
            strategy,
            counter: default_counter(),
        }
    }

    /// The same trimming measuring with `counter`.
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// The strategy.
    pub fn strategy(&self) -> TrimStrategy {
        self.strategy
    }
}

/// The messages `strategy` keeps, as a mask over `messages`.
fn keep_mask(messages: &[Message], strategy: TrimStrategy, counter: &dyn TokenCounter) -> Vec<bool> {
    let mut keep = vec![false; messages.len()];
    let mut spent: u64 = 0;
    let mut full = false;
    let mut first = true;
    for (start, end) in units(messages, 0).into_iter().rev() {
        let unit = &messages[start..end];
        if unit.iter().all(|m| m.role == Role::System) {
            keep[start..end].iter_mut().for_each(|k| *k = true);
            continue;
        }
        if full {
            continue;
        }
        let cost = match strategy {
            TrimStrategy::LastMessages(_) => unit.len() as u64,
            TrimStrategy::LastTokens(_) => unit.iter().map(|m| counter.count_message(m)).sum(),
        };
        let budget = match strategy {
            TrimStrategy::LastMessages(n) => n as u64,
            TrimStrategy::LastTokens(n) => n,
        };
        // `last_messages` rounds up (a unit that crosses the budget is kept
        // whole); `last_tokens` keeps only what fits.
        let fits = match strategy {
            TrimStrategy::LastMessages(_) => spent < budget,
            TrimStrategy::LastTokens(_) => spent + cost <= budget,
        };
        if first || fits {
            spent += cost;
            keep[start..end].iter_mut().for_each(|k| *k = true);
            full = spent >= budget;
        } else {
            full = true;
        }
        first = false;
    }
    keep
}

/// The messages [`MessageTrimMiddleware`] keeps of `messages` under
/// `strategy`, in order: every system message, and the newest non-system
/// messages within the budget (an assistant message with tool calls and the
/// tool results answering them are kept or dropped together; the newest
/// unit is always kept). Also at `summarization::trim_messages`, the path
/// the `harness::middleware` design writes.
///
/// ```
/// use tinyagents::harness::tokens::default_counter;
/// use tinyagents::middleware::summarization::trim_messages;
/// use tinyagents::middleware::TrimStrategy;
/// use tinyagents::prelude::*;
///
/// let messages = [Message::system("Be brief."), Message::user("a"), Message::assistant("b"), Message::user("c")];
/// let kept = trim_messages(&messages, TrimStrategy::LastMessages(1), &*default_counter());
/// assert_eq!(kept, [messages[0].clone(), messages[3].clone()]);
///
/// // what the middleware does with a request
/// let mut request = ModelRequest::new(messages.to_vec());
/// request.messages = trim_messages(&request.messages, TrimStrategy::LastMessages(1), &*default_counter());
/// assert_eq!(request.messages.len(), 2);
/// ```
pub fn trim_messages(messages: &[Message], strategy: TrimStrategy, counter: &dyn TokenCounter) -> SharedList<Message> {
    let keep = keep_mask(messages, strategy, counter);
    messages
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(m, _)| m.clone())
        .collect()
}

impl From<MessageTrimConfig> for MessageTrimMiddleware {
    fn from(c: MessageTrimConfig) -> Self {
        Self::new(match c.strategy {
            TrimKind::LastTokens => TrimStrategy::LastTokens(c.max_tokens),
            TrimKind::LastMessages => TrimStrategy::LastMessages(c.max_messages as usize),
        })
    }
}

/// Keeps the newest messages within a message or token budget, with every system message.
#[middleware(
    builtin,
    name = "message_trim",
    config = MessageTrimConfig,
    doc(
        mutation = "Drops the oldest non-system messages from `request.messages` (a copy: the run's history is untouched); an assistant tool-call message and its tool results go together.",
        events = "`Compressed` with provenance (the ids of the messages dropped for the first time in the run, their tool call ids, their token estimate, 0 compressed tokens) on each call where the cut moves (a message is dropped for the first time in the run).",
        failure = "Cannot fail; it never drops system messages or the newest message unit, so the model always has something to answer.",
        streaming = "None: it edits the request before the stream starts.",
        cache = "Never touches system segments, tools or leading system messages, so the stable prefix is preserved; dropping the oldest conversation messages moves the start of the cached conversation, which costs a conversation-cache miss on the calls where the cut moves.",
        retries = "Runs once per turn in `before_model`, outside the model onion: retries and fallbacks reuse the trimmed request."
    )
)]
impl MessageTrimMiddleware {
    #[before_model]
    fn trim<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let keep = keep_mask(&request.messages, self.strategy, &*self.counter);
        if keep.iter().all(|k| *k) {
            return Ok(());
        }
        let before = cache::fingerprint(request);
        let mut p = CompressionProvenance::new("message_trim", Self::POLICY);
        let mut kept = Vec::with_capacity(request.messages.len());
        let mut dropped = Vec::new();
        for (m, k) in std::mem::take(&mut request.messages).into_iter().zip(keep) {
            if k {
                kept.push(m);
            } else {
                dropped.push(m);
            }
        }
        request.messages = kept.into();
        // Recorded when the cut moves, naming the messages dropped for the
        // first time in this run (each message is named once in the run).
        {
            let recorded = ctx.locals().local::<Dropped>();
            let mut seen = recorded.0.lock().expect("dropped lock");
            for m in &dropped {
                if seen.insert(m.id.clone()) {
                    p.original_tokens += self.counter.count_message(m);
                    p.source_artifact_ids.extend(m.tool_calls.iter().map(|c| c.id.clone()));
                    p.source_message_ids.push(m.id.clone());
                }
            }
        }
        if !p.source_message_ids.is_empty() {
            p.prompt_segment_ids = request.system.iter().map(|s| s.id.clone()).collect();
            crate::harness::compression::record(ctx, p.with_prefix(before, cache::fingerprint(request)));
        }
        Ok(())
    }
}
