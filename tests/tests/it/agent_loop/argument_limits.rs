//! What a store writes, it reads back: one depth and size limit for a tool
//! call's arguments (`MAX_ARGUMENT_DEPTH`, `MAX_ARGUMENT_BYTES`), applied
//! where they come off the wire, at or below what every checkpoint store
//! can read. The deepest admitted arguments go through every store (memory,
//! file, SQLite; Redis and PostgreSQL under their features) in a call
//! paused for approval, and the thread is then approved or rejected.

use serde_json::{json, Value};
use tinyagents::graph::{AgentGraph, Checkpointer, FileCheckpointer, MemoryCheckpointer};
use tinyagents::harness::tool::{MAX_ARGUMENT_BYTES, MAX_ARGUMENT_DEPTH};
use tinyagents::middleware::{Decision, HumanInTheLoopMiddleware, InterruptOn};
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

use crate::support::unique;

/// An arguments object nested exactly `depth` levels deep (the object is level 1).
fn nested(depth: usize) -> Value {
    let mut inner = json!([]);
    for _ in 2..depth {
        inner = json!([inner]);
    }
    json!({ "path": inner })
}

fn depth_of(v: &Value) -> usize {
    match v {
        Value::Object(m) => 1 + m.values().map(depth_of).max().unwrap_or(0),
        Value::Array(a) => 1 + a.iter().map(depth_of).max().unwrap_or(0),
        _ => 0,
    }
}

fn gated_agent(delete: &RecordingTool, arguments: Value) -> Agent<()> {
    let model = ScriptedModel::from_fn(move |request| {
        if request.messages.last().is_some_and(|m| m.role == Role::Tool) {
            ScriptedTurn::text("done")
        } else {
            ScriptedTurn::tool_call("delete", arguments.clone())
        }
    });
    Agent::new(model)
        .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
        .with_stack(
            MiddlewareStack::new()
                .with(HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new()))
                .unwrap(),
        )
}

/// Pauses a call with the deepest admitted arguments on `store`, reads the
/// thread back, and approves it (or rejects it, on a second thread).
async fn deepest_through(store: &dyn Checkpointer, name: &str) {
    let arguments = nested(MAX_ARGUMENT_DEPTH);
    assert_eq!(depth_of(&arguments), MAX_ARGUMENT_DEPTH);
    for decision in [Decision::Approve, Decision::Reject { message: None }] {
        let approve = matches!(decision, Decision::Approve);
        let delete = RecordingTool::new("delete").returning("deleted");
        let agent = gated_agent(&delete, arguments.clone());
        let graph = AgentGraph::new(&agent);
        let thread = unique("deep");
        let mut ctx = RunContext::new(RunConfig::new("r1"), ());
        let err = graph
            .run_durable(&mut ctx, &(), "go", &thread, store)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Interrupted, "{name}: {err}");
        let latest = store.latest(&thread).await;
        assert!(
            matches!(latest, Ok(Some(_))),
            "{name}: the store reads back the checkpoint it wrote: {latest:?}"
        );
        let interrupt = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
        let id = interrupt.requests[0].call_id.clone();
        let resume = interrupt.decide([(id.as_str(), decision)]).unwrap();
        let mut ctx = RunContext::new(RunConfig::new("r2"), ());
        let run = graph
            .resume_with(&mut ctx, &(), &thread, store, resume)
            .await
            .unwrap_or_else(|e| panic!("{name}: a paused call with the deepest arguments is decided: {e}"));
        assert_eq!(run.final_text(), "done", "{name}");
        if approve {
            assert_eq!(
                delete.calls(),
                std::slice::from_ref(&arguments),
                "{name}: the call ran with its arguments"
            );
        } else {
            assert!(delete.calls().is_empty(), "{name}: a rejected call never runs");
        }
        assert!(store.latest(&thread).await.unwrap().is_some(), "{name}");
    }
}

#[tokio::test]
async fn argument_limits_the_deepest_admitted_arguments_go_through_every_store_and_are_decided() {
    deepest_through(&MemoryCheckpointer::new(), "memory").await;
    let dir = std::env::temp_dir().join(unique("args-file"));
    deepest_through(&FileCheckpointer::open(&dir).unwrap(), "file").await;
    let _ = std::fs::remove_dir_all(&dir);
    #[cfg(feature = "sqlite")]
    {
        let path = std::env::temp_dir().join(unique("args")).with_extension("db");
        let store = tinyagents::store::SqliteStore::open(&path).await.unwrap();
        deepest_through(&store, "sqlite").await;
        drop(store);
        for ext in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{ext}", path.display()));
        }
    }
    #[cfg(feature = "redis")]
    {
        let url = std::env::var("TINYAGENTS_REDIS_URL").expect("TINYAGENTS_REDIS_URL (feature `redis`)");
        let store = tinyagents::store::RedisStore::connect(&url).await.unwrap();
        deepest_through(&store, "redis").await;
    }
    #[cfg(feature = "postgres")]
    {
        let url = std::env::var("TINYAGENTS_POSTGRES_URL").expect("TINYAGENTS_POSTGRES_URL (feature `postgres`)");
        let store = tinyagents::store::PostgresStore::connect(&url).await.unwrap();
        deepest_through(&store, "postgres").await;
    }
}

/// A reply whose call is one level deeper (or larger) than admitted fails
/// where it comes off the wire, naming the call; nothing is stored that the
/// store cannot read, and the call never runs.
#[tokio::test]
async fn argument_limits_deeper_or_larger_arguments_are_refused_naming_the_call() {
    let too_large = json!({ "path": "x".repeat(MAX_ARGUMENT_BYTES) });
    for (arguments, says) in [
        (nested(MAX_ARGUMENT_DEPTH + 1), "nested 65 levels deep"),
        (nested(121), "nested 121 levels deep"),
        (too_large, "bytes of JSON"),
    ] {
        let delete = RecordingTool::new("delete");
        let agent = gated_agent(&delete, arguments);
        let dir = std::env::temp_dir().join(unique("args-refused"));
        let store = FileCheckpointer::open(&dir).unwrap();
        let mut ctx = RunContext::new(RunConfig::new("r1"), ());
        let err = AgentGraph::new(&agent)
            .run_durable(&mut ctx, &(), "go", "t", &store)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Model, "{err}");
        let text = err.to_string();
        assert!(text.contains(says), "{text}");
        assert!(text.contains("name: \"delete\""), "the error names the call: {text}");
        assert!(text.contains("MAX_ARGUMENT_"), "the error names the limit: {text}");
        assert!(delete.calls().is_empty());
        store.latest("t").await.expect("the thread stays readable");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// A person's edit is held to the same limits: a paused call stays decidable.
#[tokio::test]
async fn argument_limits_an_edit_deeper_than_admitted_is_refused() {
    let delete = RecordingTool::new("delete");
    let agent = gated_agent(&delete, json!({"path": "a"}));
    let mut ctx = RunContext::new(RunConfig::new("r1"), ());
    agent.run(&mut ctx, &(), "go").await.unwrap_err();
    let interrupt = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
    let id = interrupt.requests[0].call_id.clone();
    let err = interrupt
        .decide([(
            id.as_str(),
            Decision::Edit {
                arguments: nested(MAX_ARGUMENT_DEPTH + 1),
            },
        )])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation, "{err}");
    assert!(err.to_string().contains("MAX_ARGUMENT_DEPTH"), "{err}");
}

/// The envelope grows with each sub-agent level a request travels up
/// through (the child's request sits inside its parent's interrupt): the
/// deepest admitted arguments, paused ten sub-agents down, are still read
/// back by the file store and decided.
#[tokio::test]
async fn argument_limits_the_deepest_arguments_paused_in_a_nested_sub_agent_are_decided() {
    use std::sync::Arc;
    let arguments = nested(MAX_ARGUMENT_DEPTH);
    let delete = RecordingTool::new("delete").returning("deleted");
    let mut agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", arguments.clone())]),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
    .with_stack(
        MiddlewareStack::new()
            .with(HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new()))
            .unwrap(),
    );
    let levels = 10;
    for _ in 0..levels {
        let helper = AgentTool::new(Arc::new(agent), "helper", "Delegates.", || ((), ()));
        agent = Agent::new(ScriptedModel::new([
            ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "go"}))]),
            ScriptedTurn::text("done"),
        ]))
        .with_tools(ToolRegistry::new().with(helper).unwrap())
        .with_stack(MiddlewareStack::new().with(HumanInTheLoopMiddleware::new()).unwrap());
    }
    let dir = std::env::temp_dir().join(unique("args-nested"));
    let store = FileCheckpointer::open(&dir).unwrap();
    let graph = AgentGraph::new(&agent);
    let mut ctx = RunContext::new(RunConfig::new("p1"), ());
    let err = graph.run_durable(&mut ctx, &(), "go", "t", &store).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    store
        .latest("t")
        .await
        .expect("the file store reads back what it wrote");
    let id = format!("{}c1", "h1/".repeat(levels));
    let resume = HumanInTheLoopMiddleware::take_interrupt(&ctx)
        .unwrap()
        .decide([(id.as_str(), Decision::Approve)])
        .unwrap();
    let mut ctx = RunContext::new(RunConfig::new("p2"), ());
    let run = graph.resume_with(&mut ctx, &(), "t", &store, resume).await.unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(delete.calls(), [arguments]);
    let _ = std::fs::remove_dir_all(&dir);
}
