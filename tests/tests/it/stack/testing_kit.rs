//! The testing kit users test their own middleware with: the harness has a
//! method for every hook and passes each value through; the recorder sees
//! every hook, in order, with the value; a scenario runs a whole agent and
//! turns a set-up mistake into the run's error.

use serde_json::json;
use tinyagents::harness::middleware::hook;
use tinyagents::harness::middleware::{PreparedBatch, PreparedToolCall};
use tinyagents::harness::provenance::CompactionPlan;
use tinyagents::harness::steering::{SteeringAction, SteeringCommand, SteeringOutcome};
use tinyagents::harness::tool::ToolDelta;
use tinyagents::prelude::*;
use tinyagents::testing::{MiddlewareHarness, Recorder, RecordingTool, Scenario, ScriptedTurn};

#[tokio::test]
async fn the_harness_runs_every_lifecycle_hook_and_the_recorder_sees_each_value() {
    let recorder = Recorder::new();
    let mut h: MiddlewareHarness = MiddlewareHarness::new(recorder.clone());
    let steer = SteeringCommand::new("s1", SteeringAction::Redirect { goal: "g".into() });
    let call = ToolCall::new("c1", "search", json!({"q": 1}));

    h.before_agent().await.unwrap();
    assert_eq!(h.before_steering(steer.clone()).await.unwrap(), steer);
    let outcome = SteeringOutcome {
        command: steer.clone(),
        transformed: false,
        applied: true,
    };
    h.after_steering(outcome.clone()).await.unwrap();
    let request = ModelRequest::new(vec![Message::user("hi")]);
    h.before_model(request.clone()).await.unwrap();
    h.before_model_stream(request).await.unwrap();
    assert_eq!(
        h.on_model_delta(ModelDelta::text("d")).await.unwrap().as_text(),
        Some("d")
    );
    h.after_model(ModelResponse::text("r")).await.unwrap();
    let batch = PreparedBatch::new(vec![PreparedToolCall::new(call.clone(), Vec::new())]);
    assert_eq!(h.on_tool_batch(batch).await.unwrap().calls().len(), 1);
    assert_eq!(h.before_tool(call.clone()).await.unwrap(), call);
    let batch = PreparedBatch::new(vec![PreparedToolCall::new(call.clone(), Vec::new())]);
    assert_eq!(h.on_prepared_tool_calls(batch).await.unwrap().calls().len(), 1);
    h.on_tool_delta(ToolDelta::new("c1", "50%")).await.unwrap();
    h.after_tool(ToolResult::ok(&call, "ok")).await.unwrap();
    h.pre_compact(CompactionPlan::new("m", "p", 3)).await.unwrap();
    h.on_error(&TinyAgentsError::validation("boom")).await;
    h.after_agent(AgentRun::new("r".into())).await.unwrap();

    // every lifecycle hook, in the order they were called
    let lifecycle: Vec<HookKind> = HookSet::LIFECYCLE.kinds().collect();
    let mut seen = recorder.kinds();
    assert_eq!(seen.len(), lifecycle.len(), "{seen:?}");
    seen.sort_by_key(|k| *k as u8);
    assert_eq!(seen, lifecycle);
    // and the values themselves
    assert_eq!(recorder.values::<hook::BeforeSteering>(), [steer]);
    assert_eq!(recorder.values::<hook::AfterSteering>(), [outcome]);
    assert_eq!(recorder.values::<hook::BeforeTool>(), [call]);
    assert_eq!(recorder.values::<hook::BeforeModel>()[0].messages[0].text(), "hi");
    assert_eq!(
        recorder.values::<hook::OnError>()[0].to_string(),
        TinyAgentsError::validation("boom").to_string()
    );
    assert_eq!(recorder.values::<hook::BeforeAgent>().len(), 1);
    recorder.clear();
    assert!(recorder.kinds().is_empty());
}

#[tokio::test]
async fn a_scenario_runs_tools_and_records_events_and_the_recorder_sees_the_run_in_order() {
    let search = RecordingTool::new("search").returning("3 results");
    let recorder = Recorder::new();
    let done = Scenario::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "search", json!({"q": "rust"}))]),
        ScriptedTurn::text("found 3"),
    ])
    .tool(search.clone())
    .middleware(recorder.clone())
    .run("look it up")
    .await;
    assert_eq!(done.text(), "found 3");
    assert_eq!(search.calls(), [json!({"q": "rust"})]);
    let trace = done.trace();
    assert_eq!(trace.first().map(String::as_str), Some("run_started"));
    assert_eq!(trace.last().map(String::as_str), Some("run_completed"));
    assert!(trace.contains(&"tool_done search".to_owned()), "{trace:?}");

    let kinds = recorder.kinds();
    let at = |k: HookKind| {
        kinds
            .iter()
            .position(|&s| s == k)
            .unwrap_or_else(|| panic!("{k} not seen: {kinds:?}"))
    };
    assert_eq!(kinds.first(), Some(&HookKind::BeforeAgent));
    assert_eq!(kinds.last(), Some(&HookKind::AfterAgent));
    assert!(at(HookKind::BeforeModel) < at(HookKind::AfterModel));
    assert!(at(HookKind::OnToolBatch) < at(HookKind::BeforeTool));
    assert!(at(HookKind::BeforeTool) < at(HookKind::AfterTool));
    assert_eq!(recorder.values::<hook::BeforeModel>().len(), 2, "two model calls");
    assert_eq!(recorder.values::<hook::AfterTool>()[0].content, "3 results");
}

#[tokio::test]
async fn a_scenario_set_up_mistake_is_the_run_s_error_not_a_panic() {
    let done = Scenario::new([ScriptedTurn::text("never")])
        .tool(RecordingTool::new("search"))
        .tool(RecordingTool::new("search"))
        .run("hi")
        .await;
    let error = done.error().expect("two tools of one name are refused");
    assert!(error.to_string().contains("search"), "{error}");
    assert!(done.events.is_empty(), "nothing ran: {:?}", done.trace());
}
