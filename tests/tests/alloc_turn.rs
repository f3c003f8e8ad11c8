//! The exact number of heap blocks one agent turn allocates (the
//! `agent_turn` bench's turn: a model call asking for a tool, the tool call,
//! the final answer) with 10 no-op middleware, counted with a counting global
//! allocator (dhat in testing mode) in a dedicated test binary. The count
//! covers the run and its context, as the bench times them.
//!
//! `harness = false`: one `main`, so no other test thread allocates meanwhile.

use serde_json::json;
use tinyagents::prelude::*;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

/// The most blocks a turn with 10 middleware may allocate: the count this
/// turn allocates today, so any new allocation fails here. It was 108 before
/// the loop's fixed costs were cut, 92 before requests shared the agent's
/// tool list, 78 before an empty list, a top-level run's restrictions and
/// sink, its compression log and its stack's run local were made without
/// allocating, a reply's call ids were checked without a set and a result
/// with no `after_tool` hook kept no copy of its id, 67 before a request
/// shared the run's history instead of a copy of its list, 66 before the
/// loop's accumulator took a delta's strings instead of copying them, 63
/// before the scripted model cut a reply into deltas as they are read (no
/// list of them, the last piece of a text and a call's id, name and second
/// half of its arguments moved out of the reply), 56 before a stack without
/// wrap layers ran the model and tool calls in the loop's own future (no
/// boxed future behind the base-call traits, and no copy of a call's id and
/// name to answer it with on failure). The goal is 30, see
/// `docs/PERFORMANCE.md`.
const BUDGET: u64 = 51;

/// A middleware with two no-op plain hooks, as in the bench.
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

fn agent(middleware: usize) -> Agent<()> {
    let model = ScriptedModel::from_fn(|req| {
        if req.messages.iter().any(|m| m.role == Role::Tool) {
            ScriptedTurn::text("done")
        } else {
            ScriptedTurn::tool_call("echo", json!({"x": 1}))
        }
    });
    let tools = ToolRegistry::new()
        .with(tool_fn("echo", "Echoes.", |_cx, args| async move { Ok(args.into()) }))
        .unwrap();
    let mut stack = MiddlewareStack::empty();
    for i in 0..middleware {
        stack.add_named(format!("noop-{i}"), Noop).unwrap();
    }
    Agent::new(model).with_tools(tools).with_stack(stack)
}

fn blocks_of_turn(rt: &tokio::runtime::Runtime, agent: &Agent<()>) -> u64 {
    // The turn is boxed before counting starts (it does nothing until
    // polled): tokio's `block_on` boxes a future larger than a threshold
    // itself, 2 KiB in a debug build and 16 KiB in release, and that block
    // is the harness's, not the run's. So a debug and a release build count
    // the same.
    let mut turn = Box::pin(async {
        let mut ctx = RunContext::new(RunConfig::new("bench"), ());
        agent.run(&mut ctx, &(), "go").await.unwrap()
    });
    let before = dhat::HeapStats::get().total_blocks;
    let run = rt.block_on(turn.as_mut());
    let blocks = dhat::HeapStats::get().total_blocks - before;
    assert_eq!(run.final_message.as_ref().map(|m| m.text()), Some("done".into()));
    drop(run);
    blocks
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let (bare, ten) = (agent(0), agent(10));
    // Warm up (lazy statics, first-use paths).
    blocks_of_turn(&rt, &bare);
    blocks_of_turn(&rt, &ten);
    let bare_blocks = blocks_of_turn(&rt, &bare);
    let ten_blocks = blocks_of_turn(&rt, &ten);
    // The count is deterministic: a second turn allocates the same.
    let again = blocks_of_turn(&rt, &ten);
    println!("blocks per turn: {bare_blocks} with no middleware, {ten_blocks} with 10");
    let mut failures = Vec::new();
    if ten_blocks != again {
        failures.push(format!(
            "two turns allocated {ten_blocks} and {again} blocks (expected the same)"
        ));
    }
    if ten_blocks > BUDGET {
        failures.push(format!(
            "a turn with 10 middleware allocated {ten_blocks} blocks (expected at most {BUDGET})"
        ));
    }
    if failures.is_empty() {
        println!("test result: ok. 2 passed; 0 failed");
    } else {
        for f in &failures {
            eprintln!("FAILED: {f}");
        }
        println!(
            "test result: FAILED. {} passed; {} failed",
            2 - failures.len(),
            failures.len()
        );
        std::process::exit(1);
    }
}
