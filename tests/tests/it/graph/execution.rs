//! The graph boundary (command mapping), the state-graph runtime (edges,
//! reducers, fork/merge, interrupts, step bound) and the agent loop run as a
//! graph with the same middleware and the same events.

use std::sync::Arc;

use serde_json::json;
use tinyagents::graph::{
    node_fn, to_command, update, AgentGraph, BoundaryAction, Branch, Command, GraphOutcome, GraphState, HarnessOutcome,
    MemoryCheckpointer, Reducer, StateGraph, END,
};
use tinyagents::harness::steering::{SteeringAction, SteeringCommand};
use tinyagents::prelude::*;
use tinyagents::testing::{trace, CollectingSink, RecordingTool};
use tinyagents_tests::{Log, Recorder};

use crate::support::{asking, run_graph_durably};

#[test]
fn harness_outcomes_map_onto_commands_as_the_seed_says() {
    use BoundaryAction::Command as C;
    assert_eq!(to_command(HarnessOutcome::Continue), C(Command::Continue));
    assert_eq!(
        to_command(HarnessOutcome::Jump(JumpTarget::Model)),
        C(Command::Goto("model".into()))
    );
    assert_eq!(
        to_command(HarnessOutcome::Jump(JumpTarget::Tools)),
        C(Command::Goto("tools".into()))
    );
    assert_eq!(to_command(HarnessOutcome::Jump(JumpTarget::End)), C(Command::End));
    assert_eq!(
        to_command(HarnessOutcome::Control(MiddlewareControl::Interrupt {
            node: Some("hitl".into()),
            message: "ok?".into()
        })),
        C(Command::Interrupt {
            node: Some("hitl".into()),
            message: "ok?".into()
        })
    );
    let steer = |a| HarnessOutcome::SteeringAccepted(SteeringCommand::new("s", a));
    assert_eq!(
        to_command(steer(SteeringAction::SwitchMode { mode: "plan".into() })),
        C(Command::Update(update([("mode", json!("plan"))])))
    );
    assert_eq!(
        to_command(steer(SteeringAction::Pause { reason: "look".into() })),
        C(Command::Interrupt {
            node: Some("steering".into()),
            message: "look".into()
        })
    );
    assert_eq!(
        to_command(steer(SteeringAction::Cancel { reason: "no".into() })),
        C(Command::End)
    );
    let child = SteeringCommand::new("s", SteeringAction::Resume).for_run("p/k1");
    assert_eq!(
        to_command(HarnessOutcome::SteeringAccepted(child.clone())),
        BoundaryAction::DeliverToChild {
            run_id: "p/k1".into(),
            command: child
        }
    );
    assert_eq!(
        to_command(HarnessOutcome::FanOut(vec![Branch::new("a")])),
        C(Command::Fork(vec![Branch::new("a")]))
    );
    assert_eq!(
        to_command(HarnessOutcome::RetryOrFallback),
        BoundaryAction::HandledInNode
    );
}

fn counter(field: &'static str, by: i64) -> impl tinyagents::graph::Node<()> {
    node_fn(move |_s| async move { Ok(Command::Update(update([(field, json!(by))]))) })
}

#[tokio::test]
async fn fork_merges_branch_updates_deterministically_through_reducers() {
    let graph = StateGraph::<()>::new()
        .node(
            "start",
            node_fn(|_| async {
                Ok(Command::Fork(vec![
                    Branch::new("left").with_input(update([("side", json!("L"))])),
                    Branch::new("right").with_input(update([("side", json!("R"))])),
                    Branch::new("left").with_input(update([("side", json!("L2"))])),
                ]))
            }),
        )
        .node(
            "left",
            node_fn(|s| async move {
                let side = s.get("side").cloned().unwrap_or_default();
                Ok(Command::Update(update([
                    ("log", json!([side])),
                    ("total", json!(1)),
                    ("best", json!(3)),
                ])))
            }),
        )
        .node(
            "right",
            node_fn(|s| async move {
                let side = s.get("side").cloned().unwrap_or_default();
                Ok(Command::Update(update([
                    ("log", json!([side])),
                    ("total", json!(10)),
                    ("best", json!(7)),
                ])))
            }),
        )
        .entry("start")
        .edge("start", END)
        .reducer("log", Reducer::Append)
        .reducer("total", Reducer::Sum)
        .reducer("best", Reducer::Max)
        .compile()
        .unwrap();
    let first = graph.run(&mut (), GraphState::new()).await.unwrap();
    assert_eq!(
        first.state.get("log"),
        Some(&json!(["L", "R", "L2"])),
        "merged in branch order"
    );
    assert_eq!(first.state.get("total"), Some(&json!(12)));
    assert_eq!(first.state.get("best"), Some(&json!(7)));
    assert_eq!(first.state.get("side"), None, "branch inputs stay in their branch");
    for _ in 0..5 {
        assert_eq!(graph.run(&mut (), GraphState::new()).await.unwrap().state, first.state);
    }
    assert_eq!(
        first.updates.iter().map(|u| u.node.as_str()).collect::<Vec<_>>(),
        ["left", "right", "left"]
    );
}

#[tokio::test]
async fn conditional_edges_route_and_the_step_bound_stops_a_loop() {
    let looping = StateGraph::<()>::new()
        .node("inc", counter("n", 1))
        .entry("inc")
        .reducer("n", Reducer::Sum)
        .conditional_edge("inc", |s| {
            if s.get("n") == Some(&json!(4)) {
                END.into()
            } else {
                "inc".into()
            }
        })
        .compile()
        .unwrap();
    let run = looping.run(&mut (), GraphState::new()).await.unwrap();
    assert_eq!((run.state.get("n"), run.steps), (Some(&json!(4)), 4));

    let forever = StateGraph::<()>::new()
        .node("inc", counter("n", 1))
        .entry("inc")
        .edge("inc", "inc")
        .max_steps(10);
    let err = forever
        .compile()
        .unwrap()
        .run(&mut (), GraphState::new())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    assert!(err.to_string().contains("10 node steps"), "{err}");
}

#[test]
fn compile_reports_every_problem_at_once() {
    let err = StateGraph::<()>::new()
        .node("a", counter("n", 1))
        .node("a", counter("n", 2))
        .edge("a", "missing")
        .edge("ghost", "a")
        .entry("nowhere")
        .compile()
        .unwrap_err();
    let msg = err.to_string();
    for part in [
        "two nodes are named `a`",
        "entry node `nowhere` does not exist",
        "`a` → `missing`",
        "leaves `ghost`",
    ] {
        assert!(msg.contains(part), "missing {part:?} in {msg}");
    }
}

#[tokio::test]
async fn an_interrupt_pauses_and_resume_runs_the_node_again_with_the_value() {
    let graph = StateGraph::<()>::new()
        .node("ask", asking("approve the plan?"))
        .node("after", counter("done", 1))
        .entry("ask")
        .edge("ask", "after")
        .edge("after", END)
        .compile()
        .unwrap();
    let (paused, store) = run_graph_durably(&graph).await;
    match &paused.outcome {
        GraphOutcome::Interrupted(r) => assert_eq!((r.node.as_str(), r.message.as_str()), ("ask", "approve the plan?")),
        other => panic!("expected an interrupt, got {other:?}"),
    }
    let done = graph.resume(&mut (), "t", &store, Some(json!("yes"))).await.unwrap();
    assert_eq!(done.outcome, GraphOutcome::Finished);
    assert_eq!(done.state.get("answer"), Some(&json!("yes")));
    assert_eq!(
        done.state.resume_value(),
        None,
        "the resume value is for the interrupted node only"
    );
    let err = graph.resume(&mut (), "t", &store, None).await.unwrap_err();
    assert!(err.to_string().contains("already finished"), "{err}");
}

fn script() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::tool_call("search", json!({"q": "rust"})),
        ScriptedTurn::Reply(ModelResponse::text("found it").with_usage(Usage::new(5, 2))),
    ]
}

#[tokio::test]
async fn one_stack_run_by_the_loop_and_by_the_graph_sees_the_same_events() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::new();
    stack.add(Recorder::new("a", &log)).unwrap();
    stack.add(Recorder::new("b", &log)).unwrap();
    let stack = Arc::new(stack);
    let agent = |tool: &RecordingTool| {
        Agent::new(ScriptedModel::new(script()))
            .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
            .with_shared_stack(stack.clone())
    };

    let (tool1, sink1) = (
        RecordingTool::new("search").returning("r"),
        Arc::new(CollectingSink::new()),
    );
    let mut ctx1 = RunContext::new(RunConfig::new("r"), ()).with_sink(sink1.clone());
    let looped = agent(&tool1).run(&mut ctx1, &(), "go").await.unwrap();
    let loop_log = log.lines();
    log.clear();

    let (tool2, sink2) = (
        RecordingTool::new("search").returning("r"),
        Arc::new(CollectingSink::new()),
    );
    let mut ctx2 = RunContext::new(RunConfig::new("r"), ()).with_sink(sink2.clone());
    let graph_agent = agent(&tool2);
    let graphed = AgentGraph::new(&graph_agent).run(&mut ctx2, &(), "go").await.unwrap();

    assert_eq!(
        trace(&sink1.events()),
        trace(&sink2.events()),
        "the same events, in the same order"
    );
    assert!(trace(&sink1.events()).len() > 20);
    assert_eq!(loop_log, log.lines(), "the same hooks, in the same order");
    assert_eq!(looped.final_text(), graphed.final_text());
    assert_eq!(looped.usage, graphed.usage);
    assert_eq!(looped.counters, graphed.counters);
    let texts = |r: &AgentRun| {
        r.messages
            .iter()
            .map(|m| (m.role, m.text().into_owned()))
            .collect::<Vec<_>>()
    };
    assert_eq!(texts(&looped), texts(&graphed));
}

/// Records an explicit state update after each model call.
struct Marks;

#[async_trait::async_trait]
impl Middleware<()> for Marks {
    fn hooks(&self) -> HookSet {
        HookSet::AFTER_MODEL
    }
    async fn after_model(&self, ctx: &mut RunContext, _: &(), _: &mut ModelResponse) -> Result<()> {
        let step = ctx.counters().steps;
        ctx.flow_mut().update_state("last_step", json!(step));
        Ok(())
    }
}

#[tokio::test]
async fn explicit_middleware_updates_become_graph_state_and_are_kept_for_replay() {
    let agent = Agent::new(ScriptedModel::new(script()))
        .with_tools(ToolRegistry::new().with(RecordingTool::new("search")).unwrap())
        .with_stack(MiddlewareStack::new().with(Marks).unwrap());
    let store = MemoryCheckpointer::new();
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    AgentGraph::new(&agent)
        .run_durable(&mut ctx, &(), "go", "t", &store)
        .await
        .unwrap();
    let history = store.history("t");
    let last = history.last().unwrap();
    assert_eq!(last.next, None, "the final checkpoint marks the end");
    assert_eq!(last.state.get("last_step"), Some(&json!(2)));
    // Each checkpoint holds the updates since the one before: the thread's
    // record is their concatenation.
    let explained: Vec<(u32, &str)> = history
        .iter()
        .flat_map(|c| &c.updates)
        .filter_map(|u| {
            u.update
                .get("last_step")
                .map(|v| (v.as_u64().unwrap() as u32, u.node.as_str()))
        })
        .collect();
    assert_eq!(
        explained,
        [(1, "model"), (2, "model")],
        "every change is on record with the node that made it"
    );
    assert_eq!(
        trace(&sink.events()).iter().filter(|l| *l == "state last_step").count(),
        2,
        "and emitted as events"
    );
}
