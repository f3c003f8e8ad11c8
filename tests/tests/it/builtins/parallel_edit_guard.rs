//! `ParallelEditGuardMiddleware`: warn (all run, guidance once), deny (first write per
//! file runs, later ones get an error result naming the file), only declared
//! writes count, same-file writes keep the model's order in a concurrent
//! batch, a failing hook does not leave writes waiting, and configuration.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use tinyagents::config::from_toml_str;
use tinyagents::harness::tool::{FileAccess, FileAccessMode, ToolContext, ToolOutput};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use crate::support::{run_into, tool_results_by_id};
use tinyagents::testing::trace;

/// A file tool: declares `path` as read or written, sleeps `delay` ms, logs `path#n`.
struct FileTool {
    schema: ToolSchema,
    mode: FileAccessMode,
    log: Arc<Mutex<Vec<String>>>,
}

impl FileTool {
    fn new(name: &str, mode: FileAccessMode, log: &Arc<Mutex<Vec<String>>>) -> Self {
        Self {
            schema: ToolSchema::new(name, "A file tool."),
            mode,
            log: log.clone(),
        }
    }
}

#[async_trait]
impl Tool for FileTool {
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    fn file_access(&self, arguments: &Value) -> Vec<FileAccess> {
        vec![FileAccess {
            path: arguments["path"].as_str().unwrap_or_default().to_owned(),
            mode: self.mode,
        }]
    }

    async fn call(&self, _cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        let delay = arguments["delay"].as_u64().unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        let entry = format!("{}#{}", arguments["path"].as_str().unwrap_or(""), arguments["n"]);
        self.log.lock().unwrap().push(entry.clone());
        Ok(format!("{} {entry}", self.schema.name).into())
    }
}

fn tools(log: &Arc<Mutex<Vec<String>>>) -> ToolRegistry {
    ToolRegistry::new()
        .with(FileTool::new("edit", FileAccessMode::Write, log))
        .unwrap()
        .with(FileTool::new("read_file", FileAccessMode::Read, log))
        .unwrap()
        .with(tool_fn("shell", "Runs.", |_cx, _| async { Ok("ran".into()) }))
        .unwrap()
}

fn edit(id: &str, path: &str, n: u32, delay: u64) -> ToolCall {
    ToolCall::new(id, "edit", json!({ "path": path, "n": n, "delay": delay }))
}

/// An agent offered `tools`, whose model asks for `calls` in one reply and
/// then says "done", with `guard` on the default stack.
fn agent(tools: ToolRegistry, calls: Vec<ToolCall>, guard: ParallelEditGuardMiddleware) -> Agent<()> {
    Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(calls),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(tools)
    .with_stack(MiddlewareStack::new().with(guard).unwrap())
}

/// Runs `agent` once, events to `sink`.
async fn run(agent: &Agent<()>, sink: Arc<CollectingSink>) -> Result<AgentRun> {
    run_into(agent, sink, "go").await
}

/// Runs `agent` once, failing the test if it hangs instead of finishing.
async fn run_to_the_end(agent: &Agent<()>) -> Result<AgentRun> {
    tokio::time::timeout(Duration::from_secs(3600), run(agent, Arc::default()))
        .await
        .expect("the run finished instead of hanging")
}

#[tokio::test(start_paused = true)]
async fn warn_runs_every_call_and_guides_the_model_once() {
    let log = Arc::default();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            edit("1", "src/a.rs", 1, 0),
            edit("2", "./src//a.rs", 2, 0),
            edit("3", "src/b.rs", 3, 0),
            ToolCall::new("4", "read_file", json!({ "path": "src/a.rs", "n": 4 })),
        ]),
        ScriptedTurn::tool_call("read_file", json!({ "path": "src/b.rs", "n": 5 })),
        ScriptedTurn::text("done"),
    ]));
    let agent: Agent<()> = Agent::new(model.clone()).with_tools(tools(&log)).with_stack(
        MiddlewareStack::new()
            .with(ParallelEditGuardMiddleware::warn())
            .unwrap(),
    );
    let sink = Arc::new(CollectingSink::new());
    let run = run_into(&agent, sink.clone(), "go").await.unwrap();
    assert_eq!(
        tool_results_by_id(&run.messages).len(),
        5,
        "every call ran and has one result"
    );
    let requests = model.requests();
    let last = requests[1].messages.last().unwrap();
    assert_eq!(last.role, Role::User);
    assert!(
        last.text().contains("`src/a.rs`") && last.text().contains("`multiedit`"),
        "{}",
        last.text()
    );
    assert!(!last.text().contains("b.rs"), "only the file written twice is named");
    let guidance = |r: &ModelRequest| {
        r.messages
            .iter()
            .filter(|m| m.text().contains("parallel_edit_guard"))
            .count()
    };
    assert_eq!(guidance(&requests[1]), 1);
    assert_eq!(guidance(&requests[2]), 0, "sent once");
    let notices: Vec<String> = trace(&sink.events())
        .into_iter()
        .filter(|l| l.starts_with("notice parallel_edit_guard"))
        .collect();
    assert_eq!(notices.len(), 1, "{notices:?}");
}

#[tokio::test(start_paused = true)]
async fn deny_runs_only_the_first_write_per_file_and_answers_every_call() {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let calls = vec![
        edit("1", "a.rs", 1, 0),
        edit("2", "b.rs", 2, 0),
        edit("3", "a.rs", 3, 0),
        edit("4", "/abs/../a.rs", 4, 0),
        edit("5", "a.rs", 5, 0),
    ];
    let agent = agent(tools(&log), calls, ParallelEditGuardMiddleware::deny());
    let run = run(&agent, Arc::default()).await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["a.rs#1", "b.rs#2", "/abs/../a.rs#4"]);
    let r = tool_results_by_id(&run.messages);
    assert_eq!(r.len(), 5, "every call has exactly one result");
    for id in ["3", "5"] {
        let (_, text) = r.iter().find(|(i, _)| i == id).unwrap();
        assert!(
            text.contains("already writes `a.rs`") && text.contains("`multiedit`"),
            "{text}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn reads_and_undeclared_calls_do_not_count() {
    let log = Arc::default();
    let calls = vec![
        ToolCall::new("1", "read_file", json!({ "path": "a.rs" })),
        ToolCall::new("2", "read_file", json!({ "path": "a.rs" })),
        ToolCall::new("3", "shell", json!({ "command": "sed -i s/a/b/ a.rs" })),
        edit("4", "a.rs", 4, 0),
    ];
    let agent = agent(tools(&log), calls, ParallelEditGuardMiddleware::deny());
    let sink = Arc::new(CollectingSink::new());
    let run = run(&agent, sink.clone()).await.unwrap();
    assert!(tool_results_by_id(&run.messages)
        .iter()
        .all(|(_, t)| !t.contains("not run")));
    assert!(!trace(&sink.events()).iter().any(|l| l.starts_with("notice")));
}

#[tokio::test(start_paused = true)]
async fn in_a_concurrent_batch_writes_to_one_file_keep_the_models_order() {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let calls = vec![
        edit("1", "a.rs", 1, 50), // slow first write
        edit("2", "b.rs", 2, 0),
        edit("3", "a.rs", 3, 0), // fast second write: must still wait for the first
        edit("4", "a.rs", 4, 10),
    ];
    let agent = agent(tools(&log), calls, ParallelEditGuardMiddleware::warn()).with_concurrent_tools();
    run(&agent, Arc::default()).await.unwrap();
    let log = log.lock().unwrap().clone();
    let a: Vec<&String> = log.iter().filter(|e| e.starts_with("a.rs")).collect();
    assert_eq!(a, ["a.rs#1", "a.rs#3", "a.rs#4"], "full log: {log:?}");
    assert_eq!(log[0], "b.rs#2", "other files do not wait: {log:?}");
}

/// Fails the first write's `before_tool` with an error that ends the run.
#[before_tool(name = "breaker")]
fn breaker(call: &mut ToolCall) -> Result<()> {
    if call.id == "1" {
        return Err(TinyAgentsError::limit("budget", "spent"));
    }
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn a_failing_hook_does_not_leave_later_writes_waiting() {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let calls = vec![edit("1", "a.rs", 1, 0), edit("2", "a.rs", 2, 0)];
    let agent = agent(tools(&log), calls, ParallelEditGuardMiddleware::warn()).with_concurrent_tools();
    let agent = agent.with_stack(
        MiddlewareStack::new()
            .with(ParallelEditGuardMiddleware::warn())
            .unwrap()
            .with(Breaker)
            .unwrap(),
    );
    let outcome = run_to_the_end(&agent).await;
    assert_eq!(outcome.unwrap_err().kind(), ErrorKind::LimitExceeded);
}

#[test]
fn config_builds_and_bad_values_are_rejected_naming_field_value_and_rule() {
    let c: ParallelEditGuardConfig = from_toml_str("mode = \"deny\"\nmultiedit_tool = \"apply_edits\"").unwrap();
    let _: ParallelEditGuardMiddleware = c.into();
    let err = from_toml_str::<ParallelEditGuardConfig>("mode = \"block\"").unwrap_err();
    assert_eq!(err.errors()[0].path, "mode");
    assert_eq!(err.errors()[0].value, Some(json!("block")));
    assert_eq!(err.errors()[0].rule, "must be one of \"warn\", \"deny\"");
    // `enabled` is the reserved switch every middleware table accepts
    assert!(from_toml_str::<ParallelEditGuardConfig>("enabled = false").is_ok());
}

#[tokio::test(start_paused = true)]
async fn a_call_id_the_model_repeats_does_not_wait_on_itself() {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let calls = vec![
        edit("same", "a.rs", 1, 5),
        edit("same", "a.rs", 2, 0),
        edit("other", "a.rs", 3, 0),
    ];
    let agent = agent(tools(&log), calls, ParallelEditGuardMiddleware::warn()).with_concurrent_tools();
    let run = run_to_the_end(&agent).await;
    // two calls of one reply with one id are a model error now (an id names
    // one call only): the run ends at once, and no edit ran
    let err = run.unwrap_err();
    assert!(err.to_string().contains("an id names one call only"), "{err}");
    assert!(log.lock().unwrap().is_empty(), "{:?}", log.lock().unwrap());
}

/// Writes every path in `paths`.
struct MultiEdit(ToolSchema);

#[async_trait]
impl Tool for MultiEdit {
    fn schema(&self) -> &ToolSchema {
        &self.0
    }

    fn file_access(&self, arguments: &Value) -> Vec<FileAccess> {
        arguments["paths"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|p| FileAccess {
                path: p.to_owned(),
                mode: FileAccessMode::Write,
            })
            .collect()
    }

    async fn call(&self, _cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        Ok(format!("edited {}", arguments["paths"]).into())
    }
}

#[tokio::test(start_paused = true)]
async fn in_deny_mode_a_refused_call_claims_none_of_its_files() {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let calls = vec![
        edit("1", "a.rs", 1, 0),
        ToolCall::new("2", "multi", json!({ "paths": ["a.rs", "b.rs"] })), // refused: a.rs taken
        edit("3", "b.rs", 3, 0),                                           // runs: b.rs is still free
    ];
    let tools = tools(&log)
        .with(MultiEdit(ToolSchema::new("multi", "Edits many.")))
        .unwrap();
    let run = run(
        &agent(tools, calls, ParallelEditGuardMiddleware::deny()),
        Arc::default(),
    )
    .await
    .unwrap();
    assert_eq!(*log.lock().unwrap(), ["a.rs#1", "b.rs#3"]);
    let r = tool_results_by_id(&run.messages);
    assert!(r[1].1.contains("already writes `a.rs`"), "{}", r[1].1);
}
