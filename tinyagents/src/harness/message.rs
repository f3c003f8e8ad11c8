//! Conversation messages: [`Message`], [`Role`], [`ContentPart`] and stable [`MessageId`]s.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::harness::tool::ToolCall;

/// A message's stable identity.
///
/// Ids survive edits, compression and checkpoints: provenance records name
/// the ids of the messages a summary replaced. [`MessageId::generate`] makes
/// ids unique within the process; ids loaded from a checkpoint keep their value.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MessageId(Arc<str>);

impl MessageId {
    /// A new id, unique within this process (`msg-1`, `msg-2`, …).
    pub fn generate() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(Arc::from(format!("msg-{}", NEXT.fetch_add(1, Ordering::Relaxed))))
    }

    /// An id with a given value (for replay and tests).
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(id.into())
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for MessageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Instructions from the application.
    System,
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool's result, answering one tool call.
    Tool,
}

impl Role {
    /// The role's lowercase label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::User => "user",
            Self::Assistant => "assistant",
            Self::Tool => "tool",
        }
    }
}

/// One part of a message's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// Model reasoning ("thinking") text, kept apart from the answer.
    Reasoning {
        /// The reasoning text.
        text: String,
    },
    /// An image by URL or data URI.
    Image {
        /// The image's URL or `data:` URI.
        url: String,
    },
}

impl ContentPart {
    /// A [`ContentPart::Text`].
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

/// One message of a conversation.
///
/// ```
/// use tinyagents::harness::message::{Message, Role};
///
/// let m = Message::user("What is 2 + 2?");
/// assert_eq!(m.role, Role::User);
/// assert_eq!(m.text(), "What is 2 + 2?");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// The message's stable id.
    pub id: MessageId,
    /// Who speaks it.
    pub role: Role,
    /// Its content, in order.
    pub content: Vec<ContentPart>,
    /// For assistant messages: the tool calls the model asked for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For tool messages: the id of the call this answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For tool messages: the tool's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Message {
    /// A message with one text part and a fresh id.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self {
            id: MessageId::generate(),
            role,
            content: vec![ContentPart::text(text)],
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }

    /// A system message.
    pub fn system(text: impl Into<String>) -> Self {
        Self::new(Role::System, text)
    }

    /// A user message.
    pub fn user(text: impl Into<String>) -> Self {
        Self::new(Role::User, text)
    }

    /// An assistant message.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::new(Role::Assistant, text)
    }

    /// A tool message answering `call_id`.
    pub fn tool(call_id: impl Into<String>, name: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            name: Some(name.into()),
            ..Self::new(Role::Tool, text)
        }
    }

    /// The same message with a given id.
    pub fn with_id(mut self, id: MessageId) -> Self {
        self.id = id;
        self
    }

    /// The same message carrying tool calls.
    pub fn with_tool_calls(mut self, calls: Vec<ToolCall>) -> Self {
        self.tool_calls = calls;
        self
    }

    /// The concatenated text parts (reasoning excluded). Borrows when there is one part.
    pub fn text(&self) -> Cow<'_, str> {
        let mut texts = self.content.iter().filter_map(|p| match p {
            ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        });
        match (texts.next(), texts.next()) {
            (None, _) => Cow::Borrowed(""),
            (Some(one), None) => Cow::Borrowed(one),
            (Some(a), Some(b)) => {
                let mut s = String::from(a);
                s.push_str(b);
                texts.for_each(|t| s.push_str(t));
                Cow::Owned(s)
            }
        }
    }

    /// The concatenated reasoning parts.
    pub fn reasoning(&self) -> String {
        self.content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Reasoning { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Replaces all text parts with one text part (other parts are kept).
    pub fn set_text(&mut self, text: impl Into<String>) {
        self.content.retain(|p| !matches!(p, ContentPart::Text { .. }));
        self.content.insert(0, ContentPart::text(text));
    }
}
