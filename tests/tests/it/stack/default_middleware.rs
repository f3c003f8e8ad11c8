//! The built-ins on by default (seed 002: `parallel_edit_guard` in warn mode
//! and `output_limit_recovery`, "active for every agent") are on for an agent
//! built in code exactly as for one built from a file, with the same opt-outs:
//! your own instance replaces a default, `without(name)` is a file's
//! `enabled = false`, `MiddlewareStack::empty()` is a stack with none.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};
use tinyagents::config::MiddlewareRegistry;
use tinyagents::harness::model::FinishReason;
use tinyagents::harness::tool::{FileAccess, ToolContext, ToolOutput};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

/// A write tool declaring `path`; logs each write.
struct Edit {
    schema: ToolSchema,
    log: Arc<Mutex<Vec<String>>>,
}

#[async_trait]
impl Tool for Edit {
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    fn file_access(&self, arguments: &Value) -> Vec<FileAccess> {
        crate::support::writes_path(arguments)
    }

    async fn call(&self, _cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        self.log
            .lock()
            .unwrap()
            .push(arguments["path"].as_str().unwrap_or("").to_owned());
        Ok("edited".into())
    }
}

fn edit_tools(log: &Arc<Mutex<Vec<String>>>) -> ToolRegistry {
    ToolRegistry::new()
        .with(Edit {
            schema: ToolSchema::new("edit", "Edits a file."),
            log: log.clone(),
        })
        .unwrap()
}

fn two_edits_of_one_file() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("1", "edit", json!({ "path": "src/a.rs" })),
            ToolCall::new("2", "edit", json!({ "path": "src/a.rs" })),
        ]),
        ScriptedTurn::text("done"),
    ]
}

fn guided(request: &ModelRequest) -> bool {
    request
        .messages
        .iter()
        .any(|m| m.text().contains("parallel_edit_guard"))
}

async fn run(agent: &Agent<()>) -> AgentRun {
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap()
}

#[test]
fn an_agent_in_code_has_the_defaults_a_file_has() {
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("hi")]));
    let registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    let from_file = registry.stack_from_toml("").unwrap();
    assert_eq!(agent.stack().names(), from_file.names());
    assert_eq!(agent.stack().names(), registry.defaults().collect::<Vec<_>>());
    assert_eq!(agent.stack().names(), ["parallel_edit_guard", "output_limit_recovery"]);
    for hook in HookKind::ALL {
        assert_eq!(
            agent.stack().implementors(hook),
            from_file.implementors(hook),
            "{hook:?}"
        );
    }
    assert_eq!(MiddlewareStack::<()>::default().names(), agent.stack().names());
}

#[tokio::test(start_paused = true)]
async fn an_agent_with_no_stack_guides_a_model_that_writes_one_file_twice() {
    let log = Arc::default();
    let model = Arc::new(ScriptedModel::new(two_edits_of_one_file()));
    let agent: Agent<()> = Agent::new(model.clone()).with_tools(edit_tools(&log));
    let run = run(&agent).await;
    assert_eq!(run.final_text(), "done");
    assert_eq!(*log.lock().unwrap(), ["src/a.rs", "src/a.rs"], "warn mode runs both");
    assert!(guided(&model.requests()[1]), "the next request carries the guidance");
}

#[tokio::test(start_paused = true)]
async fn an_agent_with_no_stack_continues_a_reply_cut_off_by_the_output_limit() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::Reply(ModelResponse::text("cut").with_finish_reason(FinishReason::Length)),
        ScriptedTurn::text("whole"),
    ]));
    let agent: Agent<()> = Agent::new(model.clone());
    let run = run(&agent).await;
    assert_eq!(run.final_text(), "cutwhole", "continued after the cut, not ended on it");
    assert_eq!(model.requests().len(), 2);
}

#[tokio::test(start_paused = true)]
async fn empty_and_without_are_the_explicit_opt_outs() {
    // a stack with none: the cut reply ends the run as the model gave it
    let cut = || {
        Arc::new(ScriptedModel::new([
            ScriptedTurn::Reply(ModelResponse::text("cut").with_finish_reason(FinishReason::Length)),
            ScriptedTurn::text("whole"),
        ]))
    };
    let model = cut();
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(MiddlewareStack::empty());
    assert!(agent.stack().is_empty());
    assert_eq!(run(&agent).await.final_text(), "cut");
    assert_eq!(model.requests().len(), 1);
    // one default removed by name: the other stays on
    let model = cut();
    let stack = MiddlewareStack::new().without("output_limit_recovery").unwrap();
    assert_eq!(stack.names(), ["parallel_edit_guard"]);
    let agent: Agent<()> = Agent::new(model.clone()).with_stack(stack);
    assert_eq!(run(&agent).await.final_text(), "cut");
    let log = Arc::default();
    let model = Arc::new(ScriptedModel::new(two_edits_of_one_file()));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_tools(edit_tools(&log))
        .with_stack(MiddlewareStack::new().without("output_limit_recovery").unwrap());
    run(&agent).await;
    assert!(guided(&model.requests()[1]), "parallel_edit_guard is still on");
    // removing a name that is not there says what is
    let err = MiddlewareStack::<()>::new()
        .without("parallel_edit_gaurd")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`parallel_edit_gaurd`") && err.contains("parallel_edit_guard, output_limit_recovery"),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn your_own_instance_replaces_a_default_at_your_place_and_a_second_is_still_a_duplicate() {
    let log = Arc::default();
    let model = Arc::new(ScriptedModel::new(two_edits_of_one_file()));
    let stack: MiddlewareStack<()> = MiddlewareStack::new()
        .with(ParallelEditGuardMiddleware::deny())
        .unwrap();
    assert_eq!(stack.names(), ["output_limit_recovery", "parallel_edit_guard"]);
    let agent: Agent<()> = Agent::new(model.clone()).with_tools(edit_tools(&log)).with_stack(stack);
    run(&agent).await;
    assert_eq!(
        *log.lock().unwrap(),
        ["src/a.rs"],
        "deny mode: only the first write ran"
    );
    // only a default gives way: your own registration is not replaced silently
    let err = MiddlewareStack::<()>::new()
        .with(ParallelEditGuardMiddleware::deny())
        .unwrap()
        .with(ParallelEditGuardMiddleware::warn())
        .unwrap_err()
        .to_string();
    assert!(err.contains("already registered"), "{err}");
    // a registration that fails leaves the default where it was
    let mut stack: MiddlewareStack<()> = MiddlewareStack::new();
    let mut bad = MiddlewareInfo::new("parallel_edit_guard");
    bad.before = vec!["no_such_middleware".into()];
    assert!(stack.add(Named(bad)).is_err());
    assert_eq!(stack.names(), ["parallel_edit_guard", "output_limit_recovery"]);
}

/// A middleware with the given metadata and no hooks.
struct Named(MiddlewareInfo);

impl Middleware<()> for Named {
    fn info(&self) -> MiddlewareInfo {
        self.0.clone()
    }
}
