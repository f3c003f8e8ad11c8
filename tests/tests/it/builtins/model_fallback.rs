//! `ModelFallbackMiddleware`: the same request goes to the next model on a
//! retryable failure, an event names from/to, interrupts are never
//! swallowed; and the stack of timeout inside retry inside fallback, checked
//! event by event.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::model::ModelStream;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::trace;
use tinyagents_tests::assert_balanced;
use tokio::time::Instant;

fn shared(model: ScriptedModel) -> Arc<ScriptedModel> {
    Arc::new(model)
}

fn fallback(models: &[&Arc<ScriptedModel>]) -> ModelFallbackMiddleware {
    ModelFallbackMiddleware::new(models.iter().map(|m| (*m).clone() as Arc<dyn ChatModel>))
}

fn run_ctx(sink: &Arc<CollectingSink>) -> RunContext {
    RunContext::new(RunConfig::new("r").with_model("big"), ()).with_sink(sink.clone())
}

fn lines(sink: &CollectingSink, prefixes: &[&str]) -> Vec<String> {
    trace(&sink.events())
        .into_iter()
        .filter(|l| prefixes.iter().any(|p| l.starts_with(p)))
        .collect()
}

#[tokio::test]
async fn a_retryable_failure_moves_the_same_request_to_the_next_model() {
    let primary =
        shared(ScriptedModel::new([ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true))]).with_id("big"));
    let backup = shared(ScriptedModel::new([ScriptedTurn::text("from the backup")]).with_id("small"));
    let sink = Arc::new(CollectingSink::new());
    let agent: Agent<()> =
        Agent::new(primary.clone()).with_stack(MiddlewareStack::new().with(fallback(&[&backup])).unwrap());
    let run = agent.run(&mut run_ctx(&sink), &(), "question").await.unwrap();
    assert_eq!(run.final_text(), "from the backup");
    assert_eq!(
        primary.requests()[0].messages,
        backup.requests()[0].messages,
        "the same request"
    );
    assert!(backup.requests()[0].route.is_some());
    assert_eq!(
        lines(&sink, &["model_call", "model_done", "discarded", "fallback"]),
        [
            "model_call step=1 attempt=1",
            "model_done error:model",
            "discarded attempt=1",
            "fallback big -> small error:model",
            "model_call step=1 attempt=2",
            "model_done",
        ]
    );
    let models = crate::support::models_called(&sink.events());
    assert_eq!(models, ["big", "small"]);
}

#[tokio::test]
async fn the_chain_goes_on_until_a_model_answers_or_returns_the_last_error() {
    let primary = shared(ScriptedModel::new([ScriptedTurn::Fail(TinyAgentsError::model("a down", true))]).with_id("a"));
    let b = shared(ScriptedModel::new([ScriptedTurn::Fail(TinyAgentsError::model("b down", true))]).with_id("b"));
    let c = shared(ScriptedModel::new([ScriptedTurn::Fail(TinyAgentsError::model("c down", true))]).with_id("c"));
    let sink = Arc::new(CollectingSink::new());
    let agent: Agent<()> = Agent::new(primary).with_stack(MiddlewareStack::new().with(fallback(&[&b, &c])).unwrap());
    let err = agent.run(&mut run_ctx(&sink), &(), "q").await.unwrap_err();
    assert_eq!(err, TinyAgentsError::model("c down", true));
    assert_eq!(
        lines(&sink, &["fallback"]),
        ["fallback big -> b error:model", "fallback b -> c error:model"]
    );
}

#[tokio::test]
async fn a_non_retryable_error_does_not_fall_back() {
    let primary = shared(ScriptedModel::new([ScriptedTurn::Fail(TinyAgentsError::model(
        "bad request",
        false,
    ))]));
    let backup = shared(ScriptedModel::new([ScriptedTurn::text("unused")]));
    let agent: Agent<()> = Agent::new(primary).with_stack(MiddlewareStack::new().with(fallback(&[&backup])).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let err = agent.run(&mut run_ctx(&sink), &(), "q").await.unwrap_err();
    assert_eq!(err, TinyAgentsError::model("bad request", false));
    assert_eq!(backup.calls(), 0);
    assert!(lines(&sink, &["fallback"]).is_empty());
}

#[tokio::test]
async fn interrupts_and_cancellations_are_never_swallowed() {
    for error in [
        TinyAgentsError::interrupted(Some("review".into()), "needs approval"),
        TinyAgentsError::cancelled("user left"),
    ] {
        let primary = shared(ScriptedModel::new([ScriptedTurn::Fail(error.clone())]));
        let backup = shared(ScriptedModel::new([ScriptedTurn::text("unused")]));
        let mw = fallback(&[&backup]).fallback_on(|_| true);
        let agent: Agent<()> = Agent::new(primary).with_stack(MiddlewareStack::new().with(mw).unwrap());
        let sink = Arc::new(CollectingSink::new());
        let err = agent.run(&mut run_ctx(&sink), &(), "q").await.unwrap_err();
        assert_eq!(err, error);
        assert_eq!(backup.calls(), 0);
    }
}

#[tokio::test]
async fn the_failed_models_streamed_deltas_are_marked_before_the_fallbacks_arrive() {
    let primary = shared(ScriptedModel::new([ScriptedTurn::FailAfter(
        vec![ModelDelta::text("partial ")],
        TinyAgentsError::model("reset", true),
    )]));
    let backup = shared(ScriptedModel::new([ScriptedTurn::text("complete")]).with_id("small"));
    let sink = Arc::new(CollectingSink::new());
    let agent: Agent<()> = Agent::new(primary).with_stack(MiddlewareStack::new().with(fallback(&[&backup])).unwrap());
    let run = agent.run(&mut run_ctx(&sink), &(), "q").await.unwrap();
    assert_eq!(run.final_text(), "complete");
    assert_eq!(
        lines(&sink, &["delta", "discarded", "fallback"]),
        [
            "delta \"partial \"",
            "discarded attempt=1",
            "fallback big -> small error:model",
            "delta \"complete\""
        ]
    );
}

// ----- timeout inside retry inside fallback -----

/// Streams its first word at once and the next after `pause`.
struct Slow {
    id: &'static str,
    pause: Duration,
    calls: AtomicU32,
}

#[async_trait]
impl ChatModel for Slow {
    fn id(&self) -> &str {
        self.id
    }

    async fn stream(&self, _request: &ModelRequest) -> Result<ModelStream> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let pause = self.pause;
        let words = ["slow ", "answer"];
        Ok(futures::stream::iter(words.into_iter().enumerate())
            .then(move |(i, w)| async move {
                if i > 0 {
                    tokio::time::sleep(pause).await;
                }
                Ok(ModelDelta::text(w))
            })
            .boxed())
    }
}

#[tokio::test(start_paused = true)]
async fn timeout_inside_retry_inside_fallback_runs_in_this_exact_order() {
    let primary = Arc::new(Slow {
        id: "primary",
        pause: Duration::from_secs(60),
        calls: AtomicU32::new(0),
    });
    let backup = shared(ScriptedModel::new([ScriptedTurn::text("backup answer")]).with_id("backup"));
    let retry = from_toml_str::<ModelRetryConfig>("max_attempts = 2\ninitial_delay_ms = 100\njitter = 0.0")
        .unwrap()
        .build();
    let timeout = from_toml_str::<TimeoutConfig>("model_ms = 1000").unwrap().build();
    let stack = MiddlewareStack::new()
        .with(fallback(&[&backup]))
        .unwrap()
        .with(retry)
        .unwrap()
        .with(timeout)
        .unwrap();
    let agent: Agent<()> = Agent::new(primary.clone()).with_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r").with_model("primary"), ()).with_sink(sink.clone());
    let start = Instant::now();
    let run = agent.run(&mut ctx, &(), "q").await.unwrap();
    assert_eq!(run.final_text(), "backup answer");
    assert_eq!(start.elapsed(), Duration::from_millis(1000 + 100 + 1000));
    assert_eq!(primary.calls.load(Ordering::SeqCst), 2);
    assert_eq!(backup.calls(), 1);

    let all = trace(&sink.events());
    assert_balanced(&all);
    let seq = lines(
        &sink,
        &[
            "started model_fallback",
            "completed model_fallback",
            "started model_retry",
            "completed model_retry",
            "started timeout.wrap",
            "completed timeout.wrap",
            "model_call",
            "model_done",
            "discarded",
            "retry",
            "fallback",
            "delta",
        ],
    );
    assert_eq!(
        seq,
        [
            "started model_fallback.wrap_model",
            "started model_retry.wrap_model",
            "started timeout.wrap_model",
            "model_call step=1 attempt=1",
            "delta \"slow \"",
            "model_done error:cancelled",
            "discarded attempt=1",
            "completed timeout.wrap_model error:timeout",
            "retry model attempt=1/2 delay=100ms error:timeout",
            "started timeout.wrap_model",
            "model_call step=1 attempt=2",
            "delta \"slow \"",
            "model_done error:cancelled",
            "discarded attempt=2",
            "completed timeout.wrap_model error:timeout",
            "completed model_retry.wrap_model error:timeout",
            "fallback primary -> backup error:timeout",
            "started model_retry.wrap_model",
            "started timeout.wrap_model",
            "model_call step=1 attempt=3",
            "delta \"backup \"",
            "delta \"answer\"",
            "model_done",
            "completed timeout.wrap_model ok",
            "completed model_retry.wrap_model ok",
            "completed model_fallback.wrap_model ok",
        ]
    );
}

#[test]
fn the_builtin_is_documented_and_in_the_catalog() {
    let doc = catalog().into_iter().find(|d| d.name == "model_fallback").unwrap();
    assert_eq!(doc.hooks, [HookKind::WrapModel]);
    assert_eq!(doc.config_type, None, "models are objects: built in code");
}
