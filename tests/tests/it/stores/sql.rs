//! The SQL stores' suite, the same for SQLite (feature `sqlite`, a file in
//! the temporary directory) and PostgreSQL (feature `postgres`, the server
//! `TINYAGENTS_POSTGRES_URL` names; the test fails, never skips, when it is
//! unset): checkpoints are never replaced, latest is by sequence, history
//! and pruning, a damaged or missing row is an error naming it, concurrent
//! writers of one sequence number never both win; the ledger admits exactly
//! up to its cap under contention.
#![cfg(any(feature = "sqlite", feature = "postgres"))]

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tinyagents::graph::{update, Checkpoint, Checkpointer, GraphState, CHECKPOINT_FORMAT_VERSION};
use tinyagents::store::{LedgerStore, Reservation};

use crate::support::unique;

fn cp(thread: &str, seq: u64) -> Checkpoint {
    Checkpoint {
        thread_id: thread.into(),
        seq,
        steps: seq as u32,
        next: Some("work".into()),
        state: GraphState::from_update(update([("n", json!(seq))])),
        interrupt: None,
        updates: Vec::new(),
    }
}

/// What each store's suite needs: the store, its history and pruning, and a
/// way to run SQL on its tables directly (to damage a row on purpose).
trait Sql: Checkpointer + LedgerStore {
    async fn history(&self, thread: &str) -> Vec<Checkpoint>;
    async fn prune(&self, thread: &str, keep: usize) -> u64;
    async fn exec(&self, sql: &str, thread: &str);
}

async fn checkpoint_suite<S: Sql>(store: &S) {
    let t = unique("thread");
    assert_eq!(store.latest(&t).await.unwrap(), None, "a new thread has none");
    for seq in 1..=3 {
        store.put(&cp(&t, seq)).await.unwrap();
    }
    assert_eq!(store.latest(&t).await.unwrap(), Some(cp(&t, 3)), "latest by sequence");
    // Never replaced, never moved back.
    let again = store.put(&cp(&t, 3)).await.unwrap_err();
    assert_eq!(
        again.kind(),
        tinyagents::harness::error::ErrorKind::Conflict,
        "a lost write is a conflict: {again}"
    );
    let again = again.to_string();
    assert!(
        again.contains("never replaced") && again.contains("checkpoint 3"),
        "{again}"
    );
    assert!(
        store
            .put(&cp(&t, 2))
            .await
            .is_err_and(|e| e.kind() == tinyagents::harness::error::ErrorKind::Conflict),
        "an older sequence number is refused"
    );
    assert_eq!(store.latest(&t).await.unwrap(), Some(cp(&t, 3)));
    // History, oldest first; pruning keeps the newest.
    assert_eq!(store.history(&t).await, vec![cp(&t, 1), cp(&t, 2), cp(&t, 3)]);
    assert_eq!(store.prune(&t, 2).await, 1);
    assert_eq!(store.history(&t).await, vec![cp(&t, 2), cp(&t, 3)]);
    assert_eq!(store.prune(&t, 0).await, 1, "at least one is kept");
    assert_eq!(store.history(&t).await, vec![cp(&t, 3)]);
    assert!(
        store.put(&cp(&t, 3)).await.is_err(),
        "pruning does not reopen a sequence number"
    );
    store.put(&cp(&t, 4)).await.unwrap();

    // A damaged latest row is an error naming it, never the older checkpoint.
    let d = unique("damaged");
    store.put(&cp(&d, 1)).await.unwrap();
    store.put(&cp(&d, 2)).await.unwrap();
    store
        .exec(
            "UPDATE tinyagents_checkpoints SET body = replace(body, '\"n\":2', '\"n\":9') WHERE thread_id = $1 AND seq = 2",
            &d,
        )
        .await;
    let err = store.latest(&d).await.unwrap_err().to_string();
    assert!(
        err.contains("checkpoint 2") && err.contains("damaged") && err.contains("SHA-256"),
        "{err}"
    );
    // A newer format is refused naming both versions.
    let v = unique("version");
    store.put(&cp(&v, 1)).await.unwrap();
    store
        .exec(
            "UPDATE tinyagents_checkpoints SET format_version = 99 WHERE thread_id = $1",
            &v,
        )
        .await;
    let err = store.latest(&v).await.unwrap_err().to_string();
    assert!(
        err.contains("format version 99") && err.contains(&format!("version {CHECKPOINT_FORMAT_VERSION}")),
        "{err}"
    );
    // A missing latest row is an error, never the one before.
    let m = unique("missing");
    store.put(&cp(&m, 1)).await.unwrap();
    store.put(&cp(&m, 2)).await.unwrap();
    store
        .exec(
            "DELETE FROM tinyagents_checkpoints WHERE thread_id = $1 AND seq = 2",
            &m,
        )
        .await;
    let err = store.latest(&m).await.unwrap_err().to_string();
    assert!(err.contains("checkpoint 2") && err.contains("missing"), "{err}");
    // A sequence number a SQL store cannot keep is refused, not wrapped.
    let err = store.put(&cp(&unique("big"), u64::MAX)).await.unwrap_err().to_string();
    assert!(err.contains("sequence number above"), "{err}");
}

async fn race_suite<S: Sql + 'static>(store: Arc<S>) {
    // 16 writers of the same next checkpoint: exactly one wins.
    let t = unique("race");
    store.put(&cp(&t, 1)).await.unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let store = store.clone();
            let t = t.clone();
            tokio::spawn(async move { store.put(&cp(&t, 2)).await.is_ok() })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        won += usize::from(task.await.unwrap());
    }
    assert_eq!(won, 1, "one writer of checkpoint 2 wins");
}

async fn ledger_suite<S: Sql + 'static>(store: Arc<S>) {
    let day = Duration::from_secs(86_400);
    let k = unique("ledger");
    assert!(matches!(store.reserve(&k, 100, 60, day).await.unwrap(), Reservation::Admitted(t) if t.held == 60));
    assert!(matches!(store.reserve(&k, 100, 60, day).await.unwrap(), Reservation::Refused(t) if t.held == 60));
    let t = store.settle(&k, 60, 70, day).await.unwrap();
    assert_eq!((t.spent, t.held), (70, 0));
    assert!(
        matches!(store.reserve(&k, 100, 0, day).await.unwrap(), Reservation::Admitted(_)),
        "below the cap"
    );
    store.settle(&k, 0, 40, day).await.unwrap();
    assert!(matches!(store.reserve(&k, 100, 0, day).await.unwrap(), Reservation::Refused(t) if t.spent == 110));
    assert_eq!(store.totals(&k).await.unwrap().spent, 110);
    assert!(
        store.reserve(&k, 1 << 60, 1, day).await.is_err(),
        "a cap above 2^53 is refused"
    );

    // A counter: 40 concurrent reservations of 1 under a cap of 25: exactly 25.
    let c = unique("counter");
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let store = store.clone();
            let c = c.clone();
            tokio::spawn(
                async move { matches!(store.reserve(&c, 25, 1, day).await.unwrap(), Reservation::Admitted(_)) },
            )
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        admitted += usize::from(task.await.unwrap());
    }
    assert_eq!(admitted, 25);
    assert_eq!(store.totals(&c).await.unwrap().held, 25);
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use super::*;
    use tinyagents::store::SqliteStore;

    struct Db(SqliteStore, std::path::PathBuf);

    impl Drop for Db {
        fn drop(&mut self) {
            for ext in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{ext}", self.1.display()));
            }
        }
    }

    #[async_trait::async_trait]
    impl Checkpointer for Db {
        async fn put(&self, c: &Checkpoint) -> tinyagents::Result<()> {
            self.0.put(c).await
        }
        async fn latest(&self, t: &str) -> tinyagents::Result<Option<Checkpoint>> {
            self.0.latest(t).await
        }
    }

    #[async_trait::async_trait]
    impl LedgerStore for Db {
        async fn reserve(&self, k: &str, cap: u64, a: u64, ttl: Duration) -> tinyagents::Result<Reservation> {
            self.0.reserve(k, cap, a, ttl).await
        }
        async fn settle(
            &self,
            k: &str,
            r: u64,
            a: u64,
            ttl: Duration,
        ) -> tinyagents::Result<tinyagents::store::LedgerTotals> {
            self.0.settle(k, r, a, ttl).await
        }
        async fn totals(&self, k: &str) -> tinyagents::Result<tinyagents::store::LedgerTotals> {
            self.0.totals(k).await
        }
    }

    impl Sql for Db {
        async fn history(&self, thread: &str) -> Vec<Checkpoint> {
            self.0.history(thread).await.unwrap()
        }
        async fn prune(&self, thread: &str, keep: usize) -> u64 {
            self.0.prune(thread, keep).await.unwrap()
        }
        async fn exec(&self, sql: &str, thread: &str) {
            let conn = rusqlite::Connection::open(&self.1).unwrap();
            conn.execute(&sql.replace("$1", "?1"), [thread]).unwrap();
        }
    }

    async fn open() -> Arc<Db> {
        let path = std::env::temp_dir().join(unique("store-sql")).with_extension("db");
        Arc::new(Db(SqliteStore::open(&path).await.unwrap(), path))
    }

    #[tokio::test]
    async fn sqlite_checkpoints() {
        checkpoint_suite(&*open().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite_one_writer_of_a_sequence_number_wins() {
        race_suite(open().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn sqlite_ledger() {
        ledger_suite(open().await).await;
    }

    /// The variable that makes this test binary an opener for the test below.
    const OPENER: &str = "TINYAGENTS_TEST_SQLITE_OPENER";

    /// Processes that start together open one fresh file together: the
    /// switch to WAL and the schema need the file to themselves, and
    /// SQLite answers "database is locked" at once to the losers (its busy
    /// handler is not asked for every lock an opening takes). Every opener
    /// must wait its turn instead: 8 processes on each of 10 fresh files.
    /// (Threads of one process would not show it: SQLite's locks between
    /// connections of one process are its own, not the file system's.)
    #[test]
    fn sqlite_openers_of_one_fresh_file_at_once_all_succeed() {
        if let Ok(path) = std::env::var(OPENER) {
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            if let Err(e) = rt.block_on(SqliteStore::open(&path)) {
                eprintln!("opener failed: {e}");
                std::process::exit(3);
            }
            return;
        }
        let me = std::env::current_exe().unwrap();
        for round in 0..10 {
            let path = std::env::temp_dir()
                .join(unique(&format!("store-open-race-{round}")))
                .with_extension("db");
            let openers: Vec<_> = (0..8)
                .map(|_| {
                    std::process::Command::new(&me)
                        .args([
                            "--exact",
                            "stores::sql::sqlite::sqlite_openers_of_one_fresh_file_at_once_all_succeed",
                        ])
                        .args(["--nocapture", "--test-threads=1"])
                        .env(OPENER, &path)
                        .stdout(std::process::Stdio::null())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .unwrap()
                })
                .collect();
            let failed: Vec<String> = openers
                .into_iter()
                .map(|c| c.wait_with_output().unwrap())
                .filter(|o| !o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .collect();
            for ext in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
            }
            assert!(
                failed.is_empty(),
                "round {round}: {} of 8 openers failed: {failed:?}",
                failed.len()
            );
        }
    }

    #[tokio::test]
    async fn sqlite_opens_in_wal_mode_and_names_a_bad_path() {
        let db = open().await;
        let conn = rusqlite::Connection::open(&db.1).unwrap();
        let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
        assert_eq!(mode, "wal");
        let err = SqliteStore::open("/nonexistent-dir/x/store.db")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sqlite:/nonexistent-dir/x/store.db") && err.contains("`sqlite`"),
            "{err}"
        );
    }
}

#[cfg(feature = "postgres")]
mod postgres {
    use super::*;
    use tinyagents::store::PostgresStore;

    fn url() -> String {
        std::env::var("TINYAGENTS_POSTGRES_URL").unwrap_or_else(|_| {
            panic!(
                "TINYAGENTS_POSTGRES_URL is not set: the PostgreSQL store tests (feature `postgres`) need a running \
                 server; `.ci/run` starts one on loopback (see .ci/services.sh to start it by hand)"
            )
        })
    }

    struct Db(PostgresStore, tokio_postgres::Client);

    #[async_trait::async_trait]
    impl Checkpointer for Db {
        async fn put(&self, c: &Checkpoint) -> tinyagents::Result<()> {
            self.0.put(c).await
        }
        async fn latest(&self, t: &str) -> tinyagents::Result<Option<Checkpoint>> {
            self.0.latest(t).await
        }
    }

    #[async_trait::async_trait]
    impl LedgerStore for Db {
        async fn reserve(&self, k: &str, cap: u64, a: u64, ttl: Duration) -> tinyagents::Result<Reservation> {
            self.0.reserve(k, cap, a, ttl).await
        }
        async fn settle(
            &self,
            k: &str,
            r: u64,
            a: u64,
            ttl: Duration,
        ) -> tinyagents::Result<tinyagents::store::LedgerTotals> {
            self.0.settle(k, r, a, ttl).await
        }
        async fn totals(&self, k: &str) -> tinyagents::Result<tinyagents::store::LedgerTotals> {
            self.0.totals(k).await
        }
    }

    impl Sql for Db {
        async fn history(&self, thread: &str) -> Vec<Checkpoint> {
            self.0.history(thread).await.unwrap()
        }
        async fn prune(&self, thread: &str, keep: usize) -> u64 {
            self.0.prune(thread, keep).await.unwrap()
        }
        async fn exec(&self, sql: &str, thread: &str) {
            self.1.execute(sql, &[&thread]).await.unwrap();
        }
    }

    async fn open() -> Arc<Db> {
        let store = PostgresStore::connect(&url()).await.unwrap();
        let (client, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        Arc::new(Db(store, client))
    }

    #[tokio::test]
    async fn postgres_checkpoints() {
        checkpoint_suite(&*open().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_one_writer_of_a_sequence_number_wins() {
        race_suite(open().await).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn postgres_ledger() {
        ledger_suite(open().await).await;
    }

    #[tokio::test]
    async fn postgres_connects_again_after_the_server_closed_the_connection() {
        let app = unique("reconnect").replace('-', "_");
        let sep = if url().contains('?') { '&' } else { '?' };
        let store = PostgresStore::connect(&format!("{}{sep}application_name={app}", url()))
            .await
            .unwrap();
        let t = unique("reconnect");
        store.put(&cp(&t, 1)).await.unwrap();
        let (admin, conn) = tokio_postgres::connect(&url(), tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(conn);
        let killed = admin
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) k",
                &[&app],
            )
            .await
            .unwrap();
        assert_eq!(killed.get::<_, i64>(0), 1, "the store's one connection");
        // The operation that meets the closed connection may fail (it is not retried: it may have
        // been applied); the next one connects again.
        let first = store.latest(&t).await;
        let latest = match first {
            Ok(found) => found,
            Err(first) => store
                .latest(&t)
                .await
                .unwrap_or_else(|e| panic!("after `{first}`, the next operation failed too: {e}")),
        };
        assert_eq!(latest, Some(cp(&t, 1)));
        store.put(&cp(&t, 2)).await.unwrap();
    }

    #[tokio::test]
    async fn postgres_unreachable_names_the_url_and_feature_and_hides_the_password() {
        // Port 1 on loopback: nothing listens there.
        let err = PostgresStore::connect("postgres://agent:s3cret@127.0.0.1:1/agents")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("postgres://agent:***@127.0.0.1:1/agents")
                && err.contains("`postgres`")
                && !err.contains("s3cret"),
            "{err}"
        );
    }
}
