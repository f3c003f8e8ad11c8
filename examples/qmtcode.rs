//! A coding agent in the shape of QueryMT's `qmtcode` example: its stack from
//! a config with `agent_mode`, `limits` and `context_window` (QueryMT's
//! `context`), run on the scripted model. The agent starts in plan mode, so
//! only its read-only tools are offered; the limits cap steps, turns and
//! price; the context-window middleware warns and compacts near the window.
//!
//! Run it with `cargo run -p tinyagents-examples --example qmtcode`.

use serde_json::json;
use tinyagents::config::{ConfigFile, MiddlewareRegistry};
use tinyagents::harness::tool::FileAccessMode;
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::prelude::*;

/// The stack, as a QueryMT agent config writes it (`type = "context"` is
/// accepted too, with a deprecation notice naming `context_window`).
const CONFIG: &str = r#"
[[middleware]]
type = "agent_mode"
default = "plan"
read_only_tools = ["read_file"]

[[middleware]]
type = "limits"
max_steps = 20
max_turns = 10
max_price_usd = 0.50

[[middleware]]
type = "context_window"
warn_at_percent = 80
compact_at_percent = 90
fallback_max_tokens = 128000
"#;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // Errors are printed with their readable `Display` form, and the process exits non-zero.
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    let stack = registry.build_file(&ConfigFile::parse("qmtcode.toml", CONFIG)?)?;
    println!("stack: {}", stack.names().join(" → "));

    let read_file = tool_fn("read_file", "Reads a file.", |_cx, args| async move {
        Ok(format!("contents of {}", args["path"].as_str().unwrap_or("?")).into())
    })
    .with_file_access("path", FileAccessMode::Read);
    let write_file = tool_fn("write_file", "Writes a file.", |_cx, _args| async move {
        Ok("written".into())
    })
    .with_file_access("path", FileAccessMode::Write);
    let model = std::sync::Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("read_file", json!({ "path": "src/lib.rs" })),
        ScriptedTurn::text("Plan: split `lib.rs` into `parse.rs` and `eval.rs`, then add tests."),
    ]));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_tools(ToolRegistry::new().with(read_file)?.with(write_file)?)
        .with_stack(stack);
    let sink = std::sync::Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("qmtcode"), ())
        .with_sink(sink.clone())
        .with_workspace(WorkspaceDescriptor::new(env!("CARGO_MANIFEST_DIR")));
    let run = agent.run(&mut ctx, &(), "Plan the refactor of src/lib.rs.").await?;

    let offered: Vec<String> = model.requests()[0].tools.iter().map(|t| t.name.clone()).collect();
    println!("tools offered in plan mode: {}", offered.join(", "));
    println!("steps: {}, final: {}", run.counters.steps, run.final_text());
    for event in sink.events() {
        if let AgentEvent::Notice { source, message, .. } = event {
            println!("notice from {source}: {message}");
        }
    }
    Ok(())
}
