//! [`ModelDelta`]: one streamed piece of a model's reply.

use serde::{Deserialize, Serialize};

use super::{FinishReason, Usage};

/// What a delta carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DeltaContent {
    /// Answer text.
    Text {
        /// The text piece.
        text: String,
    },
    /// Reasoning text.
    Reasoning {
        /// The reasoning piece.
        text: String,
    },
    /// A piece of a tool call: the first piece of a call carries its id and
    /// name; later pieces append to its arguments (raw JSON text).
    ToolCall {
        /// Which call of the reply this piece belongs to.
        index: u32,
        /// The call id (first piece).
        id: Option<String>,
        /// The tool name (first piece).
        name: Option<String>,
        /// A piece of the arguments' JSON text.
        arguments: String,
    },
    /// Token usage (usually once, near the end).
    Usage {
        /// The usage reported.
        usage: Usage,
    },
    /// The reply is complete.
    Finish {
        /// Why the model stopped.
        reason: FinishReason,
    },
}

/// One streamed piece of a model's reply, as `on_model_delta` hooks see it.
///
/// A hook may edit the content in place, or [`suppress`](ModelDelta::suppress)
/// the delta: a suppressed delta is neither forwarded nor accumulated, and the
/// suppression is recorded as an event naming the middleware.
///
/// ```
/// use tinyagents::harness::model::ModelDelta;
///
/// let mut d = ModelDelta::text("hello");
/// if let Some(t) = d.text_mut() { t.make_ascii_uppercase(); }
/// assert_eq!(d.as_text(), Some("HELLO"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelDelta {
    /// The content.
    pub content: DeltaContent,
    #[serde(skip)]
    suppressed: bool,
    /// Deltas a hook released ahead of this one (see [`release_before`](Self::release_before)).
    #[serde(skip)]
    released: Vec<ModelDelta>,
}

impl ModelDelta {
    /// A delta with this content.
    pub const fn new(content: DeltaContent) -> Self {
        Self {
            content,
            suppressed: false,
            released: Vec::new(),
        }
    }

    /// Sends `delta` ahead of this one: the agent loop forwards it to the
    /// sink and accumulates it into the reply just before this delta (also
    /// when this one is suppressed). It does not pass the delta hooks again:
    /// the hook that releases it has already judged it. A hook that holds
    /// text back (the `pii` built-in) releases it this way at the finish
    /// delta, so every wrap inside it sees the whole reply.
    ///
    /// ```
    /// use tinyagents::harness::model::{FinishReason, ModelDelta};
    ///
    /// let mut finish = ModelDelta::finish(FinishReason::Stop);
    /// finish.release_before(ModelDelta::text("held-back tail"));
    /// let released = finish.take_released();
    /// assert_eq!(released[0].as_text(), Some("held-back tail"));
    /// assert!(finish.take_released().is_empty());
    /// ```
    pub fn release_before(&mut self, delta: ModelDelta) {
        self.released.push(delta);
    }

    /// Whether a hook released deltas ahead of this one.
    pub fn has_released(&self) -> bool {
        !self.released.is_empty()
    }

    /// Takes the deltas released ahead of this one, in release order.
    pub fn take_released(&mut self) -> Vec<ModelDelta> {
        std::mem::take(&mut self.released)
    }

    /// A text delta.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(DeltaContent::Text { text: text.into() })
    }

    /// A reasoning delta.
    pub fn reasoning(text: impl Into<String>) -> Self {
        Self::new(DeltaContent::Reasoning { text: text.into() })
    }

    /// A usage delta.
    pub const fn usage(usage: Usage) -> Self {
        Self::new(DeltaContent::Usage { usage })
    }

    /// A finish delta.
    pub const fn finish(reason: FinishReason) -> Self {
        Self::new(DeltaContent::Finish { reason })
    }

    /// The answer text, when this is a text delta.
    pub fn as_text(&self) -> Option<&str> {
        match &self.content {
            DeltaContent::Text { text } => Some(text),
            _ => None,
        }
    }

    /// The answer text, mutably, when this is a text delta.
    pub fn text_mut(&mut self) -> Option<&mut String> {
        match &mut self.content {
            DeltaContent::Text { text } => Some(text),
            _ => None,
        }
    }

    /// Drops this delta: it is not forwarded or accumulated.
    pub fn suppress(&mut self) {
        self.suppressed = true;
    }

    /// Whether a hook suppressed this delta.
    pub const fn is_suppressed(&self) -> bool {
        self.suppressed
    }
}
