//! The shared stores across real OS processes (feature `stores`; needs
//! `TINYAGENTS_REDIS_URL` and `TINYAGENTS_POSTGRES_URL`, which `.ci/run`
//! sets after starting both servers on loopback):
//!
//! 1. 4 processes × 50 runs against one Redis bucket: admitted calls never
//!    exceed the bucket (exactly `burst` for a bucket that does not refill
//!    during the test; at most `burst + elapsed × rate` on the server's clock
//!    for a 10/s bucket);
//! 2. 4 processes × 50 runs spending against one $1.00 budget (Redis,
//!    PostgreSQL, SQLite): spend ≤ cap + 4 × the cost of one call (the bound
//!    `docs/scale-out.md` states for 4 calls in flight), exactly ≤ cap when
//!    each call reserves its cost, and every refusal is a `LimitExceeded`;
//! 3. a run paused for approval in process A (which exits) is decided and
//!    resumed by process B from PostgreSQL and from SQLite: the approved
//!    call runs exactly once, and a replay in process C is refused;
//! 4. a writer SIGKILLed while it puts checkpoints leaves PostgreSQL and
//!    SQLite at their last complete checkpoint;
//! 5. the store fails while 4 processes each have a paid call in flight,
//!    under the default `SharedBudget` (no `reserve_usd`): the connection to
//!    Redis and to PostgreSQL is cut through a loopback proxy (the shared
//!    servers stay up for the other tests), a private Redis server of this
//!    test (append-only file) is SIGKILLed and started again, so is the
//!    postmaster of a private PostgreSQL cluster (with its backends; skipped
//!    where PostgreSQL is not installed, a failure when `CI=true`), SQLite's file
//!    is held by a writer process that is then SIGKILLed; each settle that
//!    failed is kept and lands when the store is back, so nothing is
//!    unrecorded.
//!
//! `harness = false`: this binary is both the test and, when
//! `TINYAGENTS_STORE_WORKER` is set, the worker it starts.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde_json::json;
use tinyagents::graph::{update, AgentGraph, Checkpoint, GraphState};
use tinyagents::harness::message::Role;
use tinyagents::harness::model::ModelResponse;
use tinyagents::harness::tool::tool_fn;
use tinyagents::middleware::{
    Decision, HitlInterrupt, HitlResume, HumanInTheLoopMiddleware, InterruptOn, LimitsMiddleware,
    RateLimiterMiddleware, TokenRates,
};
use tinyagents::prelude::*;
use tinyagents::store::{RedisStore, SharedBudget, StoreUrl, NANOS_PER_USD};

const WORKER_ENV: &str = "TINYAGENTS_STORE_WORKER";
const PROCESSES: usize = 4;
const RUNS: usize = 50;
/// One call: 1000 input tokens at $30 per million.
const CALL_USD: f64 = 0.03;

fn env_url(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| {
        panic!(
            "{var} is not set: the store tests (feature `stores`) need a running server; `.ci/run` starts \
             Redis and PostgreSQL on loopback and sets it (see .ci/services.sh to start them by hand)"
        )
    })
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A unique name for this test run (keys, threads, files).
fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{what}-{}-{nanos}", std::process::id())
}

// ---------------------------------------------------------------- workers

/// `bucket URL KEY RATE BURST`: 50 runs through a rejecting limiter; prints `admitted N refused M`.
async fn worker_bucket(args: &[String]) {
    let store = Arc::new(RedisStore::connect(&args[0]).await.unwrap());
    let key = &args[1];
    let rate: f64 = args[2].parse().unwrap();
    let burst: u32 = args[3].parse().unwrap();
    let limiter = RateLimiterMiddleware::new(rate, burst)
        .reject()
        .with_store(Arc::new(Prefixed(key.clone(), store)));
    let agent: Agent<()> = Agent::new(ScriptedModel::from_fn(|_| ScriptedTurn::text("ok")))
        .with_stack(MiddlewareStack::new().with(limiter).unwrap());
    let (mut admitted, mut refused) = (0, 0);
    for i in 0..RUNS {
        let mut ctx = RunContext::new(RunConfig::new(format!("r{i}")), ());
        match agent.run(&mut ctx, &(), "go").await {
            Ok(_) => admitted += 1,
            Err(TinyAgentsError::RateLimited { .. }) => refused += 1,
            Err(e) => panic!("a run failed with something else than RateLimited: {e}"),
        }
    }
    println!("admitted {admitted} refused {refused}");
}

/// A bucket key of its own per test run.
struct Prefixed(String, Arc<RedisStore>);

#[async_trait::async_trait]
impl tinyagents::middleware::RateLimitStore for Prefixed {
    async fn reserve(
        &self,
        key: &str,
        spec: tinyagents::middleware::BucketSpec,
        now: tokio::time::Instant,
        max_wait: Option<std::time::Duration>,
    ) -> tinyagents::Result<Result<std::time::Duration, std::time::Duration>> {
        tinyagents::middleware::RateLimitStore::reserve(&*self.1, &format!("{}:{key}", self.0), spec, now, max_wait)
            .await
    }
}

/// `budget URL KEY RESERVE_USD`: 50 runs of one $0.03 call each under a
/// shared $1.00 budget; prints `ok` or `refused LIMIT` or `error KIND MESSAGE` per run.
async fn worker_budget(args: &[String]) {
    let stores = StoreUrl::parse(&args[0]).unwrap().open().await.unwrap();
    let reserve: f64 = args[2].parse().unwrap();
    let budget = SharedBudget::new(stores.ledger(), args[1].clone(), 1.0)
        .unwrap()
        .reserve_usd(reserve)
        .unwrap();
    let limits = LimitsMiddleware::new()
        .manual_rates(TokenRates {
            input: Some(30.0),
            output: Some(0.0),
            ..TokenRates::default()
        })
        .unwrap()
        .shared_budget(budget);
    let model = ScriptedModel::from_fn(|_| ModelResponse::text("ok").with_usage(Usage::new(1000, 0)).into());
    let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::new().with(limits).unwrap());
    let mut out = std::io::stdout();
    for i in 0..RUNS {
        let mut ctx = RunContext::new(RunConfig::new(format!("r{i}")), ());
        let line = match agent.run(&mut ctx, &(), "go").await {
            Ok(_) => "ok".to_owned(),
            Err(TinyAgentsError::LimitExceeded { limit, .. }) => format!("refused {limit}"),
            Err(e) => format!("error {:?} {e}", e.kind()),
        };
        writeln!(out, "{line}").unwrap();
    }
}

/// Model calls admitted in one thread by every process together, in `counters_test`.
const THREAD_CALLS: u32 = 37;
/// Tool calls admitted in that thread (fewer than the model calls allow: the
/// tool limit, not the model limit, is what stops them).
const THREAD_TOOLS: u32 = 10;

/// `counters URL THREAD`: 50 runs in one shared thread (each: a model call
/// asking for a tool, the tool, a model call answering) under a shared
/// `model_call_limit` (`thread_limit` = THREAD_CALLS, `error` at the limit)
/// and a shared `tool_call_limit` (`thread_limit` = THREAD_TOOLS, `continue`). Prints a line per
/// run (`ok`, `refused model_call_limit` or `error …`), then
/// `made MODEL_CALLS TOOL_CALLS`: what this process really called.
async fn worker_counters(args: &[String]) {
    use std::sync::atomic::{AtomicU32, Ordering};
    let stores = StoreUrl::parse(&args[0]).unwrap().open().await.unwrap();
    let ttl = std::time::Duration::from_secs(600);
    let models = tinyagents::middleware::ModelCallLimitMiddleware::per_run(100)
        .thread_limit(THREAD_CALLS)
        .error_at_limit()
        .shared_thread_counts(stores.ledger(), ttl);
    let tools = tinyagents::middleware::ToolCallLimitMiddleware::per_run(None, 100)
        .thread_limit(THREAD_TOOLS)
        .shared_thread_counts(stores.ledger(), ttl);
    let model_calls = Arc::new(AtomicU32::new(0));
    let tool_calls = Arc::new(AtomicU32::new(0));
    let counted = model_calls.clone();
    let model = ScriptedModel::from_fn(move |request| {
        counted.fetch_add(1, Ordering::SeqCst);
        if request.messages.iter().any(|m| m.role == Role::Tool) {
            ModelResponse::text("done").into()
        } else {
            ScriptedTurn::tool_call("work", json!({}))
        }
    });
    let ran = tool_calls.clone();
    let registry = ToolRegistry::new()
        .with(tool_fn("work", "Works.", move |_c, _a| {
            ran.fetch_add(1, Ordering::SeqCst);
            async move { Ok("worked".into()) }
        }))
        .unwrap();
    let stack = MiddlewareStack::empty().with(models).unwrap().with(tools).unwrap();
    let agent: Agent<()> = Agent::new(model).with_tools(registry).with_stack(stack);
    let mut out = std::io::stdout();
    for i in 0..RUNS {
        let config = RunConfig::new(format!("r{i}")).with_thread(args[1].clone());
        let mut ctx = RunContext::new(config, ());
        let line = match agent.run(&mut ctx, &(), "go").await {
            Ok(_) => "ok".to_owned(),
            Err(TinyAgentsError::LimitExceeded { limit, .. }) => format!("refused {limit}"),
            Err(e) => format!("error {:?} {e}", e.kind()),
        };
        writeln!(out, "{line}").unwrap();
    }
    let (m, t) = (model_calls.load(Ordering::SeqCst), tool_calls.load(Ordering::SeqCst));
    writeln!(out, "made {m} {t}").unwrap();
}

/// 4 processes × 50 runs in one thread: exactly THREAD_CALLS model calls and
/// THREAD_TOOLS tool calls of the thread are made across them all (the runs
/// want many more), every refusal is a classified `LimitExceeded`, and the
/// shared counters hold exactly what was admitted.
fn counters_test(url: &str) -> Result<(), String> {
    let thread = unique("thread");
    let outputs = run_all(PROCESSES, "counters", &[url, &thread]);
    let lines: Vec<&str> = outputs.iter().flat_map(|o| o.lines()).collect();
    let (made, runs): (Vec<&str>, Vec<&str>) = lines.iter().partition(|l| l.starts_with("made "));
    if runs.len() != PROCESSES * RUNS || made.len() != PROCESSES {
        return Err(format!(
            "{url}: {} run lines and {} totals, expected {} and {PROCESSES}",
            runs.len(),
            made.len(),
            PROCESSES * RUNS
        ));
    }
    if let Some(bad) = runs.iter().find(|l| **l != "ok" && **l != "refused model_call_limit") {
        return Err(format!(
            "{url}: a run ended otherwise than ok or a classified refusal: {bad}"
        ));
    }
    let (mut models, mut tools) = (0u32, 0u32);
    for line in made {
        let mut n = line.split(' ').skip(1).map(|x| x.parse::<u32>().unwrap());
        models += n.next().unwrap();
        tools += n.next().unwrap();
    }
    if models != THREAD_CALLS || tools != THREAD_TOOLS {
        return Err(format!(
            "{url}: {PROCESSES} processes made {models} model calls and {tools} tool calls in one thread under \
             shared thread limits of {THREAD_CALLS} and {THREAD_TOOLS}"
        ));
    }
    let totals = rt().block_on(async {
        let stores = StoreUrl::parse(url).unwrap().open().await.unwrap();
        let ledger = stores.ledger();
        (
            ledger.totals(&format!("model_calls:{thread}")).await.unwrap(),
            ledger.totals(&format!("tool_calls:*:{thread}")).await.unwrap(),
        )
    });
    for (what, t, cap) in [
        ("model_calls", totals.0, THREAD_CALLS),
        ("tool_calls", totals.1, THREAD_TOOLS),
    ] {
        if t.spent + t.held != u64::from(cap) {
            return Err(format!(
                "{url}: the shared `{what}` counter holds {t:?}, expected {cap}"
            ));
        }
    }
    println!("counters {url}: {models} model calls, {tools} tool calls across {PROCESSES} processes");
    Ok(())
}

/// The approval agent: `delete` appends a line to the file `log` when it runs.
fn approval_agent(log: String) -> Agent<()> {
    let delete = tool_fn("delete", "Deletes a file.", move |_cx, args| {
        let log = log.clone();
        async move {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .unwrap();
            writeln!(f, "deleted {} by process {}", args["path"], std::process::id()).unwrap();
            Ok("deleted".into())
        }
    });
    // Asks for the call first, answers "done" once its result is in (in whichever process).
    Agent::new(ScriptedModel::from_fn(|request| {
        if request.messages.last().is_some_and(|m| m.role == Role::Tool) {
            ScriptedTurn::text("done")
        } else {
            ScriptedTurn::tool_call("delete", json!({"path": "a.txt"}))
        }
    }))
    .with_tools(ToolRegistry::new().with(delete).unwrap())
    .with_stack(
        MiddlewareStack::new()
            .with(HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new()))
            .unwrap(),
    )
}

/// `pause URL THREAD LOG`: runs until the approval pause; prints the interrupt as JSON.
async fn worker_pause(args: &[String]) {
    let stores = StoreUrl::parse(&args[0]).unwrap().open().await.unwrap();
    let store = stores.checkpointer().unwrap();
    let agent = approval_agent(args[2].clone());
    let mut ctx = RunContext::new(RunConfig::new("a"), ());
    let err = AgentGraph::new(&agent)
        .run_durable(&mut ctx, &(), "tidy up", &args[1], store.as_ref())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    let interrupt = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
    println!("{}", serde_json::to_string(&interrupt).unwrap());
}

/// `resume URL THREAD LOG RESUME_JSON`: goes on with the decisions; prints `done TEXT` or `error KIND`.
async fn worker_resume(args: &[String]) {
    let stores = StoreUrl::parse(&args[0]).unwrap().open().await.unwrap();
    let store = stores.checkpointer().unwrap();
    let agent = approval_agent(args[2].clone());
    let resume: HitlResume = serde_json::from_str(&args[3]).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("b"), ());
    match AgentGraph::new(&agent)
        .resume_with(&mut ctx, &(), &args[1], store.as_ref(), resume)
        .await
    {
        Ok(run) => println!("done {}", run.final_text()),
        Err(e) => println!("error {:?}", e.kind()),
    }
}

/// Reads one line of the parent's orders from stdin (blocking: the worker
/// has nothing else to do meanwhile).
fn order() -> String {
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    line.trim().to_owned()
}

/// `outage URL KEY`: the default shared budget ($100 cap, no reservation),
/// one $0.03 call per run. Run 1 settles; run 2's model prints `in-call` and
/// waits for `go` (the parent cuts the store meanwhile), so its settle fails;
/// run 3 is refused while the store is out; after `back`, runs until one
/// succeeds (at most 5 tries: each try makes the store client connect again).
/// Prints `run2 …`, `run3 …`, `waiting`, then `made CALLS unrecorded NANOS tries N`.
async fn worker_outage(args: &[String]) {
    use std::sync::atomic::{AtomicU32, Ordering};
    let stores = StoreUrl::parse(&args[0]).unwrap().open().await.unwrap();
    let budget = SharedBudget::new(stores.ledger(), args[1].clone(), 100.0).unwrap();
    let limits = LimitsMiddleware::new()
        .manual_rates(TokenRates {
            input: Some(30.0),
            output: Some(0.0),
            ..TokenRates::default()
        })
        .unwrap()
        .shared_budget(budget.clone());
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let model = ScriptedModel::from_fn(move |_| {
        if counted.fetch_add(1, Ordering::SeqCst) + 1 == 2 {
            println!("in-call");
            assert_eq!(order(), "go");
        }
        ModelResponse::text("ok").with_usage(Usage::new(1000, 0)).into()
    });
    let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::new().with(limits).unwrap());
    let run = |i: usize| {
        let agent = &agent;
        async move {
            let mut ctx = RunContext::new(RunConfig::new(format!("r{i}")), ());
            match agent.run(&mut ctx, &(), "go").await {
                Ok(_) => "ok".to_owned(),
                Err(e) => format!("error {:?}", e.kind()),
            }
        }
    };
    assert_eq!(run(1).await, "ok", "the first run, before the outage");
    println!("run2 {} calls {}", run(2).await, calls.load(Ordering::SeqCst));
    println!("run3 {} calls {}", run(3).await, calls.load(Ordering::SeqCst));
    println!("waiting");
    assert_eq!(order(), "back");
    let mut tries = 0;
    while tries < 5 {
        tries += 1;
        if run(3 + tries).await == "ok" {
            break;
        }
    }
    let unrecorded = tinyagents::store::usd_to_nanos(budget.unrecorded_usd());
    println!(
        "made {} unrecorded {unrecorded} tries {tries}",
        calls.load(Ordering::SeqCst)
    );
}

/// `locker PATH`: holds SQLite's write lock on PATH (an open `IMMEDIATE`
/// transaction), prints `locked`, and waits to be killed.
fn worker_locker(args: &[String]) {
    let conn = rusqlite::Connection::open(&args[0]).unwrap();
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    println!("locked");
    let _ = order();
}

fn big_checkpoint(thread: &str, seq: u64) -> Checkpoint {
    // A large payload, so a kill often lands in the middle of a write.
    let payload = format!("{seq}:").repeat(50_000);
    Checkpoint {
        thread_id: thread.into(),
        seq,
        steps: seq as u32,
        next: Some("work".into()),
        state: GraphState::from_update(update([("n", json!(seq)), ("payload", json!(payload))])),
        interrupt: None,
        updates: Vec::new(),
    }
}

fn whole(cp: &Checkpoint) -> Result<(), String> {
    if *cp == big_checkpoint(&cp.thread_id, cp.seq) {
        Ok(())
    } else {
        Err(format!("checkpoint {} is not the one written", cp.seq))
    }
}

/// `writer URL THREAD`: puts checkpoints 1, 2, … forever; prints `wrote N` after each.
async fn worker_writer(args: &[String]) {
    let stores = StoreUrl::parse(&args[0]).unwrap().open().await.unwrap();
    let store = stores.checkpointer().unwrap();
    let mut out = std::io::stdout();
    for seq in 1..=1_000_000 {
        store.put(&big_checkpoint(&args[1], seq)).await.unwrap();
        writeln!(out, "wrote {seq}").unwrap();
        out.flush().unwrap();
    }
}

fn worker(mode: &str) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    rt().block_on(async {
        match mode {
            "bucket" => worker_bucket(&args).await,
            "budget" => worker_budget(&args).await,
            "counters" => worker_counters(&args).await,
            "pause" => worker_pause(&args).await,
            "resume" => worker_resume(&args).await,
            "writer" => worker_writer(&args).await,
            "outage" => worker_outage(&args).await,
            "locker" => worker_locker(&args),
            other => panic!("unknown worker mode {other}"),
        }
    });
}

// ---------------------------------------------------------------- the test

fn spawn(mode: &str, args: &[&str]) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .env(WORKER_ENV, mode)
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn a worker")
}

/// Starts `n` workers at once and returns each one's stdout, checking each exited 0.
fn run_all(n: usize, mode: &str, args: &[&str]) -> Vec<String> {
    let children: Vec<_> = (0..n).map(|_| spawn(mode, args)).collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "a {mode} worker failed: {:?}", out.status);
            String::from_utf8(out.stdout).unwrap()
        })
        .collect()
}

/// The Redis server's clock, in microseconds.
fn redis_time(url: &str) -> u64 {
    rt().block_on(async {
        let client = redis::Client::open(url).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let (s, us): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await.unwrap();
        s * 1_000_000 + us
    })
}

fn admitted(outputs: &[String]) -> (usize, usize) {
    outputs.iter().fold((0, 0), |(a, r), out| {
        let f: Vec<&str> = out.split_whitespace().collect();
        assert_eq!((f[0], f[2]), ("admitted", "refused"), "{out}");
        (a + f[1].parse::<usize>().unwrap(), r + f[3].parse::<usize>().unwrap())
    })
}

fn bucket_tests(redis_url: &str) -> Result<(), String> {
    // A bucket that cannot refill during the test: exactly `burst` admitted.
    let key = unique("still");
    let outputs = run_all(PROCESSES, "bucket", &[redis_url, &key, "0.001", "10"]);
    let (ok, refused) = admitted(&outputs);
    if (ok, refused) != (10, PROCESSES * RUNS - 10) {
        return Err(format!(
            "a bucket of 10 tokens that does not refill admitted {ok} of {} calls across {PROCESSES} processes",
            PROCESSES * RUNS
        ));
    }
    // 10/s, burst 10, on the server's clock: never more than burst + elapsed × rate.
    let key = unique("ten");
    let start = redis_time(redis_url);
    let outputs = run_all(PROCESSES, "bucket", &[redis_url, &key, "10", "10"]);
    let elapsed_us = redis_time(redis_url) - start;
    let (ok, refused) = admitted(&outputs);
    let bound = 10 + elapsed_us.div_ceil(100_000) as usize;
    if ok + refused != PROCESSES * RUNS || ok > bound || ok < 10 {
        return Err(format!(
            "a 10/s bucket of 10 admitted {ok} calls in {elapsed_us} µs across {PROCESSES} processes (bound {bound}, \
             at least 10)"
        ));
    }
    println!("bucket: {ok} admitted, bound {bound} ({elapsed_us} µs)");
    Ok(())
}

fn budget_test(url: &str, reserve: f64) -> Result<(), String> {
    let key = unique("budget");
    let outputs = run_all(PROCESSES, "budget", &[url, &key, &reserve.to_string()]);
    let lines: Vec<&str> = outputs.iter().flat_map(|o| o.lines()).collect();
    if lines.len() != PROCESSES * RUNS {
        return Err(format!(
            "{url}: {} run lines, expected {}",
            lines.len(),
            PROCESSES * RUNS
        ));
    }
    if let Some(bad) = lines.iter().find(|l| **l != "ok" && **l != "refused max_price_usd") {
        return Err(format!(
            "{url}: a run ended otherwise than ok or a classified refusal: {bad}"
        ));
    }
    let ok = lines.iter().filter(|l| **l == "ok").count();
    let spent = rt().block_on(async {
        let stores = StoreUrl::parse(url).unwrap().open().await.unwrap();
        stores.ledger().totals(&format!("budget:{key}")).await.unwrap()
    });
    let spent_usd = spent.spent as f64 / NANOS_PER_USD;
    let bound = if reserve >= CALL_USD {
        1.0
    } else {
        1.0 + PROCESSES as f64 * CALL_USD
    };
    // Every admitted call settled its cost, nothing is left held.
    let expected = ok as u64 * (CALL_USD * NANOS_PER_USD).round() as u64;
    if spent.held != 0 || spent.spent.abs_diff(expected) > ok as u64 {
        return Err(format!(
            "{url}: {ok} calls settled {spent:?}, expected {expected} nano-dollars spent"
        ));
    }
    if spent_usd > bound + 1e-9 || spent_usd < 1.0 - CALL_USD - 1e-9 {
        return Err(format!(
            "{url} (reserve ${reserve}): {PROCESSES} processes spent ${spent_usd} under a $1.00 budget (bound ${bound})"
        ));
    }
    println!("budget {url} reserve {reserve}: {ok} calls, ${spent_usd:.2} spent (bound ${bound:.2})");
    Ok(())
}

fn approval_test(url: &str) -> Result<(), String> {
    let thread = unique("approval");
    let log = std::env::temp_dir().join(unique("approval-log"));
    let log_s = log.display().to_string();
    let out = run_all(1, "pause", &[url, &thread, &log_s]).remove(0);
    if log.exists() {
        return Err(format!("{url}: the call ran before it was approved"));
    }
    let interrupt: HitlInterrupt = serde_json::from_str(out.trim()).map_err(|e| format!("{url}: {e}: {out}"))?;
    let request = interrupt.requests[0].call_id.clone();
    let resume = interrupt
        .decide([(request.as_str(), Decision::Approve)])
        .map_err(|e| e.to_string())?;
    let resume = serde_json::to_string(&resume).unwrap();
    let b = run_all(1, "resume", &[url, &thread, &log_s, &resume]).remove(0);
    if b.trim() != "done done" {
        return Err(format!("{url}: process B did not finish the approved run: {b}"));
    }
    // A replay in a third process is refused, and runs nothing.
    let c = run_all(1, "resume", &[url, &thread, &log_s, &resume]).remove(0);
    if c.trim() != "error Conflict" {
        return Err(format!("{url}: a replayed decision was not refused: {c}"));
    }
    let ran = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    if ran.lines().count() != 1 {
        return Err(format!(
            "{url}: the approved call ran {} times: {ran}",
            ran.lines().count()
        ));
    }
    Ok(())
}

fn crash_test(url: &str) -> Result<(), String> {
    let thread = unique("crash");
    let mut child = spawn("writer", &[url, &thread]);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut confirmed = 0;
    for line in lines.by_ref() {
        confirmed = line.unwrap().trim_start_matches("wrote ").parse::<u64>().unwrap();
        if confirmed >= 10 {
            break;
        }
    }
    child.kill().expect("SIGKILL the writer");
    child.wait().unwrap();
    rt().block_on(async {
        let stores = StoreUrl::parse(url).unwrap().open().await.unwrap();
        let store = stores.checkpointer().unwrap();
        let latest = store.latest(&thread).await.map_err(|e| format!("{url}: {e}"))?;
        let Some(latest) = latest else {
            return Err(format!("{url}: no checkpoint after the kill"));
        };
        if latest.seq < confirmed {
            return Err(format!(
                "{url}: the store went back to {} after confirming {confirmed}",
                latest.seq
            ));
        }
        whole(&latest)?;
        // The store goes on from there: the next checkpoint is taken, a replay is not.
        store
            .put(&big_checkpoint(&thread, latest.seq + 1))
            .await
            .map_err(|e| format!("{url}: {e}"))?;
        if store.put(&big_checkpoint(&thread, latest.seq + 1)).await.is_ok() {
            return Err(format!("{url}: a checkpoint was replaced after the crash"));
        }
        Ok(())
    })
}

/// A loopback TCP proxy in front of a store server that the test can cut:
/// every open connection is shut down and new ones are closed at once,
/// which a client sees exactly as a server that died.
struct Proxy {
    addr: std::net::SocketAddr,
    cut: Arc<std::sync::atomic::AtomicBool>,
    open: Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Proxy {
    fn start(upstream: String) -> Proxy {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open: Arc<std::sync::Mutex<Vec<std::net::TcpStream>>> = Arc::default();
        let (is_cut, conns) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if is_cut.load(Ordering::SeqCst) {
                    let _ = client.shutdown(std::net::Shutdown::Both);
                    continue;
                }
                let Ok(server) = std::net::TcpStream::connect(&upstream) else {
                    continue;
                };
                let mut list = conns.lock().unwrap();
                list.push(client.try_clone().unwrap());
                list.push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Proxy { addr, cut, open }
    }

    /// The outage: every connection through the proxy breaks, new ones are closed.
    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for conn in self.open.lock().unwrap().drain(..) {
            let _ = conn.shutdown(std::net::Shutdown::Both);
        }
    }

    fn restore(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// `url` with its `host:port` replaced by the proxy's.
    fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").unwrap();
        let start = rest.find('@').map_or(0, |at| at + 1);
        let end = rest[start..].find('/').map_or(rest.len(), |slash| start + slash);
        format!("{scheme}://{}{}{}", &rest[..start], self.addr, &rest[end..])
    }
}

/// `host:port` of a store URL.
fn authority(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    let start = rest.find('@').map_or(0, |at| at + 1);
    let end = rest[start..].find('/').map_or(rest.len(), |slash| start + slash);
    rest[start..end].to_owned()
}

/// How the store fails in `outage_test`.
enum Outage<'a> {
    /// Cut the connections through this proxy, then restore them.
    Proxy(&'a Proxy),
    /// Hold the SQLite file's write lock in another process, then SIGKILL it.
    Locker(&'a str),
    /// SIGKILL this private Redis server, then start it again on its files.
    Kill(PrivateRedis),
    /// SIGKILL this private PostgreSQL cluster's postmaster and backends,
    /// then start it again on its data directory and port.
    KillPostgres(PrivatePostgres),
}

/// A Redis server of this test alone, on a free loopback port, keeping an
/// append-only file synced on every write (as a production Redis that must
/// not lose acknowledged writes is configured), so it can be SIGKILLed and
/// started again without disturbing the servers other tests share.
struct PrivateRedis {
    dir: std::path::PathBuf,
    port: u16,
    server: Option<std::process::Child>,
}

impl PrivateRedis {
    fn start() -> Result<PrivateRedis, String> {
        let dir = std::env::temp_dir().join(unique("redis-private"));
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut redis = PrivateRedis {
            dir,
            port,
            server: None,
        };
        redis.restart()?;
        Ok(redis)
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Starts the server on its directory and waits until it says it is ready.
    fn restart(&mut self) -> Result<(), String> {
        let mut child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string(), "--dir"])
            .arg(&self.dir)
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--daemonize",
                "no",
            ])
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start redis-server (install it, as .ci/services.sh does): {e}"))?;
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut seen = String::new();
        loop {
            let mut l = String::new();
            if out.read_line(&mut l).unwrap_or(0) == 0 {
                let _ = child.kill();
                child.wait().unwrap();
                return Err(format!(
                    "redis-server on port {} exited before it was ready: {seen}",
                    self.port
                ));
            }
            if l.contains("Ready to accept connections") {
                break;
            }
            seen.push_str(&l);
        }
        // Its later log lines are read and dropped, so the pipe never fills.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        self.server = Some(child);
        Ok(())
    }

    /// SIGKILL: no shutdown, no final write.
    fn kill(&mut self) {
        if let Some(mut child) = self.server.take() {
            child.kill().expect("SIGKILL redis-server");
            child.wait().unwrap();
        }
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A PostgreSQL cluster of this test alone (initdb, trust authentication on
/// loopback, `fsync = on`), on a free loopback port, so its postmaster can be
/// SIGKILLed and started again without disturbing the server other tests
/// share. As root (CI), the cluster belongs to the `postgres` user (or a
/// `tinyagents-pg` user created for it), as in `.ci/services.sh`: the server
/// refuses to run as root.
struct PrivatePostgres {
    bin: std::path::PathBuf,
    dir: std::path::PathBuf,
    port: u16,
    /// `runuser -u OWNER --` as root, empty otherwise.
    run_as: Vec<String>,
    /// `kill` ran since the last start: the next start must be a crash recovery.
    killed: bool,
}

impl PrivatePostgres {
    /// The newest `/usr/lib/postgresql/*/bin` (Debian's layout, which
    /// `.ci/services.sh` uses too), or `None` when PostgreSQL is not installed.
    fn bin() -> Option<std::path::PathBuf> {
        let versions = std::fs::read_dir("/usr/lib/postgresql").ok()?;
        versions
            .filter_map(|v| {
                let v = v.ok()?;
                let major: u32 = v.file_name().to_str()?.parse().ok()?;
                let bin = v.path().join("bin");
                bin.join("initdb").exists().then_some((major, bin))
            })
            .max_by_key(|(major, _)| *major)
            .map(|(_, bin)| bin)
    }

    /// Creates the cluster and starts it.
    fn start_new(bin: std::path::PathBuf) -> Result<PrivatePostgres, String> {
        let dir = std::env::temp_dir().join(unique("postgres-private"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut postgres = PrivatePostgres {
            bin,
            dir,
            port,
            run_as: Vec::new(),
            killed: false,
        };
        if running_as_root() {
            let owner = if sh(Command::new("id").arg("postgres")).is_ok() {
                "postgres"
            } else {
                if sh(Command::new("id").arg("tinyagents-pg")).is_err() {
                    sh(Command::new("useradd").args(["--system", "--no-create-home", "tinyagents-pg"]))?;
                }
                "tinyagents-pg"
            };
            sh(Command::new("chown").arg(owner).arg(&postgres.dir))?;
            postgres.run_as = ["runuser", "-u", owner, "--"].map(String::from).to_vec();
        }
        let data = postgres.dir.join("data");
        sh(postgres
            .command("initdb")
            .arg("-D")
            .arg(&data)
            .args(["-U", "tinyagents", "--auth=trust", "-E", "UTF8"]))?;
        postgres.start()?;
        Ok(postgres)
    }

    /// `bin/NAME`, run as the cluster's owner.
    fn command(&self, name: &str) -> Command {
        let program = self.bin.join(name);
        match self.run_as.split_first() {
            Some((runuser, args)) => {
                let mut c = Command::new(runuser);
                c.args(args).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    fn url(&self) -> String {
        format!("postgres://tinyagents@127.0.0.1:{}/postgres", self.port)
    }

    /// Starts the postmaster on the data directory and port, and waits (at
    /// most 30 s, `pg_ctl -w`) until it accepts connections. The lock files
    /// a killed postmaster leaves (`postmaster.pid` and the socket's
    /// `.lock`) are removed first: `kill` has made sure none of its processes
    /// runs, but a killed postmaster may stay a zombie until its parent reaps
    /// it, and the server takes a zombie's id in a lock file as a live server.
    fn start(&mut self) -> Result<(), String> {
        let data = self.dir.join("data");
        let _ = std::fs::remove_file(data.join("postmaster.pid"));
        let _ = std::fs::remove_file(self.dir.join(format!(".s.PGSQL.{}.lock", self.port)));
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={} -c fsync=on",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("postgres.log");
        let started = sh(self
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(&log)
            .args(["-w", "-t", "30", "-o", &options, "start"]));
        if let Err(e) = started {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(format!(
                "PostgreSQL on port {} did not start: {e}; its log:\n{log}",
                self.port
            ));
        }
        // After a SIGKILL the server must have recovered from its WAL (the
        // kill was a crash, not a shutdown).
        if std::mem::take(&mut self.killed) {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            if !log.contains("not properly shut down") {
                return Err(format!(
                    "PostgreSQL on port {} started after the SIGKILL without a crash recovery; its log:\n{log}",
                    self.port
                ));
            }
        }
        std::net::TcpStream::connect(("127.0.0.1", self.port))
            .map(drop)
            .map_err(|e| format!("PostgreSQL said it started but port {} refuses: {e}", self.port))
    }

    /// The postmaster's process id, from the first line of `postmaster.pid`.
    fn postmaster(&self) -> Option<u32> {
        let pid = std::fs::read_to_string(self.dir.join("data/postmaster.pid")).ok()?;
        pid.lines().next()?.trim().parse().ok()
    }

    /// SIGKILL of the postmaster and of every backend it started: no
    /// shutdown, no checkpoint. The postmaster is stopped first so it starts
    /// no process meanwhile; returns once none of them is alive (at most 10 s)
    /// and the port refuses connections.
    fn kill(&mut self) -> Result<(), String> {
        let Some(postmaster) = self.postmaster() else {
            return Err(format!("no postmaster.pid in {}", self.dir.display()));
        };
        signal("STOP", &[postmaster])?;
        self.killed = true;
        let mut pids = children(postmaster);
        pids.push(postmaster);
        // A backend may exit by itself meanwhile (`kill` then fails for its
        // id and still signals the others): what counts is that none is alive.
        let _ = signal("KILL", &pids);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pids.iter().any(|pid| alive(*pid)) {
            if std::time::Instant::now() > deadline {
                return Err(format!("PostgreSQL processes {pids:?} still alive 10 s after SIGKILL"));
            }
            std::thread::yield_now();
        }
        if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
            return Err(format!("port {} still accepts connections after the kill", self.port));
        }
        Ok(())
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        if let Some(postmaster) = self.postmaster().filter(|pid| alive(*pid)) {
            let mut pids = children(postmaster);
            pids.push(postmaster);
            let _ = signal("KILL", &pids);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `command`; its output is returned in the error when it fails.
fn sh(command: &mut Command) -> Result<(), String> {
    let out = command.output().map_err(|e| format!("cannot run {command:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{command:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|uids| uids.split_whitespace().next().map(|uid| uid == "0"))
        .unwrap_or(false)
}

/// `kill -SIGNAL PIDS…`.
fn signal(name: &str, pids: &[u32]) -> Result<(), String> {
    sh(Command::new("kill")
        .arg(format!("-{name}"))
        .args(pids.iter().map(u32::to_string)))
}

/// The fields of `/proc/PID/stat` after the command name (state, ppid, …).
fn proc_stat(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    Some(after.split_whitespace().map(String::from).collect())
}

/// The process exists and is not a zombie.
fn alive(pid: u32) -> bool {
    proc_stat(pid).is_some_and(|f| f.first().is_some_and(|state| state != "Z" && state != "X"))
}

/// The processes whose parent is `parent`.
fn children(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| proc_stat(*pid).is_some_and(|f| f.get(1).is_some_and(|ppid| *ppid == parent.to_string())))
        .collect()
}

/// 4 workers, each with a paid call in flight when the store fails: every
/// call the model answered is recorded once the store is back.
fn outage_test(url: &str, mut outage: Outage<'_>) -> Result<(), String> {
    let key = unique("outage");
    let worker_url = match &outage {
        Outage::Proxy(proxy) => proxy.url(url),
        Outage::Locker(_) | Outage::Kill(_) | Outage::KillPostgres(_) => url.to_owned(),
    };
    let mut children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(std::env::current_exe().unwrap())
                .env(WORKER_ENV, "outage")
                .args([worker_url.as_str(), key.as_str()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn a worker")
        })
        .collect();
    let mut outs: Vec<_> = children
        .iter_mut()
        .map(|c| BufReader::new(c.stdout.take().unwrap()))
        .collect();
    let mut ins: Vec<_> = children.iter_mut().map(|c| c.stdin.take().unwrap()).collect();
    let line = |out: &mut BufReader<std::process::ChildStdout>| {
        let mut l = String::new();
        out.read_line(&mut l).unwrap();
        l.trim().to_owned()
    };
    for out in &mut outs {
        let l = line(out);
        if l != "in-call" {
            return Err(format!("{url}: a worker said {l:?} before its second call"));
        }
    }
    // Every worker has a call in flight: the store fails now.
    let mut locker = None;
    match &mut outage {
        Outage::Proxy(proxy) => proxy.cut(),
        Outage::Kill(redis) => redis.kill(),
        Outage::KillPostgres(postgres) => postgres.kill()?,
        Outage::Locker(path) => {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .env(WORKER_ENV, "locker")
                .arg(path)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn the locker");
            let l = line(&mut BufReader::new(child.stdout.take().unwrap()));
            if l != "locked" {
                let _ = child.kill();
                child.wait().unwrap();
                return Err(format!("{url}: the locker said {l:?}"));
            }
            locker = Some(child);
        }
    }
    for input in &mut ins {
        writeln!(input, "go").unwrap();
    }
    for out in &mut outs {
        let (two, three, waiting) = (line(out), line(out), line(out));
        if two != "run2 error Middleware calls 2" || three != "run3 error Middleware calls 2" || waiting != "waiting" {
            return Err(format!(
                "{url}: during the outage a worker said {two:?}, {three:?}, {waiting:?} (expected the in-flight \
                 call's settle to fail and the next call to be refused without being made)"
            ));
        }
    }
    // The store is back.
    match &mut outage {
        Outage::Proxy(proxy) => proxy.restore(),
        Outage::Kill(redis) => redis.restart()?,
        Outage::KillPostgres(postgres) => postgres.start()?,
        Outage::Locker(_) => {
            let mut child = locker.take().unwrap();
            child.kill().expect("SIGKILL the writer");
            child.wait().unwrap();
        }
    }
    for input in &mut ins {
        writeln!(input, "back").unwrap();
    }
    let mut made = 0u64;
    for out in &mut outs {
        let l = line(out);
        let f: Vec<&str> = l.split(' ').collect();
        if f.len() != 6 || f[0] != "made" || f[2] != "unrecorded" || f[3] != "0" {
            return Err(format!("{url}: after the outage a worker said {l:?}"));
        }
        made += f[1].parse::<u64>().unwrap();
    }
    for mut child in children {
        let status = child.wait().unwrap();
        if !status.success() {
            return Err(format!("{url}: a worker failed: {status:?}"));
        }
    }
    let totals = rt().block_on(async {
        let stores = StoreUrl::parse(url).unwrap().open().await.unwrap();
        stores.ledger().totals(&format!("budget:{key}")).await.unwrap()
    });
    let call = tinyagents::store::usd_to_nanos(CALL_USD);
    if made != 3 * PROCESSES as u64 {
        return Err(format!(
            "{url}: the workers made {made} calls, expected {}",
            3 * PROCESSES
        ));
    }
    if totals.spent + totals.held < made * call {
        return Err(format!(
            "{url}: {made} calls of {call} nano-dollars were made, the store holds {totals:?}: spend was lost"
        ));
    }
    if totals.spent != made * call || totals.held != 0 {
        return Err(format!(
            "{url}: the store holds {totals:?} for {made} calls of {call} nano-dollars (a kept settle landed twice?)"
        ));
    }
    println!(
        "outage {url}: {made} calls made, all {} nano-dollars recorded",
        totals.spent
    );
    Ok(())
}

fn main() {
    if let Ok(mode) = std::env::var(WORKER_ENV) {
        worker(&mode);
        return;
    }
    let redis_url = env_url("TINYAGENTS_REDIS_URL");
    let postgres_url = env_url("TINYAGENTS_POSTGRES_URL");
    let sqlite_path = std::env::temp_dir().join(unique("stores")).with_extension("db");
    let sqlite_url = format!("sqlite:{}", sqlite_path.display());

    let mut results: Vec<(String, Result<(), String>)> = Vec::new();
    results.push(("rate-limit bucket across processes".into(), bucket_tests(&redis_url)));
    for url in [&redis_url, &postgres_url, &sqlite_url] {
        results.push((format!("budget without reservation ({url})"), budget_test(url, 0.0)));
        results.push((
            format!("budget reserving each call's cost ({url})"),
            budget_test(url, CALL_USD),
        ));
        results.push((
            format!("model and tool call counters of one thread ({url})"),
            counters_test(url),
        ));
    }
    for url in [&redis_url, &postgres_url, &sqlite_url] {
        results.push((
            format!("approval paused in A, resumed in B ({url})"),
            approval_test(url),
        ));
        results.push((format!("SIGKILL mid-put ({url})"), crash_test(url)));
    }
    for url in [&redis_url, &postgres_url] {
        let proxy = Proxy::start(authority(url));
        results.push((
            format!("store cut off with calls in flight ({url})"),
            outage_test(url, Outage::Proxy(&proxy)),
        ));
    }
    let private = PrivateRedis::start();
    results.push((
        "a private Redis (append-only file) SIGKILLed with calls in flight, then started again".into(),
        private.and_then(|redis| outage_test(&redis.url(), Outage::Kill(redis))),
    ));
    match PrivatePostgres::bin() {
        Some(bin) => results.push((
            "a private PostgreSQL cluster SIGKILLed with calls in flight, then started again".into(),
            PrivatePostgres::start_new(bin)
                .and_then(|postgres| outage_test(&postgres.url(), Outage::KillPostgres(postgres))),
        )),
        None if std::env::var("CI").is_ok_and(|ci| ci == "true") => results.push((
            "a private PostgreSQL cluster SIGKILLed with calls in flight".into(),
            Err(
                "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin) and CI=true: install it, as \
                 .ci/services.sh expects"
                    .into(),
            ),
        )),
        None => println!(
            "test a private PostgreSQL cluster SIGKILLed with calls in flight ... skipped: PostgreSQL is not \
             installed (no /usr/lib/postgresql/*/bin)"
        ),
    }
    results.push((
        format!("SQLite's writer holding the lock, then SIGKILLed, with calls in flight ({sqlite_url})"),
        outage_test(&sqlite_url, Outage::Locker(&sqlite_path.display().to_string())),
    ));
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", sqlite_path.display()));
    }

    let failed: Vec<_> = results.iter().filter(|(_, r)| r.is_err()).collect();
    for (name, r) in &results {
        match r {
            Ok(()) => println!("test {name} ... ok"),
            Err(e) => eprintln!("test {name} ... FAILED: {e}"),
        }
    }
    println!(
        "test result: {}. {} passed; {} failed",
        if failed.is_empty() { "ok" } else { "FAILED" },
        results.len() - failed.len(),
        failed.len()
    );
    if !failed.is_empty() {
        std::process::exit(1);
    }
}
