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

    /// Tokens in one message: its text, reasoning, tool calls and a fixed overhead.
    fn count_message(&self, message: &Message) -> u64 {
        let mut n = ApproxTokenCounter::MESSAGE_OVERHEAD;
        for part in &message.content {
            n += match part {
                ContentPart::Text { text } | ContentPart::Reasoning { text } => self.count_text(text),
                _ => ApproxTokenCounter::IMAGE_TOKENS,
            };
        }
        for call in &message.tool_calls {
            n += self.count_text(&call.name) + self.count_text(&call.arguments.to_string());
        }
        n
    }

    /// Tokens in a list of messages.
    fn count_messages(&self, messages: &[Message]) -> u64 {
        messages.iter().map(|m| self.count_message(m)).sum()
    }

    /// Tokens in a whole request: system segments, tool schemas and messages.
    fn count_request(&self, request: &ModelRequest) -> u64 {
        let system: u64 = request.system.iter().map(|s| self.count_text(&s.text)).sum();
        let tools: u64 = request
            .tools
            .iter()
            .map(|t| {
                self.count_text(&t.name) + self.count_text(&t.description) + self.count_text(&t.parameters.to_string())
            })
            .sum();
        system + tools + self.count_messages(&request.messages)
    }
}

impl<T: TokenCounter + ?Sized> TokenCounter for Arc<T> {
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
