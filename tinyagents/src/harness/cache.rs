//! The provider prompt-cache layout of a request: [`PromptCacheLayout`], its
//! [`PrefixFingerprint`], and the [`CacheLayoutEvent`] recorded when the
//! cacheable prefix changes between calls of a run.
//!
//! Providers cache the longest prefix a request shares with earlier ones.
//! The *stable prefix* of a [`ModelRequest`] is, in this order:
//!
//! 1. its [`Stable`](SegmentStability::Stable) system segments,
//! 2. its tool schemas,
//! 3. its *leading messages*: the system-role messages at the start of the
//!    conversation.
//!
//! Everything else (volatile segments, the conversation) is the *volatile
//! tail*. Middleware that edits only the tail keeps the fingerprint; a change
//! to the prefix costs a cache miss, which the prompt-cache layout guard makes
//! observable.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::harness::message::{ContentPart, MessageId, Role};
use crate::harness::model::{ModelRequest, SegmentStability};

/// A 64-bit FNV-1a fingerprint of a stable prefix: the same bytes give the
/// same value in every process and on every platform.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PrefixFingerprint(pub u64);

impl std::fmt::Display for PrefixFingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// FNV-1a over a sequence of fields (each followed by a separator so field
/// boundaries count).
#[derive(Clone, Copy)]
struct Fnv(u64);

impl std::io::Write for Fnv {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.bytes(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Fnv {
    const fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn field(&mut self, text: &str) {
        self.bytes(text.as_bytes());
        self.bytes(&[0xff]);
    }
}

/// The ordered layout of a request's stable prefix and its fingerprint.
///
/// ```
/// use tinyagents::harness::cache::PromptCacheLayout;
/// use tinyagents::harness::message::Message;
/// use tinyagents::harness::model::{ModelRequest, PromptSegment};
///
/// let mut req = ModelRequest::new(vec![Message::user("hi")])
///     .with_system(PromptSegment::stable("persona", "You are terse."));
/// let before = PromptCacheLayout::of(&req);
/// req.set_volatile("date", "Today is Monday."); // the tail only
/// req.messages.push(Message::user("more"));     // the conversation is the tail too
/// assert_eq!(PromptCacheLayout::of(&req).fingerprint, before.fingerprint);
/// req.system[0].text = "You are verbose.".into(); // the stable prefix
/// assert_ne!(PromptCacheLayout::of(&req).fingerprint, before.fingerprint);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptCacheLayout {
    /// The ids of the stable system segments, in order.
    pub stable_segments: Vec<String>,
    /// The ids of the volatile system segments, in order.
    pub volatile_segments: Vec<String>,
    /// The names of the tools, in order.
    pub tools: Vec<String>,
    /// The ids of the leading (system-role) messages.
    pub leading_messages: Vec<MessageId>,
    /// The fingerprint of the stable prefix.
    pub fingerprint: PrefixFingerprint,
}

impl PromptCacheLayout {
    /// The layout of `request`.
    pub fn of(request: &ModelRequest) -> Self {
        let mut layout = Self {
            stable_segments: Vec::new(),
            volatile_segments: Vec::new(),
            tools: request.tools.iter().map(|t| t.name.clone()).collect(),
            leading_messages: leading_messages(request).map(|m| m.id.clone()).collect(),
            fingerprint: PrefixFingerprint::default(),
        };
        for seg in &request.system {
            match seg.stability {
                SegmentStability::Stable => layout.stable_segments.push(seg.id.clone()),
                SegmentStability::Volatile => layout.volatile_segments.push(seg.id.clone()),
            }
        }
        layout.fingerprint = fingerprint(request);
        layout
    }

    /// The names of the prefix parts that differ between `self` and `other`
    /// (`segment:ID`, `tool:NAME`, `message:ID`), or `["prefix"]` when the
    /// fingerprints differ but every part keeps its name (a text changed in place).
    pub fn diff(&self, other: &Self) -> Vec<String> {
        if self.fingerprint == other.fingerprint {
            return Vec::new();
        }
        let mut out = Vec::new();
        sym_diff("segment", &self.stable_segments, &other.stable_segments, &mut out);
        sym_diff("tool", &self.tools, &other.tools, &mut out);
        let a: Vec<&str> = self.leading_messages.iter().map(MessageId::as_str).collect();
        let b: Vec<&str> = other.leading_messages.iter().map(MessageId::as_str).collect();
        sym_diff("message", &a, &b, &mut out);
        if out.is_empty() {
            out.push("prefix".to_owned());
        }
        out
    }
}

fn sym_diff<T: AsRef<str> + PartialEq>(label: &str, a: &[T], b: &[T], out: &mut Vec<String>) {
    for x in a
        .iter()
        .filter(|x| !b.contains(x))
        .chain(b.iter().filter(|x| !a.contains(x)))
    {
        out.push(format!("{label}:{}", x.as_ref()));
    }
}

/// The leading messages of a request: the system-role messages it starts with.
pub fn leading_messages(request: &ModelRequest) -> impl Iterator<Item = &crate::harness::message::Message> {
    request.messages.iter().take_while(|m| m.role == Role::System)
}

/// The fingerprint of `request`'s stable prefix (what [`PromptCacheLayout::of`]
/// computes, without the id lists).
pub fn fingerprint(request: &ModelRequest) -> PrefixFingerprint {
    let mut h = Fnv::new();
    h.field("segments");
    for seg in request
        .system
        .iter()
        .filter(|s| s.stability == SegmentStability::Stable)
    {
        h.field(&seg.id);
        h.field(&seg.text);
    }
    h.field("tools");
    for tool in &request.tools {
        h.field(&tool.name);
        h.field(&tool.description);
        // the schema's JSON text, fed to the hash as it is written (no string built)
        let _ = serde_json::to_writer(&mut h, &tool.parameters);
        h.bytes(&[0xff]);
    }
    h.field("messages");
    for m in leading_messages(request) {
        h.field(m.role.as_str());
        for part in &m.content {
            match part {
                ContentPart::Text { text } | ContentPart::Reasoning { text } | ContentPart::Image { url: text } => {
                    h.field(text)
                }
            }
        }
    }
    PrefixFingerprint(h.0)
}

/// Recorded when the cacheable prefix of a run's request differs from the
/// previous call's (emitted as
/// [`AgentEvent::CacheLayoutChanged`](crate::harness::event::AgentEvent::CacheLayoutChanged)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheLayoutEvent {
    /// The loop step of the call whose prefix changed.
    pub step: u32,
    /// The previous call's fingerprint.
    pub before: PrefixFingerprint,
    /// This call's fingerprint.
    pub after: PrefixFingerprint,
    /// Who changed it: the names of the middleware whose prefix edit differs
    /// from the previous call's, and `agent` when the request the loop built
    /// (before any middleware) already differed.
    pub changed_by: Vec<String>,
    /// The parts of the prefix that differ (see [`PromptCacheLayout::diff`]).
    pub changed_parts: Vec<String>,
}

/// One prefix edit made by a `before_model` hook, recorded while the
/// prompt-cache layout guard observes the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixEdit {
    /// The middleware that made it.
    pub middleware: Arc<str>,
    /// The fingerprint before its hook.
    pub before: PrefixFingerprint,
    /// The fingerprint after its hook.
    pub after: PrefixFingerprint,
}

/// Per-run layout tracking (a run local): the prompt-cache layout guard
/// observes the run's `before_model` hooks (a
/// [`HookObserver`](crate::harness::middleware::HookObserver)) and records
/// here every hook that changed the stable prefix. Runs without the guard pay
/// nothing.
#[derive(Debug, Default)]
pub struct CacheLayoutTracking {
    inner: Mutex<TrackingState>,
}

#[derive(Debug, Default)]
struct TrackingState {
    base: Option<PrefixFingerprint>,
    edits: Vec<PrefixEdit>,
}

impl CacheLayoutTracking {
    /// Starts a call: the fingerprint of the request the loop built.
    pub fn begin(&self, base: PrefixFingerprint) {
        let mut s = self.inner.lock().expect("layout tracking lock");
        s.base = Some(base);
        s.edits.clear();
    }

    /// Records an edit.
    pub fn record(&self, edit: PrefixEdit) {
        self.inner.lock().expect("layout tracking lock").edits.push(edit);
    }

    /// Takes the base fingerprint and the edits of the current call.
    pub fn take(&self) -> (Option<PrefixFingerprint>, Vec<PrefixEdit>) {
        let mut s = self.inner.lock().expect("layout tracking lock");
        (s.base.take(), std::mem::take(&mut s.edits))
    }
}
