//! [`PostgresStore`]: checkpoints (and so pending approvals) and ledgers on
//! a PostgreSQL server.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::error::Severity;
use tokio_postgres::{Client, NoTls, Statement};

use super::sql::{self, SCHEMA};
use super::{check_units, LedgerStore, LedgerTotals, Reservation};
use crate::graph::{Checkpoint, Checkpointer};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::secrets::{mask_url as redact, redactor};

/// The ledger's two operations, each one function call (one statement, one
/// round trip) that locks the key's row for the rest of its transaction.
const FUNCTIONS: &str = "
CREATE OR REPLACE FUNCTION tinyagents_ledger_reserve(k TEXT, cap BIGINT, amount BIGINT, ttl BIGINT)
RETURNS TABLE (o_admitted BOOLEAN, o_spent BIGINT, o_held BIGINT) LANGUAGE plpgsql AS $$
DECLARE
    now_ms BIGINT := (extract(epoch from clock_timestamp()) * 1000)::BIGINT;
    s BIGINT; h BIGINT; e BIGINT;
BEGIN
    INSERT INTO tinyagents_ledger (key, spent, held, expires_at) VALUES (k, 0, 0, now_ms + ttl)
        ON CONFLICT (key) DO NOTHING;
    SELECT l.spent, l.held, l.expires_at INTO s, h, e FROM tinyagents_ledger l WHERE l.key = k FOR UPDATE;
    IF e <= now_ms THEN s := 0; h := 0; END IF;
    IF s + h >= cap OR s + h + amount > cap THEN
        UPDATE tinyagents_ledger SET spent = s, held = h WHERE key = k;
        RETURN QUERY SELECT false, s, h;
        RETURN;
    END IF;
    h := h + amount;
    UPDATE tinyagents_ledger SET spent = s, held = h, expires_at = now_ms + ttl WHERE key = k;
    RETURN QUERY SELECT true, s, h;
END $$;
CREATE OR REPLACE FUNCTION tinyagents_ledger_settle(k TEXT, reserved BIGINT, actual BIGINT, ttl BIGINT)
RETURNS TABLE (o_spent BIGINT, o_held BIGINT) LANGUAGE plpgsql AS $$
DECLARE
    now_ms BIGINT := (extract(epoch from clock_timestamp()) * 1000)::BIGINT;
BEGIN
    INSERT INTO tinyagents_ledger (key, spent, held, expires_at) VALUES (k, 0, 0, now_ms + ttl)
        ON CONFLICT (key) DO NOTHING;
    RETURN QUERY UPDATE tinyagents_ledger l SET
        held = CASE WHEN l.expires_at <= now_ms THEN 0 ELSE GREATEST(l.held - reserved, 0) END,
        spent = LEAST(CASE WHEN l.expires_at <= now_ms THEN 0 ELSE l.spent END + actual, 9007199254740992),
        expires_at = now_ms + ttl
    WHERE l.key = k RETURNING l.spent, l.held;
END $$;
";

/// A put: moves the thread's latest sequence number forward (or matches
/// nothing) and inserts the row, in one statement, so one transaction.
const PUT: &str = "
WITH head AS (
    INSERT INTO tinyagents_threads AS t (thread_id, latest_seq) VALUES ($1, $2)
    ON CONFLICT (thread_id) DO UPDATE SET latest_seq = EXCLUDED.latest_seq
    WHERE t.latest_seq < EXCLUDED.latest_seq
    RETURNING t.thread_id
)
INSERT INTO tinyagents_checkpoints (thread_id, seq, format_version, body, sha256)
SELECT thread_id, $2, $3, $4, $5 FROM head";

/// The thread's latest sequence number and its row (a missing row is damage).
const LATEST: &str = "
SELECT t.latest_seq, c.format_version::BIGINT, c.body, c.sha256
FROM tinyagents_threads t
LEFT JOIN tinyagents_checkpoints c ON c.thread_id = t.thread_id AND c.seq = t.latest_seq
WHERE t.thread_id = $1";

const HISTORY: &str = "
SELECT seq, format_version::BIGINT, body, sha256 FROM tinyagents_checkpoints WHERE thread_id = $1 ORDER BY seq";

const PRUNE: &str = "
DELETE FROM tinyagents_checkpoints WHERE thread_id = $1 AND seq < (
    SELECT seq FROM tinyagents_checkpoints WHERE thread_id = $1 ORDER BY seq DESC OFFSET $2 LIMIT 1)";

const TOTALS: &str = "
SELECT spent, held FROM tinyagents_ledger
WHERE key = $1 AND expires_at > (extract(epoch from clock_timestamp()) * 1000)::BIGINT";

const TIMEOUT: Duration = Duration::from_secs(10);

/// Checkpoints, pending approvals (they are checkpoints: see the
/// [module docs](super)) and ledgers on a PostgreSQL server, shared by every
/// process connected to it (feature `postgres`).
///
/// * **Checkpoints**: one row per checkpoint in `tinyagents_checkpoints`
///   (the schema is in `docs/scale-out.md`), with its format version and
///   the SHA-256 of its body. A `put` is one statement — one transaction —
///   that moves the thread's latest sequence number forward and inserts the
///   row, or does neither: two processes writing the same sequence number
///   (or an older one) cannot both succeed, so a person's decision is spent
///   once. `latest` reads the row the thread's head names, and a missing or
///   damaged row is an error, never an older checkpoint.
/// * **Ledgers** ([`LedgerStore`]): one row per key; a reservation or
///   settlement is one call of a PL/pgSQL function that locks the row.
///
/// Every statement is prepared when the store connects, so each operation is
/// one round trip; each is bounded by a 10-second timeout. The tables and
/// functions are created when missing (under an advisory lock, so workers
/// starting together do not race).
///
/// ```no_run
/// use tinyagents::graph::Checkpointer;
/// use tinyagents::store::PostgresStore;
///
/// # async fn demo() -> tinyagents::Result<()> {
/// let store = PostgresStore::connect("postgres://agent@127.0.0.1:5432/agents").await?;
/// let latest = store.latest("thread-1").await?;
/// # let _ = latest; Ok(()) }
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct PostgresStore {
    /// The URL as given (with its password: never displayed).
    #[educe(Debug(ignore))]
    config: tokio_postgres::Config,
    /// The URL with its password hidden.
    url: String,
    /// The connection and its statements; replaced when the server closed it.
    #[educe(Debug(ignore))]
    conn: std::sync::Mutex<Arc<Conn>>,
    /// Held while reconnecting, so one task reconnects.
    #[educe(Debug(ignore))]
    reconnecting: tokio::sync::Mutex<()>,
}

/// One connection and the statements prepared on it.
struct Conn {
    client: Client,
    /// Set when an operation found the connection closed.
    broken: std::sync::atomic::AtomicBool,
    put: Statement,
    latest: Statement,
    history: Statement,
    prune: Statement,
    reserve: Statement,
    settle: Statement,
    totals: Statement,
}

impl Conn {
    /// Whether the connection is usable: open, and no operation found it broken.
    fn live(&self) -> bool {
        !self.client.is_closed() && !self.broken.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Connects, creates the tables and functions when missing, prepares every statement.
    async fn open(config: &tokio_postgres::Config, shown: &str) -> Result<Self> {
        let unreachable = |e: tokio_postgres::Error| {
            TinyAgentsError::config(format!(
                "store url `{shown}` (feature `postgres`): cannot reach the PostgreSQL server: {e}; start it, or fix the url"
            ))
        };
        let (client, connection) = bounded(shown, config.connect(NoTls)).await?.map_err(unreachable)?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                let error = redactor().redact(&e.to_string()).into_owned();
                tracing::warn!(%error, "the PostgreSQL store's connection ended");
            }
        });
        let setup = format!("BEGIN; SELECT pg_advisory_xact_lock(7305402871183511600); {SCHEMA} {FUNCTIONS} COMMIT;");
        bounded(shown, client.batch_execute(&setup)).await?.map_err(|e| {
            TinyAgentsError::config(format!("store `{shown}` (PostgreSQL): creating the tables failed: {e}"))
        })?;
        let prepare = |q: &'static str| {
            let client = &client;
            async move {
                bounded(shown, client.prepare(q)).await?.map_err(|e| {
                    TinyAgentsError::config(format!("store `{shown}` (PostgreSQL): preparing failed: {e}"))
                })
            }
        };
        Ok(Self {
            put: prepare(PUT).await?,
            latest: prepare(LATEST).await?,
            history: prepare(HISTORY).await?,
            prune: prepare(PRUNE).await?,
            reserve: prepare("SELECT o_admitted, o_spent, o_held FROM tinyagents_ledger_reserve($1, $2, $3, $4)")
                .await?,
            settle: prepare("SELECT o_spent, o_held FROM tinyagents_ledger_settle($1, $2, $3, $4)").await?,
            totals: prepare(TOTALS).await?,
            client,
            broken: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

impl PostgresStore {
    /// Connects to the server at `url` (a libpq URL: `postgres://USER[:PASSWORD]@HOST[:PORT]/DB`),
    /// creates the tables and functions when missing and prepares every statement.
    /// When the server closes the connection (a restart), the next operation
    /// connects again; an operation in flight then fails, and is not retried
    /// (it may have been applied).
    ///
    /// # Errors
    /// A `Config` error naming the URL (password hidden) and the feature when
    /// the URL is malformed or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        redactor().add_url(url);
        Self::open(url).await.map_err(|e| redactor().redact_error(e))
    }

    /// [`connect`](Self::connect) before its error passes the redactor.
    async fn open(url: &str) -> Result<Self> {
        let shown = redact(url);
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| {
            TinyAgentsError::config(format!(
                "store url `{shown}` (feature `postgres`) is not a PostgreSQL url: {e}"
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        let conn = Conn::open(&config, &shown).await?;
        Ok(Self {
            config,
            url: shown,
            conn: std::sync::Mutex::new(Arc::new(conn)),
            reconnecting: tokio::sync::Mutex::new(()),
        })
    }

    fn current(&self) -> Arc<Conn> {
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The live connection, connecting again when the server closed it.
    async fn conn(&self) -> Result<Arc<Conn>> {
        let current = self.current();
        if current.live() {
            return Ok(current);
        }
        let _one = self.reconnecting.lock().await;
        let current = self.current();
        if current.live() {
            return Ok(current);
        }
        let fresh = Conn::open(&self.config, &self.url)
            .await
            .map_err(|e| redactor().redact_error(e))?;
        let fresh = Arc::new(fresh);
        *self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = fresh.clone();
        Ok(fresh)
    }

    /// The error of an operation on `c`. Anything but an error the server
    /// reported for the statement alone (a closed connection, an I/O or
    /// protocol error, a FATAL or connection-class error from the server)
    /// marks the connection, so the next operation connects again.
    fn failed(&self, c: &Conn, what: &str, e: tokio_postgres::Error) -> TinyAgentsError {
        let statement_only = e.as_db_error().is_some_and(|d| {
            let code = d.code().code();
            !matches!(d.parsed_severity(), Some(Severity::Fatal | Severity::Panic))
                && !code.starts_with("08")
                && !code.starts_with("57P")
        });
        if e.is_closed() || !statement_only {
            c.broken.store(true, std::sync::atomic::Ordering::Release);
        }
        let why = match e.as_db_error() {
            Some(db) => db.to_string(),
            None => e.to_string(),
        };
        let why = redactor().redact(&why);
        TinyAgentsError::config(format!("store `{}` (PostgreSQL): {what} failed: {why}", self.url))
    }

    /// Every checkpoint of a thread, oldest first, each checked as
    /// [`latest`](Checkpointer::latest) checks one.
    ///
    /// # Errors
    /// When the server cannot answer, or naming the first damaged checkpoint.
    pub async fn history(&self, thread_id: &str) -> Result<Vec<Checkpoint>> {
        let c = self.conn().await?;
        let rows = bounded(&self.url, c.client.query(&c.history, &[&thread_id]))
            .await?
            .map_err(|e| self.failed(&c, "reading a thread's history", e))?;
        rows.iter()
            .map(|r| sql::decode(&self.url, thread_id, r.get(0), r.get(1), r.get(2), r.get(3)))
            .collect()
    }

    /// Deletes every checkpoint of a thread but the newest `keep` (at least
    /// one is always kept, so the thread goes on); returns how many went.
    /// Their explicit updates leave the thread's record with them.
    ///
    /// # Errors
    /// When the server cannot answer.
    pub async fn prune(&self, thread_id: &str, keep: usize) -> Result<u64> {
        let offset = i64::try_from(keep.max(1) - 1).unwrap_or(i64::MAX);
        let c = self.conn().await?;
        bounded(&self.url, c.client.execute(&c.prune, &[&thread_id, &offset]))
            .await?
            .map_err(|e| self.failed(&c, "pruning a thread", e))
    }
}

/// `fut`, failing after [`TIMEOUT`].
async fn bounded<T>(url: &str, fut: impl Future<Output = T>) -> Result<T> {
    tokio::time::timeout(TIMEOUT, fut)
        .await
        .map_err(|_| TinyAgentsError::timeout(format!("a request to the PostgreSQL store `{url}`"), TIMEOUT))
}

fn count(url: &str, key: &str, name: &str, n: i64) -> Result<u64> {
    u64::try_from(n).map_err(|_| {
        TinyAgentsError::config(format!(
            "store `{url}` (PostgreSQL): ledger `{key}` holds {name} = {n}, not a count; fix or delete its row"
        ))
    })
}

#[async_trait]
impl Checkpointer for PostgresStore {
    async fn put(&self, checkpoint: &Checkpoint) -> Result<()> {
        let (seq, version, body, digest) = sql::encode(checkpoint)?;
        let c = self.conn().await?;
        let stored = bounded(
            &self.url,
            c.client
                .execute(&c.put, &[&checkpoint.thread_id, &seq, &version, &body, &digest]),
        )
        .await?
        .map_err(|e| self.failed(&c, "storing a checkpoint", e))?;
        if stored == 1 {
            Ok(())
        } else {
            Err(sql::exists(&self.url, checkpoint))
        }
    }

    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>> {
        let c = self.conn().await?;
        let row = bounded(&self.url, c.client.query_opt(&c.latest, &[&thread_id]))
            .await?
            .map_err(|e| self.failed(&c, "reading a checkpoint", e))?;
        let Some(row) = row else { return Ok(None) };
        let seq: i64 = row.get(0);
        let (Some(version), Some(body), Some(digest)) = (
            row.get::<_, Option<i64>>(1),
            row.get::<_, Option<String>>(2),
            row.get::<_, Option<String>>(3),
        ) else {
            return Err(TinyAgentsError::config(format!(
                "checkpoint store `{}`: thread {:?} was last written at checkpoint {seq}, and that row is missing; \
                 no older checkpoint is used in its place (a resume from an older one would run finished steps \
                 again): restore the row, or set the thread's `latest_seq` back on purpose",
                self.url,
                crate::harness::shorten::shorten(thread_id, 80)
            )));
        };
        sql::decode(&self.url, thread_id, seq, version, &body, &digest).map(Some)
    }
}

#[async_trait]
impl LedgerStore for PostgresStore {
    async fn reserve(&self, key: &str, cap: u64, amount: u64, ttl: Duration) -> Result<Reservation> {
        check_units(key, &[("cap", cap), ("amount", amount)])?;
        let (cap, amount, ttl) = (cap as i64, amount as i64, sql::ttl_ms(ttl));
        let c = self.conn().await?;
        let row = bounded(&self.url, c.client.query_one(&c.reserve, &[&key, &cap, &amount, &ttl]))
            .await?
            .map_err(|e| self.failed(&c, "a ledger reservation", e))?;
        let totals = LedgerTotals {
            spent: count(&self.url, key, "spent", row.get(1))?,
            held: count(&self.url, key, "held", row.get(2))?,
        };
        Ok(if row.get::<_, bool>(0) {
            Reservation::Admitted(totals)
        } else {
            Reservation::Refused(totals)
        })
    }

    async fn settle(&self, key: &str, reserved: u64, actual: u64, ttl: Duration) -> Result<LedgerTotals> {
        check_units(key, &[("reserved", reserved), ("actual", actual)])?;
        let (reserved, actual, ttl) = (reserved as i64, actual as i64, sql::ttl_ms(ttl));
        let c = self.conn().await?;
        let row = bounded(
            &self.url,
            c.client.query_one(&c.settle, &[&key, &reserved, &actual, &ttl]),
        )
        .await?
        .map_err(|e| self.failed(&c, "a ledger settlement", e))?;
        Ok(LedgerTotals {
            spent: count(&self.url, key, "spent", row.get(0))?,
            held: count(&self.url, key, "held", row.get(1))?,
        })
    }

    async fn totals(&self, key: &str) -> Result<LedgerTotals> {
        let c = self.conn().await?;
        let row = bounded(&self.url, c.client.query_opt(&c.totals, &[&key]))
            .await?
            .map_err(|e| self.failed(&c, "a ledger read", e))?;
        match row {
            None => Ok(LedgerTotals::default()),
            Some(row) => Ok(LedgerTotals {
                spent: count(&self.url, key, "spent", row.get(0))?,
                held: count(&self.url, key, "held", row.get(1))?,
            }),
        }
    }
}
