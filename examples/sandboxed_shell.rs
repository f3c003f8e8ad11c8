//! Sandboxed shell: an agent on the scripted model calls the library's
//! `ShellTool`, whose every command runs confined by the OS (Landlock,
//! seccomp, limits; see `docs/security.md`). One command works in the
//! workspace, one tries to write outside it, one tries the network: the tool
//! reads each line with the shell guard's parser and rules and runs the
//! plan it read, without `/bin/sh`, so the last two are refused before
//! anything runs (under `ShellTool::with_shell(true)` the kernel refuses
//! them instead).
//!
//! Run it with `cargo run -p tinyagents-examples --example sandboxed_shell`.
//! On a machine without Landlock it says what is missing and stops: the
//! sandbox fails closed (set `SandboxMode::Off` to run unconfined, knowingly).

use serde_json::json;
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::ToolPolicyMiddleware;
use tinyagents::prelude::*;
use tinyagents::sandbox::{SandboxMode, SandboxPolicy, ShellTool};

#[tokio::main]
async fn main() -> Result<()> {
    // A throw-away workspace with one file in it.
    let root = std::env::temp_dir().join(format!("tinyagents-example-{}", std::process::id()));
    std::fs::create_dir_all(&root).map_err(|e| TinyAgentsError::config(e.to_string()))?;
    std::fs::write(root.join("notes.txt"), "buy milk\ncall Ann\n")
        .map_err(|e| TinyAgentsError::config(e.to_string()))?;

    let shell = match ShellTool::new(SandboxPolicy::new(&root)) {
        Ok(shell) => shell,
        Err(missing) => {
            println!("no sandbox on this machine: {missing}");
            return Ok(());
        }
    };
    let tools = ToolRegistry::new().with(shell)?;
    // The policy middleware refuses a sandbox-requiring tool outside a sandboxed workspace.
    let policy = ToolPolicyMiddleware::strict(tools.policies());

    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("1", "shell", json!({ "command": "grep -n Ann notes.txt" })),
            ToolCall::new("2", "shell", json!({ "command": "echo pwned > /tmp/outside.txt" })),
            ToolCall::new(
                "3",
                "shell",
                json!({ "command": "curl -sS --max-time 3 http://127.0.0.1:9/" }),
            ),
        ]),
        ScriptedTurn::text("Done."),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(policy)?);
    let workspace = WorkspaceDescriptor::new(&root).with_sandbox(SandboxMode::Required);
    let mut ctx = RunContext::new(RunConfig::new("sandboxed-shell"), ()).with_workspace(workspace);
    let run = agent.run(&mut ctx, &(), "Look at my notes.").await?;
    for message in run.messages.iter().filter(|m| m.role == Role::Tool) {
        println!("--- tool result ---\n{}", message.text());
    }
    println!("final: {}", run.final_text());
    let _ = std::fs::remove_dir_all(&root);
    Ok(())
}
