//! Middleware control outcomes drive `AgentGraph` through the boundary
//! adapter (seed 000, "Graph Boundary"): jumps become `Goto`/`End`, a stop
//! with a final answer ends the graph, a node reports its progress and routes
//! in one command, and a middleware can ask for a checkpoint to be persisted
//! without knowing how the run is driven.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use tinyagents::graph::{
    node_fn, update, AgentGraph, Command, GraphState, MemoryCheckpointer, Reducer, StateGraph, END,
};
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

/// A model asking for `ping` until it has seen `calls` results, then answering.
fn pinging(calls: usize) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::from_fn(move |request| {
        let seen = request.messages.iter().filter(|m| m.role == Role::Tool).count();
        if seen >= calls {
            ScriptedTurn::text("done")
        } else {
            ScriptedTurn::Reply(ModelResponse::tool_calls(vec![ToolCall::new(
                format!("c{seen}"),
                "ping",
                json!({}),
            )]))
        }
    }))
}

fn agent(model: Arc<ScriptedModel>, ping: &RecordingTool, stack: MiddlewareStack<()>) -> Agent<()> {
    Agent::new(model)
        .with_tools(ToolRegistry::new().with(ping.clone()).unwrap())
        .with_stack(stack)
}

/// The `next` node of every checkpoint of `thread`, in order.
fn nexts(store: &MemoryCheckpointer, thread: &str) -> Vec<Option<String>> {
    store.history(thread).into_iter().map(|c| c.next).collect()
}

/// Runs `agent` once through the graph, durably (thread `t`, in memory):
/// the run and its checkpoints.
async fn run_durable(agent: &Agent<()>) -> (AgentRun, MemoryCheckpointer) {
    let store = MemoryCheckpointer::new();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = AgentGraph::new(agent)
        .run_durable(&mut ctx, &(), "go", "t", &store)
        .await
        .unwrap();
    (run, store)
}

#[tokio::test]
async fn a_jump_to_the_end_ends_the_graph_before_the_tools_node() {
    #[after_model(can_jump_to = [end])]
    fn finish_early(ctx: &mut RunContext, response: &mut ModelResponse) -> Result<()> {
        if !response.tool_calls_requested().is_empty() {
            ctx.flow_mut().jump_to(JumpTarget::End);
        }
        Ok(())
    }
    let ping = RecordingTool::new("ping");
    let agent = agent(pinging(2), &ping, MiddlewareStack::new().with(FinishEarly).unwrap());
    let (run, store) = run_durable(&agent).await;
    assert_eq!(run.stop, StopReason::JumpedToEnd);
    assert!(ping.calls().is_empty(), "the tools node never ran");
    assert_eq!(nexts(&store, "t"), [Some("model".to_owned()), None]);
}

#[tokio::test]
async fn a_jump_to_the_model_goes_back_to_the_model_node() {
    #[derive(Default)]
    struct Once(AtomicUsize);
    #[after_model(can_jump_to = [model])]
    fn retry_once(ctx: &mut RunContext, response: &mut ModelResponse) -> Result<()> {
        if !response.tool_calls_requested().is_empty()
            && ctx.locals().local::<Once>().0.fetch_add(1, Ordering::Relaxed) == 0
        {
            ctx.flow_mut().jump_to(JumpTarget::Model);
        }
        Ok(())
    }
    // Two tool-call replies, then an answer: the first reply's call is skipped by the jump.
    let turns = Arc::new(AtomicUsize::new(0));
    let model = Arc::new(ScriptedModel::from_fn(move |_| {
        match turns.fetch_add(1, Ordering::Relaxed) {
            n @ (0 | 1) => ScriptedTurn::Reply(ModelResponse::tool_calls(vec![ToolCall::new(
                format!("c{n}"),
                "ping",
                json!({}),
            )])),
            _ => ScriptedTurn::text("done"),
        }
    }));
    let ping = RecordingTool::new("ping");
    let agent = agent(model, &ping, MiddlewareStack::new().with(RetryOnce).unwrap());
    let (run, store) = run_durable(&agent).await;
    assert_eq!(run.final_text(), "done");
    assert_eq!(ping.calls().len(), 1, "only the second request's call ran");
    assert_eq!(
        nexts(&store, "t"),
        ["model", "model", "tools", "model"]
            .map(|n| Some(n.to_owned()))
            .into_iter()
            .chain([None])
            .collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_stop_with_a_final_answer_ends_the_graph() {
    #[after_model]
    fn stop(ctx: &mut RunContext) -> Result<()> {
        ctx.flow_mut()
            .request_control(MiddlewareControl::StopWithFinal("stopped here".into()));
        Ok(())
    }
    let ping = RecordingTool::new("ping");
    let agent = agent(pinging(3), &ping, MiddlewareStack::new().with(Stop).unwrap());
    let store = MemoryCheckpointer::new();
    let run = AgentGraph::new(&agent)
        .run_durable(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go", "t", &store)
        .await
        .unwrap();
    assert_eq!(run.stop, StopReason::StoppedByMiddleware);
    assert_eq!(run.final_text(), "stopped here");
    assert_eq!(
        store.history("t").last().unwrap().next,
        None,
        "the graph reached its end"
    );
}

/// Under `checkpoint_on_request`, only the safe points a middleware asked
/// for (and the end) are persisted; by default every safe point is.
#[tokio::test]
async fn a_middleware_asks_for_a_checkpoint_to_be_persisted() {
    #[after_model]
    fn ask_after_the_second_answer(ctx: &mut RunContext) -> Result<()> {
        if ctx.counters().model_calls == 2 {
            ctx.flow_mut().request_checkpoint("the second answer is worth keeping");
        }
        Ok(())
    }
    let run = |on_request: bool| async move {
        let ping = RecordingTool::new("ping");
        let agent = agent(
            pinging(2),
            &ping,
            MiddlewareStack::new().with(AskAfterTheSecondAnswer).unwrap(),
        );
        let store = MemoryCheckpointer::new();
        let graph = AgentGraph::new(&agent);
        let graph = if on_request {
            graph.checkpoint_on_request()
        } else {
            graph
        };
        let run = graph
            .run_durable(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go", "t", &store)
            .await
            .unwrap();
        assert_eq!(run.final_text(), "done");
        assert_eq!(ping.calls().len(), 2);
        nexts(&store, "t")
    };
    let every = run(false).await;
    assert_eq!(
        every,
        ["model", "tools", "model", "tools", "model"]
            .map(|n| Some(n.to_owned()))
            .into_iter()
            .chain([None])
            .collect::<Vec<_>>()
    );
    // The request made in the second model turn persisted the safe point after it.
    assert_eq!(run(true).await, [Some("tools".to_owned()), None]);
}

/// The request is a harness-native outcome: it reads the same under `Agent::run`.
#[test]
fn a_checkpoint_request_is_kept_until_taken() {
    let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    assert_eq!(ctx.flow().checkpoint_requested(), None);
    ctx.flow_mut().request_checkpoint("first");
    ctx.flow_mut().request_checkpoint("second");
    assert_eq!(
        ctx.flow().checkpoint_requested(),
        Some("first"),
        "the first reason is kept"
    );
}

/// `Command::update_then`: a node reports its progress and routes in one
/// answer; the update is merged before the route is taken (also an interrupt).
#[tokio::test]
async fn an_update_then_a_route_merges_first() {
    let graph = StateGraph::<()>::new()
        .node(
            "a",
            node_fn(|_state: GraphState| async {
                Ok(Command::update_then(
                    update([("log", json!(["a"]))]),
                    Command::Goto("c".into()),
                ))
            }),
        )
        .node(
            "b",
            node_fn(|_state: GraphState| async { Ok(Command::Update(update([("log", json!(["b"]))]))) }),
        )
        .node(
            "c",
            node_fn(|state: GraphState| async move {
                assert_eq!(
                    state.get("log"),
                    Some(&json!(["a"])),
                    "the update was merged before `c` ran"
                );
                Ok(Command::update_then(update([("log", json!(["c"]))]), Command::End))
            }),
        )
        .entry("a")
        .edge("a", "b")
        .edge("b", END)
        .reducer("log", Reducer::Append)
        .compile()
        .unwrap();
    let run = graph.run(&mut (), GraphState::default()).await.unwrap();
    assert_eq!(
        run.state.get("log"),
        Some(&json!(["a", "c"])),
        "`b` was skipped by the goto"
    );
}
