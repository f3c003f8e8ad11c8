//! `ModelRetryMiddleware`: exponential backoff with jitter and a cap on the
//! paused clock, the `retry_on` classifier, `on_failure`, an event per retry,
//! failed attempts' deltas marked, interrupts and cancellations never retried,
//! and bad configs rejected naming field, value and rule.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tinyagents::config::{from_toml_str, from_value, BuildMiddleware, MiddlewareConfig};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::trace;
use tokio::time::Instant;

fn retry(toml: &str) -> ModelRetryMiddleware {
    from_toml_str::<ModelRetryConfig>(toml).unwrap().build()
}

fn run_with(model: ScriptedModel, retry: ModelRetryMiddleware) -> (Agent<()>, Arc<CollectingSink>, RunContext) {
    let sink = Arc::new(CollectingSink::new());
    let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::new().with(retry).unwrap());
    let ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    (agent, sink, ctx)
}

fn model_lines(sink: &CollectingSink) -> Vec<String> {
    trace(&sink.events())
        .into_iter()
        .filter(|l| {
            l.starts_with("model_call")
                || l.starts_with("model_done")
                || l.starts_with("discarded")
                || l.starts_with("retry")
                || l.starts_with("delta")
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn retries_with_exponential_backoff_then_succeeds() {
    let model = ScriptedModel::new([
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
        ScriptedTurn::text("finally"),
    ]);
    let (agent, sink, mut ctx) = run_with(
        model,
        retry("max_attempts = 3\ninitial_delay_ms = 1000\nbackoff_factor = 2.0\njitter = 0.0"),
    );
    let start = Instant::now();
    let run = agent.run(&mut ctx, &(), "hi").await.unwrap();
    assert_eq!(run.final_text(), "finally");
    assert_eq!(start.elapsed(), Duration::from_secs(3), "1 s then 2 s of backoff");
    assert_eq!(
        model_lines(&sink),
        [
            "model_call step=1 attempt=1",
            "model_done error:model",
            "discarded attempt=1",
            "retry model attempt=1/3 delay=1s error:model",
            "model_call step=1 attempt=2",
            "model_done error:model",
            "discarded attempt=2",
            "retry model attempt=2/3 delay=2s error:model",
            "model_call step=1 attempt=3",
            "delta \"finally\"",
            "model_done",
        ]
    );
    assert_eq!(run.counters.model_calls, 3);
}

#[tokio::test(start_paused = true)]
async fn the_cap_bounds_every_delay_and_a_retry_after_hint_raises_it() {
    let limited = TinyAgentsError::rate_limited("slow down", Some(Duration::from_millis(4500)));
    let model = ScriptedModel::new([
        ScriptedTurn::Fail(limited),
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
        ScriptedTurn::text("ok"),
    ]);
    let (agent, sink, mut ctx) = run_with(
        model,
        retry("max_attempts = 4\ninitial_delay_ms = 1000\nbackoff_factor = 10.0\nmax_delay_ms = 5000\njitter = 0.0"),
    );
    let start = Instant::now();
    agent.run(&mut ctx, &(), "hi").await.unwrap();
    let retries: Vec<String> = model_lines(&sink)
        .into_iter()
        .filter(|l| l.starts_with("retry"))
        .collect();
    assert_eq!(
        retries,
        [
            "retry model attempt=1/4 delay=4.5s error:rate_limited",
            "retry model attempt=2/4 delay=5s error:model",
            "retry model attempt=3/4 delay=5s error:model",
        ]
    );
    assert_eq!(start.elapsed(), Duration::from_millis(14_500));
}

#[test]
fn jitter_spreads_each_delay_within_its_fraction_and_under_the_cap() {
    let b = Backoff {
        initial: Duration::from_millis(1000),
        factor: 2.0,
        max: Duration::from_millis(3000),
        jitter: 0.25,
    };
    let firsts: Vec<Duration> = (0..200).map(|_| b.delay(1, None)).collect();
    assert!(firsts
        .iter()
        .all(|d| *d >= Duration::from_millis(750) && *d <= Duration::from_millis(1250)));
    assert!(firsts.iter().any(|d| *d != firsts[0]), "jitter spreads the delays");
    assert!((0..200).all(|_| b.delay(5, None) <= Duration::from_millis(3000)));
}

#[tokio::test(start_paused = true)]
async fn gives_up_after_max_attempts_with_the_last_error() {
    let model = ScriptedModel::new([
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded #1", true)),
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded #2", true)),
    ]);
    let (agent, sink, mut ctx) = run_with(model, retry("max_attempts = 2\ninitial_delay_ms = 10\njitter = 0.0"));
    let err = agent.run(&mut ctx, &(), "hi").await.unwrap_err();
    assert_eq!(err, TinyAgentsError::model("overloaded #2", true));
    assert_eq!(
        trace(&sink.events()).iter().filter(|l| l.starts_with("retry")).count(),
        1,
        "one retry between two attempts"
    );
}

#[tokio::test(start_paused = true)]
async fn on_failure_continue_answers_with_a_message_naming_the_failure() {
    let model = ScriptedModel::new([
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
        ScriptedTurn::Fail(TinyAgentsError::model("still overloaded", true)),
    ]);
    let (agent, _sink, mut ctx) = run_with(
        model,
        retry("max_attempts = 2\ninitial_delay_ms = 10\njitter = 0.0\non_failure = \"continue\""),
    );
    let run = agent.run(&mut ctx, &(), "hi").await.unwrap();
    assert_eq!(
        run.final_text(),
        "Model call failed after 2 attempt(s): model error: still overloaded"
    );
}

#[tokio::test(start_paused = true)]
async fn a_non_retryable_error_is_returned_at_once_even_with_continue() {
    let model = ScriptedModel::new([ScriptedTurn::Fail(TinyAgentsError::model("bad request", false))]);
    let (agent, sink, mut ctx) = run_with(model, retry("on_failure = \"continue\""));
    let err = agent.run(&mut ctx, &(), "hi").await.unwrap_err();
    assert_eq!(err, TinyAgentsError::model("bad request", false));
    assert!(!trace(&sink.events()).iter().any(|l| l.starts_with("retry")));
}

#[tokio::test(start_paused = true)]
async fn interrupts_are_never_retried_whatever_the_classifier_says() {
    let model = ScriptedModel::new([
        ScriptedTurn::Fail(TinyAgentsError::interrupted(None, "approve?")),
        ScriptedTurn::text("never"),
    ]);
    let model = Arc::new(model);
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(
        MiddlewareStack::new()
            .with(
                ModelRetryMiddleware::new()
                    .retry_on(|_| true)
                    .on_failure(OnFailure::Continue),
            )
            .unwrap(),
    );
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    assert_eq!(model.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_cancellation_during_the_backoff_wait_ends_it() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let model = ScriptedModel::from_fn(move |_| {
        c.fetch_add(1, Ordering::SeqCst);
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true))
    });
    let agent: Arc<Agent<()>> =
        Arc::new(Agent::new(model).with_stack(MiddlewareStack::new().with(retry("initial_delay_ms = 10000")).unwrap()));
    let ctx = RunContext::new(RunConfig::new("r"), ());
    let token = ctx.flow().cancellation().clone();
    let a = agent.clone();
    let run = tokio::spawn(async move {
        let mut ctx = ctx;
        a.run(&mut ctx, &(), "hi").await
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    token.cancel();
    let err = run.await.unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "no attempt after the cancellation");
}

#[tokio::test(start_paused = true)]
async fn deltas_of_a_failed_attempt_are_marked_for_the_client_to_drop() {
    let model = ScriptedModel::new([
        ScriptedTurn::FailAfter(
            vec![ModelDelta::text("half an ans")],
            TinyAgentsError::model("connection reset", true),
        ),
        ScriptedTurn::text("whole"),
    ]);
    let (agent, sink, mut ctx) = run_with(model, retry("jitter = 0.0\ninitial_delay_ms = 100"));
    let run = agent.run(&mut ctx, &(), "hi").await.unwrap();
    assert_eq!(
        run.final_text(),
        "whole",
        "the failed attempt's text is not accumulated"
    );
    let mut kept = Vec::new();
    let mut discarded = Vec::new();
    for e in sink.events() {
        match e {
            AgentEvent::ModelDelta { attempt, delta, .. } => kept.push((attempt, delta.as_text().map(str::to_owned))),
            AgentEvent::AttemptDiscarded { attempt, .. } => discarded.push(attempt),
            _ => {}
        }
    }
    assert_eq!(discarded, [1]);
    let client_view: Vec<_> = kept
        .into_iter()
        .filter(|(a, _)| !discarded.contains(a))
        .filter_map(|(_, t)| t)
        .collect();
    assert_eq!(client_view.concat(), "whole");
}

#[tokio::test(start_paused = true)]
async fn retry_on_names_the_kinds_to_retry() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::Fail(TinyAgentsError::timeout("model call", Duration::from_secs(1))),
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
        ScriptedTurn::text("unused"),
    ]));
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(
        MiddlewareStack::new()
            .with(retry("retry_on = [\"timeout\"]\njitter = 0.0\ninitial_delay_ms = 1"))
            .unwrap(),
    );
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await
        .unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::Model,
        "a retryable model error is not in `retry_on`"
    );
    assert_eq!(model.calls(), 2);
}

#[test]
fn bad_configs_are_rejected_naming_field_value_and_rule() {
    let one = |toml: &str| {
        let err = from_toml_str::<ModelRetryConfig>(toml).unwrap_err();
        assert_eq!(err.len(), 1, "{err}");
        err.errors()[0].clone()
    };
    let e = one("max_attempts = 0");
    assert_eq!((e.path.as_str(), e.value.clone()), ("max_attempts", Some(json!(0))));
    assert_eq!(e.rule, "must be in 1..=100");

    let e = one("initial_delay_ms = 2000\nmax_delay_ms = 500");
    assert_eq!((e.path.as_str(), e.value.clone()), ("max_delay_ms", Some(json!(500))));
    assert!(
        e.rule.contains("must be at least `initial_delay_ms` (2000)"),
        "{}",
        e.rule
    );

    let err = from_toml_str::<ModelRetryConfig>("backoff_factor = nan").unwrap_err();
    let rules: Vec<String> = err.errors().iter().map(ToString::to_string).collect();
    assert!(
        rules.contains(&"`backoff_factor` = \"NaN\": must be a finite number (not NaN or infinite)".to_owned()),
        "{rules:?}"
    );

    let e = one("jitter = -0.1");
    assert_eq!((e.path.as_str(), e.rule.as_str()), ("jitter", "must be in 0.0..=1.0"));

    let e = one("retry_on = [\"interrupted\"]");
    assert_eq!(
        (e.path.as_str(), e.value.clone()),
        ("retry_on", Some(json!("interrupted")))
    );
    assert!(e.rule.contains("never retried"), "{}", e.rule);

    let e = one("on_failure = \"shrug\"");
    assert_eq!(e.path, "on_failure");

    // under a registry path, and for a config built in code
    let err = from_value::<ModelRetryConfig>(&json!({"max_attempts": 0}), "middleware[1]").unwrap_err();
    assert_eq!(err.errors()[0].path, "middleware[1].max_attempts");
    let mut c = ModelRetryConfig::defaults().unwrap();
    c.max_delay_ms = 1;
    assert_eq!(
        ModelRetryMiddleware::try_from_config(c).unwrap_err().errors()[0].path,
        "max_delay_ms"
    );
}

#[test]
fn the_builtin_is_documented_and_in_the_catalog() {
    let doc = catalog().into_iter().find(|d| d.name == "model_retry").unwrap();
    assert_eq!(doc.hooks, [HookKind::WrapModel]);
    assert_eq!(doc.config_type, Some("model_retry"));
    assert_eq!(ModelRetryMiddleware::new().max_attempts(), 3);
}
