//! The retry built-ins' delays set in code (`with_max_attempts`,
//! `with_backoff`, `with_delays`), on tokio's paused clock: the waits are
//! exactly the ones set, and a value the config would refuse is bounded the
//! same way instead of running as given.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tokio::time::Instant;

fn overloaded() -> ScriptedTurn {
    ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true))
}

/// No jitter, so the paused clock shows each delay exactly.
fn steady(initial_ms: u64, factor: f64, max_ms: u64) -> Backoff {
    Backoff {
        initial: Duration::from_millis(initial_ms),
        factor,
        max: Duration::from_millis(max_ms),
        jitter: 0.0,
    }
}

#[tokio::test(start_paused = true)]
async fn model_retry_waits_the_delays_set_in_code() -> Result<()> {
    let model = ScriptedModel::new([overloaded(), overloaded(), overloaded(), ScriptedTurn::text("ok")]);
    let retry = ModelRetryMiddleware::new()
        .with_max_attempts(4)
        .with_backoff(steady(10, 3.0, 1_000))
        .with_delays(Duration::from_millis(20), Duration::from_millis(50));
    let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::empty().with(retry)?);
    let start = Instant::now();
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await?;
    assert_eq!(run.final_text(), "ok");
    // 20 ms, then 60 ms capped to 50, then 180 capped to 50
    assert_eq!(start.elapsed(), Duration::from_millis(120));
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn model_retry_gives_up_after_the_attempts_set_in_code() {
    let model = ScriptedModel::new([overloaded(), overloaded(), ScriptedTurn::text("never")]);
    let retry = ModelRetryMiddleware::new()
        .with_max_attempts(2)
        .with_backoff(steady(5, 1.0, 5));
    let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::empty().with(retry).unwrap());
    let start = Instant::now();
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("overloaded"), "{err}");
    assert_eq!(start.elapsed(), Duration::from_millis(5));
}

#[tokio::test(start_paused = true)]
async fn tool_retry_waits_the_delays_set_in_code() -> Result<()> {
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let tool = tool_fn("flaky", "Fails twice.", move |_cx, _args| {
        let calls = counted.clone();
        async move {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(TinyAgentsError::model("busy", true))
            } else {
                Ok("ok".into())
            }
        }
    });
    let retry = ToolRetryMiddleware::new()
        .with_max_attempts(3)
        .with_backoff(steady(7, 2.0, 1_000));
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("flaky", serde_json::json!({})),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(tool)?)
    .with_stack(MiddlewareStack::empty().with(retry)?);
    let start = Instant::now();
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await?;
    assert_eq!(run.final_text(), "done");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(start.elapsed(), Duration::from_millis(7 + 14));
    Ok(())
}

/// What the config refuses, the builders bound: the same middleware either way.
#[test]
fn out_of_range_values_are_bounded_as_the_config_bounds_them() {
    let wild = Backoff {
        initial: Duration::from_secs(2),
        factor: f64::INFINITY,
        max: Duration::from_secs(1),
        jitter: f64::NAN,
    };
    let retry = ModelRetryMiddleware::new().with_max_attempts(0).with_backoff(wild);
    assert_eq!(retry.max_attempts(), 1);
    assert_eq!(retry.backoff(), steady(2_000, 100.0, 2_000));
    let retry = ToolRetryMiddleware::new()
        .with_max_attempts(1_000)
        .with_delays(Duration::from_millis(500), Duration::from_millis(100));
    assert_eq!(retry.max_attempts(), 100);
    assert_eq!(retry.backoff().max, Duration::from_millis(500));
    // the code forms equal the config forms
    let from_config = from_toml_str::<ModelRetryConfig>(
        "max_attempts = 4\ninitial_delay_ms = 20\nmax_delay_ms = 50\nbackoff_factor = 3.0\njitter = 0.0",
    )
    .unwrap()
    .build();
    let from_code = ModelRetryMiddleware::new()
        .with_max_attempts(4)
        .with_backoff(steady(20, 3.0, 50));
    assert_eq!(
        (from_code.max_attempts(), from_code.backoff()),
        (from_config.max_attempts(), from_config.backoff())
    );
}
