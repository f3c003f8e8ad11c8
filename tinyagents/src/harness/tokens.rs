//! Token estimation: the [`TokenCounter`] trait and its fast approximate
//! default, [`ApproxTokenCounter`].
//!
//! Context middleware (trimming, summarisation, compression, the context
//! monitor) measure requests with a counter. The default is a cheap
//! characters-per-token estimate: good enough to decide *when* to compress,
//! never used to bill anything.

use std::sync::Arc;

use crate::harness::message::{ContentPart, Message};
use crate::harness::model::ModelRequest;

/// Counts tokens of text, messages and whole requests.
///
/// Only [`count_text`](TokenCounter::count_text) is required; the rest add a
/// small per-message overhead (role, separators) on top of the text, the
/// reasoning and the tool calls' arguments.
///
/// ```
/// use tinyagents::harness::message::Message;
/// use tinyagents::harness::tokens::{ApproxTokenCounter, TokenCounter};
///
/// let counter = ApproxTokenCounter::default(); // 4 characters per token
/// assert_eq!(counter.count_text("abcdefgh"), 2);
/// assert_eq!(counter.count_message(&Message::user("abcdefgh")), 2 + ApproxTokenCounter::MESSAGE_OVERHEAD);
/// ```
pub trait TokenCounter: Send + Sync {
    /// Tokens in a piece of text.
    fn count_text(&self, text: &str) -> u64;

    /// A key naming this counter's results, for counters whose count of a
    /// message depends on nothing but the message: then a message's count
    /// is kept with it (shared by its clones, dropped when it changes) and
    /// not computed again when the same history is measured turn after turn.
    /// Two counters that may count differently must not return the same key,
    /// and a counter with a key counts a request as its overhead plus its
    /// messages (see [`count_request`](Self::count_request)).
    /// `None` (the default): counts are never kept.
    fn memo_key(&self) -> Option<u64> {
        None
    }

    /// Tokens in one message: its text, reasoning, tool calls and a fixed
    /// overhead (kept with the message when the counter has a
    /// [`memo_key`](Self::memo_key)).
    fn count_message(&self, message: &Message) -> u64 {
        match self.memo_key() {
            Some(key) => message.memo_tokens(key, || count_fields(self, message)),
            None => count_fields(self, message),
        }
    }

    /// Tokens in a list of messages.
    fn count_messages(&self, messages: &[Message]) -> u64 {
        messages.iter().map(|m| self.count_message(m)).sum()
    }

    /// Tokens in a request's system segments and tool schemas: what
    /// [`count_request`](Self::count_request) adds to its messages.
    fn count_overhead(&self, request: &ModelRequest) -> u64 {
        let system: u64 = request.system.iter().map(|s| self.count_text(&s.text)).sum();
        let tools: u64 = request
            .tools
            .iter()
            .map(|t| {
                self.count_text(&t.name) + self.count_text(&t.description) + self.count_text(&t.parameters.to_string())
            })
            .sum();
        system + tools
    }

    /// Tokens in a whole request: system segments, tool schemas and
    /// messages. A counter with a [`memo_key`](Self::memo_key) must keep
    /// this the sum of [`count_overhead`](Self::count_overhead) and
    /// [`count_messages`](Self::count_messages) (as it is unless
    /// overridden): middleware that measure a growing history turn after
    /// turn add only what each turn appended.
    fn count_request(&self, request: &ModelRequest) -> u64 {
        self.count_overhead(request) + self.count_messages(&request.messages)
    }
}

/// [`TokenCounter::count_message`] computed (never kept).
fn count_fields<T: TokenCounter + ?Sized>(counter: &T, message: &Message) -> u64 {
    let mut n = ApproxTokenCounter::MESSAGE_OVERHEAD;
    for part in &message.content {
        n += match part {
            ContentPart::Text { text } | ContentPart::Reasoning { text } => counter.count_text(text),
            _ => ApproxTokenCounter::IMAGE_TOKENS,
        };
    }
    for call in &message.tool_calls {
        n += counter.count_text(&call.name) + counter.count_text(&call.arguments.to_string());
    }
    n
}

impl<T: TokenCounter + ?Sized> TokenCounter for Arc<T> {
    fn memo_key(&self) -> Option<u64> {
        (**self).memo_key()
    }
    fn count_text(&self, text: &str) -> u64 {
        (**self).count_text(text)
    }
    fn count_message(&self, message: &Message) -> u64 {
        (**self).count_message(message)
    }
}

/// The default counter: `ceil(chars / chars_per_token)`, counting Unicode
/// scalar values (so non-Latin text is not under-counted by its byte length).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ApproxTokenCounter {
    chars_per_token: f64,
}

impl ApproxTokenCounter {
    /// Tokens added per message for its role and separators.
    pub const MESSAGE_OVERHEAD: u64 = 4;
    /// Tokens counted for an image part.
    pub const IMAGE_TOKENS: u64 = 256;

    /// A counter with this ratio.
    ///
    /// # Panics
    /// When `chars_per_token` is not a finite number above zero.
    pub fn new(chars_per_token: f64) -> Self {
        assert!(
            chars_per_token.is_finite() && chars_per_token > 0.0,
            "chars_per_token must be a finite number above 0, got {chars_per_token}"
        );
        Self { chars_per_token }
    }

    /// Characters per token.
    pub fn chars_per_token(&self) -> f64 {
        self.chars_per_token
    }
}

impl Default for ApproxTokenCounter {
    fn default() -> Self {
        Self { chars_per_token: 4.0 }
    }
}

impl TokenCounter for ApproxTokenCounter {
    /// Its count depends on the message and `chars_per_token` alone.
    fn memo_key(&self) -> Option<u64> {
        // a fixed tag in the high bits keeps it apart from other counters' keys
        Some(0xa990_0000_0000_0000 ^ self.chars_per_token.to_bits())
    }

    fn count_text(&self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        let chars = if text.is_ascii() {
            text.len()
        } else {
            text.chars().count()
        };
        (chars as f64 / self.chars_per_token).ceil() as u64
    }
}

/// The shared default counter.
pub fn default_counter() -> Arc<dyn TokenCounter> {
    Arc::new(ApproxTokenCounter::default())
}

/// An exact counter for OpenAI's tokenizers (feature `exact-tokens`): the
/// `o200k_base` (GPT-4o and later) or `cl100k_base` (GPT-4, GPT-3.5)
/// encoding, bundled in the `tiktoken-rs` crate. The vocabulary is parsed
/// once per process, on first use. For other model families it is a closer
/// estimate than [`ApproxTokenCounter`], not an exact count.
///
/// ```
/// use tinyagents::harness::tokens::{TiktokenCounter, TokenCounter};
///
/// let counter = TiktokenCounter::o200k();
/// assert_eq!(counter.count_text("Hello, world!"), 4);
/// ```
#[cfg(feature = "exact-tokens")]
#[derive(Clone, Copy)]
pub struct TiktokenCounter {
    bpe: &'static tiktoken_rs::CoreBPE,
    name: &'static str,
}

#[cfg(feature = "exact-tokens")]
impl std::fmt::Debug for TiktokenCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TiktokenCounter").field("encoding", &self.name).finish()
    }
}

#[cfg(feature = "exact-tokens")]
impl TiktokenCounter {
    /// The `o200k_base` encoding.
    pub fn o200k() -> Self {
        Self {
            bpe: tiktoken_rs::o200k_base_singleton(),
            name: "o200k_base",
        }
    }

    /// The `cl100k_base` encoding.
    pub fn cl100k() -> Self {
        Self {
            bpe: tiktoken_rs::cl100k_base_singleton(),
            name: "cl100k_base",
        }
    }

    /// The encoding's name.
    pub fn encoding(&self) -> &'static str {
        self.name
    }
}

#[cfg(feature = "exact-tokens")]
impl TokenCounter for TiktokenCounter {
    /// Its count depends on the message and the encoding alone.
    fn memo_key(&self) -> Option<u64> {
        let name = self.name.bytes().fold(0u64, |h, b| h.rotate_left(8) ^ u64::from(b));
        Some(0x71c7_0000_0000_0000 ^ name)
    }

    fn count_text(&self, text: &str) -> u64 {
        self.bpe.encode_ordinary(text).len() as u64
    }
}
