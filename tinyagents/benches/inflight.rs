//! Memory per in-flight run, measured in a fresh process, and runs per second.
//!
//! The memory figure: 10,000 runs of the 10-middleware agent (one shared
//! stack, the multi-thread runtime) parked inside their tool call; the
//! resident memory then, over the resident memory just before they were
//! spawned, divided by 10,000. Each sample is a *fresh child process* (this
//! binary re-run with `TINYAGENTS_INFLIGHT_CHILD=1`) that measures before it
//! has run anything else: an earlier batch of finished runs would leave freed
//! memory in the allocator that the parked runs then reuse, and the figure
//! would be too low (the old `agent_turn` figure was measured that way).
//! Prints the median and the spread (min–max) of `REPS` children (5 unless
//! the `INFLIGHT_REPS` variable says otherwise).
//!
//! Then, in this process: 10,000 concurrent runs to completion, runs per second.
//!
//! Run: `cargo bench -p tinyagents --bench inflight`.

#![allow(missing_docs)] // the DSL's generated types

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tinyagents::prelude::*;

const RUNS: usize = 10_000;
const CHILD: &str = "TINYAGENTS_INFLIGHT_CHILD";

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

fn agent(tools: ToolRegistry) -> Agent<()> {
    let mut stack = MiddlewareStack::empty();
    for i in 0..10 {
        stack.add_named(format!("noop-{i}"), Noop).unwrap();
    }
    let model = ScriptedModel::from_fn(|req| {
        if req.messages.iter().any(|m| m.role == Role::Tool) {
            ScriptedTurn::text("done")
        } else {
            ScriptedTurn::tool_call("echo", json!({"x": 1}))
        }
    });
    Agent::new(model).with_tools(tools).with_stack(stack)
}

fn resident_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The child: KiB resident per parked run, printed alone on the last line.
fn measure_in_this_process() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
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
        let parked = Arc::new(agent(tools));
        let before = resident_kib().expect("/proc/self/status has VmRSS");
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
        let during = resident_kib().expect("/proc/self/status has VmRSS");
        release.notify_waiters();
        for h in handles {
            h.await.unwrap();
        }
        println!("{:.3}", during.saturating_sub(before) as f64 / RUNS as f64);
    });
}

fn runs_per_second() -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let tools = ToolRegistry::new()
        .with(tool_fn("echo", "Echoes.", |_cx, args| async move { Ok(args.into()) }))
        .unwrap();
    let shared = Arc::new(agent(tools));
    rt.block_on(async {
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
        assert_eq!(calls as usize, RUNS);
        RUNS as f64 / start.elapsed().as_secs_f64()
    })
}

fn main() {
    if std::env::var_os(CHILD).is_some() {
        measure_in_this_process();
        return;
    }
    if common::quick_mode() {
        return;
    }
    let reps: usize = std::env::var("INFLIGHT_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let exe = std::env::current_exe().expect("the bench knows its own path");
    let mut kib: Vec<f64> = (0..reps)
        .map(|_| {
            let out = Command::new(&exe)
                .env(CHILD, "1")
                .output()
                .expect("the bench runs itself as a child");
            assert!(
                out.status.success(),
                "the child failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .and_then(|l| l.trim().parse().ok())
                .expect("the child prints KiB per run")
        })
        .collect();
    kib.sort_by(f64::total_cmp);
    println!(
        "memory per in-flight run ({RUNS} runs parked in their tool call, 10 middleware, fresh process each): \
         {:.1} KiB median of {reps} processes [{:.1} – {:.1}]",
        kib[kib.len() / 2],
        kib[0],
        kib[kib.len() - 1]
    );
    println!(
        "{RUNS} concurrent runs (10 middleware, one stack): {:.0} runs/s",
        runs_per_second()
    );
}
