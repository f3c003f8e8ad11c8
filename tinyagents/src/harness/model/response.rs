//! [`ModelResponse`], [`FinishReason`] and [`Usage`].

use std::ops::{Add, AddAssign};

use serde::{Deserialize, Serialize};

use crate::harness::message::Message;
use crate::harness::tool::ToolCall;

/// Token usage of one call or of a whole run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Output tokens, reasoning included.
    pub output_tokens: u64,
    /// Of the output tokens, how many were reasoning.
    pub reasoning_tokens: u64,
    /// Input tokens read from the provider's prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the provider's prompt cache.
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Usage with input and output tokens.
    pub const fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            reasoning_tokens: 0,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
        }
    }

    /// Every input-side token: uncached, cache read and cache write.
    pub const fn total_input(&self) -> u64 {
        self.input_tokens + self.cache_read_tokens + self.cache_write_tokens
    }

    /// Whether every count is zero.
    pub fn is_zero(&self) -> bool {
        *self == Self::default()
    }
}

/// Adds counts, saturating at `u64::MAX` (counts come off the wire: a sum
/// never overflows, never panics).
impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.input_tokens = self.input_tokens.saturating_add(rhs.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(rhs.output_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(rhs.reasoning_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(rhs.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(rhs.cache_write_tokens);
    }
}

impl Add for Usage {
    type Output = Self;
    fn add(mut self, rhs: Self) -> Self {
        self += rhs;
        self
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// It finished its answer.
    #[default]
    Stop,
    /// It asked for tool calls.
    ToolCalls,
    /// It was cut off by the output-token limit.
    Length,
    /// A content filter stopped it.
    ContentFilter,
    /// Anything else the provider said.
    Other(String),
}

/// A model's complete reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The assistant message, with its tool calls.
    pub message: Message,
    /// Token usage of this call.
    pub usage: Usage,
    /// Whether the provider reported usage at all. `false` means `usage` is
    /// not a real zero but unknown: the price budget treats such a call as
    /// unpriced (the spend becomes a lower bound), never as free.
    #[serde(default = "reported")]
    pub usage_reported: bool,
    /// Why the model stopped.
    pub finish_reason: FinishReason,
    /// The model that answered, when known.
    pub model: Option<String>,
}

fn reported() -> bool {
    true
}

impl ModelResponse {
    /// A text reply.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            message: Message::assistant(text),
            usage: Usage::default(),
            usage_reported: true,
            finish_reason: FinishReason::Stop,
            model: None,
        }
    }

    /// A reply that asks for tool calls.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Self {
            message: Message::assistant("").with_tool_calls(calls),
            usage: Usage::default(),
            usage_reported: true,
            finish_reason: FinishReason::ToolCalls,
            model: None,
        }
    }

    /// The same reply with usage (reported).
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = usage;
        self.usage_reported = true;
        self
    }

    /// The same reply marked as having no usage reported by the provider
    /// (what a server that sends no `usage` produces).
    pub fn without_usage_report(mut self) -> Self {
        self.usage = Usage::default();
        self.usage_reported = false;
        self
    }

    /// The same reply with a finish reason.
    pub fn with_finish_reason(mut self, reason: FinishReason) -> Self {
        self.finish_reason = reason;
        self
    }

    /// The tool calls the model asked for.
    pub fn tool_calls_requested(&self) -> &[ToolCall] {
        &self.message.tool_calls
    }
}
