//! Short-circuit on error, `on_error` seen by every middleware, the original
//! error returned, panics caught and classified, and balanced events on
//! success, error, panic and cancellation.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use tinyagents::prelude::*;
use tinyagents::testing::{model_base, trace, CollectingSink};
use tinyagents_tests::{assert_balanced, Log, Recorder};

fn ctx_with(sink: &Arc<CollectingSink>) -> RunContext {
    RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone())
}

#[tokio::test]
async fn first_error_short_circuits_and_every_on_error_sees_the_original() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Recorder::new("a", &log)).unwrap();
    stack
        .add(Recorder::new("b", &log).failing_in(HookKind::BeforeModel))
        .unwrap();
    stack.add(Recorder::new("c", &log)).unwrap();
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = ctx_with(&sink);

    let err = stack
        .run_before_model(&mut ctx, &(), &mut ModelRequest::default())
        .await
        .unwrap_err();
    assert_eq!(
        err,
        TinyAgentsError::validation("b fails in before_model"),
        "the original error is returned"
    );
    assert_eq!(
        log.lines(),
        [
            "a:before_model",
            "b:before_model",
            // c never ran: short-circuit; then every on_error, in registration order
            "a:on_error:validation",
            "b:on_error:validation",
            "c:on_error:validation",
        ]
    );
    let t = trace(&sink.events());
    assert_balanced(&t);
    assert!(t.contains(&"completed b.before_model error:validation".to_owned()));
    // on_error returned errors, which were swallowed but are still reported as outcomes
    assert!(t.contains(&"completed c.on_error error:validation".to_owned()));
}

#[tokio::test]
async fn a_panicking_hook_becomes_a_classified_error_and_the_stack_stays_usable() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Recorder::new("calm", &log)).unwrap();
    stack
        .add(Recorder::new("wild", &log).panicking_in(HookKind::AfterTool))
        .unwrap();
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = ctx_with(&sink);
    let call = ToolCall::new("c1", "t", serde_json::json!({}));

    let err = stack
        .run_after_tool(&mut ctx, &(), &mut ToolResult::ok(&call, "x"))
        .await
        .unwrap_err();
    match &err {
        TinyAgentsError::MiddlewarePanic {
            middleware,
            hook,
            message,
        } => {
            assert_eq!(middleware, "wild");
            assert_eq!(*hook, "after_tool");
            assert!(message.contains("panics in after_tool on purpose"), "{message}");
        }
        other => panic!("expected a MiddlewarePanic, got {other:?}"),
    }
    assert_eq!(err.kind(), ErrorKind::MiddlewarePanic);
    assert!(log.lines().contains(&"calm:on_error:middleware_panic".to_owned()));
    let t = trace(&sink.events());
    assert_balanced(&t);
    assert!(t.contains(&"completed wild.after_tool panicked".to_owned()), "{t:#?}");

    // The same stack still serves: a hook that does not panic runs normally.
    log.clear();
    stack.run_before_tool(&mut ctx, &(), &mut call.clone()).await.unwrap();
    assert_eq!(log.lines(), ["calm:before_tool", "wild:before_tool"]);
}

#[tokio::test]
async fn events_are_balanced_on_success_and_name_middleware_and_hook() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Recorder::new("a", &log)).unwrap();
    stack.add(Recorder::new("b", &log)).unwrap();
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = ctx_with(&sink);
    let base = model_base(|_| Ok(ModelResponse::text("hi")));
    let out = stack
        .run_wrapped_model(&mut ctx, &(), ModelRequest::default(), &base)
        .await
        .unwrap();
    assert_eq!(out.message.text(), "hi");
    assert_eq!(
        trace(&sink.events()),
        [
            "started a.wrap_model",
            "started b.wrap_model",
            "completed b.wrap_model ok",
            "completed a.wrap_model ok"
        ]
    );
}

/// A wrap layer that sleeps forever inside `next`'s base call.
#[tokio::test(start_paused = true)]
async fn a_wrap_future_dropped_by_an_outer_timeout_still_completes_its_events() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(Recorder::new("outer", &log)).unwrap();
    stack.add(Recorder::new("inner", &log)).unwrap();
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = ctx_with(&sink);

    struct Hang;
    #[async_trait::async_trait]
    impl ModelBaseCall<()> for Hang {
        async fn call(&self, _: &mut RunContext, _: &(), _: ModelRequest) -> Result<ModelResponse> {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            unreachable!("the timeout drops this future first")
        }
    }
    use tinyagents::harness::middleware::ModelBaseCall;

    let fut = stack.run_wrapped_model(&mut ctx, &(), ModelRequest::default(), &Hang);
    let res = tokio::time::timeout(Duration::from_secs(5), fut).await;
    assert!(res.is_err(), "the timeout fired");
    let t = trace(&sink.events());
    assert_eq!(
        t,
        [
            "started outer.wrap_model",
            "started inner.wrap_model",
            "completed inner.wrap_model cancelled",
            "completed outer.wrap_model cancelled",
        ]
    );
    assert_balanced(&t);
}

#[tokio::test]
async fn an_agent_run_that_fails_reports_balanced_events_and_run_completed_with_the_error() {
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack
        .add(Recorder::new("a", &log).failing_in(HookKind::AfterModel))
        .unwrap();
    let sink = Arc::new(CollectingSink::new());
    let agent = Agent::new(ScriptedModel::new([ScriptedTurn::text("x")])).with_stack(stack);
    let err = agent.run(&mut ctx_with(&sink), &(), "hi").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    let t = trace(&sink.events());
    assert_balanced(&t);
    assert_eq!(t.first().map(String::as_str), Some("run_started"));
    assert_eq!(t.last().map(String::as_str), Some("run_completed error:validation"));
    // after_agent still saw the failed run
    assert!(log.lines().contains(&"a:after_agent".to_owned()));
}

/// A wrap layer that panics on its first pass, model and tool, and only
/// after its future has already been polled once (so the guard must hold on
/// every poll, not only the first).
struct PanicsOnce(std::sync::atomic::AtomicUsize);

#[async_trait]
impl Middleware<()> for PanicsOnce {
    fn name(&self) -> &str {
        "flaky"
    }
    fn hooks(&self) -> HookSet {
        HookSet::WRAP_MODEL | HookSet::WRAP_TOOL
    }
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        tokio::task::yield_now().await;
        if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            panic!("flaky panics in wrap_model on purpose");
        }
        next.run(ctx, state, request).await
    }
    async fn wrap_tool(
        &self,
        ctx: &mut RunContext,
        state: &(),
        call: ToolCall,
        next: ToolHandler<'_, ()>,
    ) -> Result<MiddlewareToolOutcome> {
        tokio::task::yield_now().await;
        if self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            panic!("flaky panics in wrap_tool on purpose");
        }
        next.run(ctx, state, call).await
    }
}

/// A wrap layer that calls the rest of the onion again once when it fails,
/// recording the error kind it saw.
struct RetryOnce(Log);

#[async_trait]
impl Middleware<()> for RetryOnce {
    fn name(&self) -> &str {
        "retry"
    }
    fn hooks(&self) -> HookSet {
        HookSet::WRAP_MODEL | HookSet::WRAP_TOOL
    }
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        match next.run(ctx, state, request.clone()).await {
            Err(e) => {
                self.0.push(format!("retry saw {}", e.kind().as_str()));
                next.run(ctx, state, request).await
            }
            ok => ok,
        }
    }
    async fn wrap_tool(
        &self,
        ctx: &mut RunContext,
        state: &(),
        call: ToolCall,
        next: ToolHandler<'_, ()>,
    ) -> Result<MiddlewareToolOutcome> {
        match next.run(ctx, state, call.clone()).await {
            Err(e) => {
                self.0.push(format!("retry saw {}", e.kind().as_str()));
                next.run(ctx, state, call).await
            }
            ok => ok,
        }
    }
}

#[tokio::test]
async fn an_outer_wrap_layer_sees_an_inner_layers_panic_as_an_error_and_retries_past_it() {
    use tinyagents::testing::tool_base;
    let log = Log::default();
    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(RetryOnce(log.clone())).unwrap();
    stack.add(PanicsOnce(Default::default())).unwrap();
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = ctx_with(&sink);

    let model = model_base(|_| Ok(ModelResponse::text("answered")));
    let response = stack
        .run_wrapped_model(&mut ctx, &(), ModelRequest::default(), &model)
        .await
        .expect("the retry gets past the panic");
    assert_eq!(response.message.text(), "answered");

    let mut stack = MiddlewareStack::<()>::empty();
    stack.add(RetryOnce(log.clone())).unwrap();
    stack.add(PanicsOnce(Default::default())).unwrap();
    let call = ToolCall::new("c1", "t", serde_json::json!({}));
    let tool = tool_base(|call| Ok(ToolResult::ok(&call, "ran")));
    let result = stack
        .run_wrapped_tool(&mut ctx, &(), call, &tool)
        .await
        .expect("the retry gets past the panic");
    assert_eq!(result.content, "ran");

    assert_eq!(
        log.lines(),
        ["retry saw middleware_panic", "retry saw middleware_panic"]
    );
    let t = trace(&sink.events());
    assert_balanced(&t);
    for hook in ["wrap_model", "wrap_tool"] {
        assert!(t.contains(&format!("completed flaky.{hook} panicked")), "{t:#?}");
        assert!(t.contains(&format!("completed flaky.{hook} ok")), "{t:#?}");
        assert!(t.contains(&format!("completed retry.{hook} ok")), "{t:#?}");
    }
}
