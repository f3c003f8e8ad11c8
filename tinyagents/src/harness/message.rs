//! Conversation messages: [`Message`], [`Role`], [`ContentPart`] and stable [`MessageId`]s.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use crate::harness::tool::ToolCall;

/// A message's stable identity.
///
/// Ids survive edits, compression and checkpoints: provenance records name
/// the ids of the messages a summary replaced. [`MessageId::generate`] makes
/// ids unique within the process; ids loaded from a checkpoint keep their value.
#[derive(Clone)]
pub struct MessageId(IdText);

/// An id's text: a generated id is kept inline (no allocation per message);
/// any other is shared.
#[derive(Clone)]
enum IdText {
    /// `msg-N`, written at `buf[start..]`.
    Inline {
        buf: [u8; 24],
        start: u8,
    },
    Shared(Arc<str>),
}

impl std::hash::Hash for MessageId {
    /// The text's hash (equal ids have equal text).
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for MessageId {
    /// Ids compare their text (clones of one shared id at a pointer comparison).
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (IdText::Shared(a), IdText::Shared(b)) if Arc::ptr_eq(a, b) => true,
            _ => self.as_bytes() == other.as_bytes(),
        }
    }
}

impl Eq for MessageId {}

impl PartialOrd for MessageId {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MessageId {
    /// By text.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl std::fmt::Debug for MessageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("MessageId").field(&self.as_str()).finish()
    }
}

impl Serialize for MessageId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for MessageId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        Arc::<str>::deserialize(deserializer).map(|text| Self(IdText::Shared(text)))
    }
}

impl MessageId {
    /// A new id, unique within this process (`msg-1`, `msg-2`, …). Kept
    /// inline: making one allocates nothing.
    pub fn generate() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut buf = [0u8; 24];
        let start = id_start(NEXT.fetch_add(1, Ordering::Relaxed), &mut buf);
        Self(IdText::Inline { buf, start })
    }

    /// An id with a given value (for replay and tests).
    pub fn new(id: impl Into<Arc<str>>) -> Self {
        Self(IdText::Shared(id.into()))
    }

    /// The id's text, as bytes (what comparing and hashing read).
    #[inline]
    fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            IdText::Inline { buf, start } => &buf[usize::from(*start)..],
            IdText::Shared(text) => text.as_bytes(),
        }
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            IdText::Inline { buf, start } => {
                // Written by `id_start`: ASCII only.
                std::str::from_utf8(&buf[usize::from(*start)..]).unwrap_or_default()
            }
            IdText::Shared(text) => text,
        }
    }
}

/// Writes `msg-N` at the end of `buf` ("msg-" and at most 20 digits, ASCII
/// only) without `format!`, and returns where it starts.
fn id_start(mut n: u64, buf: &mut [u8; 24]) -> u8 {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    at -= 4;
    buf[at..at + 4].copy_from_slice(b"msg-");
    // `at` is within the 24 bytes
    at as u8
}

#[cfg(test)]
mod id_tests {
    use super::{id_start, MessageId};

    #[test]
    fn ids_read_as_format_would_write_them() {
        for n in [0, 1, 9, 10, 1234567890, u64::MAX] {
            let mut buf = [0; 24];
            let start = usize::from(id_start(n, &mut buf));
            assert_eq!(std::str::from_utf8(&buf[start..]).unwrap(), format!("msg-{n}"));
        }
        let (a, b) = (MessageId::generate(), MessageId::generate());
        let num = |id: &MessageId| id.as_str().strip_prefix("msg-").unwrap().parse::<u64>().unwrap();
        assert!(num(&b) > num(&a), "{a} then {b}");
    }

    #[test]
    fn an_inline_id_is_the_same_id_as_its_text() {
        use std::hash::{BuildHasher, RandomState};
        let generated = MessageId::generate();
        let shared = MessageId::new(generated.as_str());
        assert_eq!(generated, shared);
        let hasher = RandomState::new();
        assert_eq!(hasher.hash_one(&generated), hasher.hash_one(&shared));
        assert_eq!(format!("{generated:?}"), format!("MessageId({:?})", shared.as_str()));
        let json = serde_json::to_string(&generated).unwrap();
        assert_eq!(json, format!("\"{}\"", shared.as_str()));
        assert_eq!(serde_json::from_str::<MessageId>(&json).unwrap(), generated);
        assert_eq!(generated.cmp(&shared), std::cmp::Ordering::Equal);
    }
}

impl std::fmt::Display for MessageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
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

/// One message of a conversation: its fields ([`MessageData`]) behind an
/// [`Arc`], so cloning a message — and so a whole history into every model
/// request — is a reference count, not a copy of its text.
///
/// The fields are read through `Deref` (`m.role`, `m.text()`) and written
/// through `DerefMut` (`m.content.push(..)`, `m.set_text(..)`), which is
/// copy-on-write: a message still shared with another clone (the run's
/// stored history, say) is copied once, on its first change, and only that
/// message; the other clones keep the old value. [`Message::ptr_eq`] tells
/// whether two clones still share their fields (so their content is known
/// equal without comparing it).
///
/// ```
/// use tinyagents::harness::message::{Message, Role};
///
/// let m = Message::user("What is 2 + 2?");
/// assert_eq!(m.role, Role::User);
/// assert_eq!(m.text(), "What is 2 + 2?");
///
/// let mut copy = m.clone(); // a reference count
/// assert!(Message::ptr_eq(&m, &copy));
/// copy.set_text("What is 3 + 3?"); // copies this message, once
/// assert!(!Message::ptr_eq(&m, &copy));
/// assert_eq!(m.text(), "What is 2 + 2?");
/// assert_eq!(copy.id, m.id);
/// ```
#[derive(Clone)]
pub struct Message(Arc<Shared>);

/// What clones of a message share: its fields, and results computed from
/// them that are kept until the fields change.
struct Shared {
    data: MessageData,
    /// The token count by one counter: `(counter's memo key, count)`.
    tokens: OnceLock<(u64, u64)>,
}

impl Clone for Shared {
    /// A copy about to be changed: the fields, without the kept results.
    fn clone(&self) -> Self {
        Self {
            data: self.data.clone(),
            tokens: OnceLock::new(),
        }
    }
}

impl Serialize for Message {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.data.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        MessageData::deserialize(deserializer).map(Self::from)
    }
}

/// The fields of a [`Message`] (which derefs to them).
///
/// Build one to make a message with every field given at once:
/// `Message::from(MessageData { .. })`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageData {
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

impl std::ops::Deref for Message {
    type Target = MessageData;

    fn deref(&self) -> &MessageData {
        &self.0.data
    }
}

impl std::ops::DerefMut for Message {
    /// Copy-on-write: copies the fields first when another clone shares them.
    fn deref_mut(&mut self) -> &mut MessageData {
        let shared = Arc::make_mut(&mut self.0);
        // the fields may change: results kept for them go
        shared.tokens = OnceLock::new();
        &mut shared.data
    }
}

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.data == other.0.data
    }
}

impl std::fmt::Debug for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = &self.0.data;
        f.debug_struct("Message")
            .field("id", &d.id)
            .field("role", &d.role)
            .field("content", &d.content)
            .field("tool_calls", &d.tool_calls)
            .field("tool_call_id", &d.tool_call_id)
            .field("name", &d.name)
            .finish()
    }
}

impl From<MessageData> for Message {
    fn from(data: MessageData) -> Self {
        Self(Arc::new(Shared {
            data,
            tokens: OnceLock::new(),
        }))
    }
}

impl From<Message> for MessageData {
    fn from(message: Message) -> Self {
        message.into_data()
    }
}

impl Message {
    /// A message with one text part and a fresh id.
    pub fn new(role: Role, text: impl Into<String>) -> Self {
        Self::from(MessageData {
            id: MessageId::generate(),
            role,
            content: vec![ContentPart::text(text)],
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        })
    }

    /// Whether `a` and `b` share their fields (clones of one message that
    /// neither changed since): then they are equal, without comparing them.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// The address of the shared fields: stable while any clone that shares
    /// them is alive, and a key for caches of per-message results that keep
    /// such a clone (so the address cannot be reused for another message).
    pub fn addr(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// The fields, moved out when this is the last clone and copied otherwise.
    pub fn into_data(self) -> MessageData {
        Arc::unwrap_or_clone(self.0).data
    }

    /// This message's token count by the counter whose memo key is `key`:
    /// kept with the fields (shared by every clone) until they change, so a
    /// history is counted once per message, not once per turn. A second
    /// counter's count is computed and not kept.
    pub(crate) fn memo_tokens(&self, key: u64, count: impl FnOnce() -> u64) -> u64 {
        match self.0.tokens.get() {
            Some(&(k, n)) if k == key => n,
            Some(_) => count(),
            None => {
                let n = count();
                let _ = self.0.tokens.set((key, n));
                n
            }
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
        let mut m = Self::new(Role::Tool, text);
        let d = &mut Arc::get_mut(&mut m.0).expect("a new message is not shared").data;
        d.tool_call_id = Some(call_id.into());
        d.name = Some(name.into());
        m
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

/// Hashes a [`Message::addr`]: the address is already unique, one multiply
/// spreads it (a per-message cache is looked up once per message per turn,
/// so SipHash's cost would be the cache's).
#[derive(Default, Clone, Copy)]
pub(crate) struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = ((n as u64) >> 3).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by [`Message::addr`] (whose values keep a clone of the message,
/// so the address stays its own).
pub(crate) type AddrMap<V> = std::collections::HashMap<usize, V, std::hash::BuildHasherDefault<AddrHasher>>;
