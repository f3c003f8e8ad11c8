//! The Redis store (feature `redis`) against the server
//! `TINYAGENTS_REDIS_URL` names (the test fails, never skips, when it is
//! unset): the token bucket admits exactly as the in-process one does and
//! exactly `burst` under contention; the ledger admits exactly up to its cap
//! under contention; an unreachable server is an error naming the URL and
//! the feature, with the password hidden; checkpoints are never replaced,
//! and a damaged, missing or newer-format latest one is an error naming it.
#![cfg(feature = "redis")]

use std::sync::Arc;
use std::time::Duration;

use tinyagents::middleware::{BucketSpec, RateLimitStore};
use tinyagents::store::{LedgerStore, RedisStore, Reservation};

use crate::support::unique;

fn url() -> String {
    std::env::var("TINYAGENTS_REDIS_URL").unwrap_or_else(|_| {
        panic!(
            "TINYAGENTS_REDIS_URL is not set: the Redis store tests (feature `redis`) need a running server; \
             `.ci/run` starts one on loopback (see .ci/services.sh to start it by hand)"
        )
    })
}

#[tokio::test]
async fn a_still_bucket_admits_burst_then_says_when() {
    let store = RedisStore::connect(&url()).await.unwrap();
    let key = unique("bucket");
    // 0.01 per second: one token every 100 s, so nothing refills during the test.
    let spec = BucketSpec {
        rate_per_second: 0.01,
        burst: 3,
    };
    let now = tokio::time::Instant::now();
    for _ in 0..3 {
        assert_eq!(
            RateLimitStore::reserve(&store, &key, spec, now, Some(Duration::ZERO))
                .await
                .unwrap(),
            Ok(Duration::ZERO)
        );
    }
    let refused = RateLimitStore::reserve(&store, &key, spec, now, Some(Duration::ZERO))
        .await
        .unwrap()
        .unwrap_err();
    assert!(
        refused > Duration::from_secs(90) && refused <= Duration::from_secs(100),
        "{refused:?}"
    );
    // In wait mode the caller gets its own later slot: one interval after the last.
    let wait = RateLimitStore::reserve(&store, &key, spec, now, None)
        .await
        .unwrap()
        .unwrap();
    assert!(
        wait > Duration::from_secs(90) && wait <= Duration::from_secs(100),
        "{wait:?}"
    );
    let second = RateLimitStore::reserve(&store, &key, spec, now, None)
        .await
        .unwrap()
        .unwrap();
    assert!(second > wait + Duration::from_secs(99), "{second:?} after {wait:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contended_admissions_are_exact() {
    let store = Arc::new(RedisStore::connect(&url()).await.unwrap());
    let key = unique("contended");
    let spec = BucketSpec {
        rate_per_second: 0.001,
        burst: 7,
    };
    let tasks: Vec<_> = (0..64)
        .map(|_| {
            let store = store.clone();
            let key = key.clone();
            tokio::spawn(async move {
                RateLimitStore::reserve(&*store, &key, spec, tokio::time::Instant::now(), Some(Duration::ZERO))
                    .await
                    .unwrap()
                    .is_ok()
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += usize::from(t.await.unwrap());
    }
    assert_eq!(admitted, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_ledger_admits_up_to_its_cap() {
    let store = Arc::new(RedisStore::connect(&url()).await.unwrap());
    let day = Duration::from_secs(86_400);
    let k = unique("ledger");
    assert!(
        matches!(LedgerStore::reserve(&*store, &k, 100, 60, day).await.unwrap(), Reservation::Admitted(t) if t.held == 60)
    );
    assert!(
        matches!(LedgerStore::reserve(&*store, &k, 100, 60, day).await.unwrap(), Reservation::Refused(t) if t.held == 60)
    );
    let t = store.settle(&k, 60, 70, day).await.unwrap();
    assert_eq!((t.spent, t.held), (70, 0));
    store.settle(&k, 0, 40, day).await.unwrap();
    assert!(
        matches!(LedgerStore::reserve(&*store, &k, 100, 0, day).await.unwrap(), Reservation::Refused(t) if t.spent == 110)
    );
    assert_eq!(store.totals(&k).await.unwrap().spent, 110);
    assert!(
        LedgerStore::reserve(&*store, &k, 1 << 60, 1, day).await.is_err(),
        "above 2^53 is refused"
    );
    let c = unique("counter");
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let store = store.clone();
            let c = c.clone();
            tokio::spawn(async move {
                matches!(
                    LedgerStore::reserve(&*store, &c, 25, 1, day).await.unwrap(),
                    Reservation::Admitted(_)
                )
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += usize::from(t.await.unwrap());
    }
    assert_eq!(admitted, 25);
}

#[tokio::test]
async fn an_unreachable_server_names_the_url_and_the_feature() {
    let err = RedisStore::connect("redis://:hunter2@127.0.0.1:1/0")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("redis://:***@127.0.0.1:1/0") && err.contains("`redis`") && !err.contains("hunter2"),
        "{err}"
    );
}

fn cp(thread: &str, seq: u64) -> tinyagents::graph::Checkpoint {
    tinyagents::graph::Checkpoint {
        thread_id: thread.into(),
        seq,
        steps: seq as u32,
        next: Some("work".into()),
        state: tinyagents::graph::GraphState::from_update(tinyagents::graph::update([("n", serde_json::json!(seq))])),
        interrupt: None,
        updates: Vec::new(),
    }
}

/// Runs one command on the server directly (to damage a record on purpose).
async fn raw(args: &[&str]) {
    let client = redis::Client::open(url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    let _: redis::Value = cmd.query_async(&mut conn).await.unwrap();
}

/// Checkpoints on Redis keep the SQL stores' promises: never replaced, latest
/// by sequence, history and pruning, a damaged, missing or newer-format
/// latest record is an error naming it (never the older checkpoint).
#[tokio::test]
async fn checkpoints_are_never_replaced_and_a_damaged_latest_is_an_error() {
    use tinyagents::graph::{Checkpointer, CHECKPOINT_FORMAT_VERSION};
    let store = RedisStore::connect(&url()).await.unwrap();
    let t = unique("thread");
    assert_eq!(store.latest(&t).await.unwrap(), None, "a new thread has none");
    for seq in 1..=3 {
        store.put(&cp(&t, seq)).await.unwrap();
    }
    assert_eq!(store.latest(&t).await.unwrap(), Some(cp(&t, 3)), "latest by sequence");
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
    assert_eq!(store.history(&t).await.unwrap(), vec![cp(&t, 1), cp(&t, 2), cp(&t, 3)]);
    assert_eq!(store.prune(&t, 2).await.unwrap(), 1);
    assert_eq!(store.history(&t).await.unwrap(), vec![cp(&t, 2), cp(&t, 3)]);
    assert_eq!(store.prune(&t, 0).await.unwrap(), 1, "at least one is kept");
    assert!(
        store.put(&cp(&t, 3)).await.is_err(),
        "pruning does not reopen a sequence number"
    );
    store.put(&cp(&t, 4)).await.unwrap();

    let key = |thread: &str| format!("tinyagents:checkpoints:{thread}");
    let d = unique("damaged");
    store.put(&cp(&d, 1)).await.unwrap();
    store.put(&cp(&d, 2)).await.unwrap();
    let body = serde_json::to_string(&cp(&d, 2)).unwrap().replace("\"n\":2", "\"n\":9");
    raw(&["HSET", &key(&d), "b:2", &body]).await;
    let err = store.latest(&d).await.unwrap_err().to_string();
    assert!(
        err.contains("checkpoint 2") && err.contains("damaged") && err.contains("SHA-256"),
        "{err}"
    );

    let v = unique("version");
    store.put(&cp(&v, 1)).await.unwrap();
    raw(&["HSET", &key(&v), "v:1", "99"]).await;
    let err = store.latest(&v).await.unwrap_err().to_string();
    assert!(
        err.contains("format version 99") && err.contains(&format!("version {CHECKPOINT_FORMAT_VERSION}")),
        "{err}"
    );

    let m = unique("missing");
    store.put(&cp(&m, 1)).await.unwrap();
    store.put(&cp(&m, 2)).await.unwrap();
    raw(&["HDEL", &key(&m), "v:2", "b:2", "d:2"]).await;
    let err = store.latest(&m).await.unwrap_err().to_string();
    assert!(err.contains("checkpoint 2") && err.contains("missing"), "{err}");

    let err = store.put(&cp(&unique("big"), 1 << 60)).await.unwrap_err().to_string();
    assert!(err.contains("sequence number above"), "{err}");
}

/// 16 concurrent writers of the same next checkpoint: exactly one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_of_one_checkpoint_never_both_win() {
    use tinyagents::graph::Checkpointer;
    let store = Arc::new(RedisStore::connect(&url()).await.unwrap());
    let t = unique("race");
    store.put(&cp(&t, 1)).await.unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (store, t) = (store.clone(), t.clone());
            tokio::spawn(async move { store.put(&cp(&t, 2)).await.is_ok() })
        })
        .collect();
    let mut won = 0;
    for task in tasks {
        won += usize::from(task.await.unwrap());
    }
    assert_eq!(won, 1, "one writer of checkpoint 2 wins");
}
