//! Durable checkpoints: the [`Checkpointer`] trait, an in-memory store and a
//! file store that survives a crash mid-write.

mod file;
mod memory;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

pub use file::FileCheckpointer;
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
    /// Every explicit update since the run started.
    pub updates: Vec<UpdateRecord>,
}

/// A store of checkpoints by thread. Writes are atomic: a reader sees a
/// whole checkpoint or the previous one, never half of one.
#[async_trait]
pub trait Checkpointer: Send + Sync {
    /// Stores a checkpoint (its `seq` is above every earlier one of its thread).
    async fn put(&self, checkpoint: &Checkpoint) -> Result<()>;

    /// The latest complete checkpoint of a thread.
    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>>;
}
