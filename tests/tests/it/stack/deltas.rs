//! Streaming delta hooks: modification and suppression, before forwarding
//! and accumulation; the sync fast path.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tinyagents::prelude::*;
use tinyagents::testing::{trace, CollectingSink};

/// Upper-cases every text delta (sync fast path).
struct Upper;

#[async_trait]
impl Middleware<()> for Upper {
    fn hooks(&self) -> HookSet {
        HookSet::ON_MODEL_DELTA | HookSet::SYNC_MODEL_DELTA
    }
    async fn on_model_delta(&self, _: &mut RunContext, _: &(), _: &mut ModelDelta) -> Result<()> {
        panic!("the stack must call the sync form when SYNC_MODEL_DELTA is set")
    }
    fn on_model_delta_sync(&self, _: &mut RunContext, _: &(), delta: &mut ModelDelta) -> Result<()> {
        if let Some(t) = delta.text_mut() {
            *t = t.to_uppercase();
        }
        Ok(())
    }
}

/// Suppresses deltas containing "secret" (async form).
struct Censor;

#[async_trait]
impl Middleware<()> for Censor {
    fn hooks(&self) -> HookSet {
        HookSet::ON_MODEL_DELTA
    }
    async fn on_model_delta(&self, _: &mut RunContext, _: &(), delta: &mut ModelDelta) -> Result<()> {
        if delta.as_text().is_some_and(|t| t.to_lowercase().contains("secret")) {
            delta.suppress();
        }
        Ok(())
    }
}

/// Counts deltas it sees.
#[derive(Default)]
struct Count(AtomicU32);

#[async_trait]
impl Middleware<()> for Count {
    fn name(&self) -> &str {
        "count"
    }
    fn hooks(&self) -> HookSet {
        HookSet::ON_MODEL_DELTA | HookSet::SYNC_MODEL_DELTA
    }
    fn on_model_delta_sync(&self, _: &mut RunContext, _: &(), _: &mut ModelDelta) -> Result<()> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

#[tokio::test]
async fn delta_hooks_modify_and_suppress_before_forwarding_and_accumulation() {
    let count = Arc::new(Count::default());
    let mut stack = MiddlewareStack::new().with(Upper).unwrap().with(Censor).unwrap();
    stack.add_shared(count.clone()).unwrap();
    let model = ScriptedModel::new([ScriptedTurn::text("the secret plan is ready")]);
    let agent = Agent::new(model).with_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_sink(sink.clone());
    let run = agent.run(&mut ctx, &(), "hi").await.unwrap();

    // "secret " was suppressed: not accumulated...
    assert_eq!(run.final_text(), "THE PLAN IS READY");
    let t = trace(&sink.events());
    // ...not forwarded, and the suppression was recorded naming the middleware
    assert!(!t.iter().any(|l| l.contains("SECRET")), "{t:#?}");
    assert_eq!(t.iter().filter(|l| *l == "suppressed Censor").count(), 1);
    assert_eq!(t.iter().filter(|l| l.starts_with("delta ")).count(), 4);
    // hooks after the suppressing one did not see the suppressed delta:
    // 5 text deltas + 1 usage delta + 1 finish delta = 7 deltas, one suppressed before `count`
    assert_eq!(count.0.load(Ordering::Relaxed), 6);
    // delta hooks emit no bracketing events
    assert!(!t.iter().any(|l| l.contains("on_model_delta")));
}
