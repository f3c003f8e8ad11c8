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
pub struct InterruptRecord {
    /// The node that paused (it runs again on resume).
    pub node: String,
    /// Why it paused.
    pub message: String,
}

/// One explicit state change, kept so a replay can explain every change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
