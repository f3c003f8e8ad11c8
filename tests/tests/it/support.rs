//! What every concern's tests share: readers of a run's transcript (and of
//! the models its events name) in the shape the assertions compare, a
//! hand-written retry, unique names, runs into a sink, one approval across
//! a durable pause, a sub-agent's request pausing a durable parent, a write
//! tool's declared access, and the source files below a folder.

#![allow(dead_code)]

use std::sync::Arc;

use tinyagents::graph::{AgentGraph, MemoryCheckpointer};
use tinyagents::middleware::{Decision, HitlInterrupt, HumanInTheLoopMiddleware, InterruptOn};
use tinyagents::prelude::*;

/// The text of every tool result in `messages`, in order.
pub fn tool_texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().into_owned())
        .collect()
}

/// Every tool result in `messages` as `(tool call id, text)`, in order.
pub fn tool_results_by_id(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            (
                m.tool_call_id.clone().expect("a tool result names its call"),
                m.text().into_owned(),
            )
        })
        .collect()
}

/// Every `.rs` file below `dir`, at any depth, appended to `out`.
pub fn rust_files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// What a write tool called with `arguments` declares: a write of its
/// `path` argument (the empty path when it is absent).
pub fn writes_path(arguments: &serde_json::Value) -> Vec<tinyagents::harness::tool::FileAccess> {
    vec![tinyagents::harness::tool::FileAccess {
        path: arguments["path"].as_str().unwrap_or_default().to_owned(),
        mode: tinyagents::harness::tool::FileAccessMode::Write,
    }]
}

/// The model each `ModelCallStarted` event in `events` names, in order.
pub fn models_called(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelCallStarted { model, .. } => Some(model.to_string()),
            _ => None,
        })
        .collect()
}

/// Retries a model call once when its first attempt fails with a retryable
/// error, at once (no backoff); registered as `model_retry`, the name the
/// built-ins order themselves against.
#[wrap_model(name = "model_retry")]
pub async fn retry_once(
    ctx: &mut RunContext,
    state: &(),
    request: ModelRequest,
    next: ModelHandler<'_, ()>,
) -> Result<MiddlewareModelOutcome> {
    match next.run(ctx, state, request.clone()).await {
        Err(e) if e.is_retryable() => next.run(ctx, state, request).await,
        other => other,
    }
}

/// A name no other test run uses (store keys, threads, files): `what`, this
/// process's id and the time in nanoseconds.
pub fn unique(what: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{what}-{}-{nanos}", std::process::id())
}

/// `user(hi)`, `assistant(c1,c2)`, `tool(c1)`, … : one line per message, the
/// shape of a transcript.
pub fn shape(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match (&m.tool_call_id, m.tool_calls.is_empty()) {
            (Some(id), _) => format!("tool({id})"),
            (None, false) => format!(
                "assistant({})",
                m.tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(",")
            ),
            (None, true) => format!("{:?}({})", m.role, m.text()).to_lowercase(),
        })
        .collect()
}

/// Runs `agent` once on `input` (run id `r`), every event to `sink`.
pub async fn run_into(agent: &Agent<()>, sink: Arc<CollectingSink>, input: &str) -> Result<AgentRun> {
    agent
        .run(
            &mut RunContext::new(RunConfig::new("r"), ()).with_sink(sink),
            &(),
            input,
        )
        .await
}

/// Runs `agent` durably (input "tidy", thread `t1`, in memory) until it
/// pauses for the approval of `call-delete`, runs `while_paused` (the test's
/// checks of the pause), approves the call and resumes: the resumed run.
pub async fn approve_delete_and_resume(agent: &Agent<()>, while_paused: impl FnOnce()) -> AgentRun {
    let store = MemoryCheckpointer::new();
    let mut ctx = RunContext::new(RunConfig::new("r1").with_thread("t1"), ());
    let err = AgentGraph::new(agent)
        .run_durable(&mut ctx, &(), "tidy", "t1", &store)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    while_paused();
    let paused = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
    let resume = paused.decide([("call-delete", Decision::Approve)]).unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r2").with_thread("t1"), ());
    AgentGraph::new(agent)
        .resume_with(&mut ctx, &(), "t1", &store, resume)
        .await
        .unwrap()
}

/// A parent (its stack a `human_in_the_loop`) delegating once (call `h1`)
/// to `helper`, a sub-agent whose model asks to `delete` `a.txt` (call
/// `c1`, gated by a `human_in_the_loop` of its own), run durably (run `p1`,
/// thread `t`, in `store`) until the child's request pauses it: the parent,
/// the `delete` tool and the interrupt the person answers.
pub async fn parent_paused_on_a_child_delete(
    store: &MemoryCheckpointer,
) -> (Agent<()>, tinyagents::testing::RecordingTool, HitlInterrupt) {
    let delete = tinyagents::testing::RecordingTool::new("delete").returning("deleted");
    let child: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new(
            "c1",
            "delete",
            serde_json::json!({"path": "a.txt"}),
        )]),
        ScriptedTurn::text("child done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
    .with_stack(
        MiddlewareStack::new()
            .with(HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new()))
            .unwrap(),
    );
    let helper = AgentTool::new(Arc::new(child), "helper", "Delegates.", || ((), ()));
    let parent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new(
            "h1",
            "helper",
            serde_json::json!({"input": "clean"}),
        )]),
        ScriptedTurn::text("parent done"),
    ]))
    .with_tools(ToolRegistry::new().with(helper).unwrap())
    .with_stack(MiddlewareStack::new().with(HumanInTheLoopMiddleware::new()).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("p1"), ());
    let err = AgentGraph::new(&parent)
        .run_durable(&mut ctx, &(), "go", "t", store)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    let asked = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
    (parent, delete, asked)
}

/// A graph node that pauses asking `message` and, resumed with a value,
/// records it as `answer`.
pub fn asking(message: &'static str) -> impl tinyagents::graph::Node<()> {
    tinyagents::graph::node_fn(move |s| async move {
        match s.resume_value() {
            None => Ok(tinyagents::graph::Command::Interrupt {
                node: None,
                message: message.into(),
            }),
            Some(answer) => Ok(tinyagents::graph::Command::Update(tinyagents::graph::update([(
                "answer",
                answer.clone(),
            )]))),
        }
    })
}

/// Runs `graph` durably from an empty state on thread `t` (in memory) until
/// it stops: the run so far, and the checkpoints to resume from.
pub async fn run_graph_durably(
    graph: &tinyagents::graph::CompiledGraph<()>,
) -> (tinyagents::graph::GraphRun, MemoryCheckpointer) {
    let store = MemoryCheckpointer::new();
    let run = graph
        .run_durable(&mut (), tinyagents::graph::GraphState::new(), "t", &store)
        .await
        .unwrap();
    (run, store)
}
