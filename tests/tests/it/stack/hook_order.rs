//! The exact order of before/after/wrap hooks for three middleware, on the
//! model path and the tool path, through a real agent run.

use std::sync::Arc;

use serde_json::json;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;
use tinyagents_tests::{Log, Recorder};

fn expected_step(tools: bool) -> Vec<&'static str> {
    let mut v = vec![
        "a:before_model",
        "b:before_model",
        "c:before_model",
        "a:before_model_stream",
        "b:before_model_stream",
        "c:before_model_stream",
        "a:wrap_model>",
        "b:wrap_model>",
        "c:wrap_model>",
        "c:wrap_model<",
        "b:wrap_model<",
        "a:wrap_model<",
        "c:after_model",
        "b:after_model",
        "a:after_model",
    ];
    if tools {
        v.extend([
            "a:on_tool_batch",
            "b:on_tool_batch",
            "c:on_tool_batch",
            "a:before_tool",
            "b:before_tool",
            "c:before_tool",
            "a:on_prepared_tool_calls",
            "b:on_prepared_tool_calls",
            "c:on_prepared_tool_calls",
            "a:wrap_tool>",
            "b:wrap_tool>",
            "c:wrap_tool>",
            "c:wrap_tool<",
            "b:wrap_tool<",
            "a:wrap_tool<",
            "c:after_tool",
            "b:after_tool",
            "a:after_tool",
        ]);
    }
    v
}

#[tokio::test]
async fn three_middleware_run_in_onion_order_on_model_and_tool_paths() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    for name in ["a", "b", "c"] {
        stack.add(Recorder::new(name, &log)).unwrap();
    }
    let tool = RecordingTool::new("search").returning("found it");
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("search", json!({"q": "x"})),
        ScriptedTurn::text("done"),
    ]);
    let agent = Agent::new(model)
        .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
        .with_stack(stack);

    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(tool.calls(), vec![json!({"q": "x"})]);

    let lines: Vec<String> = log
        .lines()
        .into_iter()
        // the recorder also logs a bare `x:wrap_model` when entering; the arrows carry the order
        .filter(|l| !l.ends_with(":wrap_model") && !l.ends_with(":wrap_tool"))
        .collect();
    let mut expected = vec!["a:before_agent", "b:before_agent", "c:before_agent"];
    expected.extend(expected_step(true));
    expected.extend(expected_step(false));
    expected.extend(["c:after_agent", "b:after_agent", "a:after_agent"]);
    assert_eq!(lines, expected);
}

#[tokio::test]
async fn a_shared_stack_reports_its_dispatch_lists() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Recorder::new("a", &log).only(HookSet::BEFORE_MODEL)).unwrap();
    stack
        .add(Recorder::new("b", &log).only(HookSet::AFTER_MODEL | HookSet::BEFORE_MODEL))
        .unwrap();
    stack.add(Recorder::new("c", &log)).unwrap();
    assert_eq!(stack.implementors(HookKind::BeforeModel), ["a", "b", "c"]);
    assert_eq!(stack.implementors(HookKind::AfterModel), ["b", "c"]);
    assert_eq!(stack.implementors(HookKind::BeforeTool), ["c"]);
    assert_eq!(stack.implementors(HookKind::WrapModel), ["c"]);
    // `c` reports every lifecycle hook (the hand-written default), so it is dispatched for deltas too
    assert_eq!(stack.implementors(HookKind::OnModelDelta), ["c"]);
    assert!(Arc::new(stack).has(HookKind::OnToolDelta));
}
