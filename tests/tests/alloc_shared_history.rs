//! A shared history, measured with a counting global allocator (dhat in
//! testing mode) in a dedicated test binary:
//!
//! * cloning a history of 1,000 messages allocates one block (the list of
//!   references), not a copy of any message;
//! * changing one message of the clone copies that message alone, and the
//!   original history is unchanged;
//! * a long run allocates as many blocks per turn as a short one, on the
//!   bare loop and with the context-heavy stack (pii → context_editing →
//!   summarization → message_trim → prompt_cache_guard): no turn
//!   copies or rescans the history it carries.
//!
//! `harness = false`: one `main`, so no other test thread allocates meanwhile.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::json;
use tinyagents::config::MiddlewareRegistry;
use tinyagents::prelude::*;

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
"#;

fn blocks_during<T>(f: impl FnOnce() -> T) -> (u64, T) {
    let before = dhat::HeapStats::get().total_blocks;
    let out = f();
    (dhat::HeapStats::get().total_blocks - before, out)
}

/// An agent that makes `turns` tool calls per run, then answers.
fn agent(turns: usize, heavy: bool) -> Agent<()> {
    let calls = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::from_fn(move |_req| {
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
            async move {
                Ok(format!("Result {i}: the build of crate v1.{i}.3 finished with 12 warnings; see the log.").into())
            }
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

/// Blocks allocated per turn by a run of `turns` turns (on an agent that ran once already).
fn blocks_per_turn(rt: &tokio::runtime::Runtime, turns: usize, heavy: bool) -> f64 {
    let agent = agent(turns, heavy);
    let go = || {
        rt.block_on(agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go"))
            .expect("the run completes")
    };
    drop(go()); // what the agent builds once (lazy caches) is not the run's
    let (blocks, run) = blocks_during(go);
    assert_eq!(run.final_text(), "done");
    assert_eq!(run.messages.len(), 2 * turns + 2);
    blocks as f64 / turns as f64
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();

    // A clone of a history is one block: the list of references.
    let history: Vec<Message> = (0..1_000)
        .map(|i| Message::user(format!("message {i} with some text to copy")))
        .collect();
    let (blocks, mut copy) = blocks_during(|| history.clone());
    assert_eq!(blocks, 1, "cloning 1,000 messages copied message content");
    assert!(history.iter().zip(&copy).all(|(a, b)| Message::ptr_eq(a, b)));

    // Changing one message of the clone copies that one alone.
    let (blocks, ()) = blocks_during(|| copy[500].set_text("changed"));
    assert!(blocks <= 4, "one change allocated {blocks} blocks");
    assert_eq!(history[500].text(), "message 500 with some text to copy");
    assert_eq!(copy[500].text(), "changed");
    assert_eq!(copy[500].id, history[500].id);
    assert!(!Message::ptr_eq(&history[500], &copy[500]));
    let shared = history.iter().zip(&copy).filter(|(a, b)| Message::ptr_eq(a, b)).count();
    assert_eq!(shared, 999);

    // Allocations per turn do not grow with the history.
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    for heavy in [false, true] {
        let short = blocks_per_turn(&rt, 150, heavy);
        let long = blocks_per_turn(&rt, 600, heavy);
        let name = if heavy { "heavy stack" } else { "bare loop" };
        assert!(
            long <= short * 1.15,
            "{name}: {long:.1} blocks per turn over 600 turns against {short:.1} over 150"
        );
        println!("{name}: {short:.1} blocks per turn over 150 turns, {long:.1} over 600");
    }
    println!("alloc_shared_history: ok");
}
