//! What the external hooks' tests share: a scratch directory, a script in
//! it, a hook command, and one agent turn asking for `shell` through them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tinyagents::external_hooks::{ExternalHooksMiddleware, HookCommand, HookEvent};
use tinyagents::harness::tool::SandboxMode;
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

use crate::support::tool_texts;

/// A fresh canonical directory (so it can be a workspace root) for one test:
/// `group` names the file, `name` the test.
pub fn temp_dir(group: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinyagents-{group}-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::canonicalize(dir).unwrap()
}

/// Writes script `name` into `dir`; returns the command that runs it with `sh`.
pub fn script(dir: &Path, name: &str, body: &str) -> String {
    std::fs::write(dir.join(name), format!("#!/bin/sh\n{body}\n")).unwrap();
    format!("sh ./{name}")
}

/// A hook on `event` running `command`, with a timeout no healthy script reaches.
pub fn hook(event: HookEvent, command: String) -> HookCommand {
    HookCommand::new(event, command).with_timeout(Duration::from_secs(20))
}

/// The end of one turn through the hooks: the run, its events, its model.
pub struct Outcome {
    pub run: std::result::Result<AgentRun, TinyAgentsError>,
    pub events: Vec<AgentEvent>,
    pub model: Arc<ScriptedModel>,
}

impl Outcome {
    /// The text of every tool result (the run must have succeeded).
    pub fn tool_results(&self) -> Vec<String> {
        tool_texts(&self.run.as_ref().unwrap().messages)
    }

    /// The one tool result (the run must have succeeded with exactly one).
    pub fn result(&self) -> String {
        let results = self.tool_results();
        assert_eq!(results.len(), 1, "every call gets exactly one result: {results:?}");
        results[0].clone()
    }

    /// Every notice, with whether it is an error.
    pub fn notices(&self) -> Vec<(String, bool)> {
        self.events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Notice { message, is_error, .. } => Some((message.clone(), *is_error)),
                _ => None,
            })
            .collect()
    }

    /// The error notices' messages.
    pub fn error_notices(&self) -> Vec<String> {
        self.notices()
            .into_iter()
            .filter_map(|(message, is_error)| is_error.then_some(message))
            .collect()
    }
}

/// One turn asking for `shell` with `{"command": "ls"}`, then "done", through
/// `stack`, in `workspace` when one is given.
pub async fn run_stack(stack: MiddlewareStack<()>, tool: RecordingTool, workspace: Option<&Path>) -> Outcome {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("shell", json!({ "command": "ls" })),
        ScriptedTurn::text("done"),
    ]));
    let agent: Agent<()> = Agent::from_shared(model.clone())
        .with_tools(ToolRegistry::new().with(tool).unwrap())
        .with_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("run-1"), ()).with_sink(sink.clone());
    if let Some(root) = workspace {
        ctx = ctx.with_workspace(WorkspaceDescriptor::new(root));
    }
    let run = agent.run(&mut ctx, &(), "list the files").await;
    Outcome {
        run,
        events: sink.events(),
        model,
    }
}

/// [`run_stack`] with `hooks` run from `dir` on the default stack.
pub async fn run_with(dir: &Path, hooks: Vec<HookCommand>, tool: RecordingTool) -> Outcome {
    let stack = MiddlewareStack::new()
        .with(ExternalHooksMiddleware::new(hooks).in_dir(dir))
        .unwrap();
    run_stack(stack, tool, None).await
}

/// A parent whose policy hook on `event` refuses `delete` (exit 2) calls
/// `delete` itself, then asks a sub-agent (with an empty stack) to: returns
/// the parent's run and the `delete` tool both share.
pub async fn parent_refuses_delete_then_delegates(event: HookEvent, dir: &Path) -> (AgentRun, RecordingTool) {
    let hooks = ExternalHooksMiddleware::new([HookCommand::new(
        event,
        "cat > /dev/null; echo 'delete is not allowed here' >&2; exit 2",
    )
    .with_matcher("^delete$")
    .unwrap()
    .with_sandbox(SandboxMode::Off)
    .with_timeout(Duration::from_secs(20))])
    .in_dir(dir);

    let delete = RecordingTool::new("delete").returning("deleted");
    let child: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("child done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap());
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        // the parent's own call is refused by its hook
        ScriptedTurn::tool_calls(vec![ToolCall::new("p1", "delete", json!({"path": "a.txt"}))]),
        // so it asks a sub-agent to do it
        ScriptedTurn::tool_calls(vec![ToolCall::new("h1", "helper", json!({"input": "delete a.txt"}))]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap().with(helper).unwrap())
    .with_stack(MiddlewareStack::new().with(hooks).unwrap());

    let mut ctx = RunContext::new(RunConfig::new("p"), ());
    let run = parent.run(&mut ctx, &(), "tidy").await.unwrap();
    assert!(
        run.messages
            .iter()
            .any(|m| m.text().contains("delete is not allowed here")),
        "the parent's hook refused the parent's own call"
    );
    (run, delete)
}
