//! `HookNotice`, QueryMT's name for a notice: every `AgentEvent::Notice` a
//! run publishes reads as one (`event_name` = `source`) and serialises as
//! the QueryMT docs write it; no other event does.

use std::sync::Arc;

use serde_json::json;
use tinyagents::harness::event::HookNotice;
use tinyagents::harness::tool::FileAccessMode;
use tinyagents::middleware::ParallelEditGuardMiddleware;
use tinyagents::prelude::*;

#[tokio::test]
async fn a_flagged_batch_publishes_a_hook_notice_named_after_the_guard() {
    let edit = tool_fn("edit", "Edits a file.", |_cx, _| async { Ok("ok".into()) })
        .with_file_access("path", FileAccessMode::Write);
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("1", "edit", json!({ "path": "design.md" })),
            ToolCall::new("2", "edit", json!({ "path": "design.md" })),
        ]),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(edit).unwrap())
    .with_stack(
        MiddlewareStack::new()
            .with(ParallelEditGuardMiddleware::warn())
            .unwrap(),
    );
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    agent.run(&mut ctx, &(), "go").await.unwrap();
    let events = sink.events();
    let notices: Vec<HookNotice> = events.iter().filter_map(HookNotice::of).collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
    let n = &notices[0];
    assert_eq!((n.event_name.as_str(), n.is_error), ("parallel_edit_guard", false));
    assert!(n.message.contains("`design.md`"), "{}", n.message);
    let json = serde_json::to_value(n).unwrap();
    assert_eq!(json["type"], "hook_notice");
    assert_eq!(json["event_name"], "parallel_edit_guard");
    assert_eq!(json["is_error"], false);
    // only notices map: every other event of the run has no HookNotice view
    let others = events.iter().filter(|e| !matches!(e, AgentEvent::Notice { .. }));
    assert!(others.clone().count() > 0);
    assert!(others.into_iter().all(|e| HookNotice::of(e).is_none()));
    // and the mapping goes back to the one runtime event
    let back: HookNotice = serde_json::from_value(json).unwrap();
    assert!(events.contains(&AgentEvent::from(back)));
}
