//! A full agent turn on the scripted model (one model call, one tool call,
//! a final answer) with 0 and 10 middleware; then 10,000 concurrent runs
//! sharing one stack on the multi-thread runtime: runs per second, and peak
//! memory per in-flight run (resident memory with all 10,000 runs parked
//! inside their tool call, over the baseline, divided by 10,000).
//!
//! Run: `cargo bench -p tinyagents --bench agent_turn`.

#![allow(missing_docs)] // criterion_group! and the DSL's generated types

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::quick_mode;
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

fn resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn throughput() {
    const RUNS: usize = 10_000;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Runs per second.
        let shared = Arc::new(agent(10, echo()));
        let start = Instant::now();
        let handles: Vec<_> = (0..RUNS)
            .map(|i| {
                let agent = shared.clone();
                tokio::spawn(async move {
                    let mut ctx = RunContext::new(RunConfig::new(format!("r{i}")), ());
                    agent.run(&mut ctx, &(), "go").await.unwrap().counters.tool_calls
                })
            })
            .collect();
        let mut calls = 0;
        for h in handles {
            calls += h.await.unwrap();
        }
        let elapsed = start.elapsed();
        assert_eq!(calls as usize, RUNS);
        println!(
            "\n{RUNS} concurrent runs (10 middleware, one stack): {:.0} runs/s ({elapsed:?})",
            RUNS as f64 / elapsed.as_secs_f64()
        );

        // Peak memory per in-flight run: every run parks inside its tool call.
        let gate = Arc::new(tokio::sync::Barrier::new(RUNS + 1));
        let release = Arc::new(tokio::sync::Notify::new());
        let (g2, r2) = (gate.clone(), release.clone());
        let tools = ToolRegistry::new()
            .with(tool_fn("echo", "Parks until released.", move |_cx, args| {
                let (gate, release) = (g2.clone(), r2.clone());
                async move {
                    let notified = release.notified();
                    gate.wait().await;
                    notified.await;
                    Ok(args.into())
                }
            }))
            .unwrap();
        let parked = Arc::new(agent(10, tools));
        let before = resident_kib();
        let handles: Vec<_> = (0..RUNS)
            .map(|i| {
                let agent = parked.clone();
                tokio::spawn(async move {
                    let mut ctx = RunContext::new(RunConfig::new(format!("p{i}")), ());
                    agent.run(&mut ctx, &(), "go").await.unwrap();
                })
            })
            .collect();
        gate.wait().await;
        let during = resident_kib();
        release.notify_waiters();
        for h in handles {
            h.await.unwrap();
        }
        if let (Some(b), Some(d)) = (before, during) {
            println!(
                "peak memory per in-flight run: {:.1} KiB ({} KiB resident over the baseline for {RUNS} runs)",
                d.saturating_sub(b) as f64 / RUNS as f64,
                d.saturating_sub(b)
            );
        }
    });
}

criterion_group!(benches, bench_turn);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    if !quick_mode() {
        throughput();
    }
}
