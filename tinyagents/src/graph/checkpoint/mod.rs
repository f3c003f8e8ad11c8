//! Durable checkpoints: the [`Checkpointer`] trait, an in-memory store and a
//! file store that survives a crash mid-write.
//!
//! Integrity rules every store follows (a resume from the wrong checkpoint
//! runs finished side effects again, so doubt is an error):
//! * a checkpoint is never replaced: a second `put` of a stored sequence
//!   number (or of a lower one) is an error, and the first stays;
//! * a damaged checkpoint is an error naming it, never skipped for an older
//!   one, and a thread whose checkpoints are all damaged is not "new";
//! * a checkpoint written by a newer format is an error naming both versions;
//! * each checkpoint holds the updates made since the previous one, so the
//!   storage grows linearly with the run.

mod file;
mod memory;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

#[cfg(any(feature = "postgres", feature = "sqlite", feature = "redis"))]
pub(crate) use file::{decode_json, hex};
pub use file::{FileCheckpointer, CHECKPOINT_FORMAT_VERSION};
pub use memory::MemoryCheckpointer;

use super::state::{GraphState, Update};
use crate::harness::error::Result;

/// Why a run paused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)] // a field this version does not know is refused, not dropped
pub struct InterruptRecord {
    /// The node that paused (it runs again on resume).
    pub node: String,
    /// Why it paused.
    pub message: String,
}

/// One explicit state change, kept so a replay can explain every change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)] // a field this version does not know is refused, not dropped
pub struct UpdateRecord {
    /// The graph step that made it.
    pub step: u32,
    /// The node that made it.
    pub node: String,
    /// The update.
    pub update: Update,
}

/// The state of a graph run at a safe point: everything needed to go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// The thread (conversation) the run belongs to.
    pub thread_id: String,
    /// The checkpoint's sequence number in its thread (1, 2, …).
    pub seq: u64,
    /// Graph steps taken so far.
    pub steps: u32,
    /// The node to run next; `None` when the run finished.
    pub next: Option<String>,
    /// The state.
    pub state: GraphState,
    /// Set when the run paused here.
    pub interrupt: Option<InterruptRecord>,
    /// The explicit updates made since the previous checkpoint of this
    /// thread (empty for the first). The thread's whole record of updates is
    /// the concatenation over its checkpoints, oldest first
    /// ([`MemoryCheckpointer::history`], [`FileCheckpointer::history`]); a
    /// checkpoint does not repeat the log, so storage grows linearly.
    pub updates: Vec<UpdateRecord>,
}

/// The largest sequence number a checkpoint may carry: the SQL stores keep
/// it as a signed 64-bit integer, so every store refuses more.
pub const MAX_CHECKPOINT_SEQ: u64 = i64::MAX as u64;

impl Checkpoint {
    /// The sequence number of the checkpoint after this one.
    ///
    /// # Errors
    /// A [`Validation`](crate::harness::error::TinyAgentsError::Validation)
    /// error when this one is already at [`MAX_CHECKPOINT_SEQ`] (a damaged
    /// or forged store: a thread never takes that many checkpoints).
    ///
    /// ```
    /// # use tinyagents::graph::{Checkpoint, GraphState, MAX_CHECKPOINT_SEQ};
    /// let mut c = Checkpoint { thread_id: "t".into(), seq: 1, steps: 0, next: None,
    ///     state: GraphState::new(), interrupt: None, updates: vec![] };
    /// assert_eq!(c.next_seq().unwrap(), 2);
    /// c.seq = MAX_CHECKPOINT_SEQ;
    /// assert!(c.next_seq().is_err());
    /// ```
    pub fn next_seq(&self) -> Result<u64> {
        next_seq(&self.thread_id, self.seq)
    }
}

/// Refuses to store a checkpoint numbered past [`MAX_CHECKPOINT_SEQ`]: every
/// store keeps the same range, so a thread moves between them intact. The
/// number as the SQL stores keep it.
pub(crate) fn storable(checkpoint: &Checkpoint) -> Result<i64> {
    if let Ok(seq) = i64::try_from(checkpoint.seq) {
        return Ok(seq);
    }
    Err(crate::harness::error::TinyAgentsError::validation(format!(
        "checkpoint store: checkpoint {} of thread {:?} has a sequence number above {MAX_CHECKPOINT_SEQ}, the most \
         any store keeps",
        checkpoint.seq,
        crate::harness::shorten::shorten(&checkpoint.thread_id, 80)
    )))
}

/// The sequence number after `seq` in `thread_id`, refused past [`MAX_CHECKPOINT_SEQ`].
pub(crate) fn next_seq(thread_id: &str, seq: u64) -> Result<u64> {
    match seq.checked_add(1) {
        Some(next) if next <= MAX_CHECKPOINT_SEQ => Ok(next),
        _ => Err(crate::harness::error::TinyAgentsError::validation(format!(
            "thread {:?} is at checkpoint {seq}, and no checkpoint may be numbered past {MAX_CHECKPOINT_SEQ}: the \
             store is damaged or was written by something else; start a new thread",
            crate::harness::shorten::shorten(thread_id, 80)
        ))),
    }
}

/// A store of checkpoints by thread. Writes are atomic: a reader sees a
/// whole checkpoint or the previous one, never half of one.
///
/// An implementation must fail closed, as the built-in stores do: `put` of a
/// sequence number already stored (or below the latest) is an error and
/// replaces nothing; `latest` of a thread whose newest checkpoint cannot be
/// read whole and exactly is an error naming it, never an older checkpoint
/// and never `None`.
#[async_trait]
pub trait Checkpointer: Send + Sync {
    /// Stores a checkpoint (its `seq` is above every earlier one of its thread).
    ///
    /// # Errors
    /// When a checkpoint of this thread with this `seq` (or a higher one) is
    /// already stored, or the store cannot write.
    async fn put(&self, checkpoint: &Checkpoint) -> Result<()>;

    /// The latest checkpoint of a thread; `None` only when the thread has none.
    ///
    /// # Errors
    /// When the latest checkpoint is damaged, of a newer format, or unreadable.
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>>;
}
