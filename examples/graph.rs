//! A small state graph (fan-out with a deterministic merge, an interrupt for
//! a person, a resume from a durable checkpoint), then the agent loop itself
//! run as a graph on the scripted model.
//!
//! Run it with `cargo run -p tinyagents-examples --example graph`.

use serde_json::json;
use tinyagents::graph::{
    node_fn, update, AgentGraph, Branch, Command, FileCheckpointer, GraphOutcome, GraphState, Reducer, StateGraph, END,
};
use tinyagents::prelude::*;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // Errors are printed with their readable `Display` form, and the process exits non-zero.
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<()> {
    // 1. A review pipeline: fan out to three reviewers, merge their notes in
    //    a fixed order, then ask a person before publishing.
    let graph = StateGraph::<()>::new()
        .node(
            "draft",
            node_fn(|_| async {
                Ok(Command::Fork(
                    ["style", "facts", "tone"]
                        .map(|r| Branch::new("review").with_input(update([("reviewer", json!(r))])))
                        .to_vec(),
                ))
            }),
        )
        .node(
            "review",
            node_fn(|s| async move {
                let who = s.get("reviewer").and_then(|v| v.as_str()).unwrap_or("?").to_owned();
                Ok(Command::Update(update([
                    ("notes", json!([format!("{who}: ok")])),
                    ("score", json!(1)),
                ])))
            }),
        )
        .node(
            "approve",
            node_fn(|s| async move {
                match s.resume_value() {
                    None => Ok(Command::Interrupt {
                        node: None,
                        message: "publish this draft?".into(),
                    }),
                    Some(answer) => Ok(Command::Update(update([("published", answer.clone())]))),
                }
            }),
        )
        .entry("draft")
        .edge("draft", "approve")
        .edge("approve", END)
        .reducer("notes", Reducer::Append)
        .reducer("score", Reducer::Sum)
        .compile()?;

    let dir = std::env::temp_dir().join(format!("tinyagents-example-graph-{}", std::process::id()));
    let store = FileCheckpointer::open(&dir)?;
    let paused = graph
        .run_durable(&mut (), GraphState::new(), "review-1", &store)
        .await?;
    if let GraphOutcome::Interrupted(why) = &paused.outcome {
        println!("paused at `{}`: {}", why.node, why.message);
    }
    println!("notes so far: {}", paused.state.get("notes").unwrap_or(&json!(null)));
    // ... later, possibly in another process, with the person's answer:
    let done = graph.resume(&mut (), "review-1", &store, Some(json!(true))).await?;
    println!(
        "published: {}, score: {}",
        done.state.get("published").unwrap(),
        done.state.get("score").unwrap()
    );
    std::fs::remove_dir_all(&dir).ok();

    // 2. The agent loop as a graph: the same middleware, the same events.
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("Hello from the model node.")]));
    let mut ctx = RunContext::new(RunConfig::new("graph-run"), ());
    let run = AgentGraph::new(&agent).run(&mut ctx, &(), "Hi").await?;
    println!("agent graph answered: {}", run.final_text());
    Ok(())
}
