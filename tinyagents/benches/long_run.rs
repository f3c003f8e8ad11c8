//! Long runs: one agent run of T tool-call turns (T = 10, 100, 1,000, 3,000)
//! on the scripted model, with no middleware (the bare loop) and with the
//! heavy context stack `pii → context_editing → summarization → message_trim
//! → prompt_cache_guard → retrieval_compression → output_compression` (built
//! from TOML by type name). Prints, per T and
//! stack, the time per turn (median of interleaved samples), the per-turn
//! ratio against T = 10 (flat is 1.0; goal ≤ 2.0), and the run's heap counted by
//! the global allocator: the peak live bytes over the live bytes before the
//! run, and the bytes allocated in total, with the heavy/bare heap ratio (goal
//! ≤ 2.0). The heap is that of a run on an agent that already ran once (the
//! steady state of an agent serving runs: what is built once per agent, such
//! as the PII detectors' lazily built regex caches, is not the run's), and
//! the first run's peak is printed beside it.
//!
//! First, `retrieval_compression`'s `before_model` per message at 1k and 40k
//! messages (linear: the same cost per message).
//!
//! Last, what the heavy stack adds per turn (heavy minus bare) at T = 100,
//! 1,000 and 3,000, and its ratio to T = 100 (goal: within 1.3x, work that
//! does not grow with the history).
//!
//! Run: `cargo bench -p tinyagents --bench long_run` (`-- --quick` for fewer samples;
//! `-- --profile-heavy=3000` runs only the heavy stack at T = 3,000, for `perf record`).

#![allow(missing_docs)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tinyagents::config::MiddlewareRegistry;
use tinyagents::prelude::*;
use tinyagents::testing::MiddlewareHarness;

/// Counts the heap of one run: dhat's allocator records only while a profiler
/// runs (a separate run from the timed ones, which run with none), and needs no
/// `unsafe` here (the crate forbids it).
#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const HEAVY: &str = r#"
[[middleware]]
type = "pii"

[[middleware]]
type = "context_editing"
trigger_tokens = 4000
keep = 3

[[middleware]]
type = "summarization"
trigger_messages = 120
keep_messages = 40

[[middleware]]
type = "message_trim"
max_messages = 80

[[middleware]]
type = "prompt_cache_guard"

[[middleware]]
type = "retrieval_compression"
tools = ["lookup"]
budget_tokens = 4000

[[middleware]]
type = "output_compression"
max_tokens = 2000
"#;

/// Tool output of turn `i`: prose, numbers, now and then a value to redact, and a `…`.
fn tool_output(i: usize) -> String {
    let mut out = format!(
        "Result {i}: the build of crate v1.{i}.3 finished in {}.{} s at 10:{:02} with 12 warnings; \
         see the log for details…",
        i % 60,
        i % 10,
        i % 60
    );
    if i.is_multiple_of(10) {
        out.push_str(" Contact ann@example.com or call 555-123-4567.");
    }
    out
}

fn agent(turns: usize, heavy: bool) -> Agent<()> {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::from_fn(move |_req| {
        // each run: `turns` tool calls, then the answer (the agent may run again)
        let n = calls.fetch_add(1, Ordering::Relaxed) % (turns + 1);
        if n < turns {
            ScriptedTurn::tool_call("lookup", json!({ "query": format!("item {n}") }))
        } else {
            ScriptedTurn::text("done")
        }
    });
    let counter = Arc::new(AtomicUsize::new(0));
    let tools = ToolRegistry::new()
        .with(tool_fn("lookup", "Looks up.", move |_cx, _args| {
            let i = counter.fetch_add(1, Ordering::Relaxed);
            async move { Ok(tool_output(i).into()) }
        }))
        .unwrap();
    let stack = if heavy {
        let mut registry = MiddlewareRegistry::<(), ()>::with_builtins();
        let defaults: Vec<&'static str> = registry.defaults().collect();
        for d in defaults {
            registry.clear_default(d);
        }
        registry.stack_from_toml(HEAVY).expect("the heavy stack builds")
    } else {
        MiddlewareStack::empty()
    };
    Agent::new(model)
        .with_tools(tools)
        .with_stack(stack)
        .with_max_steps(u32::try_from(turns).unwrap() + 10)
}

fn run_once(rt: &tokio::runtime::Runtime, turns: usize, heavy: bool) -> f64 {
    let agent = agent(turns, heavy);
    let start = Instant::now();
    let run = rt
        .block_on(agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go"))
        .expect("the run completes");
    let elapsed = start.elapsed().as_nanos() as f64;
    assert_eq!(run.final_text(), "done");
    elapsed / turns as f64
}

/// (peak live bytes over the start, total bytes allocated) of one run of `agent`.
fn heap_of_run(rt: &tokio::runtime::Runtime, agent: &Agent<()>) -> (u64, u64) {
    let _profiler = dhat::Profiler::builder().testing().build();
    let before = dhat::HeapStats::get();
    let run = rt
        .block_on(agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go"))
        .expect("the run completes");
    let after = dhat::HeapStats::get();
    drop(run);
    (
        (after.max_bytes - before.curr_bytes) as u64,
        after.total_bytes - before.total_bytes,
    )
}

/// The heap of the first run of a fresh agent (peak only), and of its second
/// run (peak, total allocated).
fn heap_of(rt: &tokio::runtime::Runtime, turns: usize, heavy: bool) -> (u64, (u64, u64)) {
    let agent = agent(turns, heavy);
    let first = heap_of_run(rt, &agent).0;
    (first, heap_of_run(rt, &agent))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `retrieval_compression`'s `before_model` on a request of `n` messages, a
/// third of them retrieval results of three documents each, over budget: ns
/// per message, on a run's first call (`cold`: every result read) or a later
/// one with the same history (each result read once in the run already).
fn retrieval_per_message(rt: &tokio::runtime::Runtime, n: usize, samples: usize, cold: bool) -> f64 {
    let harness = || -> MiddlewareHarness {
        let squeeze = MiddlewareRegistry::<(), ()>::with_builtins()
            .stack_from_toml(
                "[[middleware]]\ntype = \"retrieval_compression\"\ntools = [\"search\"]\nbudget_tokens = 4000",
            )
            .expect("retrieval_compression builds");
        MiddlewareHarness::with_stack(squeeze, (), ())
    };
    let mut h = harness();
    let messages: Vec<Message> = (0..n)
        .map(|i| {
            if i % 3 == 2 {
                let docs: Vec<_> = (0..3)
                    .map(|d| json!({"id": format!("doc-{i}-{d}"), "text": "lorem ipsum dolor sit amet ".repeat(8)}))
                    .collect();
                let mut m = Message::new(Role::Tool, json!(docs).to_string());
                m.name = Some("search".into());
                m.tool_call_id = Some(format!("call-{i}"));
                m
            } else {
                Message::user(format!("message {i}"))
            }
        })
        .collect();
    let request = ModelRequest::new(messages);
    if !cold {
        rt.block_on(h.before_model(request.clone())).unwrap();
    }
    let times = (0..samples)
        .map(|_| {
            if cold {
                h = harness();
            }
            let r = request.clone();
            let start = Instant::now();
            let out = rt.block_on(h.before_model(r)).unwrap();
            let t = start.elapsed().as_nanos() as f64;
            std::hint::black_box(out);
            t / n as f64
        })
        .collect();
    median(times)
}

fn main() {
    if std::env::args().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let quick = std::env::args().any(|a| a == "--quick");
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    // `--profile-heavy=T`: only heavy runs of T turns, for a profiler (`perf record`)
    if let Some(t) = std::env::args().find_map(|a| a.strip_prefix("--profile-heavy=").map(str::to_owned)) {
        let t: usize = t.parse().expect("--profile-heavy=T takes a number of turns");
        for _ in 0..10 {
            run_once(&rt, t, true);
        }
        return;
    }
    for (cold, call) in [(true, "a run's first call"), (false, "a later call")] {
        let small = retrieval_per_message(&rt, 1_000, if quick { 3 } else { 9 }, cold);
        let large = retrieval_per_message(&rt, 40_000, if quick { 3 } else { 5 }, cold);
        println!(
            "retrieval_compression before_model, {call}: {:.0} ns/message at 1k messages, {:.0} ns/message at 40k ({:.2}x; linear is 1.0)",
            small,
            large,
            large / small
        );
    }
    let sizes = [10usize, 100, 1000, 3000];
    let mut added = Vec::new();
    println!("long_run: time per turn (median of interleaved samples) and heap per run");
    println!("| T | stack | µs/turn | per-turn vs T=10 | peak heap | allocated | heap vs bare | first run's peak |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut base = [0.0f64; 2];
    for &t in &sizes {
        // alternate bare and heavy runs, so both see the same machine
        let samples = if quick { 3 } else { (10_000 / t).clamp(5, 41) };
        let mut times = [Vec::new(), Vec::new()];
        for _ in 0..samples {
            for (k, heavy) in [false, true].into_iter().enumerate() {
                times[k].push(run_once(&rt, t, heavy));
            }
        }
        let heaps = [heap_of(&rt, t, false), heap_of(&rt, t, true)];
        let medians = [median(times[0].clone()), median(times[1].clone())];
        added.push((t, medians[1] - medians[0]));
        for (k, name) in ["bare", "heavy"].into_iter().enumerate() {
            let per_turn = medians[k];
            if t == sizes[0] {
                base[k] = per_turn;
            }
            let (first, (peak, total)) = heaps[k];
            println!(
                "| {t} | {name} | {:.1} | {:.2}x | {:.2} MB | {:.2} MB | {:.2}x | {:.2} MB |",
                per_turn / 1e3,
                per_turn / base[k],
                peak as f64 / 1e6,
                total as f64 / 1e6,
                peak as f64 / heaps[0].1 .0 as f64,
                first as f64 / 1e6,
            );
        }
    }
    println!("long_run: what the heavy stack adds per turn (heavy minus bare; goal: within 1.3x of T=100)");
    let at_100 = added.iter().find(|(t, _)| *t == 100).map_or(f64::NAN, |(_, a)| *a);
    for (t, a) in added.iter().filter(|(t, _)| *t >= 100) {
        println!("  T={t:>5}: {:.1} µs/turn ({:.2}x of T=100)", a / 1e3, a / at_100);
    }
}
