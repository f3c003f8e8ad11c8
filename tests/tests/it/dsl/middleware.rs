//! `#[middleware]` impl blocks and the metadata the DSL generates: names,
//! exact hook sets, ordering, declared jumps (an undeclared one is refused),
//! documentation, and the sync delta fast path.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tinyagents::docs::MiddlewareMetadata;
use tinyagents::prelude::*;

use crate::support::tool_texts;

/// Counts model and tool calls, caps tool calls, and retries model calls:
/// several lifecycle hooks and both wraps on one type with fields.
struct Budget {
    model_calls: AtomicU32,
    tool_calls: AtomicU32,
    max_tools: u32,
    seen: Mutex<Vec<String>>,
}

impl Budget {
    fn new(max_tools: u32) -> Self {
        Self {
            model_calls: AtomicU32::new(0),
            tool_calls: AtomicU32::new(0),
            max_tools,
            seen: Mutex::new(Vec::new()),
        }
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

#[middleware(
    name = "budget",
    doc(
        summary = "Counts and caps calls.",
        mutation = "Replaces over-budget tool calls with an error result.",
        events = "None of its own."
    )
)]
impl Budget {
    #[before_agent]
    fn start(&self, ctx: &mut RunContext) -> Result<()> {
        self.seen.lock().unwrap().push(format!("start {}", ctx.run_id()));
        Ok(())
    }

    #[before_model]
    async fn count_model(&self, request: &mut ModelRequest) -> Result<()> {
        let n = self.model_calls.fetch_add(1, Ordering::Relaxed) + 1;
        request.set_volatile("budget", format!("model call {n}"));
        Ok(())
    }

    #[wrap_model]
    async fn retry_once(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<ModelResponse> {
        match next.run(ctx, state, request.clone()).await {
            Ok(outcome) => Ok(outcome.into_response()),
            Err(e) if e.is_retryable() => {
                self.seen.lock().unwrap().push("retry".into());
                Ok(next.run(ctx, state, request).await?.into_response())
            }
            Err(e) => Err(e),
        }
    }

    #[wrap_tool]
    async fn cap_tools(
        &self,
        call: ToolCall,
        ctx: &mut RunContext,
        next: ToolHandler<'_, ()>,
        state: &(),
    ) -> Result<ToolResult> {
        if self.tool_calls.fetch_add(1, Ordering::Relaxed) >= self.max_tools {
            return Ok(ToolResult::error(&call, "tool budget spent"));
        }
        Ok(next.run(ctx, state, call).await?.into_result())
    }

    #[after_agent]
    fn finish(&self, run: &mut AgentRun) -> Result<()> {
        self.seen.lock().unwrap().push(format!("finish {}", run.final_text()));
        Ok(())
    }

    /// Not a hook: a plain helper stays an ordinary method.
    fn total(&self) -> u32 {
        self.model_calls.load(Ordering::Relaxed) + self.tool_calls.load(Ordering::Relaxed)
    }
}

fn tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(tool_fn("ping", "Answers pong.", |_cx, _args| async move {
            Ok("pong".into())
        }))
        .unwrap()
}

#[tokio::test]
async fn one_add_registers_an_impl_block_everywhere_it_belongs() {
    let budget = Arc::new(Budget::new(1));
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.add_shared(budget.clone()).unwrap();
    for hook in [
        HookKind::BeforeAgent,
        HookKind::BeforeModel,
        HookKind::AfterAgent,
        HookKind::WrapModel,
        HookKind::WrapTool,
    ] {
        assert_eq!(stack.implementors(hook), ["budget"], "{hook}");
    }
    for hook in [HookKind::AfterModel, HookKind::BeforeTool, HookKind::OnError] {
        assert!(stack.implementors(hook).is_empty(), "{hook}");
    }

    let model = ScriptedModel::new([
        ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true)),
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("a", "ping", json!({})),
            ToolCall::new("b", "ping", json!({})),
        ]),
        ScriptedTurn::text("done"),
    ]);
    let agent: Agent<()> = Agent::new(model).with_tools(tools()).with_stack(stack);
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r1"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "done");
    let results = tool_texts(&run.messages);
    assert_eq!(results, ["pong", "tool budget spent"]);
    assert_eq!(budget.seen(), ["start r1", "retry", "finish done"]);
    assert_eq!(budget.total(), 2 + 2);
}

#[test]
fn an_impl_block_reports_exact_metadata_and_a_derived_doc() {
    let budget = Budget::new(0);
    let m: &dyn Middleware<()> = &budget;
    assert_eq!(m.name(), "budget");
    assert_eq!(
        m.hooks(),
        HookSet::BEFORE_AGENT
            | HookSet::BEFORE_MODEL
            | HookSet::AFTER_AGENT
            | HookSet::WRAP_MODEL
            | HookSet::WRAP_TOOL
            // `start` and `finish` are plain fns: the stack calls them synchronously
            | HookSet::sync_of(HookKind::BeforeAgent)
            | HookSet::sync_of(HookKind::AfterAgent)
    );
    let info = m.info();
    assert_eq!(info.name, "budget");
    assert_eq!(info.jumps, JumpSet::empty());
    let doc = info.doc.expect("doc(...) was given");
    assert_eq!(doc.name, "budget");
    assert_eq!(doc.summary, "Counts and caps calls.");
    assert_eq!(doc.events, "None of its own.");
    assert_eq!(doc.failure, "");
    // derived from the annotated methods, in lifecycle order
    assert_eq!(
        doc.hooks,
        [
            HookKind::BeforeAgent,
            HookKind::AfterAgent,
            HookKind::BeforeModel,
            HookKind::WrapModel,
            HookKind::WrapTool
        ]
    );
    assert_eq!(Budget::DOC, Some(doc));
}

// ----- ordering -----

#[before_model(name = "outer", before = ["inner"])]
fn outer(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("order", "outer");
    Ok(())
}

#[before_model(name = "inner", after_if_present = [Outer])]
fn inner(request: &mut ModelRequest) -> Result<()> {
    let seen = request.segment("order").map(|s| s.text.clone()).unwrap_or_default();
    request.set_volatile("order", format!("{seen} inner"));
    Ok(())
}

#[test]
fn ordering_constraints_by_name_and_by_type() {
    assert_eq!(Outer::BEFORE, ["inner"]);
    // the type's declared name, not its type name; optional, as `inner` is registered first
    assert_eq!(Inner::AFTER_IF_PRESENT, ["outer"]);
    let stack: MiddlewareStack<()> = MiddlewareStack::empty().with(Inner).unwrap().with(Outer).unwrap();
    assert_eq!(stack.names(), ["outer", "inner"]);
    let info = stack.infos().next().unwrap();
    assert_eq!(info.before, ["inner"]);
}

#[tokio::test]
async fn the_resolved_order_is_the_dispatch_order() {
    let stack: MiddlewareStack<()> = MiddlewareStack::empty().with(Inner).unwrap().with(Outer).unwrap();
    let mut request = ModelRequest::default();
    stack
        .run_before_model(&mut RunContext::new(RunConfig::new("r"), ()), &(), &mut request)
        .await
        .unwrap();
    assert_eq!(request.segment("order").unwrap().text, "outer inner");
}

#[test]
fn a_second_instance_needs_its_own_name() {
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.add(Inner).unwrap();
    let err = stack.add(Inner).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Config);
    stack.add_named("inner-2", Inner).unwrap();
    assert_eq!(stack.names(), ["inner", "inner-2"]);
}

// ----- jumps -----

#[after_model(can_jump_to = [end])]
fn stop_on_stop(ctx: &mut RunContext, response: &mut ModelResponse) -> Result<()> {
    if response.message.text().contains("STOP") {
        ctx.flow_mut().jump_to(JumpTarget::End);
    }
    Ok(())
}

#[after_model]
fn jump_undeclared(ctx: &mut RunContext) -> Result<()> {
    ctx.flow_mut().jump_to(JumpTarget::Model);
    Ok(())
}

#[tokio::test]
async fn a_declared_jump_is_honoured() {
    assert_eq!(StopOnStop::JUMPS, JumpSet::END);
    assert_eq!(Middleware::<()>::info(&StopOnStop).jumps, JumpSet::END);
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("STOP here")]))
        .with_stack(MiddlewareStack::empty().with(StopOnStop).unwrap());
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(run.stop, StopReason::JumpedToEnd);
}

#[tokio::test]
async fn an_undeclared_jump_is_refused_with_a_clear_error() {
    assert_eq!(JumpUndeclared::JUMPS, JumpSet::empty());
    let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("hi")]))
        .with_stack(MiddlewareStack::empty().with(JumpUndeclared).unwrap());
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "go")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    let text = err.to_string();
    assert!(text.contains("`JumpUndeclared` asked to jump to `model`"), "{text}");
    assert!(text.contains("can_jump_to = [model]"), "{text}");
}

// ----- the sync delta fast path -----

#[on_model_delta]
fn sync_delta(delta: &mut ModelDelta) -> Result<()> {
    if let Some(t) = delta.text_mut() {
        t.push('!');
    }
    Ok(())
}

#[on_model_delta]
async fn async_delta(delta: &mut ModelDelta) -> Result<()> {
    if let Some(t) = delta.text_mut() {
        t.push('?');
    }
    Ok(())
}

#[on_tool_delta]
fn sync_tool_delta(delta: &mut ToolDelta) -> Result<()> {
    delta.content.push('!');
    Ok(())
}

#[test]
fn a_plain_delta_fn_declares_the_sync_fast_path() {
    assert_eq!(SyncDelta::HOOKS, HookSet::ON_MODEL_DELTA | HookSet::SYNC_MODEL_DELTA);
    assert_eq!(AsyncDelta::HOOKS, HookSet::ON_MODEL_DELTA);
    assert_eq!(SyncToolDelta::HOOKS, HookSet::ON_TOOL_DELTA | HookSet::SYNC_TOOL_DELTA);

    // the sync method is the user's fn, callable without a future
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let mut delta = ModelDelta::text("a");
    Middleware::<()>::on_model_delta_sync(&SyncDelta, &mut ctx, &(), &mut delta).unwrap();
    assert_eq!(delta.as_text(), Some("a!"));
    // an async delta hook leaves the sync method to its no-op default
    Middleware::<()>::on_model_delta_sync(&AsyncDelta, &mut ctx, &(), &mut delta).unwrap();
    assert_eq!(delta.as_text(), Some("a!"));
}

#[tokio::test]
async fn sync_and_async_delta_hooks_run_in_registration_order() {
    let stack: MiddlewareStack<()> = MiddlewareStack::empty()
        .with(SyncDelta)
        .unwrap()
        .with(AsyncDelta)
        .unwrap()
        .with(SyncToolDelta)
        .unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let mut delta = ModelDelta::text("x");
    stack.run_on_model_delta(&mut ctx, &(), &mut delta).await.unwrap();
    assert_eq!(delta.as_text(), Some("x!?"));
    let mut tool_delta = ToolDelta::new("c", "y");
    stack.run_on_tool_delta(&mut ctx, &(), &mut tool_delta).await.unwrap();
    assert_eq!(tool_delta.content, "y!");
    // the async form of a sync hook delegates to it (for callers outside the stack)
    let mut delta = ModelDelta::text("z");
    Middleware::<()>::on_model_delta(&SyncDelta, &mut ctx, &(), &mut delta)
        .await
        .unwrap();
    assert_eq!(delta.as_text(), Some("z!"));
}

// ----- documentation -----

/// Redacts secrets from tool results.
///
/// A longer explanation that is not part of the summary.
#[after_tool(
    builtin,
    name = "redact",
    doc(
        mutation = "Rewrites `ToolResult::content`.",
        events = "None.",
        failure = "Fails closed: an error ends the run.",
        streaming = "Sees only final results.",
        cache = "No effect on the prompt prefix.",
        retries = "Runs again on every retried call."
    )
)]
fn redact(result: &mut ToolResult) -> Result<()> {
    result.content = result.content.replace("hunter2", "***");
    Ok(())
}

#[test]
fn a_builtin_doc_takes_its_summary_from_the_doc_comment() {
    let doc = Redact::DOC.unwrap();
    assert_eq!(doc.name, "redact");
    assert_eq!(doc.summary, "Redacts secrets from tool results.");
    assert_eq!(doc.hooks, [HookKind::AfterTool]);
    assert_eq!(doc.failure, "Fails closed: an error ends the run.");
    assert_eq!(doc.config_type, None);
    assert!(doc.config.is_empty());
    // without doc(...) or builtin there is no doc
    assert_eq!(Outer::DOC, None);
    assert_eq!(Middleware::<()>::info(&Outer).doc, None);
}

/// A type name of your choosing, for when the default would clash.
#[before_tool(type_name = ToolAudit)]
fn audit(call: &ToolCall) -> Result<()> {
    let _ = call;
    Ok(())
}

#[test]
fn type_name_names_the_generated_type_and_the_middleware() {
    assert_eq!(ToolAudit::NAME, "ToolAudit");
    // a plain fn: the hook and its synchronous form (no future per call)
    assert_eq!(
        ToolAudit::HOOKS,
        HookSet::BEFORE_TOOL | HookSet::sync_of(HookKind::BeforeTool)
    );
}
