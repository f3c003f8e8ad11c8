//! Typed per-run state (`run_state = T`): one value per run and per
//! registration, `&mut T` in the hooks the loop runs one at a time,
//! `&RunState<T>` in the others.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tinyagents::harness::middleware::pre_compact;
use tinyagents::prelude::*;

/// What one registration saw in one run.
#[derive(Default)]
struct Seen {
    model_calls: u32,
    batches: u32,
    results: Vec<String>,
}

/// Records, at the end of each run, what its run state saw.
#[derive(Default, Clone)]
struct Watch {
    reports: Arc<Mutex<Vec<String>>>,
}

#[middleware(name = "watch", run_state = Seen)]
impl Watch {
    #[before_model]
    fn model(&self, seen: &mut Seen) -> Result<()> {
        seen.model_calls += 1;
        Ok(())
    }

    #[on_tool_batch]
    async fn batch(&self, seen: &mut Seen, batch: &mut PreparedBatch) -> Result<()> {
        seen.batches += 1;
        let _ = batch;
        tokio::task::yield_now().await;
        Ok(())
    }

    #[after_tool]
    fn result(&self, seen: &RunState<Seen>, result: &mut ToolResult) -> Result<()> {
        seen.lock()?.results.push(result.call_id.clone());
        Ok(())
    }

    #[after_agent]
    fn report(&self, ctx: &mut RunContext, seen: &mut Seen, run: &mut AgentRun) -> Result<()> {
        let _ = run;
        let mut results = seen.results.clone();
        results.sort();
        self.reports.lock().unwrap().push(format!(
            "{}: {} model calls, {} batches, results {}",
            ctx.run_id(),
            seen.model_calls,
            seen.batches,
            results.join(",")
        ));
        Ok(())
    }
}

fn agent(stack: MiddlewareStack<()>) -> Agent<()> {
    let batch = || {
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("a", "ping", json!({})),
            ToolCall::new("b", "ping", json!({})),
            ToolCall::new("c", "ping", json!({})),
        ])
    };
    // two runs of one batch and a final answer each
    let model = ScriptedModel::new([batch(), ScriptedTurn::text("done"), batch(), ScriptedTurn::text("done")]);
    let tools = ToolRegistry::new()
        .with(tool_fn("ping", "Answers pong.", |_cx, _args| async move {
            tokio::task::yield_now().await;
            Ok("pong".into())
        }))
        .unwrap();
    Agent::new(model).with_tools(tools).with_stack(stack)
}

#[tokio::test]
async fn each_run_and_each_registration_has_its_own_run_state() {
    let first = Watch::default();
    let second = Watch::default();
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.add(first.clone()).unwrap();
    // A second registration of the same type (a state keyed by type would be shared).
    stack.add_named("watch-2", second.clone()).unwrap();
    let agent = agent(stack);
    for run_id in ["r1", "r2"] {
        let run = agent
            .run(&mut RunContext::new(RunConfig::new(run_id), ()), &(), "go")
            .await
            .unwrap();
        assert_eq!(run.final_text(), "done");
    }
    let expected = [
        "r1: 2 model calls, 1 batches, results a,b,c",
        "r2: 2 model calls, 1 batches, results a,b,c",
    ];
    // Had the two registrations shared a cell, each would count 4 model calls.
    assert_eq!(*first.reports.lock().unwrap(), expected);
    assert_eq!(*second.reports.lock().unwrap(), expected);
}

/// A free fn hook with run state: the count of model calls it let through.
#[before_model(run_state = u32)]
fn at_most_two(calls: &mut u32, request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    *calls += 1;
    if *calls > 2 {
        return Err(TinyAgentsError::limit("at_most_two", "a third model call"));
    }
    Ok(())
}

#[tokio::test]
async fn a_free_fn_hook_keeps_its_run_state_across_the_dispatches_of_a_run() {
    let stack: MiddlewareStack<()> = MiddlewareStack::empty().with(AtMostTwo).unwrap();
    let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    let mut request = ModelRequest::default();
    stack.run_before_model(&mut ctx, &(), &mut request).await.unwrap();
    stack.run_before_model(&mut ctx, &(), &mut request).await.unwrap();
    let third = stack.run_before_model(&mut ctx, &(), &mut request).await.unwrap_err();
    assert_eq!(third.kind(), ErrorKind::LimitExceeded);
    // Another run starts from `u32::default()`.
    let mut fresh: RunContext = RunContext::new(RunConfig::new("r2"), ());
    stack.run_before_model(&mut fresh, &(), &mut request).await.unwrap();
}

#[tokio::test]
async fn a_hook_called_outside_a_stack_has_no_run_state_and_says_so() {
    let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    let err = Middleware::<()>::before_model(&AtMostTwo, &mut ctx, &(), &mut ModelRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Middleware);
    let text = err.to_string();
    assert!(
        text.contains("keeps run state") && text.contains("MiddlewareStack"),
        "{text}"
    );
}

/// Holds its run state in `before_model` while it dispatches `pre_compact`,
/// where its own `pre_compact` hook asks for the state too.
#[derive(Default)]
struct Nested {
    inner: AtomicU32,
}

#[middleware(name = "nested", run_state = u32)]
impl Nested {
    #[before_model]
    async fn compact(&self, ctx: &mut RunContext, count: &mut u32, request: &mut ModelRequest) -> Result<()> {
        let _ = request;
        *count += 1;
        let mut plan = CompactionPlan::new("nested", "nested/1", 3);
        pre_compact(ctx, &(), &mut plan).await
    }

    #[pre_compact]
    fn inner(&self, count: &RunState<u32>, plan: &mut CompactionPlan) -> Result<()> {
        let _ = plan;
        self.inner.fetch_add(1, Ordering::Relaxed);
        *count.lock()? += 1;
        Ok(())
    }
}

#[tokio::test]
async fn a_hook_that_needs_the_state_another_hook_holds_fails_with_a_classified_error() {
    let nested = Arc::new(Nested::default());
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add_shared(nested.clone()).unwrap();
    let stack = Arc::new(stack);
    let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    stack.drive(&ctx);
    let err = stack
        .run_before_model(&mut ctx, &(), &mut ModelRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Middleware);
    let text = err.to_string();
    assert!(
        text.contains("borrowed by its `#[before_model]` hook") && text.contains("&RunState<T>"),
        "{text}"
    );
    assert_eq!(
        nested.inner.load(Ordering::Relaxed),
        1,
        "the inner hook ran, and was refused the state"
    );
}

#[tokio::test]
async fn a_sub_agent_run_on_the_same_stack_has_its_own_run_state() {
    let watch = Watch::default();
    let stack = Arc::new(MiddlewareStack::<()>::empty().with(watch.clone()).unwrap());
    let child_model = ScriptedModel::new([ScriptedTurn::text("child done")]);
    let child = Arc::new(Agent::new(child_model).with_shared_stack(stack.clone()));
    let parent_model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("k1", "helper", json!({"input": "go"}))]),
        ScriptedTurn::text("parent done"),
    ]);
    let tools = ToolRegistry::new()
        .with(AgentTool::new(child, "helper", "A helper agent.", || ((), ())))
        .unwrap();
    let parent = Agent::new(parent_model).with_tools(tools).with_shared_stack(stack);
    let run = parent
        .run(&mut RunContext::new(RunConfig::new("p"), ()), &(), "delegate")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "parent done");
    let reports = watch.reports.lock().unwrap().clone();
    // The child ends first; its one model call is not the parent's, and the parent counts only its own two.
    assert_eq!(reports.len(), 2, "{reports:?}");
    assert!(
        reports[0].ends_with(": 1 model calls, 0 batches, results "),
        "{reports:?}"
    );
    assert_eq!(reports[1], "p: 2 model calls, 1 batches, results k1", "{reports:?}");
}
