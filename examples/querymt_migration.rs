//! A QueryMT middleware brought across: the driver code is QueryMT's, only
//! its crate path changed (`querymt_agent` → `tinyagents::compat::querymt`).
//! It runs in a native stack next to the `coding` preset, on the scripted
//! model (so it runs offline), in a workspace of its own.
//!
//! Run it: `cargo run -p tinyagents-examples --example querymt_migration`.

use std::sync::atomic::{AtomicUsize, Ordering};

use tinyagents::compat::querymt::middleware::state::{Request, ToolCall};
use tinyagents::compat::querymt::middleware::{MiddlewareDriver, MiddlewareError, Result};
use tinyagents::prelude::{Agent, Role, ScriptedModel, ScriptedTurn, ToolCall as NativeCall};

/// QueryMT code, unchanged but for the path: no `shell`, and counts requests.
pub struct NoShellMiddleware {
    requests: AtomicUsize,
}

impl MiddlewareDriver for NoShellMiddleware {
    fn name(&self) -> &str {
        "no_shell"
    }

    fn process_request(&self, _request: &mut Request) -> Result<()> {
        self.requests.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn process_tool_call(&self, tool_call: &mut ToolCall) -> Result<()> {
        if tool_call.function.name == "shell" {
            return Err(MiddlewareError::permission_denied(tool_call.function.name.clone()));
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("querymt-migration-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(
        dir.join("README.md"),
        "# demo\nA workspace for the migration example.\n",
    )?;

    // The model asks for a file and a listing in one reply, then answers.
    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            NativeCall::new("c1", "read_tool", serde_json::json!({ "path": "README.md" })),
            NativeCall::new("c2", "ls", serde_json::json!({ "path": "." })),
        ]),
        ScriptedTurn::text("The workspace holds a README."),
    ]);
    let agent = Agent::single()
        .model(model) // .provider("anthropic", "claude-sonnet-4-5") for a real one
        .cwd(&dir)
        .tools(["read_tool", "ls"])
        .preset("research") // read-only: writes and execution are refused
        .middleware(NoShellMiddleware {
            requests: AtomicUsize::new(0),
        })
        .build()
        .await?;
    println!("stack: {}", agent.stack().names().join(" → "));

    let run = agent.prompt("What is in the workspace?").await?;
    for message in run.messages.iter().filter(|m| m.role == Role::Tool) {
        println!(
            "tool {}: {}",
            message.name.as_deref().unwrap_or("?"),
            message.text().lines().next().unwrap_or("")
        );
    }
    println!("answer: {}", run.final_text());
    assert_eq!(run.final_text(), "The workspace holds a README.");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
