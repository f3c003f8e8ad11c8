//! `ToolRetryMiddleware`: retries retryable tool failures with backoff, one
//! result per call whatever happens, `on_failure`, the tool filter, and bad
//! configs rejected.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use crate::support::tool_texts;
use tinyagents::testing::trace;
use tokio::time::Instant;

/// A tool failing with `error()` for its first `fails` calls, then answering "ok".
fn flaky(name: &'static str, fails: u32, error: fn() -> TinyAgentsError, calls: Arc<AtomicU32>) -> impl Tool {
    tool_fn(name, "Flaky.", move |_cx, _args| {
        let calls = calls.clone();
        async move {
            if calls.fetch_add(1, Ordering::SeqCst) < fails {
                Err(error())
            } else {
                Ok("ok".into())
            }
        }
    })
}

fn rate_limited() -> TinyAgentsError {
    TinyAgentsError::rate_limited("busy", None)
}

fn agent(tools: ToolRegistry, retry: ToolRetryMiddleware, calls: Vec<ToolCall>) -> Agent<()> {
    Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(calls),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(tools)
    .with_stack(MiddlewareStack::new().with(retry).unwrap())
}

fn config(toml: &str) -> ToolRetryMiddleware {
    from_toml_str::<ToolRetryConfig>(toml).unwrap().build()
}

/// One call to a tool `name` failing its first `fails` calls with `error()`,
/// through `retry`, events to `sink`: the run and how many times the tool ran.
async fn run_flaky(
    name: &'static str,
    fails: u32,
    error: fn() -> TinyAgentsError,
    retry: ToolRetryMiddleware,
    sink: Arc<CollectingSink>,
) -> (Result<AgentRun>, u32) {
    let calls = Arc::new(AtomicU32::new(0));
    let tools = ToolRegistry::new()
        .with(flaky(name, fails, error, calls.clone()))
        .unwrap();
    let run = agent(tools, retry, vec![ToolCall::new("c1", name, json!({}))])
        .run(&mut RunContext::new(RunConfig::new("r"), ()).with_sink(sink), &(), "go")
        .await;
    (run, calls.load(Ordering::SeqCst))
}

/// [`run_flaky`] on `fetch` with the retry configured by `toml`.
async fn run_fetch(fails: u32, error: fn() -> TinyAgentsError, toml: &str) -> (Result<AgentRun>, u32) {
    run_flaky("fetch", fails, error, config(toml), Arc::new(CollectingSink::new())).await
}

#[tokio::test(start_paused = true)]
async fn a_retryable_failure_is_retried_inside_one_call() {
    let sink = Arc::new(CollectingSink::new());
    let start = Instant::now();
    let (run, calls) = run_flaky(
        "fetch",
        2,
        rate_limited,
        config("initial_delay_ms = 100\njitter = 0.0"),
        sink.clone(),
    )
    .await;
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    assert_eq!(tool_texts(&run.unwrap().messages), ["ok"]);
    assert_eq!(calls, 3);
    let lines: Vec<String> = trace(&sink.events())
        .into_iter()
        .filter(|l| l.starts_with("tool_call ") || l.starts_with("tool_done") || l.starts_with("retry"))
        .collect();
    assert_eq!(
        lines,
        [
            "tool_call fetch",
            "retry tool attempt=1/3 delay=100ms error:rate_limited",
            "retry tool attempt=2/3 delay=200ms error:rate_limited",
            "tool_done fetch",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_that_keeps_failing_gets_one_error_result_and_the_run_goes_on() {
    let (run, calls) = run_fetch(99, rate_limited, "max_attempts = 2\ninitial_delay_ms = 1\njitter = 0.0").await;
    let run = run.unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(
        tool_texts(&run.messages),
        ["Tool `fetch` failed after 2 attempt(s): rate limited: busy"]
    );
    assert_eq!(calls, 2);
}

#[tokio::test(start_paused = true)]
async fn on_failure_error_returns_the_last_error() {
    let (run, _) = run_fetch(
        99,
        rate_limited,
        "max_attempts = 2\ninitial_delay_ms = 1\non_failure = \"error\"",
    )
    .await;
    assert_eq!(run.unwrap_err().kind(), ErrorKind::RateLimited);
}

#[tokio::test(start_paused = true)]
async fn plain_tool_failures_are_retried_only_when_retry_on_names_them() {
    let tool_error = || TinyAgentsError::tool("fetch", "flaky disk");
    let (run, calls) = run_fetch(1, tool_error, "initial_delay_ms = 1").await;
    assert_eq!(
        tool_texts(&run.unwrap().messages),
        ["tool `fetch` failed: flaky disk"],
        "not retryable by default"
    );
    assert_eq!(calls, 1);

    let (run, calls) = run_fetch(1, tool_error, "initial_delay_ms = 1\nretry_on = [\"tool\"]").await;
    assert_eq!(tool_texts(&run.unwrap().messages), ["ok"]);
    assert_eq!(calls, 2);
}

#[tokio::test(start_paused = true)]
async fn only_the_listed_tools_are_retried() {
    let (a, b) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
    let tools = ToolRegistry::new()
        .with(flaky("listed", 1, rate_limited, a.clone()))
        .unwrap()
        .with(flaky("other", 1, rate_limited, b.clone()))
        .unwrap();
    let agent = agent(
        tools,
        config("initial_delay_ms = 1").only_tools(["listed"]),
        vec![
            ToolCall::new("c1", "listed", json!({})),
            ToolCall::new("c2", "other", json!({})),
        ],
    );
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::RateLimited, "`other` was not retried");
    assert_eq!((a.load(Ordering::SeqCst), b.load(Ordering::SeqCst)), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn an_interrupt_from_a_tool_is_never_retried_or_turned_into_a_result() {
    let interrupt = || TinyAgentsError::interrupted(Some("approval".into()), "needs a human");
    let retry = ToolRetryMiddleware::new().retry_on(|_| true);
    let (run, calls) = run_flaky("pay", 5, interrupt, retry, Arc::new(CollectingSink::new())).await;
    assert_eq!(run.unwrap_err().kind(), ErrorKind::Interrupted);
    assert_eq!(calls, 1);
}

#[test]
fn bad_configs_are_rejected_naming_field_value_and_rule() {
    let err = from_toml_str::<ToolRetryConfig>("max_attempts = 0\ninitial_delay_ms = 10").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid configuration: `max_attempts` = 0: must be in 1..=100"
    );
    let err = from_toml_str::<ToolRetryConfig>("initial_delay_ms = 5000\nmax_delay_ms = 4999").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid configuration: `max_delay_ms` = 4999: must be at least `initial_delay_ms` (5000): the cap cannot \
         be below the first delay"
    );
    let err = from_toml_str::<ToolRetryConfig>("backoff_factor = inf").unwrap_err();
    assert!(err.to_string().contains("`backoff_factor` = \"inf\""), "{err}");
}

#[test]
fn the_builtin_is_documented_and_in_the_catalog() {
    let doc = catalog().into_iter().find(|d| d.name == "tool_retry").unwrap();
    assert_eq!(doc.hooks, [HookKind::WrapTool]);
}
