//! A stack from an agent file: every built-in plus a middleware of your own
//! in one registry, `examples/agent.toml` built into a stack (built-ins on by
//! default included), an agent run on it, and what a file with mistakes gets.
//!
//! Run it with `cargo run -p tinyagents-examples --example agent_file`
//! (the `tinyagents` command does the same: `cargo run -p tinyagents-cli -- check examples/agent.toml`).

use std::path::Path;

use tinyagents::config::{ConfigFile, MiddlewareRegistry};
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;
use tinyagents::MiddlewareConfig;

/// Stamps every request with a team name.
#[derive(Debug, MiddlewareConfig)]
#[config(type = "team_stamp", builds = TeamStamp)]
struct TeamStampConfig {
    /// The team named in the system prompt.
    #[config(default = "platform")]
    team: String,
}

struct TeamStamp(String);

impl From<TeamStampConfig> for TeamStamp {
    fn from(c: TeamStampConfig) -> Self {
        TeamStamp(c.team)
    }
}

#[middleware(name = "team_stamp", after_if_present = ["logging"])]
impl TeamStamp {
    #[before_model]
    fn stamp(&self, request: &mut ModelRequest) -> Result<()> {
        request.set_volatile("team", format!("You work for the {} team.", self.0));
        Ok(())
    }
}

#[tokio::main]
async fn main() {
    // Errors are printed with their readable `Display` form, and the process exits non-zero.
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> std::result::Result<(), Box<dyn std::error::Error>> {
    // Every built-in's factory, and ours next to them.
    let mut registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    registry.register::<TeamStampConfig>()?;

    // The sample file, plus one entry of our own type.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("agent.toml");
    let text = std::fs::read_to_string(&path)?;
    let text = format!("{text}\n[[middleware]]\ntype = \"team_stamp\"\nteam = \"tooling\"\n");
    let file = ConfigFile::parse("agent.toml", text)?;
    let stack = registry.build_file(&file)?;
    println!("resolved order ({} middleware):", stack.len());
    for (i, name) in stack.names().iter().enumerate() {
        println!("  {:>2}. {name}", i + 1);
    }

    // Run it on a scripted model; the file's hook runs in the examples directory.
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("shell", serde_json::json!({ "command": "ls" })),
        ScriptedTurn::text("There is an agent file and a hooks folder."),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(RecordingTool::new("shell").returning("agent.toml hooks"))?)
        .with_stack(stack);
    let sink = std::sync::Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("example"), ())
        .with_sink(sink.clone())
        .with_workspace(WorkspaceDescriptor::new(env!("CARGO_MANIFEST_DIR")));
    let run = agent.run(&mut ctx, &(), "What is here?").await?;
    println!("\nfinal: {}", run.final_text());
    for event in sink.events() {
        if let AgentEvent::Notice { source, message, .. } = event {
            println!("notice from {source}: {message}");
        }
    }

    // A file with mistakes: every one, with its line and column.
    let bad = "[[middleware]]\ntype = \"team_stamp\"\nteem = \"x\"\n\n[[middleware]]\ntype = \"summarisation\"\n";
    match registry.build_file(&ConfigFile::parse("bad.toml", bad)?) {
        Ok(_) => unreachable!("the file has two mistakes"),
        Err(errors) => println!("\nbad.toml:\n{errors}"),
    }
    Ok(())
}
