//! Compression provenance: what a compression replaced, and how.
//!
//! Every compression built-in records one [`CompressionProvenance`] per
//! change with [`record`]: it is emitted as
//! [`AgentEvent::Compressed`],
//! kept in the run's [`CompressionLog`], and attached to the
//! [`AgentRun`] in `after_agent`
//! ([`attach`]) so a replay can explain every change.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::harness::agent::AgentRun;
use crate::harness::cache::PrefixFingerprint;
use crate::harness::context::RunContext;
use crate::harness::event::{AgentEvent, EventKind};
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

/// The compressions of one run, in order (a run local: `ctx.local::<CompressionLog>()`).
#[derive(Debug, Default)]
pub struct CompressionLog {
    entries: Mutex<Vec<CompressionProvenance>>,
    attached: Mutex<usize>,
}

impl CompressionLog {
    /// Every compression recorded so far in the run.
    pub fn entries(&self) -> Vec<CompressionProvenance> {
        self.entries.lock().expect("compression log lock").clone()
    }

    fn push(&self, p: CompressionProvenance) {
        self.entries.lock().expect("compression log lock").push(p);
    }
}

/// Records a compression: emits [`AgentEvent::Compressed`] and appends it to
/// the run's [`CompressionLog`]. The step is filled from the run's counters.
pub fn record<C>(ctx: &RunContext<C>, mut provenance: CompressionProvenance) {
    provenance.step = ctx.counters().steps;
    ctx.emit_with(EventKind::Compressed, || AgentEvent::Compressed {
        run_id: ctx.run_id().clone(),
        provenance: Box::new(provenance.clone()),
    });
    ctx.local::<CompressionLog>().push(provenance);
}

/// Copies the compressions not yet attached onto `run.compressions`
/// (idempotent). The agent calls it when a run ends, before and after the
/// `after_agent` hooks, so compression middleware need not.
pub fn attach<C>(ctx: &RunContext<C>, run: &mut AgentRun) {
    let log: Arc<CompressionLog> = ctx.local::<CompressionLog>();
    let entries = log.entries.lock().expect("compression log lock");
    let mut attached = log.attached.lock().expect("compression log lock");
    run.compressions.extend(entries[*attached..].iter().cloned());
    *attached = entries.len();
}
