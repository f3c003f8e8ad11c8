//! Unit tests of the hook observer seam and of wrap registration.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use super::hook::{AfterModel, BeforeModel};
use super::*;
use crate::harness::context::{RunConfig, RunContext};
use crate::harness::error::{ErrorKind, Result, TinyAgentsError};
use crate::harness::model::{ModelRequest, ModelResponse};

/// Appends its name to the request's system prompt in `before_model`, and
/// to the response text in `after_model`; fails when told to.
struct Mark(&'static str, bool);

#[async_trait]
impl Middleware<()> for Mark {
    fn name(&self) -> &str {
        self.0
    }
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL | HookSet::AFTER_MODEL
    }
    async fn before_model(&self, _: &mut RunContext, _: &(), request: &mut ModelRequest) -> Result<()> {
        request.set_volatile(self.0, self.0);
        if self.1 {
            return Err(TinyAgentsError::validation(format!("{} refuses", self.0)));
        }
        Ok(())
    }
    async fn after_model(&self, _: &mut RunContext, _: &(), response: &mut ModelResponse) -> Result<()> {
        let text = format!("{}{}", response.message.text(), self.0);
        response.message.set_text(text);
        Ok(())
    }
}

/// Records what it saw: `begin:<prompt>` and `<middleware>:<prompt>`.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

impl HookObserver<ModelRequest> for Seen {
    fn begin(&self, request: &ModelRequest) {
        self.0
            .lock()
            .unwrap()
            .push(format!("begin:{}", request.system_prompt()));
    }
    fn after(&self, middleware: &Arc<str>, request: &ModelRequest) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{middleware}:{}", request.system_prompt()));
    }
}

impl HookObserver<ModelResponse> for Seen {
    fn after(&self, middleware: &Arc<str>, response: &ModelResponse) {
        self.0
            .lock()
            .unwrap()
            .push(format!("{middleware}:{}", response.message.text()));
    }
}

/// A stack of `Mark`s (name, fails), a fresh context, and a `Seen` observing `before_model`.
fn observed(marks: &[(&'static str, bool)]) -> (MiddlewareStack<()>, RunContext, Arc<Seen>) {
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    for &(name, fails) in marks {
        stack.add(Mark(name, fails)).unwrap();
    }
    let ctx = RunContext::new(RunConfig::new("run-1"), ());
    let seen = Arc::new(Seen::default());
    observe_hook::<BeforeModel, _>(&ctx, seen.clone());
    (stack, ctx, seen)
}

#[tokio::test]
async fn an_observer_sees_the_value_before_the_first_hook_and_after_each_in_dispatch_order() {
    let (stack, mut ctx, seen) = observed(&[("a", false), ("b", false)]);
    // Installing the same observer again installs it once.
    observe_hook::<BeforeModel, _>(&ctx, seen.clone());
    observe_hook::<AfterModel, _>(&ctx, seen.clone());

    stack
        .run_before_model(&mut ctx, &(), &mut ModelRequest::default())
        .await
        .unwrap();
    let mut response = ModelResponse::text("");
    stack.run_after_model(&mut ctx, &(), &mut response).await.unwrap();

    let seen = seen.0.lock().unwrap().clone();
    let prompt_a = "a";
    let prompt_ab = "a\n\nb";
    assert_eq!(
        seen,
        [
            "begin:".to_owned(),
            format!("a:{prompt_a}"),
            format!("b:{prompt_ab}"),
            // after_model runs in reverse registration order.
            "b:b".to_owned(),
            "a:ba".to_owned(),
        ]
    );
}

#[tokio::test]
async fn an_observer_sees_the_hook_that_failed_and_nothing_after_it() {
    let (stack, mut ctx, seen) = observed(&[("a", true), ("b", false)]);
    let err = stack
        .run_before_model(&mut ctx, &(), &mut ModelRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    assert_eq!(*seen.0.lock().unwrap(), ["begin:", "a:a"]);
}

#[tokio::test]
async fn a_hook_nobody_implements_is_not_observed() {
    let (stack, mut ctx, seen) = observed(&[]);
    stack
        .run_before_model(&mut ctx, &(), &mut ModelRequest::default())
        .await
        .unwrap();
    assert!(seen.0.lock().unwrap().is_empty());
}

/// A hand-written lifecycle + wrap type: its wrap answers every model call
/// itself (short-circuiting the onion).
struct Both {
    /// Whether `hooks()` reports the wrap (a narrowed set that leaves it out
    /// means the wrap is not dispatched).
    declare: bool,
}

#[async_trait]
impl Middleware<()> for Both {
    fn hooks(&self) -> HookSet {
        let wrap = if self.declare {
            HookSet::WRAP_MODEL
        } else {
            HookSet::empty()
        };
        HookSet::BEFORE_MODEL | wrap
    }
    async fn wrap_model(
        &self,
        _: &mut RunContext,
        _: &(),
        _: ModelRequest,
        _: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        Ok(MiddlewareModelOutcome::from(ModelResponse::text("from the wrap")))
    }
}

/// The model the wraps surround.
struct Base;

#[async_trait]
impl ModelBaseCall<()> for Base {
    async fn call(&self, _: &mut RunContext, _: &(), _: ModelRequest) -> Result<ModelResponse> {
        Ok(ModelResponse::text("from the model"))
    }
}

fn answer(stack: &MiddlewareStack<()>) -> String {
    let mut ctx = RunContext::new(RunConfig::new("run-1"), ());
    let response =
        futures::executor::block_on(stack.run_wrapped_model(&mut ctx, &(), ModelRequest::default(), &Base)).unwrap();
    response.message.text().into_owned()
}

#[test]
fn a_hand_written_wrap_is_registered_by_add_with_the_lifecycle_hooks() {
    let stack: MiddlewareStack<()> = MiddlewareStack::empty().with(Both { declare: true }).unwrap();
    assert_eq!(stack.implementors(HookKind::WrapModel), ["Both"]);
    assert_eq!(stack.implementors(HookKind::BeforeModel), ["Both"]);
    assert_eq!(answer(&stack), "from the wrap");
}

#[test]
fn a_wrap_left_out_of_a_narrowed_hook_set_is_not_dispatched() {
    let stack: MiddlewareStack<()> = MiddlewareStack::empty().with(Both { declare: false }).unwrap();
    assert!(stack.implementors(HookKind::WrapModel).is_empty());
    assert_eq!(answer(&stack), "from the model");
}

/// A hand-written type that keeps every default: every hook, the wraps included.
struct Defaults;

#[async_trait]
impl Middleware<()> for Defaults {}

#[test]
fn a_hand_written_impl_reports_every_hook_and_its_default_wraps_proceed() {
    let stack: MiddlewareStack<()> = MiddlewareStack::empty().with(Defaults).unwrap();
    assert_eq!(stack.infos().next().unwrap().hooks, HookSet::EVERY);
    for kind in HookKind::ALL {
        assert_eq!(stack.implementors(kind), ["Defaults"], "{kind}");
    }
    assert_eq!(answer(&stack), "from the model");
}

/// A wrap-only type, registered with `push_model`.
struct WrapOnlyRetry;

#[async_trait]
impl ModelMiddleware<()> for WrapOnlyRetry {
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        let mut outcome = next.run(ctx, state, request).await?.into_response();
        outcome.message.set_text("wrapped");
        Ok(outcome.into())
    }
}

#[test]
fn a_wrap_only_type_is_registered_in_its_onion_alone() {
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.try_push_model(Arc::new(WrapOnlyRetry)).unwrap();
    assert_eq!(stack.implementors(HookKind::WrapModel), ["WrapOnlyRetry"]);
    assert!(stack.implementors(HookKind::WrapTool).is_empty());
    assert!(stack.implementors(HookKind::BeforeModel).is_empty());
    assert_eq!(answer(&stack), "wrapped");
    assert!(
        stack.try_push_model(Arc::new(WrapOnlyRetry)).is_err(),
        "a duplicate name is refused"
    );
}
