//! Wrap middleware: retry (next called three times), short-circuit (next never
//! called) and fallback (a replacement on error).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tinyagents::harness::middleware::Middleware;
use tinyagents::prelude::*;
use tinyagents::testing::{model_base, tool_base, MiddlewareHarness};

/// Calls `next` up to `attempts` times while the error is retryable.
struct Retry {
    attempts: u32,
}

#[async_trait]
impl Middleware<()> for Retry {
    fn hooks(&self) -> HookSet {
        HookSet::WRAP_MODEL
    }
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        let mut last = None;
        for _ in 0..self.attempts {
            match next.run(ctx, state, request.clone()).await {
                Ok(out) => return Ok(out),
                Err(e) if e.is_retryable() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.expect("at least one attempt"))
    }
}

#[tokio::test]
async fn retry_calls_next_three_times_then_succeeds() {
    let calls = AtomicU32::new(0);
    let base = model_base(|_| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        if n < 3 {
            Err(TinyAgentsError::model(format!("overloaded #{n}"), true))
        } else {
            Ok(ModelResponse::text("third time lucky"))
        }
    });
    let mut h = MiddlewareHarness::new(Retry { attempts: 5 });
    let out = h.wrap_model(ModelRequest::default(), &base).await.unwrap();
    assert_eq!(out.message.text(), "third time lucky");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn retry_gives_up_after_its_attempts_and_returns_the_last_error() {
    let calls = AtomicU32::new(0);
    let base = model_base(|_| {
        let n = calls.fetch_add(1, Ordering::SeqCst) + 1;
        Err(TinyAgentsError::model(format!("overloaded #{n}"), true))
    });
    let mut h = MiddlewareHarness::new(Retry { attempts: 3 });
    let err = h.wrap_model(ModelRequest::default(), &base).await.unwrap_err();
    assert_eq!(err, TinyAgentsError::model("overloaded #3", true));
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

/// Answers from a cache without calling `next`.
struct Cached;

#[async_trait]
impl Middleware<()> for Cached {
    fn hooks(&self) -> HookSet {
        HookSet::WRAP_TOOL
    }
    async fn wrap_tool(
        &self,
        _: &mut RunContext,
        _: &(),
        call: ToolCall,
        _next: ToolHandler<'_, ()>,
    ) -> Result<MiddlewareToolOutcome> {
        Ok(ToolResult::ok(&call, "from cache").into())
    }
}

#[tokio::test]
async fn short_circuit_never_calls_next() {
    let calls = AtomicU32::new(0);
    let base = tool_base(|call| {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(ToolResult::ok(&call, "real"))
    });
    let mut h = MiddlewareHarness::new(Cached);
    let out = h
        .wrap_tool(ToolCall::new("c1", "t", serde_json::json!({})), &base)
        .await
        .unwrap();
    assert_eq!(out.content, "from cache");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

/// Substitutes a canned response when the inner call fails.
struct Fallback;

#[async_trait]
impl Middleware<()> for Fallback {
    fn hooks(&self) -> HookSet {
        HookSet::WRAP_MODEL
    }
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        match next.run(ctx, state, request).await {
            Ok(out) => Ok(out),
            Err(e) if e.is_control_flow() => Err(e),
            Err(_) => Ok(ModelResponse::text("fallback answer").into()),
        }
    }
}

#[tokio::test]
async fn fallback_substitutes_a_response_on_error_but_never_swallows_an_interrupt() {
    let mut h = MiddlewareHarness::new(Fallback);
    let failing = model_base(|_| Err(TinyAgentsError::model("down", false)));
    let out = h.wrap_model(ModelRequest::default(), &failing).await.unwrap();
    assert_eq!(out.message.text(), "fallback answer");

    let interrupting = model_base(|_| Err(TinyAgentsError::interrupted(None, "approval needed")));
    let err = h.wrap_model(ModelRequest::default(), &interrupting).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted);
}

#[tokio::test]
async fn retry_inside_an_agent_counts_every_attempt_and_marks_failed_ones_discarded() {
    let model = ScriptedModel::new([
        ScriptedTurn::FailAfter(
            vec![ModelDelta::text("partial ")],
            TinyAgentsError::model("dropped stream", true),
        ),
        ScriptedTurn::text("whole answer"),
    ]);
    let sink = Arc::new(tinyagents::testing::CollectingSink::new());
    let agent = Agent::new(model).with_stack(MiddlewareStack::new().with(Retry { attempts: 2 }).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "hi").await.unwrap();
    assert_eq!(run.final_text(), "whole answer");
    assert_eq!(run.counters.model_calls, 2);
    assert_eq!(run.counters.steps, 1);
    let t = tinyagents::testing::trace(&sink.events());
    let discarded = t
        .iter()
        .position(|l| l == "discarded attempt=1")
        .expect("attempt 1 discarded");
    let partial = t
        .iter()
        .position(|l| l == "delta \"partial \"")
        .expect("the partial delta was forwarded");
    assert!(partial < discarded);
}
