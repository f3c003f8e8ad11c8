//! `RateLimiterMiddleware` on the paused clock: 200 concurrent runs against a
//! 10/s bucket admit exactly what the bucket allows (reject and wait modes),
//! keys per model and per tool, a custom store, retry after a refusal, and
//! bad configs rejected.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use crate::support::tool_texts;
use tinyagents::testing::trace;
use tokio::time::Instant;

/// An agent whose model records when each call was admitted.
fn agent(limiter: RateLimiterMiddleware, admitted: Arc<Mutex<Vec<Instant>>>) -> Arc<Agent<()>> {
    let model = ScriptedModel::from_fn(move |_| {
        admitted.lock().unwrap().push(Instant::now());
        ScriptedTurn::text("ok")
    });
    Arc::new(Agent::new(model).with_stack(MiddlewareStack::new().with(limiter).unwrap()))
}

async fn run_many(agent: &Arc<Agent<()>>, n: usize) -> Vec<Result<AgentRun>> {
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let agent = agent.clone();
            tokio::spawn(async move {
                let mut ctx = RunContext::new(RunConfig::new(format!("run-{i}")), ());
                agent.run(&mut ctx, &(), "hi").await
            })
        })
        .collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.unwrap());
    }
    out
}

fn limiter(toml: &str) -> RateLimiterMiddleware {
    from_toml_str::<RateLimiterConfig>(toml).unwrap().build()
}

#[tokio::test(start_paused = true)]
async fn reject_mode_admits_exactly_the_burst_then_the_refill() {
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let agent = agent(
        limiter("rate_per_second = 10.0\nburst = 10\nmode = \"reject\""),
        admitted.clone(),
    );
    let results = run_many(&agent, 200).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 10, "a full bucket of 10 admits 10 at once");
    let refused: Vec<&TinyAgentsError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(refused.len(), 190);
    assert!(refused.iter().all(|e| e.kind() == ErrorKind::RateLimited));
    assert_eq!(refused[0].retry_after(), Some(Duration::from_millis(100)));

    // one second later the bucket has refilled 10 tokens: exactly 10 more
    tokio::time::advance(Duration::from_secs(1)).await;
    let results = run_many(&agent, 200).await;
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 10);
    assert_eq!(admitted.lock().unwrap().len(), 20);
}

#[tokio::test(start_paused = true)]
async fn wait_mode_admits_every_run_exactly_as_fast_as_the_bucket_allows() {
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let agent = agent(limiter("rate_per_second = 10.0\nburst = 10"), admitted.clone());
    let start = Instant::now();
    let results = run_many(&agent, 200).await;
    assert!(results.iter().all(Result::is_ok));
    let times: Vec<Duration> = admitted.lock().unwrap().iter().map(|t| *t - start).collect();
    assert_eq!(times.len(), 200);
    // by time T, exactly min(200, 10 + floor(10 T)) calls were admitted
    for ms in [0u64, 50, 99, 100, 550, 1000, 5000, 18_999, 19_000, 25_000] {
        let by = times.iter().filter(|t| **t <= Duration::from_millis(ms)).count();
        let allowed = (10 + ms / 100).min(200) as usize;
        assert_eq!(by, allowed, "admitted by {ms} ms");
    }
    assert_eq!(*times.iter().max().unwrap(), Duration::from_secs(19));
}

#[tokio::test(start_paused = true)]
async fn a_wait_is_reported_and_max_wait_turns_a_long_wait_into_a_refusal() {
    let sink = Arc::new(CollectingSink::new());
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let agent = agent(
        limiter("rate_per_second = 2.0\nburst = 1\nmax_wait_ms = 600"),
        admitted.clone(),
    );
    let mut results = Vec::new();
    for i in 0..3 {
        let mut ctx = RunContext::new(RunConfig::new(format!("r{i}")), ()).with_sink(sink.clone());
        results.push(agent.run(&mut ctx, &(), "hi").await.map(|_| ()));
    }
    // sequential: the second waits 500 ms; the third is reserved at once after it, so it waits 500 ms too
    assert!(results.iter().all(Result::is_ok));
    let lines: Vec<String> = trace(&sink.events())
        .into_iter()
        .filter(|l| l.starts_with("rate_limited"))
        .collect();
    assert_eq!(
        lines,
        ["rate_limited global waited=500ms", "rate_limited global waited=500ms"]
    );

    // once the bucket is full again, three at once: the first goes now, the second waits
    // 500 ms (within max_wait), the third would wait 1 s (> 600 ms): refused
    tokio::time::advance(Duration::from_secs(2)).await;
    let results = run_many(&agent, 3).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!(ok, 2);
}

#[tokio::test(start_paused = true)]
async fn per_model_keys_give_each_model_its_own_bucket() {
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let agent = agent(
        limiter("rate_per_second = 1.0\nburst = 1\nkey = \"model\"\nmode = \"reject\""),
        admitted,
    );
    let sink = Arc::new(CollectingSink::new());
    let mut outcomes = Vec::new();
    for model in ["a", "b", "a"] {
        let mut ctx = RunContext::new(RunConfig::new("r").with_model(model), ()).with_sink(sink.clone());
        outcomes.push(agent.run(&mut ctx, &(), "hi").await.is_ok());
    }
    assert_eq!(outcomes, [true, true, false]);
    assert!(trace(&sink.events()).contains(&"rate_limited model:a rejected".to_owned()));
}

#[tokio::test(start_paused = true)]
async fn per_tool_keys_limit_tool_calls_and_leave_model_calls_alone() {
    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("1", "search", json!({})),
            ToolCall::new("2", "fetch", json!({})),
            ToolCall::new("3", "search", json!({})),
        ]),
        ScriptedTurn::text("done"),
    ]);
    let ok = |name: &'static str| tool_fn(name, "Answers.", |_cx, _a| async move { Ok("ok".into()) });
    let retry = from_toml_str::<ToolRetryConfig>("max_attempts = 1").unwrap().build();
    let agent: Agent<()> = Agent::new(model)
        .with_tools(
            ToolRegistry::new()
                .with(ok("search"))
                .unwrap()
                .with(ok("fetch"))
                .unwrap(),
        )
        .with_stack(
            MiddlewareStack::new()
                .with(retry)
                .unwrap()
                .with(limiter(
                    "rate_per_second = 1.0\nburst = 1\nkey = \"tool\"\nmode = \"reject\"",
                ))
                .unwrap(),
        );
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    let results = tool_texts(&run.messages);
    assert_eq!(results[..2], ["ok", "ok"]);
    assert!(results[2].contains("bucket `tool:search`"), "{}", results[2]);
    assert_eq!(run.final_text(), "done", "model calls are not limited by a tool key");
}

#[tokio::test(start_paused = true)]
async fn a_retry_outside_waits_for_the_refusals_retry_after() {
    let admitted = Arc::new(Mutex::new(Vec::new()));
    let a = admitted.clone();
    let model = ScriptedModel::from_fn(move |_| {
        a.lock().unwrap().push(Instant::now());
        ScriptedTurn::text("ok")
    });
    let retry = from_toml_str::<ModelRetryConfig>("initial_delay_ms = 1\njitter = 0.0")
        .unwrap()
        .build();
    let agent: Agent<()> = Agent::new(model).with_stack(
        MiddlewareStack::new()
            .with(retry)
            .unwrap()
            .with(limiter("rate_per_second = 4.0\nburst = 1\nmode = \"reject\""))
            .unwrap(),
    );
    let start = Instant::now();
    for i in 0..2 {
        agent
            .run(&mut RunContext::new(RunConfig::new(format!("r{i}")), ()), &(), "hi")
            .await
            .unwrap();
    }
    let times: Vec<Duration> = admitted.lock().unwrap().iter().map(|t| *t - start).collect();
    assert_eq!(times, [Duration::ZERO, Duration::from_millis(250)]);
}

/// A store that counts reservations and delegates to the in-memory one.
#[derive(Default)]
struct CountingStore {
    inner: InMemoryRateLimitStore,
    calls: AtomicU32,
}

#[async_trait::async_trait]
impl RateLimitStore for CountingStore {
    async fn reserve(
        &self,
        key: &str,
        spec: BucketSpec,
        now: Instant,
        max_wait: Option<Duration>,
    ) -> tinyagents::Result<std::result::Result<Duration, Duration>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Ok(self.inner.reserve_now(key, spec, now, max_wait))
    }
}

#[tokio::test(start_paused = true)]
async fn the_bucket_state_lives_in_the_store_it_is_given() {
    let store = Arc::new(CountingStore::default());
    let shared: Arc<dyn RateLimitStore> = store.clone();
    // two limiters sharing one store share its buckets
    let first = agent(
        RateLimiterMiddleware::new(1.0, 1).reject().with_store(shared.clone()),
        Arc::default(),
    );
    let second = agent(
        RateLimiterMiddleware::new(1.0, 1).reject().with_store(shared),
        Arc::default(),
    );
    assert!(first
        .run(&mut RunContext::new(RunConfig::new("a"), ()), &(), "hi")
        .await
        .is_ok());
    let err = second
        .run(&mut RunContext::new(RunConfig::new("b"), ()), &(), "hi")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RateLimited);
    assert_eq!(store.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn bad_configs_are_rejected_naming_field_value_and_rule() {
    let first = |toml: &str| from_toml_str::<RateLimiterConfig>(toml).unwrap_err().errors()[0].clone();
    let e = first("rate_per_second = -1.0");
    assert_eq!(
        (e.path.as_str(), e.value.clone()),
        ("rate_per_second", Some(json!(-1.0)))
    );
    assert_eq!(e.rule, "must be in 0.001..=1000000.0");
    let err = from_toml_str::<RateLimiterConfig>("rate_per_second = nan").unwrap_err();
    assert!(err
        .to_string()
        .contains("`rate_per_second` = \"NaN\": must be a finite number (not NaN or infinite)"));
    let e = first("burst = 0");
    assert_eq!((e.path.as_str(), e.rule.as_str()), ("burst", "must be in 1..=1000000"));
    let e = first("key = \"user\"");
    assert_eq!((e.path.as_str(), e.value.clone()), ("key", Some(json!("user"))));
    let e = first("mode = \"drop\"");
    assert_eq!(e.path, "mode");
}

#[test]
fn the_builtin_is_documented_and_in_the_catalog() {
    let doc = catalog().into_iter().find(|d| d.name == "rate_limiter").unwrap();
    assert_eq!(doc.hooks, [HookKind::WrapModel, HookKind::WrapTool]);
}
