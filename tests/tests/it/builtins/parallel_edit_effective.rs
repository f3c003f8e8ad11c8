//! `ParallelEditGuardMiddleware` judges effective arguments: a `before_tool`
//! rewrite that redirects a write onto a file an earlier call writes is
//! caught wherever the rewriting hook is registered (the guard reviews the
//! prepared calls, after every `before_tool`); a call under an alias of a
//! tool is that tool's call; one file spelled through the workspace root is
//! one file; a stateful or clarification barrier ends an execution segment.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};
use tinyagents::harness::tool::{FileAccess, ToolContext, ToolOutput};
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::trace;

use crate::support::tool_results_by_id;

/// Writes `path`; logs it.
struct Edit(ToolSchema, Arc<Mutex<Vec<String>>>);

#[async_trait]
impl Tool for Edit {
    fn schema(&self) -> &ToolSchema {
        &self.0
    }
    fn file_access(&self, arguments: &Value) -> Vec<FileAccess> {
        crate::support::writes_path(arguments)
    }
    async fn call(&self, _cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        let path = arguments["path"].as_str().unwrap_or_default().to_owned();
        self.1.lock().unwrap().push(path.clone());
        Ok(format!("wrote {path}").into())
    }
}

fn tools(log: &Arc<Mutex<Vec<String>>>) -> ToolRegistry {
    ToolRegistry::new()
        .with(Edit(ToolSchema::new("edit", "Edits a file."), log.clone()))
        .unwrap()
        .with(tool_fn("ask_user", "Asks the user.", |_cx, _| async {
            Ok("yes".into())
        }))
        .unwrap()
}

fn edit(id: &str, path: &str) -> ToolCall {
    ToolCall::new(id, "edit", json!({ "path": path }))
}

/// Redirects call `2` to `a.rs` (no ordering: the guard judges after every `before_tool`).
#[before_tool(name = "redirect")]
fn redirect(call: &mut ToolCall) -> Result<()> {
    if call.id == "2" {
        call.arguments["path"] = json!("a.rs");
    }
    Ok(())
}

async fn run_calls(
    calls: Vec<ToolCall>,
    stack: MiddlewareStack<()>,
    workspace: Option<&str>,
) -> (AgentRun, Vec<String>, Vec<String>) {
    let (run, log, notices, _) = run_with_requests(calls, stack, workspace).await;
    (run, log, notices)
}

/// [`run_calls`], with the model's second request (the one after the batch).
async fn run_with_requests(
    calls: Vec<ToolCall>,
    stack: MiddlewareStack<()>,
    workspace: Option<&str>,
) -> (AgentRun, Vec<String>, Vec<String>, ModelRequest) {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(calls),
        ScriptedTurn::text("done"),
    ]));
    let agent: Agent<()> = Agent::new(model.clone()).with_tools(tools(&log)).with_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    if let Some(root) = workspace {
        ctx = ctx.with_workspace(WorkspaceDescriptor::new(root));
    }
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    let notices = trace(&sink.events())
        .into_iter()
        .filter(|l| l.starts_with("notice parallel_edit_guard"))
        .collect();
    let log = log.lock().unwrap().clone();
    let second = model.requests()[1].clone();
    (run, log, notices, second)
}

fn result_of(run: &AgentRun, id: &str) -> String {
    tool_results_by_id(&run.messages)
        .into_iter()
        .find(|(i, _)| i == id)
        .map(|(_, t)| t)
        .unwrap()
}

#[tokio::test]
async fn deny_refuses_a_write_a_before_tool_hook_redirects_onto_an_earlier_calls_file() {
    let guard_first = MiddlewareStack::empty()
        .with(ParallelEditGuardMiddleware::deny())
        .unwrap()
        .with(Redirect)
        .unwrap();
    let redirect_first = MiddlewareStack::empty()
        .with(Redirect)
        .unwrap()
        .with(ParallelEditGuardMiddleware::deny())
        .unwrap();
    assert_eq!(guard_first.names(), ["parallel_edit_guard", "redirect"]);
    assert_eq!(redirect_first.names(), ["redirect", "parallel_edit_guard"]);
    for stack in [guard_first, redirect_first] {
        let order = stack.names().join(", ");
        let (run, log, notices) = run_calls(vec![edit("1", "a.rs"), edit("2", "b.rs")], stack, None).await;
        assert_eq!(log, ["a.rs"], "[{order}] the redirected write did not run");
        let refused = result_of(&run, "2");
        assert!(refused.contains("already writes `a.rs`"), "[{order}] {refused}");
        assert_eq!(notices.len(), 1, "[{order}] {notices:?}");
    }
}

#[tokio::test]
async fn a_write_under_an_alias_of_the_tool_is_the_tools_write() {
    // `write` is declared an alias of `edit`: the model's second call writes a.rs too
    let calls = || {
        vec![
            edit("1", "a.rs"),
            ToolCall::new("2", "write", json!({ "path": "a.rs" })),
        ]
    };
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let aliased = tools(&log).with_alias("write", "edit").unwrap();
    let model = ScriptedModel::new([ScriptedTurn::tool_calls(calls()), ScriptedTurn::text("done")]);
    let agent: Agent<()> = Agent::new(model).with_tools(aliased).with_stack(
        MiddlewareStack::new()
            .with(ParallelEditGuardMiddleware::deny())
            .unwrap(),
    );
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(
        *log.lock().unwrap(),
        ["a.rs"],
        "the write under the alias was judged a second write"
    );
    let refused = result_of(&run, "2");
    assert!(refused.contains("already writes `a.rs`"), "{refused}");
    // without the alias, `write` is an unknown tool: it fails as one, and nothing was renamed
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let model = ScriptedModel::new([ScriptedTurn::tool_calls(calls()), ScriptedTurn::text("done")]);
    let agent: Agent<()> = Agent::new(model).with_tools(tools(&log)).with_stack(
        MiddlewareStack::new()
            .with(ParallelEditGuardMiddleware::deny())
            .unwrap(),
    );
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(*log.lock().unwrap(), ["a.rs"]);
    let unknown = result_of(&run, "2");
    assert!(unknown.contains("write"), "{unknown}");
    assert!(!unknown.contains("already writes"), "{unknown}");
}

#[tokio::test]
async fn warn_names_the_file_a_rewrite_made_shared_in_its_guidance() {
    let stack = MiddlewareStack::new()
        .with(ParallelEditGuardMiddleware::warn())
        .unwrap()
        .with(Redirect)
        .unwrap();
    let (_, log, notices, second) = run_with_requests(vec![edit("1", "a.rs"), edit("2", "b.rs")], stack, None).await;
    assert_eq!(log, ["a.rs", "a.rs"], "warn: both run, in the model's order");
    assert_eq!(notices.len(), 1, "{notices:?}");
    let guided = second
        .messages
        .iter()
        .any(|m| m.text().contains("[parallel_edit_guard]") && m.text().contains("`a.rs`"));
    assert!(guided, "the guidance names a.rs");
}

#[tokio::test]
async fn without_the_rewrite_the_same_calls_are_not_flagged() {
    let stack = MiddlewareStack::new()
        .with(ParallelEditGuardMiddleware::deny())
        .unwrap();
    let (_, log, notices) = run_calls(vec![edit("1", "a.rs"), edit("2", "b.rs")], stack, None).await;
    assert_eq!(log, ["a.rs", "b.rs"]);
    assert!(notices.is_empty());
}

#[tokio::test]
async fn one_file_spelled_absolute_inside_the_workspace_and_relative_is_one_file() {
    let stack = MiddlewareStack::new()
        .with(ParallelEditGuardMiddleware::deny())
        .unwrap();
    let calls = vec![edit("1", "/ws/src/a.rs"), edit("2", "src/./a.rs")];
    let (run, log, _) = run_calls(calls.clone(), stack, Some("/ws")).await;
    assert_eq!(log, ["/ws/src/a.rs"]);
    assert!(result_of(&run, "2").contains("already writes `src/a.rs`"));
    // outside a workspace the two spellings are not known to be one file
    let stack = MiddlewareStack::new()
        .with(ParallelEditGuardMiddleware::deny())
        .unwrap();
    let (_, log, _) = run_calls(calls, stack, None).await;
    assert_eq!(log.len(), 2);
}

#[tokio::test]
async fn writes_separated_by_a_barrier_are_in_different_segments() {
    let calls = || {
        vec![
            edit("1", "a.rs"),
            ToolCall::new("q", "ask_user", json!({ "question": "go on?" })),
            edit("2", "a.rs"),
        ]
    };
    let guard = ParallelEditGuardMiddleware::deny().with_barrier_tools(["ask_user"]);
    let stack = MiddlewareStack::new().with(guard).unwrap();
    let (_, log, notices) = run_calls(calls(), stack, None).await;
    assert_eq!(log, ["a.rs", "a.rs"], "the barrier orders them: both run");
    assert!(notices.is_empty(), "{notices:?}");
    // with no barrier declared, the second write of the one segment is refused
    let stack = MiddlewareStack::new()
        .with(ParallelEditGuardMiddleware::deny())
        .unwrap();
    let (run, log, _) = run_calls(calls(), stack, None).await;
    assert_eq!(log, ["a.rs"]);
    assert!(result_of(&run, "2").contains("already writes `a.rs`"));
}

#[test]
fn barrier_tools_are_configured_by_name() {
    let c: ParallelEditGuardConfig =
        tinyagents::config::from_toml_str("mode = \"deny\"\nbarrier_tools = [\"ask_user\"]").unwrap();
    assert_eq!(c.barrier_tools, ["ask_user"]);
    let defaults: ParallelEditGuardConfig = tinyagents::config::from_toml_str("").unwrap();
    assert!(defaults.barrier_tools.is_empty());
}
