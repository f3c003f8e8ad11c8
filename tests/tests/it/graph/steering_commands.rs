//! An agent run as one node of a graph routes it at the graph boundary
//! (seed 000, "Graph Boundary"): accepted steering `Goto` becomes
//! `Command::Goto`, and a middleware can ask for a fan-out (`Command::Fork`)
//! or a `Goto`. Asserted on the order of the nodes the graph visited.

use std::sync::Arc;

use serde_json::json;
use tinyagents::graph::{
    node_fn, to_command, update, AgentGraph, AgentNode, BoundaryAction, Branch, Command, CompiledGraph, GraphRoute,
    GraphState, HarnessOutcome, Reducer, StateGraph, END,
};
use tinyagents::harness::steering::{SteeringAction, SteeringHandle};
use tinyagents::prelude::*;

/// A node that only marks it ran (appending its name to `visited`).
fn mark(name: &'static str) -> impl tinyagents::graph::Node<RunContext> + 'static {
    node_fn(move |_state| async move { Ok(Command::Update(update([("visited", json!([name]))]))) })
}

/// `agent` → `publish` → end, with `review`, `summarise` and `translate`
/// reachable only by a route the agent's run asks for (`review` ends the
/// run, the branches return to the agent node's edge).
fn graph(agent: Agent<()>) -> CompiledGraph<RunContext> {
    StateGraph::new()
        .node("agent", AgentNode::new(Arc::new(agent), Arc::new(())))
        .node("publish", mark("publish"))
        .node("review", mark("review"))
        .node("summarise", mark("summarise"))
        .node("translate", mark("translate"))
        .entry("agent")
        .edge("agent", "publish")
        .edge("publish", END)
        .edge("review", END)
        .reducer("visited", Reducer::Append)
        .compile()
        .unwrap()
}

fn input() -> GraphState {
    GraphState::from_update(update([("messages", json!([Message::user("go")]))]))
}

/// The nodes a run visited, in order (each leaves one update record).
fn visited(run: &tinyagents::graph::GraphRun) -> Vec<String> {
    run.updates.iter().map(|u| u.node.clone()).collect()
}

/// An agent whose `escalate` tool sends the steering command `Goto(node)`
/// while the run is under way; the model would answer after it.
fn steered_to(node: &'static str, handle: &SteeringHandle) -> (Agent<()>, Arc<ScriptedModel>) {
    let h = handle.clone();
    let escalate = tool_fn("escalate", "Hands the task to a reviewer.", move |_cx, _args| {
        let h = h.clone();
        async move {
            h.send(SteeringCommand::new("esc", SteeringAction::Goto { node: node.into() }));
            Ok("escalated".into())
        }
    });
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("escalate", json!({})),
        ScriptedTurn::text("published"),
    ]));
    let agent = Agent::new(model.clone()).with_tools(ToolRegistry::new().with(escalate).unwrap());
    (agent, model)
}

#[tokio::test]
async fn accepted_steering_goto_leaves_the_agent_node_for_that_node() {
    let handle = SteeringHandle::new();
    let (agent, model) = steered_to("review", &handle);
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_steering(handle);
    let run = graph(agent).run(&mut ctx, input()).await.unwrap();
    assert_eq!(
        visited(&run),
        ["agent", "review"],
        "review instead of the edge to publish"
    );
    assert_eq!(
        model.requests().len(),
        1,
        "the run ended at the safe point after the tool batch"
    );
    // the conversation up to the steering point is in the state
    let messages: Vec<Message> = run.state.get_as("messages").unwrap().unwrap();
    assert_eq!(messages.last().unwrap().role, Role::Tool);
}

#[tokio::test]
async fn steering_goto_an_unknown_node_is_a_config_error_naming_the_nodes() {
    let handle = SteeringHandle::new();
    let (agent, _) = steered_to("nowhere", &handle);
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_steering(handle);
    let err = graph(agent).run(&mut ctx, input()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    let text = err.to_string();
    assert!(text.contains("node `agent` asked to go to `nowhere`"), "{text}");
    assert!(text.contains("agent, publish, review, summarise, translate"), "{text}");
}

#[tokio::test]
async fn steering_goto_outside_a_graph_node_fails_closed() {
    let handle = SteeringHandle::new();
    let (agent, model) = steered_to("review", &handle);
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_steering(handle);
    let err = agent.run(&mut ctx, &(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert!(err.to_string().contains("not driven by a graph node"), "{err}");
    assert_eq!(model.requests().len(), 1, "nothing ran after the refused command");

    // nor does the model/tools graph of one agent have other nodes to go to
    let handle = SteeringHandle::new();
    let (agent, model) = steered_to("review", &handle);
    let mut ctx = RunContext::new(RunConfig::new("r2"), ()).with_steering(handle);
    let err = AgentGraph::new(&agent).run(&mut ctx, &(), "go").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(model.requests().len(), 1);
}

#[test]
fn the_boundary_maps_an_accepted_steering_goto_onto_command_goto() {
    let accepted = SteeringCommand::new("g", SteeringAction::Goto { node: "review".into() });
    assert_eq!(
        to_command(HarnessOutcome::SteeringAccepted(accepted.clone())),
        BoundaryAction::Command(Command::Goto("review".into()))
    );
    // addressed to a child run, it is delivered there instead
    assert!(matches!(
        to_command(HarnessOutcome::SteeringAccepted(accepted.for_run("child"))),
        BoundaryAction::DeliverToChild { .. }
    ));
}

#[tokio::test]
async fn a_middleware_fan_out_runs_the_branches_then_the_edge() {
    #[after_model]
    fn fan_out(ctx: &mut RunContext, response: &mut ModelResponse) -> Result<()> {
        if response.tool_calls_requested().is_empty() {
            GraphRoute::fork(
                ctx,
                vec![
                    Branch::new("summarise"),
                    Branch::new("translate").with_input(update([("lang", json!("fr"))])),
                ],
            )?;
        }
        Ok(())
    }
    let agent = Agent::new(ScriptedModel::new([ScriptedTurn::text("draft")]))
        .with_stack(MiddlewareStack::new().with(FanOut).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = graph(agent).run(&mut ctx, input()).await.unwrap();
    assert_eq!(visited(&run), ["agent", "summarise", "translate", "publish"]);
    assert_eq!(
        run.state.get("visited"),
        Some(&json!(["summarise", "translate", "publish"]))
    );
    assert_eq!(run.state.get("lang"), None, "a branch's input stays in its branch");
}

#[tokio::test]
async fn a_middleware_goto_routes_once_and_a_second_request_is_a_conflict() {
    #[after_model]
    fn to_review(ctx: &mut RunContext, _response: &mut ModelResponse) -> Result<()> {
        GraphRoute::goto(ctx, "review")
    }
    let agent = Agent::new(ScriptedModel::new([ScriptedTurn::text("draft")]))
        .with_stack(MiddlewareStack::new().with(ToReview).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = graph(agent).run(&mut ctx, input()).await.unwrap();
    assert_eq!(visited(&run), ["agent", "review"]);

    // asked twice in one run (after each of two replies): refused
    let model = ScriptedModel::new([ScriptedTurn::tool_call("escalate", json!({})), ScriptedTurn::text("x")]);
    let noop = tool_fn("escalate", "No-op.", |_cx, _args| async { Ok("ok".into()) });
    let agent = Agent::new(model)
        .with_tools(ToolRegistry::new().with(noop).unwrap())
        .with_stack(MiddlewareStack::new().with(ToReview).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    let err = graph(agent).run(&mut ctx, input()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict);
    assert!(err.to_string().contains("already asked for"), "{err}");
}

#[tokio::test]
async fn a_pause_in_the_agent_pauses_the_graph_at_its_node_and_a_resume_starts_the_node_over() {
    #[derive(Default)]
    struct Paused(std::sync::atomic::AtomicBool);
    /// Pauses once, before the model call that follows the tool batch.
    #[before_model]
    fn pause_after_tools(ctx: &mut RunContext, request: &mut ModelRequest) -> Result<()> {
        if request.messages.iter().any(|m| m.role == Role::Tool)
            && !ctx
                .locals()
                .local::<Paused>()
                .0
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            ctx.flow_mut().request_control(MiddlewareControl::Interrupt {
                node: None,
                message: "wait".into(),
            });
        }
        Ok(())
    }
    // (a scripted model from a function keeps no requests: the lengths of the conversations it saw)
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let model = Arc::new(ScriptedModel::from_fn(move |request| {
        log.lock().unwrap().push(request.messages.len());
        if request.messages.iter().any(|m| m.role == Role::Tool) {
            ScriptedTurn::text("done")
        } else {
            ScriptedTurn::tool_call("noop", json!({}))
        }
    }));
    let noop = tool_fn("noop", "No-op.", |_cx, _args| async { Ok("ok".into()) });
    let agent = Agent::new(model)
        .with_tools(ToolRegistry::new().with(noop).unwrap())
        .with_stack(MiddlewareStack::new().with(PauseAfterTools).unwrap());
    let graph = graph(agent);
    let store = tinyagents::graph::MemoryCheckpointer::new();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let paused = graph.run_durable(&mut ctx, input(), "t", &store).await.unwrap();
    match &paused.outcome {
        tinyagents::graph::GraphOutcome::Interrupted(record) => assert_eq!(record.node, "agent"),
        other => panic!("expected a pause, got {other:?}"),
    }
    assert_eq!(*seen.lock().unwrap(), [1]);

    let run = graph.resume(&mut ctx, "t", &store, None).await.unwrap();
    assert_eq!(visited(&run), ["agent", "publish"]);
    assert_eq!(*seen.lock().unwrap(), [1, 1, 3], "the node started over from its input");
    // the counters live in the context: the resumed run counts on
    assert_eq!(ctx.counters().steps, 4);
}
