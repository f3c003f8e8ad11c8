//! [`FileCheckpointer`]: one file per checkpoint, written atomically, never
//! replaced, checked on every read.
//!
//! Why files, next to [`SqliteStore`](crate::store) (feature `sqlite`, the
//! embedded durable default, which also keeps ledgers): a checkpoint store
//! needs exactly one atomic operation — "this checkpoint now exists, whole" —
//! and linking a fully written, synced temporary file to its final name gives
//! it with no server, no C library to build (the `sqlite` feature compiles
//! SQLite) and no schema, in files a person can read, copy and back up one by
//! one. `link(2)` (unlike `rename(2)`) fails when the name exists, so a second
//! write of a sequence number is refused rather than replacing the first. A
//! writer killed mid-write leaves only a temporary file, which readers ignore.
//!
//! # File format (version 2)
//!
//! ```text
//! tinyagents-checkpoint v2 bytes=<n> sha256=<64 lowercase hex digits>\n
//! <n bytes: the checkpoint as JSON>
//! ```
//!
//! The header line carries the format version, the body's length and its
//! SHA-256, so a damaged file (a disk fault, a hand edit, a truncation) is
//! detected and reported naming the file, never read as another state and
//! never skipped for an older checkpoint. A file of a newer version is an
//! error naming both versions. Files without the header (version 1, written
//! by earlier releases: the bare JSON) are still read.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use sha2::{Digest, Sha256};

use super::{Checkpoint, Checkpointer};
use crate::harness::error::{Result, TinyAgentsError};

/// The format version this build writes, and the newest it reads.
pub const CHECKPOINT_FORMAT_VERSION: u32 = 2;

const MAGIC: &str = "tinyagents-checkpoint";

/// The longest readable prefix of a thread's directory name.
const PREFIX_LEN: usize = 32;

/// Stores checkpoints under a directory: `<dir>/<thread>/<seq>.ckpt`, where
/// `<thread>` is a readable prefix of the id (lowercase, at most 32
/// characters) followed by the SHA-256 of the id in lowercase hex. Ids that
/// differ only in case, or in characters a file system cannot hold, get
/// different directories on every file system, and every file names its
/// thread, which is checked on reading.
///
/// Every checkpoint stores its state and the updates made since the previous
/// checkpoint (not the whole log), so the disk used grows linearly with the
/// run (for a state of bounded size).
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
/// assert_eq!(store.latest("t1").await?, Some(cp.clone()));
/// // A checkpoint is never replaced.
/// assert!(store.put(&cp).await.is_err());
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

fn damaged(path: &Path, why: impl std::fmt::Display) -> TinyAgentsError {
    TinyAgentsError::config(format!(
        "checkpoint store: the checkpoint file `{}` is damaged ({why}); it is not read, and no older \
         checkpoint is used in its place (a resume from an older one would run finished steps again): \
         restore the file from a backup, or move it away to resume from the one before it on purpose",
        path.display()
    ))
}

/// A thread id as a directory name: a readable, lowercase prefix, then the
/// SHA-256 of the id's bytes in lowercase hex (collision-free, the same on
/// case-insensitive file systems, at most 97 bytes long).
fn dir_name(thread_id: &str) -> String {
    let mut out: String = thread_id
        .chars()
        .take(PREFIX_LEN)
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '_',
        })
        .collect();
    out.push('-');
    out.push_str(&hex(&Sha256::digest(thread_id.as_bytes())));
    out
}

/// The directory name of format version 1 (case-sensitive, unbounded): only
/// looked for, to refuse rather than miss the checkpoints it holds.
fn legacy_dir_name(thread_id: &str) -> String {
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

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sequence number a file name stands for: `<20 digits>.ckpt`
/// (version 2) or `<20 digits>.json` (version 1).
fn seq_of(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".ckpt").or_else(|| name.strip_suffix(".json"))?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// The file body of a checkpoint: the header line, then the JSON.
fn encode(checkpoint: &Checkpoint) -> Result<Vec<u8>> {
    super::storable(checkpoint)?;
    let body = serde_json::to_vec(checkpoint)
        .map_err(|e| TinyAgentsError::config(format!("checkpoint store: cannot serialise a checkpoint: {e}")))?;
    let mut out = format!(
        "{MAGIC} v{CHECKPOINT_FORMAT_VERSION} bytes={} sha256={}\n",
        body.len(),
        hex(&Sha256::digest(&body))
    )
    .into_bytes();
    out.extend_from_slice(&body);
    Ok(out)
}

/// Reads a checkpoint file, checking everything it says about itself.
fn decode(path: &Path, bytes: &[u8], thread_id: &str, seq: u64) -> Result<Checkpoint> {
    let json = if bytes.first() == Some(&b'{') {
        // Version 1: the bare JSON, no digest (its damage shows as bad JSON).
        bytes
    } else {
        let end = bytes
            .iter()
            .take(256)
            .position(|&b| b == b'\n')
            .ok_or_else(|| damaged(path, "no header line"))?;
        let header = std::str::from_utf8(&bytes[..end]).map_err(|_| damaged(path, "the header is not text"))?;
        let body = &bytes[end + 1..];
        let mut fields = header.split(' ');
        if fields.next() != Some(MAGIC) {
            return Err(damaged(path, format_args!("the header does not start with `{MAGIC}`")));
        }
        let version: u32 = fields
            .next()
            .and_then(|v| v.strip_prefix('v'))
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| damaged(path, "the header has no format version"))?;
        if version > CHECKPOINT_FORMAT_VERSION {
            return Err(TinyAgentsError::config(format!(
                "checkpoint store: the checkpoint file `{}` has format version {version}, newer than version \
                 {CHECKPOINT_FORMAT_VERSION}, the newest this build of tinyagents reads; it is left untouched: \
                 resume this thread with the newer release that wrote it",
                path.display()
            )));
        }
        if version < 2 {
            return Err(damaged(
                path,
                format_args!("format version {version} has no header line"),
            ));
        }
        let (mut len, mut digest) = (None, None);
        for field in fields {
            if let Some(n) = field.strip_prefix("bytes=") {
                len = n.parse::<usize>().ok();
            } else if let Some(d) = field.strip_prefix("sha256=") {
                digest = Some(d);
            }
        }
        let (Some(len), Some(digest)) = (len, digest) else {
            return Err(damaged(path, "the header lacks its length or digest"));
        };
        if body.len() != len {
            return Err(damaged(
                path,
                format_args!("the body is {} bytes, the header says {len}", body.len()),
            ));
        }
        if hex(&Sha256::digest(body)) != digest {
            return Err(damaged(path, "the body does not match its SHA-256"));
        }
        body
    };
    decode_json(json, thread_id, seq).map_err(|why| damaged(path, why))
}

/// A checkpoint from its JSON body, checking everything it says about
/// itself: whole JSON, a checkpoint, no field this version does not know,
/// the expected thread and sequence number. `Err` says why not (the caller
/// names the place it read).
pub(crate) fn decode_json(json: &[u8], thread_id: &str, seq: u64) -> std::result::Result<Checkpoint, String> {
    let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| format!("invalid JSON: {e}"))?;
    let checkpoint: Checkpoint = serde_json::from_value(value.clone()).map_err(|e| format!("not a checkpoint: {e}"))?;
    // Nothing may be dropped: a field this version does not know is refused.
    if let (serde_json::Value::Object(read), Ok(serde_json::Value::Object(known))) =
        (&value, serde_json::to_value(&checkpoint))
    {
        let unknown: Vec<&str> = read
            .keys()
            .filter(|k| !known.contains_key(*k))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            return Err(format!(
                "fields this version does not know: {}; a newer release may have written them",
                unknown.join(", ")
            ));
        }
    }
    if checkpoint.thread_id != thread_id {
        return Err(format!(
            "it belongs to thread {:?}, not {:?}",
            crate::harness::shorten::shorten(&checkpoint.thread_id, 80),
            crate::harness::shorten::shorten(thread_id, 80)
        ));
    }
    if checkpoint.seq != seq {
        return Err(format!("it holds checkpoint {}, its name says {seq}", checkpoint.seq));
    }
    if checkpoint.seq > super::MAX_CHECKPOINT_SEQ {
        return Err(format!(
            "its sequence number {} is past the last one a store keeps ({})",
            checkpoint.seq,
            super::MAX_CHECKPOINT_SEQ
        ));
    }
    Ok(checkpoint)
}

impl FileCheckpointer {
    /// Opens (creating it if needed) a store under `dir`.
    ///
    /// # Errors
    /// A [`Config`](TinyAgentsError::Config) error when the directory cannot be created.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        std::fs::create_dir_all(&dir).map_err(|e| io_error("create", &dir, e))?;
        Ok(Self { dir })
    }

    /// The directory holding a thread's checkpoints.
    pub fn thread_dir(&self, thread_id: &str) -> PathBuf {
        self.dir.join(dir_name(thread_id))
    }

    /// Refuses to work on a thread whose checkpoints sit in the layout of
    /// format version 1 (they would be missed, and the run started over).
    fn check_layout(&self, thread_id: &str) -> Result<()> {
        let legacy = self.dir.join(legacy_dir_name(thread_id));
        if legacy.is_dir() && !self.thread_dir(thread_id).exists() {
            return Err(TinyAgentsError::config(format!(
                "checkpoint store: `{}` holds checkpoints in the directory layout of format version 1 (or of a \
                 thread whose id differs only in case); they are not read, so the run does not start over: move \
                 that directory to `{}` if it belongs to thread {:?}",
                legacy.display(),
                self.thread_dir(thread_id).display(),
                crate::harness::shorten::shorten(thread_id, 80)
            )));
        }
        Ok(())
    }

    fn write(&self, checkpoint: &Checkpoint) -> Result<()> {
        static TMP: AtomicU64 = AtomicU64::new(0);
        self.check_layout(&checkpoint.thread_id)?;
        let dir = self.thread_dir(&checkpoint.thread_id);
        std::fs::create_dir_all(&dir).map_err(|e| io_error("create", &dir, e))?;
        let body = encode(checkpoint)?;
        let fin = dir.join(format!("{:020}.ckpt", checkpoint.seq));
        let legacy = dir.join(format!("{:020}.json", checkpoint.seq));
        let exists = |path: &Path| {
            TinyAgentsError::conflict(format!(
                "checkpoint store: checkpoint {} of thread {:?} already exists (`{}`); checkpoints are never \
                 replaced: another run of this thread wrote first, or the thread was restarted from an older \
                 checkpoint. Reload the thread's latest checkpoint and go on from it (do not retry the same \
                 write), or use a new thread id",
                checkpoint.seq,
                crate::harness::shorten::shorten(&checkpoint.thread_id, 80),
                path.display()
            ))
        };
        if legacy.exists() {
            return Err(exists(&legacy));
        }
        let tmp = dir.join(format!(
            ".tmp-{:020}-{}-{}",
            checkpoint.seq,
            std::process::id(),
            TMP.fetch_add(1, Ordering::Relaxed)
        ));
        let mut file = std::fs::File::create(&tmp).map_err(|e| io_error("create", &tmp, e))?;
        let written = file
            .write_all(&body)
            .and_then(|()| file.sync_all())
            .map_err(|e| io_error("write", &tmp, e));
        drop(file);
        // `link` fails when the final name exists: a checkpoint is never replaced.
        let linked = written.and_then(|()| match std::fs::hard_link(&tmp, &fin) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(exists(&fin)),
            Err(e) => Err(io_error("link", &fin, e)),
        });
        let _ = std::fs::remove_file(&tmp);
        linked?;
        // Make the new name itself durable.
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(())
    }

    /// Every complete checkpoint file of a thread: (seq, path), oldest first.
    fn files(&self, thread_id: &str) -> Result<Vec<(u64, PathBuf)>> {
        self.check_layout(thread_id)?;
        let dir = self.thread_dir(thread_id);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io_error("read", &dir, e)),
        };
        let mut files = Vec::new();
        for entry in entries {
            let path = entry.map_err(|e| io_error("read", &dir, e))?.path();
            // Temporary files (a write in progress, or one killed) are never read.
            if let Some(seq) = path.file_name().and_then(|n| n.to_str()).and_then(seq_of) {
                files.push((seq, path));
            }
        }
        files.sort();
        if let Some(w) = files.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(damaged(
                &w[1].1,
                format_args!("checkpoint {} is also stored as `{}`", w[0].0, w[0].1.display()),
            ));
        }
        Ok(files)
    }

    fn read(path: &Path, thread_id: &str, seq: u64) -> Result<Checkpoint> {
        let bytes = std::fs::read(path).map_err(|e| io_error("read", path, e))?;
        decode(path, &bytes, thread_id, seq)
    }

    fn read_latest(&self, thread_id: &str) -> Result<Option<Checkpoint>> {
        match self.files(thread_id)?.pop() {
            Some((seq, path)) => Self::read(&path, thread_id, seq).map(Some),
            None => Ok(None),
        }
    }

    fn read_history(&self, thread_id: &str) -> Result<Vec<Checkpoint>> {
        self.files(thread_id)?
            .into_iter()
            .map(|(seq, path)| Self::read(&path, thread_id, seq))
            .collect()
    }

    /// Every checkpoint of a thread, oldest first, each checked as
    /// [`latest`](Checkpointer::latest) checks one. The thread's whole record
    /// of explicit updates is their `updates`, concatenated in this order.
    ///
    /// # Errors
    /// A [`Config`](TinyAgentsError::Config) error naming the first damaged
    /// or unreadable file.
    pub async fn history(&self, thread_id: &str) -> Result<Vec<Checkpoint>> {
        let this = self.clone();
        let thread_id = thread_id.to_owned();
        tokio::task::spawn_blocking(move || this.read_history(&thread_id))
            .await
            .map_err(|e| TinyAgentsError::config(format!("checkpoint store: the reader task failed: {e}")))?
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directory_names_are_bounded_lowercase_and_distinct() {
        let ids = ["T1", "t1", "", "a/b", "a%2fb", "..", "é", &"x".repeat(10_000)];
        let names: Vec<String> = ids.iter().map(|id| dir_name(id)).collect();
        for (id, name) in ids.iter().zip(&names) {
            assert!(name.len() <= PREFIX_LEN + 1 + 64, "{name}");
            assert_eq!(*name, name.to_lowercase(), "{id:?}");
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{name}"
            );
        }
        let unique: std::collections::HashSet<String> = names.iter().map(|n| n.to_lowercase()).collect();
        assert_eq!(unique.len(), names.len(), "distinct even ignoring case");
        assert!(names[0].starts_with("t1-") && names[1].starts_with("t1-"));
    }

    #[test]
    fn only_whole_sequence_names_count() {
        assert_eq!(seq_of("00000000000000000007.ckpt"), Some(7));
        assert_eq!(seq_of("00000000000000000007.json"), Some(7));
        assert_eq!(seq_of(".tmp-00000000000000000007-1-0"), None);
        assert_eq!(seq_of("7.ckpt"), None);
        assert_eq!(seq_of("0000000000000000000x.ckpt"), None);
    }
}
