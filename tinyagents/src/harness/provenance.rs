//! Compression provenance: what a compression replaced, and how (plain data).
//!
//! Every compression built-in records one [`CompressionProvenance`] per
//! change with [`compression::record`](crate::harness::compression::record):
//! it is emitted as
//! [`AgentEvent::Compressed`](crate::harness::event::AgentEvent::Compressed),
//! kept in the run's
//! [`CompressionLog`](crate::harness::compression::CompressionLog), and
//! attached to the [`AgentRun`](crate::harness::run::AgentRun) when the run
//! ends, so a replay can explain every change.

use serde::{Deserialize, Serialize};

use crate::harness::cache::PrefixFingerprint;
use crate::harness::message::MessageId;

/// What one compression replaced, and how.
///
/// ```
/// use tinyagents::harness::provenance::CompressionProvenance;
///
/// let p = CompressionProvenance::new("summarization", "summarization/1");
/// assert_eq!(p.saved_tokens(), 0);
/// assert!(p.stable_prefix_preserved);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompressionProvenance {
    /// The middleware that compressed.
    pub middleware: String,
    /// The policy and its version (`summarization/1`), so a replay knows which rules applied.
    pub policy_version: String,
    /// The loop step the compression happened in.
    pub step: u32,
    /// The ids of the messages replaced (or edited).
    pub source_message_ids: Vec<MessageId>,
    /// The ids of the artifacts replaced (tool call ids, document ids, stored artifact refs).
    pub source_artifact_ids: Vec<String>,
    /// The id of the message that now stands for them, when one was inserted.
    pub replacement_message_id: Option<MessageId>,
    /// Estimated tokens of what was replaced.
    pub original_tokens: u64,
    /// Estimated tokens of what replaced it.
    pub compressed_tokens: u64,
    /// The ids of the system prompt segments of the request it applied to
    /// (the layout a replay rebuilds), including any segment it wrote.
    pub prompt_segment_ids: Vec<String>,
    /// The stable-prefix fingerprint before the compression.
    pub prefix_before: PrefixFingerprint,
    /// The stable-prefix fingerprint after it.
    pub prefix_after: PrefixFingerprint,
    /// Whether the stable provider prompt-cache prefix was kept intact.
    pub stable_prefix_preserved: bool,
}

impl CompressionProvenance {
    /// An empty record for `middleware` under `policy_version`.
    pub fn new(middleware: impl Into<String>, policy_version: impl Into<String>) -> Self {
        Self {
            middleware: middleware.into(),
            policy_version: policy_version.into(),
            step: 0,
            source_message_ids: Vec::new(),
            source_artifact_ids: Vec::new(),
            replacement_message_id: None,
            original_tokens: 0,
            compressed_tokens: 0,
            prompt_segment_ids: Vec::new(),
            prefix_before: PrefixFingerprint::default(),
            prefix_after: PrefixFingerprint::default(),
            stable_prefix_preserved: true,
        }
    }

    /// Sets both fingerprints and derives
    /// [`stable_prefix_preserved`](Self::stable_prefix_preserved) from them.
    pub fn with_prefix(mut self, before: PrefixFingerprint, after: PrefixFingerprint) -> Self {
        self.prefix_before = before;
        self.prefix_after = after;
        self.stable_prefix_preserved = before == after;
        self
    }

    /// Tokens saved (never negative).
    pub fn saved_tokens(&self) -> u64 {
        self.original_tokens.saturating_sub(self.compressed_tokens)
    }
}

/// A compaction a middleware is about to make (a summary replacing older
/// messages), shown to every `pre_compact` hook of the run's stack before it
/// happens. A hook may [`block`](Self::block) it; the compacting middleware
/// then leaves the context as it is.
///
/// ```
/// use tinyagents::harness::provenance::CompactionPlan;
///
/// let mut plan = CompactionPlan::new("summarization", "summarization/1", 12);
/// assert_eq!(plan.details()["messages"], 12);
/// plan.block("keep the history");
/// assert_eq!(plan.blocked(), Some("keep the history"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionPlan {
    /// The middleware about to compact.
    pub middleware: String,
    /// Its policy and version (`summarization/1`).
    pub policy: String,
    /// How many messages the compaction would replace.
    pub messages: usize,
    blocked: Option<String>,
}

impl CompactionPlan {
    /// A compaction of `messages` messages by `middleware` under `policy`.
    pub fn new(middleware: impl Into<String>, policy: impl Into<String>, messages: usize) -> Self {
        Self {
            middleware: middleware.into(),
            policy: policy.into(),
            messages,
            blocked: None,
        }
    }

    /// Blocks the compaction, saying why (the first reason given is kept).
    pub fn block(&mut self, reason: impl Into<String>) {
        self.blocked.get_or_insert_with(|| reason.into());
    }

    /// Why the compaction was blocked, when it was.
    pub fn blocked(&self) -> Option<&str> {
        self.blocked.as_deref()
    }

    /// The plan as JSON (`middleware`, `policy`, `messages`), as external hooks receive it.
    pub fn details(&self) -> serde_json::Value {
        serde_json::json!({ "middleware": self.middleware, "policy": self.policy, "messages": self.messages })
    }
}
