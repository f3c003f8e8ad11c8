//! What the SQL stores share: the schema (the same tables on PostgreSQL and
//! SQLite) and the checks on a checkpoint row (which the Redis store applies
//! to its checkpoint records too).
//!
//! ```sql
//! -- one row per checkpoint, never updated
//! CREATE TABLE tinyagents_checkpoints (
//!     thread_id      TEXT    NOT NULL,
//!     seq            BIGINT  NOT NULL,   -- 1, 2, … per thread
//!     format_version INTEGER NOT NULL,   -- CHECKPOINT_FORMAT_VERSION of the writer
//!     body           TEXT    NOT NULL,   -- the checkpoint as JSON
//!     sha256         TEXT    NOT NULL,   -- of body, lowercase hex
//!     PRIMARY KEY (thread_id, seq)
//! );
//! -- the newest sequence number of each thread: a put moves it forward or fails
//! CREATE TABLE tinyagents_threads (thread_id TEXT PRIMARY KEY, latest_seq BIGINT NOT NULL);
//! -- budgets and counters
//! CREATE TABLE tinyagents_ledger (
//!     key TEXT PRIMARY KEY, spent BIGINT NOT NULL, held BIGINT NOT NULL,
//!     expires_at BIGINT NOT NULL   -- milliseconds since the Unix epoch
//! );
//! ```

#![cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]

use sha2::{Digest, Sha256};

use crate::graph::checkpoint::{decode_json, hex};
use crate::graph::{Checkpoint, CHECKPOINT_FORMAT_VERSION};
use crate::harness::error::{Result, TinyAgentsError};

/// The tables, in SQL both engines read.
pub(super) const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tinyagents_checkpoints (
    thread_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    format_version INTEGER NOT NULL,
    body TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    PRIMARY KEY (thread_id, seq)
);
CREATE TABLE IF NOT EXISTS tinyagents_threads (
    thread_id TEXT PRIMARY KEY,
    latest_seq BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS tinyagents_ledger (
    key TEXT PRIMARY KEY,
    spent BIGINT NOT NULL,
    held BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
";

/// A checkpoint as a row: (seq, format_version, body, sha256).
pub(super) fn encode(checkpoint: &Checkpoint) -> Result<(i64, i32, String, String)> {
    let seq = crate::graph::checkpoint::storable(checkpoint)?;
    let body = serde_json::to_string(checkpoint)
        .map_err(|e| TinyAgentsError::config(format!("checkpoint store: cannot serialise a checkpoint: {e}")))?;
    let digest = hex(&Sha256::digest(body.as_bytes()));
    Ok((seq, CHECKPOINT_FORMAT_VERSION as i32, body, digest))
}

/// The error for a `put` that would not move the thread forward: a lost race (`Conflict`).
pub(super) fn exists(store: &str, checkpoint: &Checkpoint) -> TinyAgentsError {
    TinyAgentsError::conflict(format!(
        "checkpoint store `{store}`: checkpoint {} of thread {:?} cannot be stored: the thread already has it or a \
         later one; checkpoints are never replaced: another run of this thread wrote first, or it was restarted \
         from an older checkpoint. Reload the thread's latest checkpoint and go on from it (do not retry the same \
         write), or use a new thread id",
        checkpoint.seq,
        crate::harness::shorten::shorten(&checkpoint.thread_id, 80)
    ))
}

/// A checkpoint from its row, checking everything it says about itself.
pub(super) fn decode(
    store: &str,
    thread_id: &str,
    seq: i64,
    version: i64,
    body: &str,
    digest: &str,
) -> Result<Checkpoint> {
    let damaged = |why: String| {
        TinyAgentsError::config(format!(
            "checkpoint store `{store}`: checkpoint {seq} of thread {:?} is damaged ({why}); it is not read, and no \
             older checkpoint is used in its place (a resume from an older one would run finished steps again): \
             restore it from a backup, or delete it to resume from the one before it on purpose",
            crate::harness::shorten::shorten(thread_id, 80)
        ))
    };
    if version > i64::from(CHECKPOINT_FORMAT_VERSION) {
        return Err(TinyAgentsError::config(format!(
            "checkpoint store `{store}`: checkpoint {seq} of thread {:?} has format version {version}, newer than \
             version {CHECKPOINT_FORMAT_VERSION}, the newest this build of tinyagents reads; it is left untouched: \
             resume this thread with the newer release that wrote it",
            crate::harness::shorten::shorten(thread_id, 80)
        )));
    }
    if version < 2 {
        return Err(damaged(format!(
            "format version {version} is not one a shared store writes"
        )));
    }
    if hex(&Sha256::digest(body.as_bytes())) != digest {
        return Err(damaged("the body does not match its SHA-256".to_owned()));
    }
    let seq = u64::try_from(seq).map_err(|_| damaged(format!("negative sequence number {seq}")))?;
    decode_json(body.as_bytes(), thread_id, seq).map_err(damaged)
}

/// Milliseconds since the Unix epoch, now.
#[cfg(feature = "sqlite")]
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A ttl in milliseconds, at least 1.
pub(super) fn ttl_ms(ttl: std::time::Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).clamp(1, 1 << 53)
}
