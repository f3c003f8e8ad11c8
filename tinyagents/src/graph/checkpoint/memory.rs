//! [`MemoryCheckpointer`]: checkpoints kept in memory, for tests and short-lived processes.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Checkpoint, Checkpointer};
use crate::harness::error::Result;

/// Keeps every checkpoint of every thread in memory.
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
        self.threads
            .lock()
            .expect("checkpoint lock")
            .entry(checkpoint.thread_id.clone())
            .or_default()
            .push(checkpoint.clone());
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
