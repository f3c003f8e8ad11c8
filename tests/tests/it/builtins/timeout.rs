//! `TimeoutMiddleware` on the paused clock: the inner future is dropped on
//! expiry, the error is a `Timeout`, `on_error` runs, events stay balanced,
//! a retry outside sees a retryable error, tool and run limits, and bad
//! configs rejected.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::model::ModelStream;
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use crate::support::{run_into, tool_texts};
use tinyagents::testing::trace;
use tinyagents_tests::assert_balanced;
use tokio::time::Instant;

/// Sets its flag when dropped: proves the call's future was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Streams "part one " at once, then each later word after `pause` (per call,
/// the pauses come from `pauses`, the last repeating).
struct SlowModel {
    pauses: Vec<Duration>,
    calls: AtomicU32,
    dropped: Arc<AtomicBool>,
}

impl SlowModel {
    fn new(pauses: impl IntoIterator<Item = u64>) -> Self {
        Self {
            pauses: pauses.into_iter().map(Duration::from_millis).collect(),
            calls: AtomicU32::new(0),
            dropped: Arc::new(AtomicBool::new(false)),
        }
    }
}

#[async_trait]
impl ChatModel for SlowModel {
    fn id(&self) -> &str {
        "slow"
    }

    async fn stream(&self, _request: &ModelRequest) -> Result<ModelStream> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) as usize;
        let pause = *self.pauses.get(n).or(self.pauses.last()).unwrap();
        let flag = DropFlag(self.dropped.clone());
        let words = vec!["part one ", "part two"];
        let stream = futures::stream::iter(words.into_iter().enumerate()).then(move |(i, w)| {
            let _keep = &flag;
            async move {
                if i > 0 {
                    tokio::time::sleep(pause).await;
                }
                Ok(ModelDelta::text(w))
            }
        });
        Ok(stream.boxed())
    }
}

/// Records the kind of every error `on_error` sees.
#[derive(Clone, Default)]
struct ErrorSeen(Arc<Mutex<Vec<String>>>);

#[middleware(name = "error_seen")]
impl ErrorSeen {
    #[on_error]
    fn seen(&self, error: &TinyAgentsError) -> Result<()> {
        self.0.lock().unwrap().push(error.to_string());
        Ok(())
    }
}

fn timeout(toml: &str) -> TimeoutMiddleware {
    from_toml_str::<TimeoutConfig>(toml).unwrap().build()
}

#[tokio::test(start_paused = true)]
async fn an_expired_model_call_is_dropped_and_fails_with_a_timeout() {
    let model = Arc::new(SlowModel::new([5000]));
    let seen = ErrorSeen::default();
    let sink = Arc::new(CollectingSink::new());
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(
        MiddlewareStack::empty()
            .with(seen.clone())
            .unwrap()
            .with(timeout("model_ms = 1000"))
            .unwrap(),
    );
    let start = Instant::now();
    let err = run_into(&agent, sink.clone(), "hi").await.unwrap_err();
    assert_eq!(err, TinyAgentsError::timeout("model call", Duration::from_secs(1)));
    assert!(err.is_retryable());
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert!(model.dropped.load(Ordering::SeqCst), "the inner stream was dropped");
    assert_eq!(
        *seen.0.lock().unwrap(),
        ["model call timed out after 1s"],
        "on_error saw the timeout once"
    );
    let lines = trace(&sink.events());
    assert_balanced(&lines);
    let calls: Vec<&String> = lines
        .iter()
        .filter(|l| {
            l.starts_with("model_") || l.starts_with("discarded") || l.starts_with("delta") || l.contains("wrap_model")
        })
        .collect();
    assert_eq!(
        calls,
        [
            "started timeout.wrap_model",
            "model_call step=1 attempt=1",
            "delta \"part one \"",
            "model_done error:cancelled",
            "discarded attempt=1",
            "completed timeout.wrap_model error:timeout",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_retry_outside_sees_a_retryable_timeout_and_tries_again() {
    let model = Arc::new(SlowModel::new([5000, 10]));
    let retry = from_toml_str::<ModelRetryConfig>("initial_delay_ms = 500\njitter = 0.0")
        .unwrap()
        .build();
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(
        MiddlewareStack::empty()
            .with(retry)
            .unwrap()
            .with(timeout("model_ms = 1000"))
            .unwrap(),
    );
    let sink = Arc::new(CollectingSink::new());
    let start = Instant::now();
    let run = run_into(&agent, sink.clone(), "hi").await.unwrap();
    assert_eq!(run.final_text(), "part one part two");
    assert_eq!(start.elapsed(), Duration::from_millis(1000 + 500 + 10));
    assert!(trace(&sink.events()).contains(&"retry model attempt=1/3 delay=500ms error:timeout".to_owned()));
    assert_balanced(&trace(&sink.events()));
}

fn slow_tool(ms: u64) -> impl Tool {
    tool_fn("slow", "Sleeps.", move |_cx, _a| async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Ok("finished".into())
    })
}

#[tokio::test(start_paused = true)]
async fn a_tool_call_past_its_limit_fails_with_a_timeout_and_its_events_close() {
    let sink = Arc::new(CollectingSink::new());
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("slow", json!({})),
        ScriptedTurn::text("never"),
    ]))
    .with_tools(ToolRegistry::new().with(slow_tool(10_000)).unwrap())
    .with_stack(MiddlewareStack::empty().with(timeout("tool_ms = 500")).unwrap());
    let start = Instant::now();
    let err = run_into(&agent, sink.clone(), "go").await.unwrap_err();
    assert_eq!(
        err,
        TinyAgentsError::timeout("tool call `slow`", Duration::from_millis(500))
    );
    assert_eq!(start.elapsed(), Duration::from_millis(500));
    let lines = trace(&sink.events());
    assert_balanced(&lines);
    assert!(lines.contains(&"tool_done slow error".to_owned()), "{lines:#?}");
}

#[tokio::test(start_paused = true)]
async fn a_tool_retry_outside_turns_repeated_timeouts_into_one_error_result() {
    let retry = from_toml_str::<ToolRetryConfig>("max_attempts = 2\ninitial_delay_ms = 100\njitter = 0.0")
        .unwrap()
        .build();
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("slow", json!({})),
        ScriptedTurn::text("gave up on it"),
    ]))
    .with_tools(ToolRegistry::new().with(slow_tool(10_000)).unwrap())
    .with_stack(
        MiddlewareStack::empty()
            .with(retry)
            .unwrap()
            .with(timeout("tool_ms = 500"))
            .unwrap(),
    );
    let start = Instant::now();
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_millis(500 + 100 + 500));
    let results = tool_texts(&run.messages);
    assert_eq!(
        results,
        ["Tool `slow` failed after 2 attempt(s): tool call `slow` timed out after 500ms"]
    );
    assert_eq!(run.final_text(), "gave up on it");
}

#[tokio::test(start_paused = true)]
async fn the_run_limit_bounds_every_call_after_it_starts() {
    let model = Arc::new(SlowModel::new([5000]));
    // turn 1: the slow model's first word arrives at once, the second after 5 s: the run
    // limit (3 s) is shorter than the model limit (4 s), so it is the run that times out
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(
        MiddlewareStack::empty()
            .with(timeout("model_ms = 4000\nrun_ms = 3000"))
            .unwrap(),
    );
    let start = Instant::now();
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await
        .unwrap_err();
    assert_eq!(err, TinyAgentsError::timeout("run", Duration::from_secs(3)));
    assert_eq!(start.elapsed(), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn a_run_deadline_is_not_retried_or_fallen_back_from() {
    let model = Arc::new(SlowModel::new([5000]));
    let backup: Arc<dyn ChatModel> = Arc::new(ScriptedModel::new([ScriptedTurn::text("unused")]));
    let retry = from_toml_str::<ModelRetryConfig>("initial_delay_ms = 10\njitter = 0.0")
        .unwrap()
        .build();
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(
        MiddlewareStack::empty()
            .with(ModelFallbackMiddleware::new([backup]))
            .unwrap()
            .with(retry)
            .unwrap()
            .with(timeout("run_ms = 1000"))
            .unwrap(),
    );
    let sink = Arc::new(CollectingSink::new());
    let err = run_into(&agent, sink.clone(), "hi").await.unwrap_err();
    assert_eq!(err, TinyAgentsError::timeout("run", Duration::from_secs(1)));
    assert_eq!(model.calls.load(Ordering::SeqCst), 1);
    let lines = trace(&sink.events());
    assert!(
        !lines
            .iter()
            .any(|l| l.starts_with("retry") || l.starts_with("fallback")),
        "{lines:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_starting_after_the_run_deadline_fails_at_once() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let tools = ToolRegistry::new()
        .with(tool_fn("wait", "Sleeps 2 s.", move |_cx, _a| {
            let c = c.clone();
            async move {
                c.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(2)).await;
                Ok("slept".into())
            }
        }))
        .unwrap();
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("a", "wait", json!({})),
            ToolCall::new("b", "wait", json!({})),
        ]),
        ScriptedTurn::text("never"),
    ]))
    .with_tools(tools)
    .with_stack(MiddlewareStack::empty().with(timeout("run_ms = 2000")).unwrap());
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap_err();
    assert_eq!(err, TinyAgentsError::timeout("run", Duration::from_secs(2)));
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the second call never started");
}

#[test]
fn bad_configs_are_rejected_naming_field_value_and_rule() {
    let err = from_toml_str::<TimeoutConfig>("tool_ms = 0").unwrap_err();
    assert_eq!(err.errors()[0].path, "tool_ms");
    assert_eq!(err.errors()[0].value, Some(json!(0)));
    assert_eq!(err.errors()[0].rule, "must be in 1..");
    let err = from_toml_str::<TimeoutConfig>("").unwrap_err();
    assert_eq!(err.errors()[0].path, "model_ms");
    assert!(err.errors()[0].rule.contains("set at least one of"), "{err}");
    let err = from_toml_str::<TimeoutConfig>("run_ms = -5").unwrap_err();
    assert_eq!(err.errors()[0].path, "run_ms");
}

#[test]
fn the_builtin_is_documented_and_in_the_catalog() {
    let doc = catalog().into_iter().find(|d| d.name == "timeout").unwrap();
    assert_eq!(
        doc.hooks,
        [HookKind::BeforeAgent, HookKind::WrapModel, HookKind::WrapTool]
    );
}
