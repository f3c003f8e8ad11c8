//! The loop's limits and refusals: `max_steps` admits as many calls of a
//! concurrent batch as of a sequential one, and a call refused before it
//! starts emits `ToolCallRefused`, never `ToolCallStarted`.

use std::sync::Arc;

use serde_json::json;
use tinyagents::harness::tool::{SideEffects, ToolPolicy};
use tinyagents::middleware::{LimitsMiddleware, ToolPolicyMiddleware};
use tinyagents::prelude::*;
use tinyagents::testing::{assert_valid_transcript, trace, RecordingTool};

fn batch(n: usize) -> ScriptedTurn {
    ScriptedTurn::tool_calls(
        (0..n)
            .map(|i| ToolCall::new(format!("c{i}"), "t", json!({"i": i})))
            .collect(),
    )
}

/// A batch of 12 under `max_steps = 3`: (calls run, the run's error).
async fn twelve_under_three(concurrent: bool) -> (usize, TinyAgentsError) {
    let tool = RecordingTool::new("t");
    let model = Arc::new(ScriptedModel::new([batch(12), ScriptedTurn::text("done")]));
    let stack = MiddlewareStack::new()
        .with(LimitsMiddleware::new().max_steps(3))
        .unwrap();
    let mut agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
        .with_stack(stack);
    if concurrent {
        agent = agent.with_concurrent_tools();
    }
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap_err();
    (tool.calls().len(), err)
}

#[tokio::test]
async fn max_steps_admits_as_many_calls_of_a_concurrent_batch_as_of_a_sequential_one() {
    let (sequential, seq_err) = twelve_under_three(false).await;
    let (concurrent, con_err) = twelve_under_three(true).await;
    assert_eq!(sequential, 3, "the sequential loop runs 3 calls, then stops");
    assert_eq!(concurrent, 3, "a concurrent batch runs the same 3 calls");
    for err in [&seq_err, &con_err] {
        assert!(
            matches!(err, TinyAgentsError::LimitExceeded { limit, .. } if limit == "max_steps"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "limit `max_steps` exceeded: this run reached its limit of 3 tool calls; `t` was not run",
            "the message counts the 3 calls that ran"
        );
    }
}

/// A stack refusing `pay` (a payment side effect) and admitting `read`.
async fn refused_run(concurrent: bool) -> Vec<String> {
    let pay = RecordingTool::new("pay").with_policy(ToolPolicy::classified().with_side_effects(SideEffects::PAYMENT));
    let read = RecordingTool::new("read").with_policy(ToolPolicy::classified().with_side_effects(SideEffects::READ));
    let tools = ToolRegistry::new()
        .with(pay.clone())
        .unwrap()
        .with(read.clone())
        .unwrap();
    let policy = ToolPolicyMiddleware::new(tools.policies()).deny_side_effects(SideEffects::PAYMENT);
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("1", "pay", json!({"amount": 100})),
            ToolCall::new("2", "read", json!({})),
        ]),
        ScriptedTurn::text("done"),
    ]));
    let mut agent: Agent<()> = Agent::new(model)
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(policy).unwrap());
    if concurrent {
        agent = agent.with_concurrent_tools();
    }
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_valid_transcript(&run.messages);
    assert!(pay.calls().is_empty(), "the refused call never ran");
    assert_eq!(read.calls().len(), 1);
    let events = sink.events();
    let refused: Vec<&AgentEvent> = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ToolCallRefused { .. }))
        .collect();
    assert_eq!(refused.len(), 1, "{refused:?}");
    let AgentEvent::ToolCallRefused {
        call_id, tool, reason, ..
    } = refused[0]
    else {
        unreachable!()
    };
    assert_eq!((call_id.as_str(), tool.as_str()), ("1", "pay"));
    assert!(
        reason.contains("payment"),
        "the reason is the call's error result: {reason}"
    );
    trace(&events).into_iter().filter(|l| l.starts_with("tool_")).collect()
}

#[tokio::test]
async fn a_call_refused_by_tool_policy_emits_a_refusal_and_never_starts() {
    for concurrent in [false, true] {
        let lines = refused_run(concurrent).await;
        assert!(lines.contains(&"tool_refused pay".to_owned()), "{lines:?}");
        assert!(
            !lines
                .iter()
                .any(|l| l == "tool_call pay" || l.starts_with("tool_done pay")),
            "no started/completed pair for a call that never ran: {lines:?}"
        );
        assert!(lines.contains(&"tool_call read".to_owned()), "{lines:?}");
        assert!(lines.contains(&"tool_done read".to_owned()), "{lines:?}");
    }
}
