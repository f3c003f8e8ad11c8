//! A full agent turn on the scripted model (one model call, one tool call,
//! a final answer) with 0 and 10 middleware. (Runs per second and memory per
//! in-flight run are the `inflight` bench's: the memory is measured there in a
//! fresh process.)
//!
//! Run: `cargo bench -p tinyagents --bench agent_turn`.

#![allow(missing_docs)] // criterion_group! and the DSL's generated types

mod common;

use criterion::{criterion_group, Criterion};
use serde_json::json;
use tinyagents::prelude::*;

/// A middleware with two no-op hooks (what a light observer costs).
struct Noop;

#[middleware(name = "noop")]
impl Noop {
    #[before_model]
    fn before(&self, _request: &mut ModelRequest) -> Result<()> {
        Ok(())
    }

    #[after_model]
    fn after(&self, _response: &mut ModelResponse) -> Result<()> {
        Ok(())
    }
}

fn model() -> ScriptedModel {
    ScriptedModel::from_fn(|req| {
        if req.messages.iter().any(|m| m.role == Role::Tool) {
            ScriptedTurn::text("done")
        } else {
            ScriptedTurn::tool_call("echo", json!({"x": 1}))
        }
    })
}

fn agent(middleware: usize, tools: ToolRegistry) -> Agent<()> {
    let mut stack = MiddlewareStack::empty();
    for i in 0..middleware {
        stack.add_named(format!("noop-{i}"), Noop).unwrap();
    }
    Agent::new(model()).with_tools(tools).with_stack(stack)
}

fn echo() -> ToolRegistry {
    ToolRegistry::new()
        .with(tool_fn("echo", "Echoes.", |_cx, args| async move { Ok(args.into()) }))
        .unwrap()
}

fn bench_turn(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let mut g = c.benchmark_group("agent turn (model + tool + answer)");
    for n in [0usize, 10] {
        let agent = agent(n, echo());
        g.bench_function(format!("{n} middleware"), |b| {
            b.iter(|| {
                rt.block_on(async {
                    let mut ctx = RunContext::new(RunConfig::new("bench"), ());
                    agent.run(&mut ctx, &(), "go").await.unwrap()
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench_turn);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
