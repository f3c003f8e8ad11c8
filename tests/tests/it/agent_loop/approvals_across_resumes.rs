//! Fourth red-team pass: human approval across durable resumes, restrictions
//! applied by steering, and graph state keys a middleware can write.
//!
//! Each test states the promise it holds the runtime to; they fail until the
//! weakness they describe is fixed.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use tinyagents::graph::{AgentGraph, Checkpointer, MemoryCheckpointer};
use tinyagents::harness::steering::{SteeringAction, SteeringHandle};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

use crate::support::parent_paused_on_a_child_delete;

fn gated() -> HumanInTheLoopMiddleware {
    HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new())
}

fn delete_call(id: &str, path: &str) -> ScriptedTurn {
    ScriptedTurn::tool_calls(vec![ToolCall::new(id, "delete", json!({"path": path}))])
}

/// A fresh agent (a new process: a new `human_in_the_loop` with an empty ledger) on `turns`.
fn agent_with(tools: ToolRegistry, turns: Vec<ScriptedTurn>) -> Agent<()> {
    Agent::new(ScriptedModel::new(turns))
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(gated()).unwrap())
}

// ---------------------------------------------------------------------------
// 1. Decisions attached to a plain `AgentGraph::resume` are never checked
//    against the checkpoint: not against `hitl_interrupt` (the pause they
//    answer) and not against `hitl_consumed` (spent decisions).
// ---------------------------------------------------------------------------

/// The model asks for the same call, under the same id, at two pauses of one
/// thread. The person approves the first pause only. In a new process, the
/// first pause's (spent) decisions, attached to a plain `resume`, approve the
/// second pause: `delete` runs twice on one approval.
#[tokio::test]
async fn spent_decisions_of_an_earlier_pause_do_not_approve_a_later_pause_through_plain_resume() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let tools = || ToolRegistry::new().with(delete.clone()).unwrap();
    let store = MemoryCheckpointer::new();

    // process 1: pause P1, approve, run; the model asks again (same id, same args): pause P2
    let first = agent_with(
        tools(),
        vec![
            delete_call("d1", "a.txt"),
            delete_call("d1", "a.txt"),
            ScriptedTurn::text("done"),
        ],
    );
    let mut ctx = RunContext::new(RunConfig::new("r1"), ());
    let err = AgentGraph::new(&first)
        .run_durable(&mut ctx, &(), "tidy", "t", &store)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    let p1 = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
    let approved_p1 = p1.decide([("d1", Decision::Approve)]).unwrap();
    // what the approval endpoint received, as JSON
    let captured = serde_json::to_string(&approved_p1).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    let err = AgentGraph::new(&first)
        .resume_with(&mut ctx, &(), "t", &store, approved_p1)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "paused again at P2: {err}");
    assert_eq!(delete.calls().len(), 1, "P1's approval ran the call once");
    let consumed = store.latest("t").await.unwrap().unwrap();
    assert!(
        consumed.state.get("hitl_consumed").is_some(),
        "the checkpoint records P1's decisions as spent"
    );

    // process 2: nobody decided on P2; P1's captured decisions are replayed
    let second = agent_with(tools(), vec![ScriptedTurn::text("done")]);
    let replay: HitlResume = serde_json::from_str(&captured).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r3"), ());
    replay.attach(&ctx);
    let out = AgentGraph::new(&second).resume(&mut ctx, &(), "t", &store).await;
    assert_eq!(
        delete.calls().len(),
        1,
        "a spent decision on pause P1 approved pause P2 (the run ended {:?}); the checkpoint's \
         `hitl_consumed`/`hitl_interrupt` must be checked on every resume that carries decisions",
        out.map(|r| r.final_text()).map_err(|e| e.to_string())
    );
}

// ---------------------------------------------------------------------------
// 2. Decisions as JSON: unknown fields are dropped, not refused.
// ---------------------------------------------------------------------------

/// A person edits the arguments, and the client sends the edit with the
/// wrong `type` (or a field the format does not have): the decision is read
/// as a plain approval of the *original* call, and the call the person
/// rejected runs. The checkpoint's own records refuse unknown fields; the
/// decisions a server receives should too.
#[tokio::test]
async fn decisions_json_with_fields_the_format_does_not_have_is_refused() {
    let approve_with_args = serde_json::from_value::<Decision>(json!({
        "type": "approve",
        "arguments": {"path": "safe.txt"}
    }));
    let edit_with_tool = serde_json::from_value::<Decision>(json!({
        "type": "edit",
        "tool": "move_to_trash",
        "arguments": {"path": "a.txt"}
    }));
    let reject_with_reason = serde_json::from_value::<Decision>(json!({
        "type": "reject",
        "reason": "never delete this"
    }));
    assert!(
        approve_with_args.is_err() && edit_with_tool.is_err() && reject_with_reason.is_err(),
        "unknown decision fields were silently dropped: {approve_with_args:?} / {edit_with_tool:?} / \
         {reject_with_reason:?}"
    );
}

/// End to end: the decision JSON carries edited arguments under
/// `"type": "approve"`; the original `delete /` runs.
#[tokio::test]
async fn an_approve_carrying_edited_arguments_does_not_run_the_original_call() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let store = MemoryCheckpointer::new();
    let a = agent_with(
        ToolRegistry::new().with(delete.clone()).unwrap(),
        vec![delete_call("d1", "/"), ScriptedTurn::text("done")],
    );
    let mut ctx = RunContext::new(RunConfig::new("r1"), ());
    AgentGraph::new(&a)
        .run_durable(&mut ctx, &(), "tidy", "t", &store)
        .await
        .unwrap_err();
    let paused = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
    // the endpoint reads the person's decision from JSON
    let body = json!({"type": "approve", "arguments": {"path": "tmp/scratch.txt"}});
    let Ok(decision) = serde_json::from_value::<Decision>(body) else {
        return; // refused: fixed
    };
    let resume = paused.decide([("d1", decision)]).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    let _ = AgentGraph::new(&a)
        .resume_with(&mut ctx, &(), "t", &store, resume)
        .await;
    assert_ne!(
        delete.calls(),
        vec![json!({"path": "/"})],
        "the decision carried other arguments and the original call ran"
    );
}

// ---------------------------------------------------------------------------
// 3. Restrictions applied by steering are not carried by the checkpoint.
// ---------------------------------------------------------------------------

/// An operator switches the run to plan mode (read-only) and pauses it. The
/// checkpoint records `mode = plan`, but `agent_mode` reads the mode from the
/// run context's updates, which a resumed run starts without: the resumed run
/// is back in build mode and `write` runs.
#[tokio::test]
async fn a_mode_switched_to_plan_before_a_pause_still_holds_after_the_resume() {
    let write = RecordingTool::new("write").returning("written");
    let read = RecordingTool::new("read").returning("text");
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("w1", "write", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(
        ToolRegistry::new()
            .with(write.clone())
            .unwrap()
            .with(read.clone())
            .unwrap(),
    )
    .with_stack(
        MiddlewareStack::new()
            .with(AgentModeMiddleware::new(AgentMode::Build).read_only_tools(["read"]))
            .unwrap(),
    );
    let handle = SteeringHandle::new();
    handle.send(SteeringCommand::new(
        "m",
        SteeringAction::SwitchMode { mode: "plan".into() },
    ));
    handle.send(SteeringCommand::new(
        "p",
        SteeringAction::Pause {
            reason: "look before going on".into(),
        },
    ));
    let store = MemoryCheckpointer::new();
    let mut ctx = RunContext::new(RunConfig::new("r1"), ()).with_steering(handle);
    let err = AgentGraph::new(&agent)
        .run_durable(&mut ctx, &(), "go", "t", &store)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    let paused = store.latest("t").await.unwrap().unwrap();
    assert_eq!(
        paused.state.get("mode"),
        Some(&json!("plan")),
        "the checkpoint says plan"
    );

    let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    let run = AgentGraph::new(&agent).resume(&mut ctx, &(), "t", &store).await;
    assert!(
        write.calls().is_empty(),
        "the resumed run left plan mode and ran `write` ({:?})",
        run.map(|r| r.final_text()).map_err(|e| e.to_string())
    );
}

/// The same for a step limit an operator lowered with steering
/// (`AdjustLimits`): the resumed run is back at the agent's own limit.
#[tokio::test]
async fn a_step_limit_lowered_by_steering_before_a_pause_still_holds_after_the_resume() {
    let t = RecordingTool::new("t").returning("ok");
    let turns: Vec<ScriptedTurn> = (0..6)
        .map(|i| ScriptedTurn::tool_calls(vec![ToolCall::new(format!("c{i}"), "t", json!({}))]))
        .chain([ScriptedTurn::text("done")])
        .collect();
    let agent: Agent<()> = Agent::new(ScriptedModel::new(turns))
        .with_tools(ToolRegistry::new().with(t.clone()).unwrap())
        .with_max_steps(20);
    let handle = SteeringHandle::new();
    handle.send(SteeringCommand::new(
        "l",
        SteeringAction::AdjustLimits { max_steps: Some(1) },
    ));
    handle.send(SteeringCommand::new(
        "p",
        SteeringAction::Pause {
            reason: "look before going on".into(),
        },
    ));
    let store = MemoryCheckpointer::new();
    let mut ctx = RunContext::new(RunConfig::new("r1"), ()).with_steering(handle);
    let err = AgentGraph::new(&agent)
        .run_durable(&mut ctx, &(), "go", "t", &store)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    let run = AgentGraph::new(&agent).resume(&mut ctx, &(), "t", &store).await;
    assert!(
        t.calls().len() <= 1,
        "the operator's step limit of 1 was gone after the resume: {} tool calls ({:?})",
        t.calls().len(),
        run.map(|r| r.final_text()).map_err(|e| e.to_string())
    );
}

// ---------------------------------------------------------------------------
// 4. A middleware's state update can rewrite the graph's own keys.
// ---------------------------------------------------------------------------

/// A middleware that records a summary of each run segment under the state
/// key `counters` (its own shape), as middleware may with `update_state`.
struct RunSummary;

#[async_trait]
impl Middleware<()> for RunSummary {
    fn hooks(&self) -> HookSet {
        HookSet::AFTER_AGENT
    }
    async fn after_agent(&self, ctx: &mut RunContext, _: &(), run: &mut AgentRun) -> Result<()> {
        ctx.flow_mut()
            .update_state("counters", json!({"segments": 1, "messages": run.messages.len()}));
        Ok(())
    }
}

/// The agent allows 2 model turns per run. The run pauses for approval after
/// its second turn; at the pause the middleware's `counters` update is
/// written over the graph's own `counters` in the paused checkpoint, so the
/// resumed run restarts its step count at 0 and makes 4 more model turns.
#[tokio::test]
async fn a_middleware_state_update_cannot_rewrite_the_graph_s_own_counters_at_a_pause() {
    let t = RecordingTool::new("t").returning("ok");
    let delete = RecordingTool::new("delete").returning("deleted");
    let mut turns = vec![
        ScriptedTurn::tool_calls(vec![ToolCall::new("c0", "t", json!({}))]),
        delete_call("d1", "a.txt"),
    ];
    turns.extend((1..6).map(|i| ScriptedTurn::tool_calls(vec![ToolCall::new(format!("c{i}"), "t", json!({}))])));
    turns.push(ScriptedTurn::text("done"));
    let agent: Agent<()> = Agent::new(ScriptedModel::new(turns))
        .with_tools(
            ToolRegistry::new()
                .with(t.clone())
                .unwrap()
                .with(delete.clone())
                .unwrap(),
        )
        .with_stack(MiddlewareStack::new().with(gated()).unwrap().with(RunSummary).unwrap())
        .with_max_steps(2);
    let store = MemoryCheckpointer::new();
    let mut ctx = RunContext::new(RunConfig::new("r1"), ());
    let err = AgentGraph::new(&agent)
        .run_durable(&mut ctx, &(), "go", "t", &store)
        .await
        .unwrap_err();
    // refused, naming the key: the graph's own keys are never a middleware's to write
    assert_eq!(err.kind(), ErrorKind::Validation, "{err}");
    assert!(err.to_string().contains("`counters`"), "{err}");
    // and the stored checkpoints keep the graph's counters
    let latest = store.latest("t").await.unwrap().unwrap();
    let counters = latest.state.get("counters").cloned().unwrap_or_default();
    assert!(
        counters.get("steps").is_some(),
        "the checkpoint's counters were rewritten: {counters}"
    );
    assert!(
        counters.get("segments").is_none(),
        "the checkpoint's counters were rewritten: {counters}"
    );
    assert_eq!(t.calls().len(), 1);
    assert!(delete.calls().is_empty());
}

// ---------------------------------------------------------------------------
// 5. A batch interrupted by anything but `human_in_the_loop` loses the
//    results of the calls that already ran: the resume runs them again.
// ---------------------------------------------------------------------------

/// The parent's batch is `[write, helper]`. `write` runs (a side effect);
/// then the sub-agent pauses for a reason of its own (here: an operator's
/// steering `Pause` addressed to the child run). The parent pauses at its
/// `tools` node with both calls still pending, and the resume runs `write`
/// a second time.
#[tokio::test]
async fn a_call_that_ran_before_a_sub_agent_paused_is_not_run_again_on_resume() {
    let write = RecordingTool::new("write").returning("written");
    let child: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::text("child done"),
        ScriptedTurn::text("child done"),
    ]));
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("w1", "write", json!({"path": "ledger.txt", "append": "pay 100"})),
            ToolCall::new("h1", "helper", json!({"input": "check"})),
        ]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(write.clone()).unwrap().with(helper).unwrap());
    let handle = SteeringHandle::new();
    handle.send(
        SteeringCommand::new(
            "p",
            SteeringAction::Pause {
                reason: "an operator looks at the child".into(),
            },
        )
        .for_run("p1/h1"),
    );
    let store = MemoryCheckpointer::new();
    let mut ctx = RunContext::new(RunConfig::new("p1"), ()).with_steering(handle);
    let err = AgentGraph::new(&parent)
        .run_durable(&mut ctx, &(), "go", "t", &store)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    assert_eq!(write.calls().len(), 1, "`write` ran before the child paused");
    let paused = store.latest("t").await.unwrap().unwrap();
    let pending: Vec<String> = paused
        .state
        .get("pending_calls")
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |a| {
            a.iter().filter_map(|c| c["id"].as_str().map(str::to_owned)).collect()
        });

    let mut ctx = RunContext::new(RunConfig::new("p2"), ());
    let run = AgentGraph::new(&parent).resume(&mut ctx, &(), "t", &store).await;
    assert_eq!(
        write.calls().len(),
        1,
        "the resume ran `write` again (pending at the pause: {pending:?}; run: {:?})",
        run.map(|r| r.final_text()).map_err(|e| e.to_string())
    );
}

// ---------------------------------------------------------------------------
// 6. `resume_with` checks the parent's interrupt against the store, but not
//    the sub-agent resumes the decisions carry (`children`): their
//    conversation, reply and decisions come from the caller.
// ---------------------------------------------------------------------------

/// The child asked to `delete a.txt`; the store recorded that. The decisions
/// JSON keeps the parent's interrupt intact but rewrites the child's resume
/// (the reply it replays, and a decision bound to the new call's digest): the
/// child runs `delete /`, a call nobody was asked about.
#[tokio::test]
async fn a_sub_agent_resume_inside_the_decisions_must_answer_the_child_interrupt_the_store_recorded() {
    use tinyagents::harness::tool::call_digest;
    let store = MemoryCheckpointer::new();
    let (parent, delete, asked) = parent_paused_on_a_child_delete(&store).await;
    assert_eq!(asked.pending()[0].1.arguments, json!({"path": "a.txt"}));
    let decided = asked.decide([("h1/c1", Decision::Approve)]).unwrap();

    // the JSON the endpoint receives: the parent's interrupt untouched, the child's resume rewritten
    let mut body = serde_json::to_value(&decided).unwrap();
    let child = &mut body["children"]["h1"][1];
    child["interrupt"]["reply"]["tool_calls"][0]["arguments"] = json!({"path": "/"});
    child["decisions"]["c1"]["digest"] = json!(call_digest("delete", &json!({"path": "/"})));
    let forged: HitlResume = serde_json::from_value(body).unwrap();

    let mut ctx = RunContext::new(RunConfig::new("p2"), ());
    let out = AgentGraph::new(&parent)
        .resume_with(&mut ctx, &(), "t", &store, forged)
        .await;
    assert!(
        !delete.calls().contains(&json!({"path": "/"})),
        "the child ran `delete /`, which no request asked about (calls {:?}, run {:?})",
        delete.calls(),
        out.map(|r| r.final_text()).map_err(|e| e.to_string())
    );
}

/// The same root cause as (1) across threads: decisions a person took on
/// thread A, attached to a plain `resume` of thread B whose model asked for
/// the same call under the same id, run it on B.
#[tokio::test]
async fn decisions_taken_on_one_thread_do_not_approve_another_thread_through_plain_resume() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let tools = || ToolRegistry::new().with(delete.clone()).unwrap();
    let store = MemoryCheckpointer::new();
    let a = agent_with(tools(), vec![delete_call("d1", "a.txt"), ScriptedTurn::text("done")]);
    let mut ctx = RunContext::new(RunConfig::new("ra"), ());
    AgentGraph::new(&a)
        .run_durable(&mut ctx, &(), "tidy", "thread-a", &store)
        .await
        .unwrap_err();
    let on_a = HumanInTheLoopMiddleware::take_interrupt(&ctx)
        .unwrap()
        .decide([("d1", Decision::Approve)])
        .unwrap();
    let b = agent_with(tools(), vec![delete_call("d1", "a.txt"), ScriptedTurn::text("done")]);
    let mut ctx = RunContext::new(RunConfig::new("rb"), ());
    AgentGraph::new(&b)
        .run_durable(&mut ctx, &(), "tidy", "thread-b", &store)
        .await
        .unwrap_err();
    assert!(delete.calls().is_empty());
    // a new process resumes thread B with thread A's decisions
    let c = agent_with(tools(), vec![ScriptedTurn::text("done")]);
    let mut ctx = RunContext::new(RunConfig::new("rb2"), ());
    on_a.attach(&ctx);
    let out = AgentGraph::new(&c).resume(&mut ctx, &(), "thread-b", &store).await;
    assert!(
        delete.calls().is_empty(),
        "thread A's approval ran thread B's call ({:?})",
        out.map(|r| r.final_text()).map_err(|e| e.to_string())
    );
}

/// The siblings: a tool that answers `Interrupted` itself (a pause asked from
/// inside a call), with the batch run one call after another and
/// concurrently: the call that finished before the pause is not run again on
/// resume, and the transcript stays one providers accept.
#[tokio::test]
async fn a_call_that_finished_before_a_tool_paused_is_not_run_again_on_resume() {
    use tinyagents::harness::tool::{ToolContext, ToolOutput};
    struct PauseOnce(ToolSchema, std::sync::atomic::AtomicBool);
    #[async_trait]
    impl Tool for PauseOnce {
        fn schema(&self) -> &ToolSchema {
            &self.0
        }
        async fn call(&self, _cx: ToolContext, _args: Value) -> Result<ToolOutput> {
            if !self.1.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Err(TinyAgentsError::interrupted(None, "ask the operator first"));
            }
            Ok("checked".into())
        }
    }
    for concurrent in [false, true] {
        let write = RecordingTool::new("write").returning("written");
        let pause = PauseOnce(ToolSchema::new("check", "checks"), Default::default());
        let mut agent: Agent<()> = Agent::new(ScriptedModel::new([
            ScriptedTurn::tool_calls(vec![
                ToolCall::new("w1", "write", json!({"path": "ledger.txt"})),
                ToolCall::new("k1", "check", json!({})),
            ]),
            ScriptedTurn::text("done"),
        ]))
        .with_tools(ToolRegistry::new().with(write.clone()).unwrap().with(pause).unwrap());
        if concurrent {
            agent = agent.with_concurrent_tools();
        }
        let store = MemoryCheckpointer::new();
        let mut ctx = RunContext::new(RunConfig::new("r1"), ());
        let err = AgentGraph::new(&agent)
            .run_durable(&mut ctx, &(), "go", "t", &store)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
        assert_eq!(write.calls().len(), 1);
        let mut ctx = RunContext::new(RunConfig::new("r2"), ());
        let run = AgentGraph::new(&agent)
            .resume(&mut ctx, &(), "t", &store)
            .await
            .unwrap();
        tinyagents::testing::assert_valid_transcript(&run.messages);
        assert_eq!(
            write.calls().len(),
            1,
            "concurrent: {concurrent}: `write` ran again on resume"
        );
        assert_eq!(run.final_text(), "done");
    }
}
