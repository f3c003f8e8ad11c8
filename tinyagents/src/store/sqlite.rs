//! [`SqliteStore`]: the embedded durable store for one machine.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

use super::sql::{self, SCHEMA};
use super::{admits, check_units, LedgerStore, LedgerTotals, Reservation, MAX_LEDGER_UNITS};
use crate::graph::{Checkpoint, Checkpointer};
use crate::harness::error::{Result, TinyAgentsError};

/// Checkpoints, pending approvals (they are checkpoints: see the
/// [module docs](super)) and ledgers in a SQLite file, shared by every
/// process of one machine that opens it (feature `sqlite`; the SQLite
/// library is compiled in, no system package is needed).
///
/// The same tables as [`PostgresStore`](super::PostgresStore) (the schema
/// is in `docs/scale-out.md`) and the same guarantees, tested by the same
/// suite: a checkpoint is never replaced, a missing or damaged latest row is
/// an error, never an older checkpoint. The file is in WAL mode with
/// `synchronous = FULL`, and every write is one `IMMEDIATE` transaction, so
/// a process killed mid-write (or a power cut) leaves the file at its last
/// committed checkpoint. Writers from several processes wait for each other
/// up to 10 seconds (`busy_timeout`), then fail; so do processes that open
/// one new file at the same moment.
///
/// Calls run on tokio's blocking pool (`spawn_blocking`), one connection
/// per store, so the async runtime is never blocked on the disk.
///
/// ```
/// use tinyagents::graph::{Checkpoint, Checkpointer, GraphState};
/// use tinyagents::store::SqliteStore;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let path = std::env::temp_dir().join(format!("tinyagents-doc-{}.db", std::process::id()));
/// let store = SqliteStore::open(&path).await?;
/// assert_eq!(store.path(), path);
/// let cp = Checkpoint {
///     thread_id: "t1".into(), seq: 1, steps: 0, next: Some("start".into()),
///     state: GraphState::new(), interrupt: None, updates: vec![],
/// };
/// store.put(&cp).await?;
/// assert_eq!(store.latest("t1").await?, Some(cp.clone()));
/// assert!(store.put(&cp).await.is_err(), "never replaced");
/// # drop(store); std::fs::remove_file(&path).ok();
/// # Ok::<(), tinyagents::TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub struct SqliteStore {
    #[educe(Debug(ignore))]
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    #[educe(Debug(ignore))]
    shown: String,
}

impl SqliteStore {
    /// The file this store is on, as given to [`SqliteStore::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens (creating it when missing) the store in the file at `path`.
    ///
    /// # Errors
    /// A `Config` error naming the file and the feature when it cannot be
    /// opened or is not a store.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let shown = format!("sqlite:{}", path.display());
        let (p, s) = (path.clone(), shown.clone());
        let conn = tokio::task::spawn_blocking(move || -> Result<Connection> {
            let failed = |e: rusqlite::Error| {
                let fix = if is_busy(&e) {
                    format!(
                        "another connection held the file locked for {} s; find the process that holds it \
                         (`fuser {}`) and open the store again",
                        BUSY_TIMEOUT.as_secs(),
                        p.display()
                    )
                } else {
                    "check the path and its permissions".to_owned()
                };
                TinyAgentsError::config(format!(
                    "store url `{s}` (feature `sqlite`): cannot open the store: {e}; {fix}"
                ))
            };
            let conn = Connection::open(&p).map_err(failed)?;
            conn.busy_timeout(BUSY_TIMEOUT).map_err(failed)?;
            let mode = until_not_busy(|| prepare(&conn)).map_err(failed)?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(TinyAgentsError::config(format!(
                    "store url `{s}` (feature `sqlite`): the file cannot use write-ahead logging (journal mode \
                     `{mode}`); put it on a local file system"
                )));
            }
            Ok(conn)
        })
        .await
        .map_err(|e| TinyAgentsError::config(format!("store `{shown}`: the opening task failed: {e}")))??;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path,
            shown,
        })
    }

    /// Runs `f` on the connection, on the blocking pool.
    async fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection, &str) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let conn = self.conn.clone();
        let shown = self.shown.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut conn, &shown)
        })
        .await
        .map_err(|e| TinyAgentsError::config(format!("store `{}`: the store task failed: {e}", self.shown)))?
    }

    /// Every checkpoint of a thread, oldest first, each checked as
    /// [`latest`](Checkpointer::latest) checks one.
    ///
    /// # Errors
    /// When the file cannot be read, or naming the first damaged checkpoint.
    pub async fn history(&self, thread_id: &str) -> Result<Vec<Checkpoint>> {
        let thread = thread_id.to_owned();
        self.with(move |conn, shown| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, format_version, body, sha256 FROM tinyagents_checkpoints WHERE thread_id = ?1 ORDER BY seq",
                )
                .map_err(|e| failed(shown, "reading a thread's history", e))?;
            let rows = stmt
                .query_map(params![thread], |r| {
                    Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?, r.get::<_, String>(2)?, r.get::<_, String>(3)?))
                })
                .map_err(|e| failed(shown, "reading a thread's history", e))?;
            let mut out = Vec::new();
            for row in rows {
                let (seq, version, body, digest) = row.map_err(|e| failed(shown, "reading a thread's history", e))?;
                out.push(sql::decode(shown, &thread, seq, version, &body, &digest)?);
            }
            Ok(out)
        })
        .await
    }

    /// Deletes every checkpoint of a thread but the newest `keep` (at least
    /// one is always kept); returns how many went.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub async fn prune(&self, thread_id: &str, keep: usize) -> Result<u64> {
        let thread = thread_id.to_owned();
        let offset = i64::try_from(keep.max(1) - 1).unwrap_or(i64::MAX);
        self.with(move |conn, shown| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| failed(shown, "pruning a thread", e))?;
            let n = tx
                .execute(
                    "DELETE FROM tinyagents_checkpoints WHERE thread_id = ?1 AND seq < (
                        SELECT seq FROM tinyagents_checkpoints WHERE thread_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
                    params![thread, offset],
                )
                .map_err(|e| failed(shown, "pruning a thread", e))?;
            tx.commit().map_err(|e| failed(shown, "pruning a thread", e))?;
            Ok(n as u64)
        })
        .await
    }
}

/// How long a statement waits for another process's lock before it fails.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Puts a newly opened file in WAL mode with `synchronous = FULL` and
/// creates the tables when missing; returns the journal mode the file is in.
fn prepare(conn: &Connection) -> rusqlite::Result<String> {
    let mode: String = conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Ok(mode);
    }
    conn.execute_batch("PRAGMA synchronous = FULL;")?;
    conn.execute_batch(&format!("BEGIN IMMEDIATE; {SCHEMA} COMMIT;"))
        .inspect_err(|_| {
            let _ = conn.execute_batch("ROLLBACK;");
        })?;
    Ok(mode)
}

/// Runs `step` again while SQLite answers "busy" or "locked", for up to
/// [`BUSY_TIMEOUT`] in all.
///
/// The busy timeout covers a statement that waits for a lock, but not a
/// connection that holds a read lock and needs a write lock another
/// connection also wants: SQLite fails one of them at once rather than let
/// both wait forever. Switching a fresh file to WAL is such a step, so
/// processes that open one new file together would otherwise see "database
/// is locked" although nothing is wrong; the step is safe to repeat whole.
fn until_not_busy<T>(mut step: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        match step() {
            Err(e) if is_busy(&e) && std::time::Instant::now() + pause < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Whether SQLite refused because another connection holds a lock.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

fn failed(shown: &str, what: &str, e: rusqlite::Error) -> TinyAgentsError {
    let e = crate::harness::secrets::redactor().redact(&e.to_string()).into_owned();
    TinyAgentsError::config(format!("store `{shown}` (SQLite): {what} failed: {e}"))
}

fn count(shown: &str, key: &str, name: &str, n: i64) -> Result<u64> {
    u64::try_from(n).map_err(|_| {
        TinyAgentsError::config(format!(
            "store `{shown}` (SQLite): ledger `{key}` holds {name} = {n}, not a count; fix or delete its row"
        ))
    })
}

/// The key's totals in a transaction, zeros when missing or expired.
fn read_totals(tx: &rusqlite::Transaction<'_>, shown: &str, key: &str, now: i64) -> Result<LedgerTotals> {
    let row: Option<(i64, i64, i64)> = tx
        .query_row(
            "SELECT spent, held, expires_at FROM tinyagents_ledger WHERE key = ?1",
            params![key],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(|e| failed(shown, "a ledger read", e))?;
    match row {
        Some((spent, held, expires)) if expires > now => Ok(LedgerTotals {
            spent: count(shown, key, "spent", spent)?,
            held: count(shown, key, "held", held)?,
        }),
        _ => Ok(LedgerTotals::default()),
    }
}

fn write_totals(tx: &rusqlite::Transaction<'_>, shown: &str, key: &str, t: LedgerTotals, expires: i64) -> Result<()> {
    tx.execute(
        "INSERT INTO tinyagents_ledger (key, spent, held, expires_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (key) DO UPDATE SET spent = excluded.spent, held = excluded.held, expires_at = excluded.expires_at",
        params![key, t.spent as i64, t.held as i64, expires],
    )
    .map_err(|e| failed(shown, "a ledger write", e))?;
    Ok(())
}

#[async_trait]
impl Checkpointer for SqliteStore {
    async fn put(&self, checkpoint: &Checkpoint) -> Result<()> {
        let (seq, version, body, digest) = sql::encode(checkpoint)?;
        let checkpoint = checkpoint.clone();
        self.with(move |conn, shown| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| failed(shown, "storing a checkpoint", e))?;
            let head: Option<i64> = tx
                .query_row(
                    "SELECT latest_seq FROM tinyagents_threads WHERE thread_id = ?1",
                    params![checkpoint.thread_id],
                    |r| r.get(0),
                )
                .optional()
                .map_err(|e| failed(shown, "storing a checkpoint", e))?;
            if head.is_some_and(|h| h >= seq) {
                return Err(sql::exists(shown, &checkpoint));
            }
            tx.execute(
                "INSERT INTO tinyagents_threads (thread_id, latest_seq) VALUES (?1, ?2)
                 ON CONFLICT (thread_id) DO UPDATE SET latest_seq = excluded.latest_seq",
                params![checkpoint.thread_id, seq],
            )
            .map_err(|e| failed(shown, "storing a checkpoint", e))?;
            tx.execute(
                "INSERT INTO tinyagents_checkpoints (thread_id, seq, format_version, body, sha256) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![checkpoint.thread_id, seq, version, body, digest],
            )
            .map_err(|e| failed(shown, "storing a checkpoint", e))?;
            tx.commit().map_err(|e| failed(shown, "storing a checkpoint", e))
        })
        .await
    }

    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>> {
        let thread = thread_id.to_owned();
        self.with(move |conn, shown| {
            let row: Option<(i64, Option<i64>, Option<String>, Option<String>)> = conn
                .query_row(
                    "SELECT t.latest_seq, c.format_version, c.body, c.sha256 FROM tinyagents_threads t
                     LEFT JOIN tinyagents_checkpoints c ON c.thread_id = t.thread_id AND c.seq = t.latest_seq
                     WHERE t.thread_id = ?1",
                    params![thread],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                .optional()
                .map_err(|e| failed(shown, "reading a checkpoint", e))?;
            let Some((seq, version, body, digest)) = row else {
                return Ok(None);
            };
            let (Some(version), Some(body), Some(digest)) = (version, body, digest) else {
                return Err(TinyAgentsError::config(format!(
                    "checkpoint store `{shown}`: thread {:?} was last written at checkpoint {seq}, and that row is \
                     missing; no older checkpoint is used in its place (a resume from an older one would run \
                     finished steps again): restore the row, or set the thread's `latest_seq` back on purpose",
                    crate::harness::shorten::shorten(&thread, 80)
                )));
            };
            sql::decode(shown, &thread, seq, version, &body, &digest).map(Some)
        })
        .await
    }
}

#[async_trait]
impl LedgerStore for SqliteStore {
    async fn reserve(&self, key: &str, cap: u64, amount: u64, ttl: Duration) -> Result<Reservation> {
        check_units(key, &[("cap", cap), ("amount", amount)])?;
        let key = key.to_owned();
        let ttl = sql::ttl_ms(ttl);
        self.with(move |conn, shown| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| failed(shown, "a ledger reservation", e))?;
            let now = sql::now_ms();
            let mut t = read_totals(&tx, shown, &key, now)?;
            if !admits(t, cap, amount) {
                return Ok(Reservation::Refused(t));
            }
            t.held += amount;
            write_totals(&tx, shown, &key, t, now.saturating_add(ttl))?;
            tx.commit().map_err(|e| failed(shown, "a ledger reservation", e))?;
            Ok(Reservation::Admitted(t))
        })
        .await
    }

    async fn settle(&self, key: &str, reserved: u64, actual: u64, ttl: Duration) -> Result<LedgerTotals> {
        check_units(key, &[("reserved", reserved), ("actual", actual)])?;
        let key = key.to_owned();
        let ttl = sql::ttl_ms(ttl);
        self.with(move |conn, shown| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| failed(shown, "a ledger settlement", e))?;
            let now = sql::now_ms();
            let mut t = read_totals(&tx, shown, &key, now)?;
            t.held = t.held.saturating_sub(reserved);
            t.spent = t.spent.saturating_add(actual).min(MAX_LEDGER_UNITS);
            write_totals(&tx, shown, &key, t, now.saturating_add(ttl))?;
            tx.commit().map_err(|e| failed(shown, "a ledger settlement", e))?;
            Ok(t)
        })
        .await
    }

    async fn totals(&self, key: &str) -> Result<LedgerTotals> {
        let key = key.to_owned();
        self.with(move |conn, shown| {
            let tx = conn
                .transaction_with_behavior(TransactionBehavior::Deferred)
                .map_err(|e| failed(shown, "a ledger read", e))?;
            read_totals(&tx, shown, &key, sql::now_ms())
        })
        .await
    }
}
