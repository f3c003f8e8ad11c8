//! `ModelCallLimitMiddleware`: per run and per thread, `end` and `error`,
//! every tool call still answered, retries counted once, bad configs rejected.

use std::sync::Arc;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::trace;

use crate::support::run_into;

fn looping_model() -> ScriptedModel {
    ScriptedModel::from_fn(|_| ScriptedTurn::tool_call("ping", json!({})))
}

fn tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(tool_fn("ping", "Pong.", |_cx, _a| async move { Ok("pong".into()) }))
        .unwrap()
}

fn agent(limit: ModelCallLimitMiddleware) -> Agent<()> {
    Agent::new(looping_model())
        .with_tools(tools())
        .with_stack(MiddlewareStack::new().with(limit).unwrap())
}

fn limit(toml: &str) -> ModelCallLimitMiddleware {
    from_toml_str::<ModelCallLimitConfig>(toml).unwrap().build()
}

/// Every tool call in `run` has exactly one result.
fn every_call_answered(run: &AgentRun) {
    let calls: Vec<String> = run
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
        .collect();
    let results = run.messages.iter().filter(|m| m.role == Role::Tool).count();
    assert_eq!(calls.len(), results, "{:#?}", run.messages);
}

#[tokio::test]
async fn end_stops_the_run_with_a_final_message_naming_the_limit() {
    let sink = Arc::new(CollectingSink::new());
    let run = run_into(&agent(limit("run_limit = 3")), sink.clone(), "go")
        .await
        .unwrap();
    assert_eq!(run.stop, StopReason::StoppedByMiddleware);
    assert_eq!(run.counters.model_calls, 3);
    assert_eq!(
        run.final_text(),
        "Model call limit reached: this run made 3 model calls, at most 3 per run."
    );
    every_call_answered(&run);
    assert!(trace(&sink.events()).contains(&"control stop_with_final".to_owned()));
}

#[tokio::test]
async fn error_fails_the_run_with_limit_exceeded() {
    let err = agent(limit("run_limit = 2\nexit_behavior = \"error\""))
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert_eq!(
        err.to_string(),
        "limit `model_call_limit` exceeded: Model call limit reached: this run made 2 model calls, at most 2 per run."
    );
}

#[tokio::test]
async fn the_thread_limit_counts_across_the_runs_of_a_thread() {
    let mw = limit("thread_limit = 5");
    let handle = mw.clone();
    let agent = agent(mw);
    let thread_run = |id: &str, thread: &str| RunContext::new(RunConfig::new(id).with_thread(thread), ());
    let first = agent.run(&mut thread_run("a", "t1"), &(), "go").await.unwrap();
    assert_eq!(first.counters.model_calls, 5);
    assert_eq!(handle.thread_count("t1"), 5);
    let second = agent.run(&mut thread_run("b", "t1"), &(), "go").await.unwrap();
    assert_eq!(second.counters.model_calls, 0, "the thread's calls are spent");
    assert_eq!(
        second.final_text(),
        "Model call limit reached: this thread made 5 model calls, at most 5 per thread."
    );
    // another thread starts fresh; a reset thread too
    assert_eq!(handle.thread_count("t2"), 0);
    handle.reset_thread("t1");
    assert_eq!(handle.thread_count("t1"), 0);
}

#[tokio::test]
async fn run_and_thread_limits_together() {
    let agent = agent(limit("run_limit = 2\nthread_limit = 3"));
    let ctx = |id: &str| RunContext::new(RunConfig::new(id).with_thread("t"), ());
    let a = agent.run(&mut ctx("a"), &(), "go").await.unwrap();
    assert_eq!(a.counters.model_calls, 2);
    assert!(a.final_text().contains("this run made 2"));
    let b = agent.run(&mut ctx("b"), &(), "go").await.unwrap();
    assert_eq!(b.counters.model_calls, 1);
    assert!(b.final_text().contains("this thread made 3"));
    // without a thread id only the run limit applies
    let c = agent
        .run(&mut RunContext::new(RunConfig::new("c"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(c.counters.model_calls, 2);
}

#[tokio::test(start_paused = true)]
async fn retries_inside_a_turn_count_once() {
    let model = ScriptedModel::new([
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
        ScriptedTurn::tool_call("ping", json!({})),
        ScriptedTurn::text("never"),
    ]);
    let retry = from_toml_str::<ModelRetryConfig>("initial_delay_ms = 1")
        .unwrap()
        .build();
    let agent: Agent<()> = Agent::new(model).with_tools(tools()).with_stack(
        MiddlewareStack::new()
            .with(limit("run_limit = 1"))
            .unwrap()
            .with(retry)
            .unwrap(),
    );
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(run.counters.model_calls, 2, "two attempts");
    assert_eq!(
        run.stop,
        StopReason::StoppedByMiddleware,
        "one turn counted; the second turn is refused"
    );
    every_call_answered(&run);
}

#[tokio::test]
async fn concurrent_runs_of_one_stack_keep_their_own_run_counts() {
    let agent = Arc::new(agent(limit("run_limit = 2")));
    let runs = (0..20).map(|i| {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .run(&mut RunContext::new(RunConfig::new(format!("r{i}")), ()), &(), "go")
                .await
        })
    });
    for r in futures::future::join_all(runs).await {
        assert_eq!(r.unwrap().unwrap().counters.model_calls, 2);
    }
}

#[test]
fn bad_configs_are_rejected_naming_field_value_and_rule() {
    let err = from_toml_str::<ModelCallLimitConfig>("run_limit = 0").unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid configuration: `run_limit` = 0: must be in 1.."
    );
    let err = from_toml_str::<ModelCallLimitConfig>("").unwrap_err();
    assert_eq!(err.errors()[0].path, "run_limit");
    assert!(err.errors()[0].rule.contains("set `run_limit`, `thread_limit` or both"));
    let err = from_toml_str::<ModelCallLimitConfig>("run_limit = 1\nexit_behavior = \"continue\"").unwrap_err();
    assert_eq!(err.errors()[0].path, "exit_behavior");
    assert_eq!(err.errors()[0].rule, "must be one of \"end\", \"error\"");
}

#[test]
fn the_builtin_is_documented_and_in_the_catalog() {
    let doc = catalog().into_iter().find(|d| d.name == "model_call_limit").unwrap();
    assert_eq!(doc.hooks, [HookKind::BeforeModel]);
}
