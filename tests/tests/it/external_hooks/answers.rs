//! What a policy hook's answer may do, and what a sub-agent inherits: a
//! parent's `permission_request` refusal holds in a child run, and a
//! `pre_tool_use` "stop" answer does not let the call it was asked about run.

use std::time::Duration;

use serde_json::json;
use tinyagents::external_hooks::{ExternalHooksMiddleware, HookCommand, HookEvent};
use tinyagents::harness::tool::SandboxMode;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

use super::support::{parent_refuses_delete_then_delegates, temp_dir};

/// A parent's `permission_request` policy hook refuses `delete` (exit 2).
/// It is a policy event (fails closed by default, `HookEvent::is_policy`),
/// yet, unlike a `pre_tool_use` hook, it records no restriction: a sub-agent
/// with an empty stack runs `delete` unasked.
#[tokio::test]
async fn a_parent_s_permission_request_hook_holds_in_a_sub_agent_run() {
    let dir = temp_dir("answers", "perm-inherit");
    let (_run, delete) = parent_refuses_delete_then_delegates(HookEvent::PermissionRequest, &dir).await;
    assert!(
        delete.calls().is_empty(),
        "the parent's permission_request hook must refuse `delete` in its sub-agent too; it ran: {:?}",
        delete.calls()
    );
}

/// A `pre_tool_use` hook answering `{"continue": false}` ("stop the run")
/// about a call: the call still runs, and the run stops only after its side
/// effect. A policy hook that says "stop" must not let the call it was asked
/// about through.
#[tokio::test]
async fn a_pre_tool_use_stop_answer_does_not_let_the_call_run() {
    let dir = temp_dir("answers", "pre-stop");
    let hooks = ExternalHooksMiddleware::new([HookCommand::new(
        HookEvent::PreToolUse,
        r#"cat > /dev/null; echo '{"continue": false, "stop_reason": "Stopped by policy."}'"#,
    )
    .with_sandbox(SandboxMode::Off)
    .with_timeout(Duration::from_secs(20))])
    .in_dir(&dir);
    let tool = RecordingTool::new("delete").returning("deleted");
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
    .with_stack(MiddlewareStack::new().with(hooks).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), "tidy").await.unwrap();
    assert_eq!(run.final_text(), "Stopped by policy.");
    assert!(
        tool.calls().is_empty(),
        "the hook said stop before the call; it ran anyway: {:?}",
        tool.calls()
    );
}
