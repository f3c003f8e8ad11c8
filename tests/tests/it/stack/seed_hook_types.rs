//! Seed 000, "Hook Types", compiled: a hand-written type implements
//! `Middleware<State, Ctx>` with every hook the seed lists, and the wrap
//! traits `ModelMiddleware` and `ToolMiddleware` in impls of their own with
//! exactly the seed's signatures (`wrap_model(&self, ctx, state, request:
//! ModelRequest, next: ModelHandler<'_, State, Ctx>) ->
//! Result<MiddlewareModelOutcome>`). Registered with `add_layers` in an
//! agent, its lifecycle hooks and both wraps run.
//!
//! One difference from the seed, decided by the design: the lifecycle hooks
//! take the run context first, then the state, then the value (the seed's
//! `Middleware` block writes `state, ctx`; its wrap traits already write
//! `ctx, state`, and the native trait has one order for both).

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use tinyagents::harness::context::{RunConfig, RunContext};
use tinyagents::harness::error::{Result, TinyAgentsError};
use tinyagents::harness::middleware::{
    AgentRun, Middleware, MiddlewareModelOutcome, MiddlewareStack, MiddlewareToolOutcome, ModelHandler,
    ModelMiddleware, ToolHandler, ToolMiddleware,
};
use tinyagents::harness::model::{ModelDelta, ModelRequest, ModelResponse};
use tinyagents::harness::steering::{SteeringCommand, SteeringOutcome};
use tinyagents::harness::tool::{ToolCall, ToolDelta, ToolResult};
use tinyagents::prelude::{tool_fn, Agent, ScriptedModel, ScriptedTurn, ToolRegistry};

/// The seed's shape: one type, lifecycle hooks in one impl, each wrap in its own.
#[derive(Default)]
struct SeedHooks {
    ran: Arc<Mutex<Vec<&'static str>>>,
}

impl SeedHooks {
    fn hit(&self, hook: &'static str) -> Result<()> {
        self.ran.lock().unwrap().push(hook);
        Ok(())
    }
}

#[async_trait]
impl<State, Ctx> Middleware<State, Ctx> for SeedHooks
where
    State: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    fn name(&self) -> &str {
        "seed_hooks"
    }
    async fn before_agent(&self, _ctx: &mut RunContext<Ctx>, _state: &State) -> Result<()> {
        self.hit("before_agent")
    }
    async fn after_agent(&self, _ctx: &mut RunContext<Ctx>, _state: &State, _run: &mut AgentRun) -> Result<()> {
        self.hit("after_agent")
    }
    async fn before_steering(
        &self,
        _ctx: &mut RunContext<Ctx>,
        _state: &State,
        _command: &mut SteeringCommand,
    ) -> Result<()> {
        self.hit("before_steering")
    }
    async fn after_steering(
        &self,
        _ctx: &mut RunContext<Ctx>,
        _state: &State,
        _outcome: &mut SteeringOutcome,
    ) -> Result<()> {
        self.hit("after_steering")
    }
    async fn before_model(
        &self,
        _ctx: &mut RunContext<Ctx>,
        _state: &State,
        _request: &mut ModelRequest,
    ) -> Result<()> {
        self.hit("before_model")
    }
    async fn before_model_stream(
        &self,
        _ctx: &mut RunContext<Ctx>,
        _state: &State,
        _request: &mut ModelRequest,
    ) -> Result<()> {
        self.hit("before_model_stream")
    }
    async fn on_model_delta(&self, _ctx: &mut RunContext<Ctx>, _state: &State, _delta: &mut ModelDelta) -> Result<()> {
        self.hit("on_model_delta")
    }
    async fn after_model(
        &self,
        _ctx: &mut RunContext<Ctx>,
        _state: &State,
        _response: &mut ModelResponse,
    ) -> Result<()> {
        self.hit("after_model")
    }
    async fn before_tool(&self, _ctx: &mut RunContext<Ctx>, _state: &State, _call: &mut ToolCall) -> Result<()> {
        self.hit("before_tool")
    }
    async fn on_tool_delta(&self, _ctx: &mut RunContext<Ctx>, _state: &State, _delta: &mut ToolDelta) -> Result<()> {
        self.hit("on_tool_delta")
    }
    async fn after_tool(&self, _ctx: &mut RunContext<Ctx>, _state: &State, _result: &mut ToolResult) -> Result<()> {
        self.hit("after_tool")
    }
    async fn on_error(&self, _ctx: &mut RunContext<Ctx>, _state: &State, _error: &TinyAgentsError) -> Result<()> {
        self.hit("on_error")
    }
}

#[async_trait]
impl<State, Ctx> ModelMiddleware<State, Ctx> for SeedHooks
where
    State: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    fn name(&self) -> &str {
        "seed_hooks"
    }
    async fn wrap_model(
        &self,
        ctx: &mut RunContext<Ctx>,
        state: &State,
        request: ModelRequest,
        next: ModelHandler<'_, State, Ctx>,
    ) -> Result<MiddlewareModelOutcome> {
        self.hit("wrap_model")?;
        next.run(ctx, state, request).await
    }
}

#[async_trait]
impl<State, Ctx> ToolMiddleware<State, Ctx> for SeedHooks
where
    State: Send + Sync + 'static,
    Ctx: Send + Sync + 'static,
{
    fn name(&self) -> &str {
        "seed_hooks"
    }
    async fn wrap_tool(
        &self,
        ctx: &mut RunContext<Ctx>,
        state: &State,
        call: ToolCall,
        next: ToolHandler<'_, State, Ctx>,
    ) -> Result<MiddlewareToolOutcome> {
        self.hit("wrap_tool")?;
        next.run(ctx, state, call).await
    }
}

#[tokio::test]
async fn the_seed_hook_types_compile_and_every_role_runs_in_an_agent() {
    let hooks = SeedHooks::default();
    let ran = hooks.ran.clone();
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack.add_layers(hooks).unwrap();
    assert_eq!(stack.names(), ["seed_hooks"], "one registration, every role");
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "echo", json!({"text": "hi"}))]),
        ScriptedTurn::text("done"),
    ]));
    let tools = ToolRegistry::new()
        .with(tool_fn("echo", "Echoes.", |_cx, _args| async { Ok("hi".into()) }))
        .unwrap();
    let agent: Agent<()> = Agent::new(model).with_tools(tools).with_stack(stack);
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("seed"), ()), &(), "go")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "done");
    let ran = ran.lock().unwrap().clone();
    let count = |hook: &str| ran.iter().filter(|h| **h == hook).count();
    // the lifecycle hooks of a run with one tool call
    assert_eq!(count("before_agent"), 1, "{ran:?}");
    assert_eq!(count("before_model"), 2, "{ran:?}");
    assert_eq!(count("after_model"), 2, "{ran:?}");
    assert_eq!(count("before_tool"), 1, "{ran:?}");
    assert_eq!(count("after_tool"), 1, "{ran:?}");
    assert_eq!(count("after_agent"), 1, "{ran:?}");
    // the separate wraps, around each model call and the tool call
    assert_eq!(count("wrap_model"), 2, "{ran:?}");
    assert_eq!(count("wrap_tool"), 1, "{ran:?}");
    // each wrap runs between its before and after hooks
    let first = |hook: &str| ran.iter().position(|h| *h == hook).unwrap();
    assert!(first("before_model") < first("wrap_model") && first("wrap_model") < first("after_model"));
    assert!(first("before_tool") < first("wrap_tool") && first("wrap_tool") < first("after_tool"));
    assert_eq!(count("on_error"), 0, "nothing failed: {ran:?}");
}
