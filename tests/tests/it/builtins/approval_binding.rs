//! Human approval (issue 14, class 4): a decision is bound to the digest of
//! the exact call shown (tool + canonical arguments) and refused on a
//! mismatch; a decision is single-use; a HITL approval satisfies
//! `tool_policy`'s `approval_required`; and a sub-agent's approval request
//! travels up into its parent's interrupt, where it is decided and resumed
//! (the child resumes, the approved call runs exactly once).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use tinyagents::harness::tool::{call_digest, ToolAccess, ToolPolicy};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

fn gated() -> HumanInTheLoopMiddleware {
    HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new())
}

fn agent(delete: &RecordingTool, turns: Vec<ScriptedTurn>, stack: MiddlewareStack<()>) -> Agent<()> {
    Agent::new(ScriptedModel::new(turns))
        .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
        .with_stack(stack)
}

fn delete_then_done() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::tool_calls(vec![ToolCall::new(
            "d1",
            "delete",
            json!({"path": "a.txt", "force": false}),
        )]),
        ScriptedTurn::text("done"),
    ]
}

async fn pause(agent: &Agent<()>) -> HitlInterrupt {
    let mut ctx = RunContext::new(RunConfig::new("first"), ());
    let err = agent.run(&mut ctx, &(), "tidy").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    HumanInTheLoopMiddleware::take_interrupt(&ctx).expect("an interrupt")
}

/// The gated `delete_then_done` agent run durably (run `r1`, thread `t`, in
/// `store`) until it pauses: the `delete` tool, the agent, the interrupt.
async fn durable_pause(store: &tinyagents::graph::MemoryCheckpointer) -> (RecordingTool, Agent<()>, HitlInterrupt) {
    let delete = RecordingTool::new("delete").returning("deleted");
    let a = agent(
        &delete,
        delete_then_done(),
        MiddlewareStack::new().with(gated()).unwrap(),
    );
    let mut ctx = RunContext::new(RunConfig::new("r1"), ());
    tinyagents::graph::AgentGraph::new(&a)
        .run_durable(&mut ctx, &(), "tidy", "t", store)
        .await
        .unwrap_err();
    let asked = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
    (delete, a, asked)
}

async fn resume(agent: &Agent<()>, resume: HitlResume) -> Result<AgentRun> {
    let input = resume.input();
    let mut ctx = RunContext::new(RunConfig::new("second"), ());
    resume.attach(&ctx);
    agent.run(&mut ctx, &(), input).await
}

#[tokio::test]
async fn each_request_carries_the_digest_of_the_call_shown_and_a_unique_id() {
    let delete = RecordingTool::new("delete");
    let a = agent(
        &delete,
        delete_then_done(),
        MiddlewareStack::new().with(gated()).unwrap(),
    );
    let p1 = pause(&a).await;
    let r = &p1.requests[0];
    assert_eq!(
        r.digest,
        call_digest("delete", &json!({"force": false, "path": "a.txt"}))
    );
    assert_eq!(r.request_id.len(), 32);
    assert_eq!(p1.run_id, "first");
    let a = agent(
        &delete,
        delete_then_done(),
        MiddlewareStack::new().with(gated()).unwrap(),
    );
    let p2 = pause(&a).await;
    assert_ne!(
        p1.requests[0].request_id, p2.requests[0].request_id,
        "every pause asks anew"
    );
}

#[tokio::test]
async fn a_stored_reply_changed_after_the_decision_is_refused_and_nothing_runs() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let a = agent(
        &delete,
        delete_then_done(),
        MiddlewareStack::new().with(gated()).unwrap(),
    );
    let paused = pause(&a).await;
    let mut r = paused.decide([("d1", Decision::Approve)]).unwrap();
    // Tamper with the stored reply through its serialised form: other arguments, same call id.
    let mut stored = serde_json::to_value(&r).unwrap();
    stored["interrupt"]["reply"]["tool_calls"][0]["arguments"] = json!({"path": "/etc/passwd", "force": true});
    r = serde_json::from_value(stored).unwrap();
    let err = resume(&a, r).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation, "{err}");
    assert!(err.to_string().contains("not the call the person decided on"), "{err}");
    assert!(delete.calls().is_empty(), "the changed call never ran");
}

#[tokio::test]
async fn a_request_altered_before_the_decision_or_decided_on_another_digest_is_refused() {
    let delete = RecordingTool::new("delete");
    let a = agent(
        &delete,
        delete_then_done(),
        MiddlewareStack::new().with(gated()).unwrap(),
    );
    let paused = pause(&a).await;

    // the arguments shown were changed but not the digest: refused
    let mut altered = paused.clone();
    altered.requests[0].arguments = json!({"path": "/"});
    let err = altered.decide([("d1", Decision::Approve)]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.to_string().contains("was altered"), "{err}");

    // a decision carrying the digest the person's screen showed: must match
    let other = call_digest("delete", &json!({"path": "/"}));
    let err = paused
        .clone()
        .decide_bound([("d1", other, Decision::Approve)])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.to_string().contains("taken on another call"), "{err}");
    let right = paused.requests[0].digest.clone();
    let ok = paused.decide_bound([("d1", right, Decision::Approve)]).unwrap();
    resume(&a, ok).await.unwrap();
    assert_eq!(delete.calls().len(), 1);
}

#[tokio::test]
async fn a_decision_is_single_use_a_replayed_resume_is_refused() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let a = agent(
        &delete,
        vec![
            ScriptedTurn::tool_calls(vec![ToolCall::new("d1", "delete", json!({"path": "a.txt"}))]),
            ScriptedTurn::text("done"),
            ScriptedTurn::text("done again"),
        ],
        MiddlewareStack::new().with(gated()).unwrap(),
    );
    let r = pause(&a).await.decide([("d1", Decision::Approve)]).unwrap();
    let replay = r.clone();
    let through_json: HitlResume = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
    resume(&a, r).await.unwrap();
    assert_eq!(delete.calls().len(), 1);
    for again in [replay, through_json] {
        let err = resume(&a, again).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
        assert!(err.to_string().contains("already used"), "{err}");
    }
    assert_eq!(delete.calls().len(), 1, "the approved call ran exactly once");
}

#[tokio::test]
async fn a_person_s_approval_satisfies_tool_policy_approval_required() {
    let pay = RecordingTool::new("pay")
        .returning("paid")
        .with_policy(ToolPolicy::classified().with_access(ToolAccess {
            approval_required: true,
            read_only: false,
        }));
    let make = |turns: Vec<ScriptedTurn>, hitl: bool| {
        let registry = ToolRegistry::new().with(pay.clone()).unwrap();
        let policy = ToolPolicyMiddleware::new(registry.policies());
        let mut stack = MiddlewareStack::new();
        // the policy registered first: it decides before the HITL's before_tool
        stack = stack.with(policy).unwrap();
        if hitl {
            stack = stack
                .with(HumanInTheLoopMiddleware::new().interrupt_on("pay", InterruptOn::new()))
                .unwrap();
        }
        Agent::<()>::new(ScriptedModel::new(turns))
            .with_tools(ToolRegistry::new().with(pay.clone()).unwrap())
            .with_stack(stack)
    };
    let turns = || {
        vec![
            ScriptedTurn::tool_calls(vec![ToolCall::new("p1", "pay", json!({"amount": 5}))]),
            ScriptedTurn::text("done"),
        ]
    };

    // no person: refused (and the tool is not shown)
    let a = make(turns(), false);
    let run = a
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "pay")
        .await
        .unwrap();
    assert!(pay.calls().is_empty());
    assert!(run.messages.iter().any(|m| m.text().contains("requires approval")));

    // a person approves that call: it runs once, with the policy in the stack
    let a = make(turns(), true);
    let mut ctx = RunContext::new(RunConfig::new("r1"), ());
    assert_eq!(
        a.run(&mut ctx, &(), "pay").await.unwrap_err().kind(),
        ErrorKind::Interrupted
    );
    let r = HumanInTheLoopMiddleware::take_interrupt(&ctx)
        .unwrap()
        .decide([("p1", Decision::Approve)])
        .unwrap();
    let run = resume(&a, r).await.unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(pay.calls(), [json!({"amount": 5})]);

    // an edit is approved as edited
    let a = make(turns(), true);
    let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    assert!(a.run(&mut ctx, &(), "pay").await.is_err());
    let r = HumanInTheLoopMiddleware::take_interrupt(&ctx)
        .unwrap()
        .decide([(
            "p1",
            Decision::Edit {
                arguments: json!({"amount": 1}),
            },
        )])
        .unwrap();
    resume(&a, r).await.unwrap();
    assert_eq!(pay.calls()[1], json!({"amount": 1}));
}

#[before_tool(name = "rewriter")]
fn rewriter(call: &mut ToolCall) -> Result<()> {
    call.arguments = json!({"path": "/"});
    Ok(())
}

/// A rewrite of the approved call's arguments after the decision (a
/// middleware changing them in `before_tool`) is refused before the tool runs.
#[tokio::test]
async fn arguments_rewritten_after_the_approval_are_refused() {
    let stack = || {
        MiddlewareStack::new()
            .with(gated())
            .unwrap()
            .with(ToolPolicyMiddleware::new(HashMap::new()))
            .unwrap()
            .with(Rewriter)
            .unwrap()
    };
    let gated_tool = RecordingTool::new("delete").with_policy(ToolPolicy::classified().with_access(ToolAccess {
        approval_required: true,
        read_only: false,
    }));
    let a = agent(&gated_tool, delete_then_done(), stack());
    let r = pause(&a).await.decide([("d1", Decision::Approve)]).unwrap();
    let run = resume(&a, r).await.unwrap();
    assert!(gated_tool.calls().is_empty(), "the rewritten call never ran");
    assert!(
        run.messages
            .iter()
            .any(|m| m.role == Role::Tool && m.text().contains("changed after a person approved it")),
        "{:?}",
        run.messages
    );
}

/// The child's gated call pauses the parent; the parent's interrupt names
/// the child run and call; deciding there resumes the child and the
/// approved call runs exactly once.
#[tokio::test]
async fn a_sub_agent_s_request_is_decided_and_resumed_through_the_parent() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let child_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("child done"),
    ]));
    let child: Agent<()> = Agent::new(child_model.clone())
        .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
        .with_stack(MiddlewareStack::new().with(gated()).unwrap());
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "clean"}))]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(helper).unwrap())
    .with_stack(MiddlewareStack::new().with(HumanInTheLoopMiddleware::new()).unwrap());

    let mut ctx = RunContext::new(RunConfig::new("p1"), ());
    let err = parent.run(&mut ctx, &(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    assert!(err.to_string().contains("sub-agent run `p1/h1`"), "{err}");
    assert!(delete.calls().is_empty());
    let paused = HumanInTheLoopMiddleware::take_interrupt(&ctx).expect("the parent holds the interrupt");
    assert!(paused.requests.is_empty());
    assert_eq!(paused.children.len(), 1);
    let child_req = &paused.children[0];
    assert_eq!((child_req.call_id.as_str(), child_req.run_id.as_str()), ("h1", "p1/h1"));
    assert_eq!(child_req.interrupt.requests[0].tool, "delete");
    let addresses: Vec<String> = paused.pending().into_iter().map(|(a, _)| a).collect();
    assert_eq!(addresses, ["h1/c1"]);

    // it travels as JSON, like every interrupt
    let paused: HitlInterrupt = serde_json::from_str(&serde_json::to_string(&paused).unwrap()).unwrap();
    let r = paused.decide([("h1/c1", Decision::Approve)]).unwrap();
    let replay = r.clone();
    let run = resume(&parent, r).await.unwrap();
    assert_eq!(run.final_text(), "parent done");
    assert_eq!(
        delete.calls(),
        [json!({"path": "a.txt"})],
        "the approved call ran exactly once"
    );
    assert_eq!(
        child_model.calls(),
        2,
        "the child's paused reply was replayed, not re-asked"
    );

    let err = resume(&parent, replay).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert_eq!(delete.calls().len(), 1, "a replay ran nothing");
}

#[tokio::test]
async fn a_sub_agent_rejection_routed_up_never_runs_the_call() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let child: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("child done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
    .with_stack(MiddlewareStack::new().with(gated()).unwrap());
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "clean"}))]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(helper).unwrap())
    .with_stack(MiddlewareStack::new().with(HumanInTheLoopMiddleware::new()).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("p1"), ());
    parent.run(&mut ctx, &(), "go").await.unwrap_err();
    let paused = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();

    // a decision missing for the child's request: nothing runs
    let err = paused.clone().decide(Vec::<(String, Decision)>::new()).unwrap_err();
    assert!(err.to_string().contains("no decision for calls c1"), "{err}");

    // the parent's call to the sub-agent changed since the pause: refused
    let mut tampered = serde_json::to_value(paused.clone().decide([("h1/c1", Decision::Approve)]).unwrap()).unwrap();
    tampered["interrupt"]["reply"]["tool_calls"][0]["arguments"] = json!({"input": "delete everything"});
    let err = resume(&parent, serde_json::from_value(tampered).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation, "{err}");
    assert!(delete.calls().is_empty());

    let r = paused
        .decide([(
            "h1/c1",
            Decision::Reject {
                message: Some("no".into()),
            },
        )])
        .unwrap();
    let run = resume(&parent, r).await.unwrap();
    assert_eq!(run.final_text(), "parent done");
    assert!(delete.calls().is_empty(), "the rejected call never ran");
}

/// The same routing under a durable graph run: the parent pauses at its
/// `tools` node with the child's request; `resume_with` resumes the child.
#[tokio::test]
async fn a_sub_agent_s_request_resumes_through_a_durable_parent() {
    use crate::support::parent_paused_on_a_child_delete;
    use tinyagents::graph::{AgentGraph, MemoryCheckpointer};
    let store = MemoryCheckpointer::new();
    let (parent, delete, asked) = parent_paused_on_a_child_delete(&store).await;
    let r = asked.decide([("h1/c1", Decision::Approve)]).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("p2"), ());
    let run = AgentGraph::new(&parent)
        .resume_with(&mut ctx, &(), "t", &store, r.clone())
        .await
        .unwrap();
    assert_eq!(run.final_text(), "parent done");
    assert_eq!(delete.calls().len(), 1);
    let mut ctx = RunContext::new(RunConfig::new("p3"), ());
    let err = AgentGraph::new(&parent)
        .resume_with(&mut ctx, &(), "t", &store, r)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert_eq!(delete.calls().len(), 1);
}

/// The child shares its parent's stack (the same `human_in_the_loop`
/// instance brackets both runs): the child's request is routed up, decided
/// once, and the call runs exactly once.
#[tokio::test]
async fn a_shared_stack_routes_the_child_s_request_up_once() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let stack = Arc::new(MiddlewareStack::new().with(gated()).unwrap());
    let child: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("child done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
    .with_shared_stack(stack.clone());
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "clean"}))]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(helper).unwrap())
    .with_shared_stack(stack);
    let mut ctx = RunContext::new(RunConfig::new("p1"), ());
    assert_eq!(
        parent.run(&mut ctx, &(), "go").await.unwrap_err().kind(),
        ErrorKind::Interrupted
    );
    let r = HumanInTheLoopMiddleware::take_interrupt(&ctx)
        .unwrap()
        .decide([("h1/c1", Decision::Approve)])
        .unwrap();
    let replay = r.clone();
    let run = resume(&parent, r).await.unwrap();
    assert_eq!(run.final_text(), "parent done");
    assert_eq!(delete.calls().len(), 1);
    let err = resume(&parent, replay).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains("already used"), "{err}");
    assert_eq!(delete.calls().len(), 1);
}

/// A checkpoint whose pending call was changed after the pause: the
/// decision does not apply to it and nothing runs.
#[tokio::test]
async fn a_tampered_checkpoint_is_refused_on_resume() {
    use tinyagents::graph::{AgentGraph, Checkpointer, MemoryCheckpointer};
    let store = MemoryCheckpointer::new();
    let (delete, a, asked) = durable_pause(&store).await;
    let r = asked.decide([("d1", Decision::Approve)]).unwrap();
    let mut cp = store.latest("t").await.unwrap().unwrap();
    let mut values = cp.state.values().clone();
    values["pending_calls"][0]["arguments"] = json!({"path": "/", "force": true});
    cp.state = tinyagents::graph::GraphState::from_update(values);
    cp.seq += 1;
    store.put(&cp).await.unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    let err = AgentGraph::new(&a)
        .resume_with(&mut ctx, &(), "t", &store, r)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation, "{err}");
    assert!(err.to_string().contains("not the call the person decided on"), "{err}");
    assert!(delete.calls().is_empty());
}

/// The store is the authority on what a durable pause asked: decisions on
/// another interrupt (an earlier pause, or forged ids) are refused.
#[tokio::test]
async fn resume_with_answers_only_the_interrupt_the_store_recorded() {
    use tinyagents::graph::{AgentGraph, Checkpointer, MemoryCheckpointer};
    let store = MemoryCheckpointer::new();
    let (delete, a, asked) = durable_pause(&store).await;
    let recorded = store.latest("t").await.unwrap().unwrap();
    assert_eq!(
        recorded.state.get("hitl_interrupt"),
        Some(&serde_json::to_value(&asked).unwrap()),
        "the pause's checkpoint records what was asked"
    );
    let mut forged = asked.clone();
    forged.requests[0].request_id = "0".repeat(32);
    let r = forged.decide([("d1", Decision::Approve)]).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    let err = AgentGraph::new(&a)
        .resume_with(&mut ctx, &(), "t", &store, r)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation, "{err}");
    assert!(err.to_string().contains("another interrupt"), "{err}");
    assert!(delete.calls().is_empty());
    // the genuine decisions still apply
    let r = asked.decide([("d1", Decision::Approve)]).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r3"), ());
    AgentGraph::new(&a)
        .resume_with(&mut ctx, &(), "t", &store, r)
        .await
        .unwrap();
    assert_eq!(delete.calls().len(), 1);
}

/// Decisions attached to a context and a plain `AgentGraph::resume` apply at
/// the `tools` node where the run paused (they used to be waited for in a
/// model replay that never came, so the run paused again forever).
#[tokio::test]
async fn attached_decisions_apply_when_a_graph_resumes_at_its_tools_node() {
    use tinyagents::graph::{AgentGraph, MemoryCheckpointer};
    let store = MemoryCheckpointer::new();
    let (delete, a, asked) = durable_pause(&store).await;
    let r = asked.decide([("d1", Decision::Approve)]).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    r.attach(&ctx);
    let run = AgentGraph::new(&a).resume(&mut ctx, &(), "t", &store).await.unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(delete.calls().len(), 1);
}

/// A parent with no `human_in_the_loop` cannot carry its child's request up:
/// the run fails clearly (a `Config` error naming the fix), nothing runs,
/// and it does not pretend to be resumable.
#[tokio::test]
async fn a_child_s_request_with_no_carrier_above_fails_clearly() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let child: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("child done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
    .with_stack(MiddlewareStack::new().with(gated()).unwrap());
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "clean"}))]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(helper).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("p1"), ());
    let err = parent.run(&mut ctx, &(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    assert!(
        err.to_string()
            .contains("no `human_in_the_loop` to carry the request up"),
        "{err}"
    );
    assert!(delete.calls().is_empty());
}

/// A tool that requires approval is shown to the model only when a person
/// can be asked for it in this run (a `human_in_the_loop` gates it).
#[tokio::test]
async fn an_approval_required_tool_is_shown_only_when_a_person_can_be_asked() {
    let policies = HashMap::from([(
        "pay".to_string(),
        ToolPolicy::classified().with_access(ToolAccess {
            approval_required: true,
            read_only: false,
        }),
    )]);
    for (hitl, shown) in [(false, false), (true, true)] {
        let mut stack: MiddlewareStack<()> = MiddlewareStack::new();
        if hitl {
            stack = stack
                .with(HumanInTheLoopMiddleware::new().interrupt_on("pay", InterruptOn::new()))
                .unwrap();
        }
        let stack = stack.with(ToolPolicyMiddleware::new(policies.clone())).unwrap();
        let mut ctx = RunContext::new(RunConfig::new("r"), ());
        stack.run_before_agent(&mut ctx, &()).await.unwrap();
        let mut req = ModelRequest::default().with_tools(vec![ToolSchema::new("pay", "")]);
        stack.run_before_model(&mut ctx, &(), &mut req).await.unwrap();
        assert_eq!(!req.tools.is_empty(), shown, "hitl = {hitl}");
        // and never admitted at execution without a person's approval of the call
        let mut call = ToolCall::new("p1", "pay", json!({}));
        assert!(stack.run_before_tool(&mut ctx, &(), &mut call).await.is_err());
    }
}

/// A nested decision carrying the digest the person's screen showed is
/// checked like a top-level one.
#[tokio::test]
async fn a_bound_decision_on_a_sub_agent_request_must_carry_its_digest() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let child: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("child done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
    .with_stack(MiddlewareStack::new().with(gated()).unwrap());
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "clean"}))]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(helper).unwrap())
    .with_stack(MiddlewareStack::new().with(HumanInTheLoopMiddleware::new()).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("p1"), ());
    parent.run(&mut ctx, &(), "go").await.unwrap_err();
    let paused = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
    let wrong = call_digest("delete", &json!({"path": "b.txt"}));
    let err = paused
        .clone()
        .decide_bound([("h1/c1", wrong, Decision::Approve)])
        .unwrap_err();
    assert!(err.to_string().contains("taken on another call"), "{err}");
    let (_, request) = paused.pending().into_iter().next().unwrap();
    let right = request.digest.clone();
    let r = paused.decide_bound([("h1/c1", right, Decision::Approve)]).unwrap();
    resume(&parent, r).await.unwrap();
    assert_eq!(delete.calls().len(), 1);
}

/// A call of the parent's batch that ran before the sub-agent paused it is
/// not run again on resume: its result comes back from the interrupt.
#[tokio::test]
async fn a_sibling_that_ran_before_a_sub_agent_paused_is_not_run_again() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let notify = RecordingTool::new("notify").returning("notified");
    let child: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("child done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
    .with_stack(MiddlewareStack::new().with(gated()).unwrap());
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("n1", "notify", json!({"to": "ops"})),
            ToolCall::new("h1", "helper", json!({"input": "clean"})),
        ]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(notify.clone()).unwrap().with(helper).unwrap())
    .with_stack(MiddlewareStack::new().with(HumanInTheLoopMiddleware::new()).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("p1"), ());
    parent.run(&mut ctx, &(), "go").await.unwrap_err();
    assert_eq!(notify.calls().len(), 1);
    let paused = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
    assert_eq!(paused.completed.len(), 1);
    assert_eq!(paused.completed[0].result.call_id, "n1");

    // a tampered sibling (other arguments than the call that ran) is refused
    let mut tampered = serde_json::to_value(paused.clone().decide([("h1/c1", Decision::Approve)]).unwrap()).unwrap();
    tampered["interrupt"]["reply"]["tool_calls"][0]["arguments"] = json!({"to": "everyone"});
    let err = resume(&parent, serde_json::from_value(tampered).unwrap())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation, "{err}");
    assert_eq!(notify.calls().len(), 1);

    let r = paused.decide([("h1/c1", Decision::Approve)]).unwrap();
    let run = resume(&parent, r).await.unwrap();
    assert_eq!(run.final_text(), "parent done");
    assert_eq!(
        notify.calls().len(),
        1,
        "the sibling that already ran was not run again"
    );
    assert_eq!(delete.calls().len(), 1);
    let results: Vec<String> = run
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(results, ["notified", "child done"]);
}

/// A person's approval is good for the batch it was given in. Here the
/// person edits a gated payment of 500 down to 50; the edited call runs.
/// On a later turn the model sends a *new* call that reuses the call id and
/// carries the edited arguments: the gate's condition (`amount > 100`) does
/// not hold, so nobody is asked, and `tool_policy`'s `approval_required` is
/// satisfied by the old grant (keyed by call id, never spent). The payment
/// runs a second time on one approval.
#[tokio::test]
async fn an_edited_approval_is_not_reused_by_a_later_call_with_the_same_id() {
    let pay = RecordingTool::new("pay")
        .returning("paid")
        .with_policy(ToolPolicy::classified().with_access(ToolAccess {
            approval_required: true,
            read_only: false,
        }));
    let registry = ToolRegistry::new().with(pay.clone()).unwrap();
    let stack = MiddlewareStack::new()
        .with(ToolPolicyMiddleware::new(registry.policies()))
        .unwrap()
        .with(HumanInTheLoopMiddleware::new().interrupt_on(
            "pay",
            InterruptOn::new().when(|call| call.arguments["amount"].as_u64().unwrap_or(u64::MAX) > 100),
        ))
        .unwrap();
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("p1", "pay", json!({"amount": 500}))]),
        // a later turn: a new call, the same id, the arguments the person chose
        ScriptedTurn::tool_calls(vec![ToolCall::new("p1", "pay", json!({"amount": 50}))]),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(registry)
    .with_stack(stack);

    let mut ctx = RunContext::new(RunConfig::new("first"), ());
    let err = agent.run(&mut ctx, &(), "pay").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    let resume = HumanInTheLoopMiddleware::take_interrupt(&ctx)
        .unwrap()
        .decide([(
            "p1",
            Decision::Edit {
                arguments: json!({"amount": 50}),
            },
        )])
        .unwrap();
    let input = resume.input();
    let mut ctx2 = RunContext::new(RunConfig::new("second"), ());
    resume.attach(&ctx2);
    let run = agent.run(&mut ctx2, &(), input).await.unwrap();
    assert_eq!(
        pay.calls(),
        [json!({"amount": 50})],
        "one approval ran one payment; the later call was never approved: {:?}",
        run.messages.iter().map(|m| m.text().into_owned()).collect::<Vec<_>>()
    );
}
