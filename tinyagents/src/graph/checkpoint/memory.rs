//! [`MemoryCheckpointer`]: checkpoints kept in memory, for tests and short-lived processes.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Checkpoint, Checkpointer};
use crate::harness::error::{Result, TinyAgentsError};

/// Keeps every checkpoint of every thread in memory. Like every store, it
/// never replaces a checkpoint: a `put` whose `seq` is not above the
/// thread's latest is an error.
///
/// ```
/// use tinyagents::graph::{Checkpoint, Checkpointer, GraphState, MemoryCheckpointer};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let store = MemoryCheckpointer::new();
/// let cp = Checkpoint {
///     thread_id: "t".into(), seq: 1, steps: 0, next: None,
///     state: GraphState::new(), interrupt: None, updates: vec![],
/// };
/// store.put(&cp).await.unwrap();
/// assert!(store.put(&cp).await.is_err(), "never replaced");
/// assert_eq!(store.history("t"), vec![cp]);
/// # });
/// ```
#[derive(Debug, Default)]
pub struct MemoryCheckpointer {
    threads: Mutex<HashMap<String, Vec<Checkpoint>>>,
}

impl MemoryCheckpointer {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every checkpoint of a thread, oldest first.
    pub fn history(&self, thread_id: &str) -> Vec<Checkpoint> {
        self.threads
            .lock()
            .expect("checkpoint lock")
            .get(thread_id)
            .cloned()
            .unwrap_or_default()
    }
}

#[async_trait]
impl Checkpointer for MemoryCheckpointer {
    async fn put(&self, checkpoint: &Checkpoint) -> Result<()> {
        super::storable(checkpoint)?;
        let mut threads = self.threads.lock().expect("checkpoint lock");
        let history = threads.entry(checkpoint.thread_id.clone()).or_default();
        if let Some(last) = history.last().filter(|last| last.seq >= checkpoint.seq) {
            return Err(TinyAgentsError::conflict(format!(
                "checkpoint store: checkpoint {} of thread {:?} cannot be stored: the thread already has \
                 checkpoint {}; checkpoints are never replaced: another run of this thread wrote first, or it \
                 was restarted from an older checkpoint. Reload the thread's latest checkpoint and go on from \
                 it (do not retry the same write), or use a new thread id",
                checkpoint.seq,
                crate::harness::shorten::shorten(&checkpoint.thread_id, 80),
                last.seq
            )));
        }
        history.push(checkpoint.clone());
        Ok(())
    }

    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>> {
        Ok(self
            .threads
            .lock()
            .expect("checkpoint lock")
            .get(thread_id)
            .and_then(|v| v.last().cloned()))
    }
}
