//! [`FileCheckpointer`]: one JSON file per checkpoint, written atomically.
//!
//! Why files and not SQLite: a checkpoint store needs exactly one atomic
//! operation — "this checkpoint is now the latest" — and `rename(2)` of a
//! fully written, synced temporary file gives it with no server, no C
//! library to build and no schema. A writer killed mid-write leaves only a
//! temporary file, which readers ignore; the previous checkpoint stays the
//! latest.

use std::io::Write;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{Checkpoint, Checkpointer};
use crate::harness::error::{Result, TinyAgentsError};

/// Stores checkpoints under a directory: `<dir>/<thread>/<seq>.json`.
///
/// ```
/// use tinyagents::graph::{Checkpoint, Checkpointer, FileCheckpointer, GraphState};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let dir = std::env::temp_dir().join(format!("tinyagents-doc-{}", std::process::id()));
/// let store = FileCheckpointer::open(&dir)?;
/// let cp = Checkpoint {
///     thread_id: "t1".into(), seq: 1, steps: 0, next: Some("start".into()),
///     state: GraphState::new(), interrupt: None, updates: vec![],
/// };
/// store.put(&cp).await?;
/// assert_eq!(store.latest("t1").await?, Some(cp));
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok::<(), tinyagents::TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct FileCheckpointer {
    dir: PathBuf,
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> TinyAgentsError {
    TinyAgentsError::config(format!("checkpoint store: cannot {what} `{}`: {e}", path.display()))
}

/// A thread id as a safe directory name (other characters hex-escaped).
fn dir_name(thread_id: &str) -> String {
    let mut out = String::with_capacity(thread_id.len());
    for b in thread_id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    if out.is_empty() {
        out.push('%');
    }
    out
}

impl FileCheckpointer {
    /// Opens (creating it if needed) a store under `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|e| io_error("create", &dir, e))?;
        Ok(Self { dir })
    }

    fn thread_dir(&self, thread_id: &str) -> PathBuf {
        self.dir.join(dir_name(thread_id))
    }

    fn write(&self, checkpoint: &Checkpoint) -> Result<()> {
        let dir = self.thread_dir(&checkpoint.thread_id);
        std::fs::create_dir_all(&dir).map_err(|e| io_error("create", &dir, e))?;
        let body = serde_json::to_vec(checkpoint)
            .map_err(|e| TinyAgentsError::config(format!("checkpoint store: cannot serialise a checkpoint: {e}")))?;
        let tmp = dir.join(format!(".tmp-{:020}-{}", checkpoint.seq, std::process::id()));
        let fin = dir.join(format!("{:020}.json", checkpoint.seq));
        let mut file = std::fs::File::create(&tmp).map_err(|e| io_error("create", &tmp, e))?;
        file.write_all(&body).map_err(|e| io_error("write", &tmp, e))?;
        file.sync_all().map_err(|e| io_error("sync", &tmp, e))?;
        drop(file);
        std::fs::rename(&tmp, &fin).map_err(|e| io_error("rename", &tmp, e))?;
        // Make the rename itself durable.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    fn read_latest(&self, thread_id: &str) -> Result<Option<Checkpoint>> {
        let dir = self.thread_dir(thread_id);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error("read", &dir, e)),
        };
        let mut seqs: Vec<(u64, PathBuf)> = entries
            .filter_map(|entry| {
                let path = entry.ok()?.path();
                let seq = path.file_name()?.to_str()?.strip_suffix(".json")?.parse().ok()?;
                Some((seq, path))
            })
            .collect();
        seqs.sort_by_key(|(seq, _)| std::cmp::Reverse(*seq));
        for (_, path) in seqs {
            let body = std::fs::read(&path).map_err(|e| io_error("read", &path, e))?;
            match serde_json::from_slice(&body) {
                Ok(checkpoint) => return Ok(Some(checkpoint)),
                // Only renamed, complete files are read; a damaged one (a disk fault) is skipped.
                Err(_) => continue,
            }
        }
        Ok(None)
    }
}

#[async_trait]
impl Checkpointer for FileCheckpointer {
    async fn put(&self, checkpoint: &Checkpoint) -> Result<()> {
        let this = self.clone();
        let checkpoint = checkpoint.clone();
        tokio::task::spawn_blocking(move || this.write(&checkpoint))
            .await
            .map_err(|e| TinyAgentsError::config(format!("checkpoint store: the writer task failed: {e}")))?
    }

    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>> {
        let this = self.clone();
        let thread_id = thread_id.to_owned();
        tokio::task::spawn_blocking(move || this.read_latest(&thread_id))
            .await
            .map_err(|e| TinyAgentsError::config(format!("checkpoint store: the reader task failed: {e}")))?
    }
}
