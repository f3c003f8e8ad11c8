//! Independent acceptance tests: promises of the README, docs/*.md and the
//! rustdoc, checked through the public API.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware, MiddlewareRegistry};
use tinyagents::graph::{AgentGraph, MemoryCheckpointer};
use tinyagents::harness::steering::{SteeringAction, SteeringHandle};
use tinyagents::middleware::*;
use tinyagents::prelude::*;
use tinyagents::testing::{assert_valid_transcript, check_transcript, RecordingTool};

use crate::support::{approve_delete_and_resume, shape};

fn two_calls(name: &str) -> ScriptedTurn {
    ScriptedTurn::tool_calls(vec![
        ToolCall::new("c1", name, json!({"n": 1})),
        ToolCall::new("c2", name, json!({"n": 2})),
    ])
}

// ----- 1. tool_call_limit x human_in_the_loop: a paused batch is counted twice -----

/// docs/middleware.md, tool_call_limit: "Fails closed: a call over the limit
/// never runs" / "Counts each call once in the batch review". A batch paused
/// by `human_in_the_loop` never ran; resumed in the same thread, the one
/// approved call is the thread's first call to run, so a thread limit of 1
/// must admit it.
#[tokio::test]
async fn acc_a_paused_and_approved_call_is_not_counted_twice_by_the_thread_limit() {
    let delete = RecordingTool::new("delete").returning("deleted");
    let limit = ToolCallLimitMiddleware::per_run(None, 5).thread_limit(1);
    let hitl = HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new());
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("delete", json!({"path": "a.txt"})),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
    .with_stack(MiddlewareStack::new().with(limit).unwrap().with(hitl).unwrap());
    let run = approve_delete_and_resume(&agent, || assert!(delete.calls().is_empty())).await;
    assert_valid_transcript(&run.messages);
    let tool_msgs: Vec<String> = run
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().to_string())
        .collect();
    assert_eq!(
        delete.calls().len(),
        1,
        "the approved call is the thread's first call to run, within thread_limit = 1; tool results: {tool_msgs:?}"
    );
}

// ----- 2. a wrap that answers with another call's id -----

struct ForeignId;

#[async_trait]
impl Middleware<()> for ForeignId {
    fn hooks(&self) -> HookSet {
        HookSet::AFTER_TOOL
    }
    async fn after_tool(&self, _: &mut RunContext, _: &(), result: &mut ToolResult) -> Result<()> {
        // e.g. a cache answering from a stored result
        result.call_id = "cached-call".into();
        Ok(())
    }
}

/// README: "tool calls with exactly one result each"; DESIGN: "every call
/// gets exactly one result". A middleware that rewrites a result's call id
/// leaves the call unanswered in the transcript the loop hands back.
#[tokio::test]
async fn acc_every_call_is_answered_even_when_a_hook_changes_the_results_call_id() {
    let tool = RecordingTool::new("t");
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("t", json!({})),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
    .with_stack(MiddlewareStack::new().with(ForeignId).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), "go").await;
    match run {
        Ok(run) => assert!(
            check_transcript(&run.messages).is_empty(),
            "transcript: {:?}: {:?}",
            shape(&run.messages),
            check_transcript(&run.messages)
        ),
        Err(e) => assert_eq!(e.kind(), ErrorKind::Middleware, "{e}"),
    }
}

/// The siblings: `before_tool` rewriting the call's id, a wrap answering
/// with another call's result, and a review's `reject_with` given a result
/// of another id. The first two fail the run naming the hook; `reject_with`
/// makes the result answer the call it rejects.
#[tokio::test]
async fn no_hook_can_answer_a_call_under_another_id() {
    struct RenameCall;
    #[async_trait]
    impl Middleware<()> for RenameCall {
        fn hooks(&self) -> HookSet {
            HookSet::BEFORE_TOOL
        }
        async fn before_tool(&self, _: &mut RunContext, _: &(), call: &mut ToolCall) -> Result<()> {
            call.id = "another".into();
            Ok(())
        }
    }
    struct StaleCache;
    #[async_trait]
    impl tinyagents::harness::middleware::ToolMiddleware<()> for StaleCache {
        async fn wrap_tool(
            &self,
            _: &mut RunContext,
            _: &(),
            call: ToolCall,
            _: ToolHandler<'_, ()>,
        ) -> Result<MiddlewareToolOutcome> {
            let stale = ToolCall::new("yesterday", &call.name, json!({}));
            Ok(ToolResult::ok(&stale, "cached").into())
        }
    }
    struct RejectForeign;
    #[async_trait]
    impl Middleware<()> for RejectForeign {
        fn hooks(&self) -> HookSet {
            HookSet::ON_TOOL_BATCH
        }
        async fn on_tool_batch(&self, _: &mut RunContext, _: &(), batch: &mut PreparedBatch) -> Result<()> {
            let foreign = ToolCall::new("someone-else", "other", json!({}));
            batch.reject_with(0, ToolResult::error(&foreign, "no"));
            Ok(())
        }
    }
    let agent = |stack: MiddlewareStack<()>, tool: &RecordingTool| -> Agent<()> {
        Agent::new(ScriptedModel::new([
            ScriptedTurn::tool_call("t", json!({})),
            ScriptedTurn::text("done"),
        ]))
        .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
        .with_stack(stack)
    };
    for (stack, hook) in [
        (MiddlewareStack::new().with(RenameCall).unwrap(), "before_tool"),
        (
            {
                let mut s = MiddlewareStack::new();
                s.try_push_tool(Arc::new(StaleCache)).unwrap();
                s
            },
            "wrap_tool",
        ),
    ] {
        let tool = RecordingTool::new("t");
        let mut ctx = RunContext::new(RunConfig::new("r"), ());
        let err = agent(stack, &tool).run(&mut ctx, &(), "go").await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Middleware, "{hook}: {err}");
        assert!(err.to_string().contains(hook), "the error names `{hook}`: {err}");
    }
    let tool = RecordingTool::new("t");
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent(MiddlewareStack::new().with(RejectForeign).unwrap(), &tool)
        .run(&mut ctx, &(), "go")
        .await
        .unwrap();
    assert_valid_transcript(&run.messages);
    assert!(tool.calls().is_empty(), "the rejected call ran");
}

// ----- 4. jump to the end from before_tool -----

struct JumpEndAtFirstTool;

#[async_trait]
impl Middleware<()> for JumpEndAtFirstTool {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_TOOL
    }
    async fn before_tool(&self, ctx: &mut RunContext, _: &(), call: &mut ToolCall) -> Result<()> {
        if call.id == "c1" {
            ctx.flow_mut().jump_to(JumpTarget::End);
        }
        Ok(())
    }
}

/// control.rs, JumpTarget::End: "End the run with the latest response
/// (pending calls get a "not run" result)". A jump to the end asked in the
/// first call's `before_tool`: the second call is pending, and must not run.
#[tokio::test]
async fn acc_a_jump_to_end_from_before_tool_does_not_run_the_rest_of_the_batch() {
    let tool = RecordingTool::new("t");
    let agent: Agent<()> = Agent::new(ScriptedModel::new([two_calls("t"), ScriptedTurn::text("done")]))
        .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
        .with_stack(MiddlewareStack::new().with(JumpEndAtFirstTool).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_valid_transcript(&run.messages);
    assert_eq!(run.stop, StopReason::JumpedToEnd);
    assert!(
        tool.calls().len() <= 1,
        "the run ended at c1's before_tool, yet {} calls ran: {:?}",
        tool.calls().len(),
        shape(&run.messages)
    );
}

/// Every call's `before_tool` runs before any call of the batch runs: a jump
/// to the end asked in the second call's `before_tool` answers that call
/// "not run", and the first call (prepared before the jump) still runs, one
/// at a time or concurrently — as it did when it ran before the second
/// call's `before_tool`.
#[tokio::test]
async fn a_jump_from_a_later_calls_before_tool_still_runs_the_calls_before_it() {
    struct JumpEndAtSecondTool;
    #[async_trait]
    impl Middleware<()> for JumpEndAtSecondTool {
        fn hooks(&self) -> HookSet {
            HookSet::BEFORE_TOOL
        }
        async fn before_tool(&self, ctx: &mut RunContext, _: &(), call: &mut ToolCall) -> Result<()> {
            if call.id == "c2" {
                ctx.flow_mut().jump_to(JumpTarget::End);
            }
            Ok(())
        }
    }
    for concurrent in [false, true] {
        let tool = RecordingTool::new("t");
        let mut agent: Agent<()> = Agent::new(ScriptedModel::new([two_calls("t"), ScriptedTurn::text("done")]))
            .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
            .with_stack(MiddlewareStack::new().with(JumpEndAtSecondTool).unwrap());
        if concurrent {
            agent = agent.with_concurrent_tools();
        }
        let run = agent
            .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
            .await
            .unwrap();
        assert_valid_transcript(&run.messages);
        assert_eq!(run.stop, StopReason::JumpedToEnd);
        let ran: Vec<String> = tool.calls().iter().map(|c| c["n"].to_string()).collect();
        assert_eq!(ran, ["1"], "concurrent: {concurrent}: {:?}", shape(&run.messages));
        let c2 = run
            .messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some("c2"))
            .unwrap();
        assert!(c2.text().starts_with("not run:"), "{}", c2.text());
    }
}

/// The siblings: each way a tool hook can leave the batch (a jump to the
/// end, a jump to the model, a stop with a final text; from `before_tool`
/// or from the previous call's `after_tool`), with the calls run one after
/// another or concurrently. The call that asked and every later one are
/// answered "not run" and never run; the transcript stays valid.
#[tokio::test]
async fn every_way_a_tool_hook_leaves_the_batch_runs_nothing_after_it() {
    #[derive(Clone, Copy, Debug)]
    enum Leave {
        End,
        Model,
        Stop,
    }
    struct LeaveAt(Leave, bool);
    #[async_trait]
    impl Middleware<()> for LeaveAt {
        fn hooks(&self) -> HookSet {
            HookSet::BEFORE_TOOL | HookSet::AFTER_TOOL
        }
        fn info(&self) -> MiddlewareInfo {
            MiddlewareInfo::new("leave_at")
                .with_hooks(self.hooks())
                .with_jumps(JumpSet::MODEL | JumpSet::END)
        }
        async fn before_tool(&self, ctx: &mut RunContext, _: &(), call: &mut ToolCall) -> Result<()> {
            if !self.1 && call.id == "c1" {
                leave(ctx, self.0);
            }
            Ok(())
        }
        async fn after_tool(&self, ctx: &mut RunContext, _: &(), result: &mut ToolResult) -> Result<()> {
            if self.1 && result.call_id == "c1" {
                leave(ctx, self.0);
            }
            Ok(())
        }
    }
    fn leave(ctx: &mut RunContext, how: Leave) {
        match how {
            Leave::End => ctx.flow_mut().jump_to(JumpTarget::End),
            Leave::Model => ctx.flow_mut().jump_to(JumpTarget::Model),
            Leave::Stop => ctx
                .flow_mut()
                .request_control(MiddlewareControl::StopWithFinal("stopped".into())),
        }
    }
    for how in [Leave::End, Leave::Model, Leave::Stop] {
        for after_first in [false, true] {
            for concurrent in [false, true] {
                if concurrent && after_first {
                    continue; // concurrent calls have no "after the previous one"
                }
                let tool = RecordingTool::new("t");
                let mut agent: Agent<()> = Agent::new(ScriptedModel::new([two_calls("t"), ScriptedTurn::text("done")]))
                    .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
                    .with_stack(MiddlewareStack::new().with(LeaveAt(how, after_first)).unwrap());
                if concurrent {
                    agent = agent.with_concurrent_tools();
                }
                let mut ctx = RunContext::new(RunConfig::new("r"), ());
                let run = agent.run(&mut ctx, &(), "go").await.unwrap();
                let case = format!("{how:?}, after the first call: {after_first}, concurrent: {concurrent}");
                assert_valid_transcript(&run.messages);
                let ran: Vec<String> = tool.calls().iter().map(|c| c["n"].to_string()).collect();
                assert_eq!(
                    ran,
                    if after_first { vec!["1"] } else { vec![] },
                    "{case}: {:?}",
                    shape(&run.messages)
                );
                let c2 = run
                    .messages
                    .iter()
                    .find(|m| m.tool_call_id.as_deref() == Some("c2"))
                    .unwrap();
                assert!(c2.text().starts_with("not run:"), "{case}: {}", c2.text());
                match how {
                    Leave::End => assert_eq!(run.stop, StopReason::JumpedToEnd, "{case}"),
                    Leave::Model => assert_eq!(run.final_text(), "done", "{case}"),
                    Leave::Stop => assert_eq!(run.final_text(), "stopped", "{case}"),
                }
            }
        }
    }
}

// ----- 5. unknown keys are refused, with the valid keys listed, for every built-in -----

/// docs: "unknown keys rejected"; "Every mistake in a file is reported at
/// once, with its line and column"; an unknown key lists the valid ones.
#[test]
fn acc_every_built_in_refuses_an_unknown_key_and_lists_its_valid_keys() {
    let registry = MiddlewareRegistry::<()>::with_builtins();
    let mut bad = Vec::new();
    for t in registry.types().collect::<Vec<_>>() {
        let text = format!("[[middleware]]\ntype = \"{t}\"\nbogus_key_zz = 1\n");
        let err = match registry.stack_from_toml(&text) {
            Ok(_) => {
                bad.push(format!("{t}: accepted an unknown key"));
                continue;
            }
            Err(e) => e.to_string(),
        };
        if !err.contains("bogus_key_zz") || !err.contains("valid keys") {
            bad.push(format!("{t}: {err}"));
            continue;
        }
        for f in registry.fields(t).unwrap_or(&[]).iter() {
            if !err.contains(&format!("`{}`", f.name)) {
                bad.push(format!("{t}: valid key `{}` not listed in: {err}", f.name));
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

// ----- 6. timeout + tool_retry -----

fn slow_tool() -> impl Tool {
    tool_fn("slow", "Sleeps.", |_cx, _a| async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok("late".into())
    })
}

/// docs/middleware.md, timeout: "A timed-out tool call ends the run under
/// the default tool error policy unless a `tool_retry` outside turns it into
/// an error result." and tool_retry: "Place it outside `timeout` (a
/// timed-out attempt is a retryable `Timeout`)".
#[tokio::test(start_paused = true)]
async fn acc_a_timed_out_tool_call_becomes_an_error_result_with_tool_retry_outside() {
    let retry = from_toml_str::<ToolRetryConfig>("max_attempts = 2\ninitial_delay_ms = 10\njitter = 0.0")
        .unwrap()
        .build();
    let timeout = from_toml_str::<TimeoutConfig>("tool_ms = 100").unwrap().build();
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("slow", json!({})),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(slow_tool()).unwrap())
    .with_stack(MiddlewareStack::new().with(retry).unwrap().with(timeout).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_valid_transcript(&run.messages);
    let result = run.messages.iter().find(|m| m.role == Role::Tool).unwrap().text();
    assert!(result.contains("failed after 2 attempt(s)"), "{result}");
    assert_eq!(run.final_text(), "done");
}

// ----- 8. the graph form behaves like the loop -----

struct StopAfterReply;

#[async_trait]
impl Middleware<()> for StopAfterReply {
    fn hooks(&self) -> HookSet {
        HookSet::AFTER_MODEL
    }
    async fn after_model(&self, ctx: &mut RunContext, _: &(), _: &mut ModelResponse) -> Result<()> {
        ctx.flow_mut()
            .request_control(MiddlewareControl::StopWithFinal("stopped".into()));
        Ok(())
    }
}

/// seed 000: "Middleware must not need to know whether the caller is using
/// the simple loop or the state-graph runtime"; AgentGraph: "The middleware
/// sees exactly what it sees under Agent::run".
#[tokio::test]
async fn acc_the_graph_and_the_loop_give_the_same_run_for_a_stop_with_final() {
    let mk = || {
        Agent::<()>::new(ScriptedModel::new([two_calls("t"), ScriptedTurn::text("done")]))
            .with_tools(ToolRegistry::new().with(RecordingTool::new("t")).unwrap())
            .with_stack(MiddlewareStack::new().with(StopAfterReply).unwrap())
    };
    let a = mk();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let looped = a.run(&mut ctx, &(), "go").await.unwrap();
    let b = mk();
    let store = MemoryCheckpointer::new();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let graphed = AgentGraph::new(&b)
        .run_durable(&mut ctx, &(), "go", "t", &store)
        .await
        .unwrap();
    assert_eq!(shape(&looped.messages), shape(&graphed.messages));
    assert_eq!(looped.stop, graphed.stop);
    assert_eq!(looped.final_text(), graphed.final_text());
    assert_valid_transcript(&graphed.messages);
}

// ----- 9. documented options change behaviour -----

/// Runs `n` tool turns (tool `tools[i % len]`, each result 400 chars of
/// `R{i}`), then a final text turn; returns the model's requests.
async fn requests_after_tool_turns(stack: MiddlewareStack<()>, tools: &[&str], n: usize) -> Vec<ModelRequest> {
    let mut turns = Vec::new();
    for i in 0..n {
        let name = tools[i % tools.len()];
        turns.push(ScriptedTurn::tool_calls(vec![ToolCall::new(
            format!("c{i}"),
            name,
            json!({"i": i, "pad": "x".repeat(50)}),
        )]));
    }
    turns.push(ScriptedTurn::text("done"));
    let model = Arc::new(ScriptedModel::new(turns));
    let mut reg = ToolRegistry::new();
    for t in tools {
        let name = t.to_string();
        reg = reg
            .with(tool_fn(*t, "A tool.", move |_cx, a| {
                let name = name.clone();
                async move { Ok(format!("{name}-R{}:{}", a["i"], "y".repeat(400)).into()) }
            }))
            .unwrap();
    }
    let agent: Agent<()> = Agent::from_shared(model.clone()).with_tools(reg).with_stack(stack);
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_valid_transcript(&run.messages);
    model.requests()
}

fn tool_texts(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text().chars().take(12).collect())
        .collect()
}

/// docs/middleware.md, context_editing: `keep` ("The newest tool results
/// always kept"), `exclude_tools`, `placeholder`, `clear_tool_inputs`.
#[tokio::test]
async fn acc_context_editing_options_each_change_what_is_cleared() {
    let mw = from_toml_str::<ContextEditingConfig>(
        "trigger_tokens = 1\nkeep = 1\nplaceholder = \"[gone]\"\nexclude_tools = [\"keepme\"]\nclear_tool_inputs = true",
    )
    .unwrap()
    .build();
    let reqs = requests_after_tool_turns(MiddlewareStack::new().with(mw).unwrap(), &["a", "keepme"], 4).await;
    let last = reqs.last().unwrap();
    assert_valid_transcript(&last.messages);
    // c0 (a), c1 (keepme), c2 (a), c3 (keepme, newest): c0 and c2 cleared, c1 excluded, c3 kept
    assert_eq!(
        tool_texts(last),
        ["[gone]", "keepme-R1:yy", "[gone]", "keepme-R3:yy"],
        "{:?}",
        tool_texts(last)
    );
    let args: Vec<serde_json::Value> = last
        .messages
        .iter()
        .flat_map(|m| m.tool_calls.iter().map(|c| c.arguments.clone()))
        .collect();
    assert_eq!(args[0], json!({}), "clear_tool_inputs clears c0's arguments");
    assert_ne!(args[1], json!({}), "c1 was not cleared");
}

// ----- 10. the graph boundary: an interrupt after calls ran, a pause after an injected message -----

/// Asks for a pause, once, with `message`, from the one hook it declares:
/// `after_tool` (after a call ran) or `after_model` (after a reply).
struct PauseOnce {
    hook: HookSet,
    message: &'static str,
    asked: std::sync::atomic::AtomicBool,
}

impl PauseOnce {
    fn new(hook: HookSet, message: &'static str) -> Self {
        Self {
            hook,
            message,
            asked: Default::default(),
        }
    }

    fn pause(&self, ctx: &mut RunContext) -> Result<()> {
        if !self.asked.swap(true, std::sync::atomic::Ordering::SeqCst) {
            ctx.flow_mut().request_control(MiddlewareControl::Interrupt {
                node: None,
                message: self.message.into(),
            });
        }
        Ok(())
    }
}

#[async_trait]
impl Middleware<()> for PauseOnce {
    fn hooks(&self) -> HookSet {
        self.hook
    }
    async fn after_tool(&self, ctx: &mut RunContext, _: &(), _: &mut ToolResult) -> Result<()> {
        self.pause(ctx)
    }
    async fn after_model(&self, ctx: &mut RunContext, _: &(), _: &mut ModelResponse) -> Result<()> {
        self.pause(ctx)
    }
}

/// MiddlewareControl::Interrupt: "Pause at the next safe point"; AgentGraph:
/// "a durable run can be resumed from its checkpoint"; graph/checkpoint:
/// "a resume from the wrong checkpoint runs finished side effects again, so
/// doubt is an error". A pause asked after a call ran (safe point after the
/// batch) must not run that call a second time on resume.
#[tokio::test]
async fn acc_a_pause_after_a_call_ran_does_not_run_it_again_on_resume() {
    let tool = RecordingTool::new("t").returning("ok");
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("t", json!({"n": 1})),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
    .with_stack(
        MiddlewareStack::new()
            .with(PauseOnce::new(
                HookSet::AFTER_TOOL,
                "a person should look at this result",
            ))
            .unwrap(),
    );
    let store = MemoryCheckpointer::new();
    let mut ctx = RunContext::new(RunConfig::new("r1"), ());
    let err = AgentGraph::new(&agent)
        .run_durable(&mut ctx, &(), "go", "t1", &store)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    assert_eq!(tool.calls().len(), 1);
    let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    let run = AgentGraph::new(&agent)
        .resume(&mut ctx, &(), "t1", &store)
        .await
        .unwrap();
    assert_valid_transcript(&run.messages);
    assert_eq!(run.final_text(), "done");
    assert_eq!(
        tool.calls().len(),
        1,
        "the call ran before the pause and ran again on resume: {:?}",
        shape(&run.messages)
    );
}

/// The siblings of a pause that follows progress: a pause asked in
/// `after_model`, after a reply with calls (the resume runs the calls,
/// without asking the model for the same reply again) and after a final
/// reply (the resume ends with it). The model is asked once per reply.
#[tokio::test]
async fn a_pause_after_a_reply_keeps_the_reply_across_the_resume() {
    for with_calls in [true, false] {
        let tool = RecordingTool::new("t").returning("ok");
        let turns = if with_calls {
            vec![
                ScriptedTurn::tool_call("t", json!({"n": 1})),
                ScriptedTurn::text("done"),
            ]
        } else {
            vec![ScriptedTurn::text("the answer")]
        };
        let model = Arc::new(ScriptedModel::new(turns));
        let agent: Agent<()> = Agent::from_shared(model.clone())
            .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
            .with_stack(
                MiddlewareStack::new()
                    .with(PauseOnce::new(HookSet::AFTER_MODEL, "look at the reply"))
                    .unwrap(),
            );
        let store = MemoryCheckpointer::new();
        let mut ctx = RunContext::new(RunConfig::new("r1"), ());
        let err = AgentGraph::new(&agent)
            .run_durable(&mut ctx, &(), "go", "t1", &store)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
        assert_eq!(model.calls(), 1);
        let mut ctx = RunContext::new(RunConfig::new("r2"), ());
        let run = AgentGraph::new(&agent)
            .resume(&mut ctx, &(), "t1", &store)
            .await
            .unwrap();
        assert_valid_transcript(&run.messages);
        if with_calls {
            assert_eq!(tool.calls().len(), 1, "{:?}", shape(&run.messages));
            assert_eq!(model.calls(), 2, "the reply with the call was asked for once");
            assert_eq!(run.final_text(), "done");
        } else {
            assert_eq!(model.calls(), 1, "the final reply was asked for once");
            assert_eq!(run.final_text(), "the answer");
        }
    }
}

/// SteeringAction::InjectMessage: "Add a message to the conversation before
/// the next model call"; Pause: "an interrupt at the next safe point". An
/// accepted injection followed by a pause, in a durable graph run: after the
/// resume the injected message must still be in the conversation.
#[tokio::test]
async fn acc_an_accepted_injection_survives_a_steering_pause_in_a_durable_run() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("done")]));
    let agent: Agent<()> = Agent::from_shared(model.clone());
    let handle = SteeringHandle::new();
    handle.send(SteeringCommand::new(
        "i",
        SteeringAction::InjectMessage {
            message: Message::user("also: use metric units"),
        },
    ));
    handle.send(SteeringCommand::new(
        "p",
        SteeringAction::Pause { reason: "wait".into() },
    ));
    let store = MemoryCheckpointer::new();
    let mut ctx = RunContext::new(RunConfig::new("r1"), ()).with_steering(handle.clone());
    let err = AgentGraph::new(&agent)
        .run_durable(&mut ctx, &(), "go", "t1", &store)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    let mut ctx = RunContext::new(RunConfig::new("r2"), ()).with_steering(handle);
    let run = AgentGraph::new(&agent)
        .resume(&mut ctx, &(), "t1", &store)
        .await
        .unwrap();
    assert_eq!(run.final_text(), "done");
    let sent: Vec<String> = model.requests()[0]
        .messages
        .iter()
        .map(|m| m.text().to_string())
        .collect();
    assert!(
        sent.iter().any(|t| t.contains("metric")),
        "the accepted injection was lost across the pause; the model saw {sent:?}"
    );
}

/// An agent whose model calls `delete` on `a.txt` then says "done", its stack
/// `human_in_the_loop` (pausing on `delete`) then `limit`: run `r1` (on
/// `thread` if given) pauses, the call is approved, and run `r2` (same
/// thread) resumes it in memory. The `delete` tool, the model, the resumed run.
async fn approve_delete_in_a_new_run(
    limit: impl Middleware<()> + 'static,
    thread: Option<&str>,
) -> (RecordingTool, Arc<ScriptedModel>, AgentRun) {
    let config = |id: &str| match thread {
        Some(thread) => RunConfig::new(id).with_thread(thread),
        None => RunConfig::new(id),
    };
    let delete = RecordingTool::new("delete").returning("deleted");
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("delete", json!({"path": "a.txt"})),
        ScriptedTurn::text("done"),
    ]));
    let hitl = HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new());
    let agent: Agent<()> = Agent::from_shared(model.clone())
        .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
        .with_stack(MiddlewareStack::new().with(hitl).unwrap().with(limit).unwrap());
    let mut ctx = RunContext::new(config("r1"), ());
    let err = agent.run(&mut ctx, &(), "clean up").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
    let resume = HumanInTheLoopMiddleware::take_interrupt(&ctx)
        .unwrap()
        .decide([("call-delete", Decision::Approve)])
        .unwrap();
    let ctx2 = RunContext::new(config("r2"), ());
    let input = resume.input();
    resume.attach(&ctx2);
    let mut ctx2 = ctx2;
    let run = agent.run(&mut ctx2, &(), input).await.unwrap();
    (delete, model, run)
}

/// docs/middleware.md, model_call_limit: "Most model calls across the runs
/// of one thread"; human_in_the_loop: on resume it "replaces the first model
/// call with the paused reply" (no model is asked). Two real model calls in
/// the thread fit a thread limit of 2.
#[tokio::test]
async fn acc_the_replayed_reply_of_a_resume_is_not_a_model_call_for_the_thread_limit() {
    let limit = ModelCallLimitMiddleware::per_run(10).thread_limit(2);
    let (delete, model, run) = approve_delete_in_a_new_run(limit, Some("t1")).await;
    assert_eq!(delete.calls().len(), 1);
    assert_eq!(
        (model.calls(), run.final_text().to_string()),
        (2, "done".to_string()),
        "only one real model call was made before the thread limit of 2 stopped the run"
    );
}

/// The siblings: `limits.max_turns` does not count the replayed turn either,
/// and `tool_call_limit`'s run limit gives back a call a later review
/// rejected (it never ran), so the next batch may use it.
#[tokio::test]
async fn the_limits_count_what_ran_not_what_was_replayed_or_rejected() {
    // max_turns = 1 on the resumed run: the replay is no model turn, "done" is the one
    let (delete, _, run) = approve_delete_in_a_new_run(LimitsMiddleware::new().max_turns(1), None).await;
    assert_eq!((delete.calls().len(), run.final_text()), (1, "done".to_string()));

    // run_limit = 1: a later review rejects the first batch's call; the second batch's call runs
    struct RejectFirst;
    #[async_trait]
    impl Middleware<()> for RejectFirst {
        fn hooks(&self) -> HookSet {
            HookSet::ON_TOOL_BATCH
        }
        async fn on_tool_batch(&self, _: &mut RunContext, _: &(), batch: &mut PreparedBatch) -> Result<()> {
            if batch.calls()[0].call.id == "c1" {
                batch.reject(0, "not now");
            }
            Ok(())
        }
    }
    let tool = RecordingTool::new("t").returning("ok");
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "t", json!({"n": 1}))]),
        ScriptedTurn::tool_calls(vec![ToolCall::new("c2", "t", json!({"n": 2}))]),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
    .with_stack(
        MiddlewareStack::new()
            .with(ToolCallLimitMiddleware::per_run(None, 1))
            .unwrap()
            .with(RejectFirst)
            .unwrap(),
    );
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    assert_valid_transcript(&run.messages);
    let ran: Vec<String> = tool.calls().iter().map(|c| c["n"].to_string()).collect();
    assert_eq!(ran, ["2"], "{:?}", shape(&run.messages));
}
