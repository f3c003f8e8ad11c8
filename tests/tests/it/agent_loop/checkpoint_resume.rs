//! "Interrupt for human input", "persist checkpoint" and "resume from
//! checkpoint" for real: a run pauses for an approval, every in-memory object
//! is dropped, a new agent built from the same store resumes with the
//! decision, and the result equals an uninterrupted run's.

use std::collections::HashSet;
use std::path::PathBuf;

use async_trait::async_trait;
use serde_json::json;
use tinyagents::graph::{AgentGraph, Checkpointer, FileCheckpointer};
use tinyagents::harness::middleware::PreparedBatch;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

/// The user context of a run: the calls a person approved.
#[derive(Default)]
struct Approvals(HashSet<String>);

/// Pauses a batch with a `delete` call until a person approves that call.
struct ApprovalGate;

#[async_trait]
impl Middleware<(), Approvals> for ApprovalGate {
    fn hooks(&self) -> HookSet {
        HookSet::ON_TOOL_BATCH
    }
    async fn on_tool_batch(&self, ctx: &mut RunContext<Approvals>, _: &(), batch: &mut PreparedBatch) -> Result<()> {
        let pending: Vec<String> = batch
            .calls()
            .iter()
            .filter(|p| p.call.name == "delete" && !ctx.context().0.contains(&p.call.id))
            .map(|p| p.call.id.clone())
            .collect();
        if !pending.is_empty() {
            ctx.flow_mut().request_control(MiddlewareControl::Interrupt {
                node: Some("approval".into()),
                message: format!("approve {}?", pending.join(", ")),
            });
        }
        Ok(())
    }
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinyagents-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn agent(model: ScriptedModel, tool: &RecordingTool) -> Agent<(), Approvals> {
    Agent::new(model)
        .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
        .with_stack(MiddlewareStack::new().with(ApprovalGate).unwrap())
}

fn first_turn() -> ScriptedTurn {
    ScriptedTurn::Reply(
        ModelResponse::tool_calls(vec![ToolCall::new("d1", "delete", json!({"path": "old.log"}))])
            .with_usage(Usage::new(10, 4)),
    )
}

fn second_turn() -> ScriptedTurn {
    ScriptedTurn::Reply(ModelResponse::text("old.log is gone").with_usage(Usage::new(20, 3)))
}

#[tokio::test]
async fn a_run_paused_for_approval_resumes_in_a_new_agent_and_matches_an_uninterrupted_run() {
    let dir = temp_dir("resume");

    // 1. The run pauses: no decision for `d1` yet, and the tool never runs.
    {
        let store = FileCheckpointer::open(&dir).unwrap();
        let tool = RecordingTool::new("delete").returning("deleted old.log");
        let agent = agent(ScriptedModel::new([first_turn()]), &tool);
        let mut ctx = RunContext::new(RunConfig::new("run-1"), Approvals::default());
        let err = AgentGraph::new(&agent)
            .run_durable(&mut ctx, &(), "clean up the logs", "thread-7", &store)
            .await
            .unwrap_err();
        assert_eq!(err, TinyAgentsError::interrupted(Some("tools".into()), "approve d1?"));
        assert!(tool.calls().is_empty(), "no gated tool ran without a decision");
        let latest = store.latest("thread-7").await.unwrap().unwrap();
        assert_eq!(latest.next.as_deref(), Some("tools"));
        assert_eq!(
            latest.interrupt.as_ref().map(|i| i.message.as_str()),
            Some("approve d1?")
        );
    } // every in-memory object is dropped here

    // 2. A new process: a new store handle, a new agent, the decision.
    let store = FileCheckpointer::open(&dir).unwrap();
    let tool = RecordingTool::new("delete").returning("deleted old.log");
    let resumed_agent = agent(ScriptedModel::new([second_turn()]), &tool);
    let mut ctx = RunContext::new(RunConfig::new("run-1b"), Approvals(HashSet::from(["d1".to_owned()])));
    let resumed = AgentGraph::new(&resumed_agent)
        .resume(&mut ctx, &(), "thread-7", &store)
        .await
        .unwrap();
    assert_eq!(
        tool.calls(),
        vec![json!({"path": "old.log"})],
        "the approved call ran exactly once"
    );

    // 3. The same run without an interruption (approved up front).
    let tool2 = RecordingTool::new("delete").returning("deleted old.log");
    let straight_agent = agent(ScriptedModel::new([first_turn(), second_turn()]), &tool2);
    let mut ctx2 = RunContext::new(RunConfig::new("run-2"), Approvals(HashSet::from(["d1".to_owned()])));
    let straight = straight_agent.run(&mut ctx2, &(), "clean up the logs").await.unwrap();

    let texts = |r: &AgentRun| {
        r.messages
            .iter()
            .map(|m| (m.role, m.text().into_owned()))
            .collect::<Vec<_>>()
    };
    assert_eq!(resumed.final_text(), "old.log is gone");
    assert_eq!(texts(&resumed), texts(&straight));
    assert_eq!(resumed.usage, straight.usage, "usage from before the restart is kept");
    assert_eq!(resumed.counters, straight.counters);
    let _ = std::fs::remove_dir_all(&dir);
}
