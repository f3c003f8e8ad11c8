//! A type implements `Middleware` and the wrap traits separately, as the
//! middleware design writes them (lifecycle hooks in one impl, each wrap in
//! its own): registered with `add_layers` (or `add_with_model_wrap` /
//! `add_with_tool_wrap` for one wrap), it is one entry whose lifecycle hooks
//! and wraps all run. `add`, `with` and `push` of such a type do not compile
//! (its wrap would never run: `ui-tests/fail/separate_wrap_registered_with_add.rs`);
//! a value erased to `Arc<dyn Middleware>` joins its wraps by name with
//! `push_model`/`push_tool`, in either order.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use tinyagents::harness::middleware::{ModelMiddleware, ToolMiddleware};
use tinyagents::prelude::*;
use tinyagents::testing::{model_base, tool_base};

/// Lifecycle hooks in one impl, a model wrap and a tool wrap in two others.
#[derive(Default)]
struct Both {
    before_model: AtomicU32,
    wrapped_models: AtomicU32,
    wrapped_tools: AtomicU32,
}

#[async_trait]
impl Middleware<()> for Both {
    fn name(&self) -> &str {
        "both"
    }
    async fn before_model(&self, _ctx: &mut RunContext, _state: &(), _request: &mut ModelRequest) -> Result<()> {
        self.before_model.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[async_trait]
impl ModelMiddleware<()> for Both {
    fn name(&self) -> &str {
        "both"
    }
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        self.wrapped_models.fetch_add(1, Ordering::SeqCst);
        let mut response = next.run(ctx, state, request).await?.into_response();
        response.message.set_text("wrapped by both");
        Ok(response.into())
    }
}

#[async_trait]
impl ToolMiddleware<()> for Both {
    fn name(&self) -> &str {
        "both"
    }
    async fn wrap_tool(
        &self,
        ctx: &mut RunContext,
        state: &(),
        call: ToolCall,
        next: ToolHandler<'_, ()>,
    ) -> Result<MiddlewareToolOutcome> {
        self.wrapped_tools.fetch_add(1, Ordering::SeqCst);
        next.run(ctx, state, call).await
    }
}

fn ctx() -> RunContext {
    RunContext::new(RunConfig::new("both"), ())
}

async fn run_everything(stack: &MiddlewareStack<()>) -> String {
    let mut ctx = ctx();
    let mut request = ModelRequest::default();
    stack.run_before_model(&mut ctx, &(), &mut request).await.unwrap();
    let model = model_base(|_| Ok(ModelResponse::text("from the model")));
    let response = stack.run_wrapped_model(&mut ctx, &(), request, &model).await.unwrap();
    let tool = tool_base(|call| Ok(ToolResult::ok(&call, "done")));
    let result = stack
        .run_wrapped_tool(&mut ctx, &(), ToolCall::new("c1", "echo", serde_json::json!({})), &tool)
        .await
        .unwrap();
    assert_eq!(result.content, "done");
    response.message.text().into_owned()
}

/// `Both` as a `dyn Middleware`: what the compile-time check cannot see.
fn erased(both: &Arc<Both>) -> Arc<dyn Middleware<()>> {
    both.clone()
}

/// Lifecycle hooks and a model wrap only.
#[derive(Default)]
struct ModelSide {
    before_model: AtomicU32,
    wrapped_models: AtomicU32,
}

#[async_trait]
impl Middleware<()> for ModelSide {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL
    }
    async fn before_model(&self, _ctx: &mut RunContext, _state: &(), _request: &mut ModelRequest) -> Result<()> {
        self.before_model.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[async_trait]
impl ModelMiddleware<()> for ModelSide {
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        self.wrapped_models.fetch_add(1, Ordering::SeqCst);
        let mut response = next.run(ctx, state, request).await?.into_response();
        response.message.set_text("wrapped by the model side");
        Ok(response.into())
    }
}

/// Lifecycle hooks and a tool wrap only.
#[derive(Default)]
struct ToolSide {
    wrapped_tools: AtomicU32,
}

#[async_trait]
impl Middleware<()> for ToolSide {
    fn hooks(&self) -> HookSet {
        HookSet::AFTER_TOOL
    }
}

#[async_trait]
impl ToolMiddleware<()> for ToolSide {
    async fn wrap_tool(
        &self,
        ctx: &mut RunContext,
        state: &(),
        call: ToolCall,
        next: ToolHandler<'_, ()>,
    ) -> Result<MiddlewareToolOutcome> {
        self.wrapped_tools.fetch_add(1, Ordering::SeqCst);
        next.run(ctx, state, call).await
    }
}

#[tokio::test]
async fn add_layers_is_one_entry_running_every_role() {
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.add_layers(Both::default()).unwrap();
    assert_eq!(stack.names(), ["both"]);
    assert_eq!(stack.implementors(HookKind::BeforeModel), ["both"]);
    assert_eq!(stack.implementors(HookKind::WrapModel), ["both"]);
    assert_eq!(stack.implementors(HookKind::WrapTool), ["both"]);
    assert_eq!(run_everything(&stack).await, "wrapped by both");
}

#[tokio::test]
async fn one_separate_wrap_registers_with_its_own_method() {
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack
        .add_with_model_wrap(ModelSide::default())
        .unwrap()
        .add_with_tool_wrap(ToolSide::default())
        .unwrap();
    assert_eq!(stack.names(), ["ModelSide", "ToolSide"]);
    assert_eq!(stack.implementors(HookKind::WrapModel), ["ModelSide"]);
    assert_eq!(stack.implementors(HookKind::WrapTool), ["ToolSide"]);
    assert_eq!(stack.implementors(HookKind::BeforeModel), ["ModelSide"]);
    assert_eq!(stack.implementors(HookKind::AfterTool), ["ToolSide"]);
    assert_eq!(run_everything(&stack).await, "wrapped by the model side");
    // a second registration of the name is refused, and the stack is unchanged
    let err = stack.add_with_model_wrap(ModelSide::default()).unwrap_err();
    assert!(err.to_string().contains("`ModelSide` is already registered"), "{err}");
    assert_eq!(stack.implementors(HookKind::WrapModel), ["ModelSide"]);
}

#[tokio::test]
async fn an_erased_value_joins_its_wraps_by_name_lifecycle_first() {
    let both = Arc::new(Both::default());
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack
        .push(erased(&both))
        .push_model(both.clone())
        .push_tool(both.clone());
    assert_eq!(stack.names(), ["both"]);
    assert_eq!(stack.implementors(HookKind::BeforeModel), ["both"]);
    assert_eq!(stack.implementors(HookKind::WrapModel), ["both"]);
    assert_eq!(stack.implementors(HookKind::WrapTool), ["both"]);
    assert_eq!(run_everything(&stack).await, "wrapped by both");
    assert_eq!(both.before_model.load(Ordering::SeqCst), 1);
    assert_eq!(
        both.wrapped_models.load(Ordering::SeqCst),
        1,
        "the separate model wrap ran, once"
    );
    assert_eq!(
        both.wrapped_tools.load(Ordering::SeqCst),
        1,
        "the separate tool wrap ran, once"
    );
}

#[tokio::test]
async fn wraps_first_then_lifecycle_joins_the_same_entry() {
    let both = Arc::new(Both::default());
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.push_model(both.clone()).push(erased(&both));
    assert_eq!(stack.names(), ["both"]);
    assert_eq!(run_everything(&stack).await, "wrapped by both");
    assert_eq!(both.before_model.load(Ordering::SeqCst), 1);
    assert_eq!(both.wrapped_models.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_second_wrap_of_one_kind_under_one_name_is_refused() {
    let both = Arc::new(Both::default());
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.push(erased(&both)).push_model(both.clone());
    let err = stack.try_push_model(both.clone()).unwrap_err();
    assert!(err.to_string().contains("`both` is already registered"), "{err}");
    assert_eq!(stack.implementors(HookKind::WrapModel), ["both"]);
}

#[tokio::test]
async fn a_wrap_registered_before_add_layers_of_its_name_is_a_duplicate() {
    let both = Arc::new(Both::default());
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.push_model(both.clone());
    let err = stack.add_layers(Both::default()).unwrap_err();
    assert!(err.to_string().contains("`both` is already registered"), "{err}");
    assert_eq!(stack.implementors(HookKind::WrapModel), ["both"]);
    assert_eq!(stack.implementors(HookKind::BeforeModel), Vec::<&str>::new());
}

/// The one shape the compiler cannot check: a value erased to `dyn
/// Middleware` before registration runs through its `Middleware` impl only.
#[tokio::test]
async fn erased_and_pushed_alone_its_separate_wrap_does_not_run() {
    let both = Arc::new(Both::default());
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.push(erased(&both));
    assert_eq!(run_everything(&stack).await, "from the model");
    assert_eq!(both.wrapped_models.load(Ordering::SeqCst), 0);
}
