//! The agent loop keeps its promises (issue 15): transcripts providers
//! accept after every stop, attempt numbers per step, jumps that do what
//! they say (and undeclared ones refused whatever the hook returned), panics
//! of tools classified as the tool's, and tool-call events always paired.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use tinyagents::harness::context::JumpSet;
use tinyagents::middleware::{ExitBehavior, ToolCallLimitMiddleware};
use tinyagents::prelude::*;

use crate::support::RetryOnce;
use tinyagents::testing::{assert_valid_transcript, check_transcript, trace, CollectingSink, RecordingTool};

use crate::support::shape;

fn two_calls() -> ScriptedTurn {
    ScriptedTurn::tool_calls(vec![
        ToolCall::new("c1", "t", json!({"n": 1})),
        ToolCall::new("c2", "t", json!({"n": 2})),
    ])
}

/// Requests a control or a jump in one hook.
#[derive(Clone)]
enum Ask {
    Stop(&'static str),
    Jump(JumpTarget),
}

struct At {
    hook: HookSet,
    ask: Ask,
    declared: JumpSet,
    fail: bool,
}

impl At {
    fn new(hook: HookSet, ask: Ask) -> Self {
        Self {
            hook,
            ask,
            declared: JumpSet::all(),
            fail: false,
        }
    }

    fn apply(&self, ctx: &mut RunContext) -> Result<()> {
        match &self.ask {
            Ask::Stop(text) => ctx
                .flow_mut()
                .request_control(MiddlewareControl::StopWithFinal((*text).into())),
            Ask::Jump(t) => ctx.flow_mut().jump_to(*t),
        }
        if self.fail {
            return Err(TinyAgentsError::validation("the hook refused the call"));
        }
        Ok(())
    }
}

#[async_trait]
impl Middleware<()> for At {
    fn hooks(&self) -> HookSet {
        self.hook
    }
    fn info(&self) -> MiddlewareInfo {
        MiddlewareInfo::new("at")
            .with_hooks(self.hook)
            .with_jumps(self.declared)
    }
    async fn before_model(&self, ctx: &mut RunContext, _: &(), _: &mut ModelRequest) -> Result<()> {
        self.apply(ctx)
    }
    async fn after_model(&self, ctx: &mut RunContext, _: &(), _: &mut ModelResponse) -> Result<()> {
        self.apply(ctx)
    }
    async fn on_tool_batch(&self, ctx: &mut RunContext, _: &(), _: &mut PreparedBatch) -> Result<()> {
        self.apply(ctx)
    }
    async fn before_tool(&self, ctx: &mut RunContext, _: &(), _: &mut ToolCall) -> Result<()> {
        self.apply(ctx)
    }
}

async fn run_with(
    stack: MiddlewareStack<()>,
    turns: Vec<ScriptedTurn>,
    tool: &RecordingTool,
    input: impl Into<AgentInput>,
) -> (Result<AgentRun>, Vec<String>) {
    let agent = Agent::new(ScriptedModel::new(turns))
        .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
        .with_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), input).await;
    (run, trace(&sink.events()))
}

// ----- 1. transcripts ---------------------------------------------------

/// `StopWithFinal` after the reply and from the batch review: every call is
/// answered (none run) before the final message.
#[tokio::test]
async fn stop_with_final_answers_every_call_before_the_final_message() {
    for (case, hook) in [
        ("after the reply", HookSet::AFTER_MODEL),
        ("from the batch review", HookSet::ON_TOOL_BATCH),
    ] {
        let tool = RecordingTool::new("t");
        let stack = MiddlewareStack::new().with(At::new(hook, Ask::Stop("final"))).unwrap();
        let (run, _) = run_with(stack, vec![two_calls()], &tool, "hi").await;
        let run = run.unwrap();
        assert_eq!(
            shape(&run.messages),
            [
                "user(hi)",
                "assistant(c1,c2)",
                "tool(c1)",
                "tool(c2)",
                "assistant(final)"
            ],
            "{case}"
        );
        assert_valid_transcript(&run.messages);
        assert_eq!(run.final_text(), "final", "{case}");
        assert!(tool.calls().is_empty(), "{case}");
    }
}

#[tokio::test]
async fn tool_call_limit_with_exit_end_leaves_a_transcript_providers_accept() {
    let tool = RecordingTool::new("t");
    let stack = MiddlewareStack::new()
        .with(ToolCallLimitMiddleware::per_run(None, 1).exit_behavior(ExitBehavior::End))
        .unwrap();
    let (run, _) = run_with(stack, vec![two_calls()], &tool, "hi").await;
    let run = run.unwrap();
    assert_valid_transcript(&run.messages);
    assert_eq!(
        shape(&run.messages)[..4],
        ["user(hi)", "assistant(c1,c2)", "tool(c1)", "tool(c2)"]
    );
    assert_eq!(run.stop, StopReason::StoppedByMiddleware);
    assert!(
        run.final_text().contains("Tool call limit reached"),
        "{}",
        run.final_text()
    );
    assert!(tool.calls().is_empty(), "no call of the batch ran");
}

#[test]
fn the_validator_catches_each_rule() {
    let mut ask = Message::assistant("");
    ask.tool_calls = vec![ToolCall::new("c1", "t", json!({}))];
    // unanswered at the end
    assert_eq!(check_transcript(&[Message::user("u"), ask.clone()]).len(), 1);
    // answered twice
    let twice = [
        ask.clone(),
        Message::tool("c1", "t", "a"),
        Message::tool("c1", "t", "b"),
    ];
    assert!(check_transcript(&twice)[0].message.contains("answered twice"));
    // a tool message without its call
    let orphan = [Message::user("u"), Message::tool("zz", "t", "a")];
    assert!(check_transcript(&orphan)[0].message.contains("does not answer"));
    // a user message between the call and its answer
    let late = [ask.clone(), Message::user("u"), Message::tool("c1", "t", "a")];
    assert_eq!(check_transcript(&late).len(), 2);
    // the same id for two calls
    let reused = [
        ask.clone(),
        Message::tool("c1", "t", "a"),
        ask,
        Message::tool("c1", "t", "a"),
    ];
    assert!(check_transcript(&reused)
        .iter()
        .any(|v| v.message.contains("more than one call")));
}

// ----- 2. attempt numbers -------------------------------------------------

#[tokio::test]
async fn attempt_numbers_count_within_the_step() {
    let tool = RecordingTool::new("t");
    let (run, trace) = run_with(
        MiddlewareStack::new(),
        vec![ScriptedTurn::tool_call("t", json!({})), ScriptedTurn::text("done")],
        &tool,
        "hi",
    )
    .await;
    assert_valid_transcript(&run.unwrap().messages);
    let calls: Vec<&String> = trace.iter().filter(|l| l.starts_with("model_call")).collect();
    assert_eq!(calls, ["model_call step=1 attempt=1", "model_call step=2 attempt=1"]);
}

#[tokio::test]
async fn a_retried_attempt_in_the_second_step_is_attempt_2_of_that_step() {
    let tool = RecordingTool::new("t");
    let (run, trace) = run_with(
        MiddlewareStack::new().with(RetryOnce).unwrap(),
        vec![
            ScriptedTurn::tool_call("t", json!({})),
            ScriptedTurn::Fail(TinyAgentsError::model("flaky", true)),
            ScriptedTurn::text("done"),
        ],
        &tool,
        "hi",
    )
    .await;
    let run = run.unwrap();
    assert_valid_transcript(&run.messages);
    let lines: Vec<&String> = trace
        .iter()
        .filter(|l| l.starts_with("model_call") || l.starts_with("discarded"))
        .collect();
    assert_eq!(
        lines,
        [
            "model_call step=1 attempt=1",
            "model_call step=2 attempt=1",
            "discarded attempt=1",
            "model_call step=2 attempt=2",
        ]
    );
    assert_eq!(run.counters.model_calls, 3, "the run still counts every model call");
}

// ----- 3. jumps -------------------------------------------------------------

#[tokio::test]
async fn a_jump_to_the_model_from_the_batch_review_skips_every_pending_call() {
    let tool = RecordingTool::new("t");
    let stack = MiddlewareStack::new()
        .with(At::new(HookSet::ON_TOOL_BATCH, Ask::Jump(JumpTarget::Model)))
        .unwrap();
    // the review jumps every time; the second reply has no calls, so the run ends
    let (run, trace) = run_with(stack, vec![two_calls(), ScriptedTurn::text("done")], &tool, "hi").await;
    let run = run.unwrap();
    assert!(tool.calls().is_empty(), "the dangerous call never ran");
    assert_eq!(
        shape(&run.messages),
        [
            "user(hi)",
            "assistant(c1,c2)",
            "tool(c1)",
            "tool(c2)",
            "assistant(done)"
        ]
    );
    assert!(run.messages[2].text().contains("not run"));
    assert_valid_transcript(&run.messages);
    assert!(trace.contains(&"control jump_to_model".to_owned()));
    assert!(!trace.iter().any(|l| l.starts_with("tool_call ")), "{trace:?}");
}

#[tokio::test]
async fn an_undeclared_jump_is_refused_also_when_its_hook_returned_an_error() {
    let tool = RecordingTool::new("t");
    let at = At {
        hook: HookSet::BEFORE_TOOL,
        ask: Ask::Jump(JumpTarget::End),
        declared: JumpSet::empty(),
        fail: true,
    };
    let stack = MiddlewareStack::new().with(at).unwrap();
    let (run, _) = run_with(
        stack,
        vec![ScriptedTurn::tool_call("t", json!({})), ScriptedTurn::text("done")],
        &tool,
        "hi",
    )
    .await;
    let run = run.unwrap();
    // the refusal of the call became its result (default tool-error policy);
    // the undeclared jump to the end was not honoured: the model answered again
    assert_eq!(run.stop, StopReason::Finished);
    assert_eq!(run.final_text(), "done");
    let result = run.messages[2].text().into_owned();
    assert!(
        result.contains("`at`")
            && result.contains("can_jump_to = [end]")
            && result.contains("the hook refused the call"),
        "{result}"
    );
    assert_valid_transcript(&run.messages);
}

#[tokio::test]
async fn a_declared_jump_from_a_failing_hook_is_kept() {
    let tool = RecordingTool::new("t");
    let at = At {
        hook: HookSet::BEFORE_TOOL,
        ask: Ask::Jump(JumpTarget::End),
        declared: JumpSet::END,
        fail: true,
    };
    let (run, _) = run_with(
        MiddlewareStack::new().with(at).unwrap(),
        vec![ScriptedTurn::tool_call("t", json!({})), ScriptedTurn::text("never")],
        &tool,
        "hi",
    )
    .await;
    let run = run.unwrap();
    assert_eq!(run.stop, StopReason::JumpedToEnd);
    assert_valid_transcript(&run.messages);
}

/// Jumps to tools from `before_model` on the first turn only.
struct ToolsFirst;

#[async_trait]
impl Middleware<()> for ToolsFirst {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL
    }
    fn info(&self) -> MiddlewareInfo {
        MiddlewareInfo::new("tools_first")
            .with_hooks(HookSet::BEFORE_MODEL)
            .with_jumps(JumpSet::TOOLS)
    }
    async fn before_model(&self, ctx: &mut RunContext, _: &(), _: &mut ModelRequest) -> Result<()> {
        if ctx.counters().steps == 1 {
            ctx.flow_mut().jump_to(JumpTarget::Tools);
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_jump_to_tools_from_before_model_runs_the_unanswered_calls_of_the_last_reply() {
    let tool = RecordingTool::new("t");
    let mut ask = Message::assistant("");
    ask.tool_calls = vec![ToolCall::new("c1", "t", json!({"n": 1}))];
    let input = vec![Message::user("hi"), ask];
    let (run, trace) = run_with(
        MiddlewareStack::new().with(ToolsFirst).unwrap(),
        vec![ScriptedTurn::text("done")],
        &tool,
        input,
    )
    .await;
    let run = run.unwrap();
    assert_eq!(tool.calls(), [json!({"n": 1})], "the pending call ran once");
    assert_eq!(
        shape(&run.messages),
        ["user(hi)", "assistant(c1)", "tool(c1)", "assistant(done)"]
    );
    assert_valid_transcript(&run.messages);
    assert!(trace.contains(&"control jump_to_tools".to_owned()));
}

#[tokio::test]
async fn a_jump_to_tools_from_before_model_with_nothing_pending_is_refused_clearly() {
    let tool = RecordingTool::new("t");
    let (run, _) = run_with(
        MiddlewareStack::new().with(ToolsFirst).unwrap(),
        vec![ScriptedTurn::text("done")],
        &tool,
        "hi",
    )
    .await;
    let err = run.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    let msg = err.to_string();
    assert!(
        msg.contains("`tools_first`") && msg.contains("jumped to `tools`") && msg.contains("no unanswered tool calls"),
        "{msg}"
    );
}

// ----- 4. panics and paired tool events -----------------------------------

fn panicking_tool() -> impl Tool {
    tool_fn("boom", "Panics.", |_cx, _args| async move {
        if true {
            panic!("kaboom");
        }
        Ok("never".into())
    })
}

async fn run_panicking(stack: MiddlewareStack<()>) -> (AgentRun, Vec<String>) {
    let agent = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("boom", json!({})),
        ScriptedTurn::text("recovered"),
    ]))
    .with_tools(ToolRegistry::new().with(panicking_tool()).unwrap())
    .with_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent
        .run(&mut ctx, &(), "hi")
        .await
        .expect("a panicking tool does not end the run");
    (run, trace(&sink.events()))
}

#[tokio::test]
async fn a_panicking_tool_without_wraps_becomes_that_calls_error_result() {
    let (run, trace) = run_panicking(MiddlewareStack::new()).await;
    let result = run.messages[2].text().into_owned();
    assert!(result.contains("the tool `boom` panicked: kaboom"), "{result}");
    assert_eq!(run.final_text(), "recovered");
    assert_valid_transcript(&run.messages);
    assert!(trace.contains(&"tool_done boom error".to_owned()), "{trace:?}");
}

/// A pass-through tool wrap.
struct PassTool;

#[async_trait]
impl Middleware<()> for PassTool {
    fn hooks(&self) -> HookSet {
        HookSet::WRAP_TOOL
    }
    async fn wrap_tool(
        &self,
        ctx: &mut RunContext,
        state: &(),
        call: ToolCall,
        next: ToolHandler<'_, ()>,
    ) -> Result<MiddlewareToolOutcome> {
        next.run(ctx, state, call).await
    }
}

#[tokio::test]
async fn a_panicking_tool_is_not_blamed_on_the_innermost_wrap() {
    let (run, trace) = run_panicking(MiddlewareStack::new().with(PassTool).unwrap()).await;
    let result = run.messages[2].text().into_owned();
    assert!(result.contains("the tool `boom` panicked"), "{result}");
    assert!(!result.contains("pass_tool"), "{result}");
    assert!(!trace.iter().any(|l| l.ends_with("panicked")), "{trace:?}");
    assert_valid_transcript(&run.messages);
}

fn tool_events(trace: &[String]) -> Vec<&str> {
    trace
        .iter()
        .filter(|l| l.starts_with("tool_call ") || l.starts_with("tool_done ") || l.starts_with("tool_refused "))
        .map(String::as_str)
        .collect()
}

#[tokio::test]
async fn a_call_refused_in_before_tool_is_refused_and_never_started() {
    let tool = RecordingTool::new("t");
    let at = At {
        hook: HookSet::BEFORE_TOOL,
        ask: Ask::Jump(JumpTarget::Model),
        declared: JumpSet::empty(),
        fail: true,
    };
    let (run, trace) = run_with(
        MiddlewareStack::new().with(at).unwrap(),
        vec![ScriptedTurn::tool_call("t", json!({})), ScriptedTurn::text("done")],
        &tool,
        "hi",
    )
    .await;
    assert_valid_transcript(&run.unwrap().messages);
    assert_eq!(tool_events(&trace), ["tool_refused t"]);
}

/// Rejects every call of a batch.
struct RejectAll;

#[async_trait]
impl Middleware<()> for RejectAll {
    fn hooks(&self) -> HookSet {
        HookSet::ON_TOOL_BATCH
    }
    async fn on_tool_batch(&self, _: &mut RunContext, _: &(), batch: &mut PreparedBatch) -> Result<()> {
        for i in 0..batch.len() {
            batch.reject(i, "no");
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_call_rejected_by_the_batch_review_is_refused_and_never_started() {
    let tool = RecordingTool::new("t");
    let (run, trace) = run_with(
        MiddlewareStack::new().with(RejectAll).unwrap(),
        vec![two_calls(), ScriptedTurn::text("done")],
        &tool,
        "hi",
    )
    .await;
    assert_valid_transcript(&run.unwrap().messages);
    assert_eq!(tool_events(&trace), ["tool_refused t", "tool_refused t"]);
    assert!(tool.calls().is_empty());
}
