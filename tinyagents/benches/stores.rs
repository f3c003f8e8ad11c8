#![allow(missing_docs)] // criterion_group! generates an undocumented fn
//! Per-call overhead of each shared store on loopback next to the in-process
//! store: a rate-limit admission, a budget reservation + settlement, a
//! checkpoint put. A shared limit should cost one round trip, not several.
//!
//! Needs the servers `TINYAGENTS_REDIS_URL` and `TINYAGENTS_POSTGRES_URL`
//! name (`.ci/services.sh` starts both on loopback); a store whose URL is
//! unset is left out, and says so.
//!
//! Run: `cargo bench -p tinyagents --features redis,postgres,sqlite --bench stores`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, Criterion};
use serde_json::json;
use tinyagents::graph::{update, Checkpoint, Checkpointer, GraphState, MemoryCheckpointer};
use tinyagents::middleware::{BucketSpec, InMemoryRateLimitStore, RateLimitStore};
use tinyagents::store::{LedgerStore, MemoryLedger, PostgresStore, RedisStore, SqliteStore};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn url(var: &str) -> Option<String> {
    let url = std::env::var(var).ok();
    if url.is_none() {
        eprintln!("{var} is not set: its store is left out");
    }
    url
}

fn unique(what: &str) -> String {
    format!("bench-{what}-{}", std::process::id())
}

fn admit(c: &mut Criterion) {
    let rt = rt();
    let mut group = c.benchmark_group("rate_limit_admit");
    // A bucket that never runs dry: every admission is the same work.
    let spec = BucketSpec {
        rate_per_second: 1e6,
        burst: 1_000_000,
    };
    let mut stores: Vec<(&str, Arc<dyn RateLimitStore>)> =
        vec![("in_memory", Arc::new(InMemoryRateLimitStore::default()))];
    if let Some(u) = url("TINYAGENTS_REDIS_URL") {
        stores.push(("redis", Arc::new(rt.block_on(RedisStore::connect(&u)).unwrap())));
    }
    for (name, store) in stores {
        let key = unique("bucket");
        group.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(store.reserve(&key, spec, tokio::time::Instant::now(), Some(Duration::ZERO)))
                    .unwrap()
                    .unwrap()
            })
        });
    }
    group.finish();
}

fn reserve_settle(c: &mut Criterion) {
    let rt = rt();
    let mut group = c.benchmark_group("budget_reserve_settle");
    let day = Duration::from_secs(86_400);
    let path = std::env::temp_dir().join(unique("ledger")).with_extension("db");
    let mut stores: Vec<(&str, Arc<dyn LedgerStore>)> = vec![
        ("in_memory", Arc::new(MemoryLedger::default())),
        ("sqlite", Arc::new(rt.block_on(SqliteStore::open(&path)).unwrap())),
    ];
    if let Some(u) = url("TINYAGENTS_REDIS_URL") {
        stores.push(("redis", Arc::new(rt.block_on(RedisStore::connect(&u)).unwrap())));
    }
    if let Some(u) = url("TINYAGENTS_POSTGRES_URL") {
        stores.push(("postgres", Arc::new(rt.block_on(PostgresStore::connect(&u)).unwrap())));
    }
    for (name, store) in stores {
        let key = unique("budget");
        group.bench_function(name, |b| {
            b.iter(|| {
                rt.block_on(async {
                    store.reserve(&key, 1 << 52, 30_000_000, day).await.unwrap();
                    store.settle(&key, 30_000_000, 0, day).await.unwrap()
                })
            })
        });
    }
    group.finish();
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

fn put(c: &mut Criterion) {
    let rt = rt();
    let mut group = c.benchmark_group("checkpoint_put");
    let path = std::env::temp_dir().join(unique("checkpoints")).with_extension("db");
    let mut stores: Vec<(&str, Arc<dyn Checkpointer>)> = vec![
        ("in_memory", Arc::new(MemoryCheckpointer::new())),
        ("sqlite", Arc::new(rt.block_on(SqliteStore::open(&path)).unwrap())),
    ];
    if let Some(u) = url("TINYAGENTS_POSTGRES_URL") {
        stores.push(("postgres", Arc::new(rt.block_on(PostgresStore::connect(&u)).unwrap())));
    }
    if let Some(u) = url("TINYAGENTS_REDIS_URL") {
        stores.push(("redis", Arc::new(rt.block_on(RedisStore::connect(&u)).unwrap())));
    }
    // A checkpoint of a short conversation (about 2 kB of JSON).
    let state = GraphState::from_update(update([("messages", json!(vec!["a message of some length"; 60]))]));
    for (name, store) in stores {
        let thread = unique(name);
        let seq = AtomicU64::new(0);
        group.bench_function(name, |b| {
            b.iter(|| {
                let cp = Checkpoint {
                    thread_id: thread.clone(),
                    seq: seq.fetch_add(1, Ordering::Relaxed) + 1,
                    steps: 1,
                    next: Some("model".into()),
                    state: state.clone(),
                    interrupt: None,
                    updates: Vec::new(),
                };
                rt.block_on(store.put(&cp)).unwrap()
            })
        });
    }
    group.finish();
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
    }
}

criterion_group!(benches, admit, reserve_settle, put);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
