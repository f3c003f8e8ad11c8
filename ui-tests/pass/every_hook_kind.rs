//! Every hook attribute on a free fn, with parameters in varied orders and
//! subsets, sync and async, registered on one stack.

use tinyagents::prelude::*;

#[before_agent]
fn before_agent_hook(ctx: &mut RunContext, state: &()) -> Result<()> {
    let _ = (ctx, state);
    Ok(())
}

#[after_agent]
async fn after_agent_hook(run: &mut AgentRun) -> Result<()> {
    let _ = run;
    Ok(())
}

#[before_steering]
async fn before_steering_hook(command: &mut SteeringCommand, ctx: &mut RunContext) -> Result<()> {
    let _ = (command, ctx);
    Ok(())
}

#[after_steering]
fn after_steering_hook(outcome: &SteeringOutcome) -> Result<()> {
    let _ = outcome;
    Ok(())
}

#[before_model]
async fn before_model_hook(state: &(), request: &mut ModelRequest, ctx: &mut RunContext) -> Result<()> {
    let _ = (state, request, ctx);
    Ok(())
}

#[before_model_stream]
fn before_model_stream_hook(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("stream", "yes");
    Ok(())
}

#[on_model_delta]
fn on_model_delta_sync_hook(delta: &mut ModelDelta) -> Result<()> {
    let _ = delta;
    Ok(())
}

#[on_model_delta]
async fn on_model_delta_async_hook(ctx: &mut RunContext, delta: &mut ModelDelta) -> Result<()> {
    let _ = (ctx, delta);
    Ok(())
}

#[after_model]
async fn after_model_hook(response: &mut ModelResponse, state: &()) -> Result<()> {
    let _ = (response, state);
    Ok(())
}

#[on_tool_batch]
fn on_tool_batch_hook(batch: &mut PreparedBatch) -> Result<()> {
    let _ = batch;
    Ok(())
}

#[before_tool]
async fn before_tool_hook(call: &mut ToolCall) -> Result<()> {
    let _ = call;
    Ok(())
}

#[on_prepared_tool_calls]
fn on_prepared_tool_calls_hook(batch: &mut PreparedBatch) -> Result<()> {
    let _ = batch;
    Ok(())
}

#[on_tool_delta]
fn on_tool_delta_hook(delta: &mut ToolDelta, ctx: &RunContext) -> Result<()> {
    let _ = (delta, ctx);
    Ok(())
}

#[after_tool]
fn after_tool_hook(result: &mut ToolResult) -> Result<()> {
    let _ = result;
    Ok(())
}

#[pre_compact]
fn pre_compact_hook(state: &(), plan: &mut CompactionPlan) -> Result<()> {
    let _ = state;
    plan.block("keep the history");
    Ok(())
}

#[on_error]
async fn on_error_hook(error: &TinyAgentsError, state: &()) -> Result<()> {
    let _ = (error, state);
    Ok(())
}

#[wrap_model]
async fn wrap_model_hook(
    request: ModelRequest,
    ctx: &mut RunContext,
    next: ModelHandler<'_, ()>,
    state: &(),
) -> Result<MiddlewareModelOutcome> {
    next.run(ctx, state, request).await
}

#[wrap_tool]
async fn wrap_tool_hook(
    ctx: &mut RunContext,
    state: &(),
    call: ToolCall,
    next: ToolHandler<'_, ()>,
) -> Result<ToolResult> {
    Ok(next.run(ctx, state, call).await?.into_result())
}

#[dynamic_prompt]
fn dynamic_prompt_plain() -> String {
    "text".to_owned()
}

#[dynamic_prompt]
async fn dynamic_prompt_fallible(request: &ModelRequest, ctx: &mut RunContext) -> Result<String> {
    let _ = ctx;
    Ok(format!("{} messages", request.messages.len()))
}

fn main() {
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    stack
        .add(BeforeAgentHook)
        .and_then(|s| s.add(AfterAgentHook))
        .and_then(|s| s.add(BeforeSteeringHook))
        .and_then(|s| s.add(AfterSteeringHook))
        .and_then(|s| s.add(BeforeModelHook))
        .and_then(|s| s.add(BeforeModelStreamHook))
        .and_then(|s| s.add(OnModelDeltaSyncHook))
        .and_then(|s| s.add(OnModelDeltaAsyncHook))
        .and_then(|s| s.add(AfterModelHook))
        .and_then(|s| s.add(OnToolBatchHook))
        .and_then(|s| s.add(BeforeToolHook))
        .and_then(|s| s.add(OnPreparedToolCallsHook))
        .and_then(|s| s.add(OnToolDeltaHook))
        .and_then(|s| s.add(AfterToolHook))
        .and_then(|s| s.add(PreCompactHook))
        .and_then(|s| s.add(OnErrorHook))
        .and_then(|s| s.add(WrapModelHook))
        .and_then(|s| s.add(WrapToolHook))
        .and_then(|s| s.add(DynamicPromptPlain))
        .and_then(|s| s.add(DynamicPromptFallible))
        .unwrap();
    assert_eq!(stack.len(), 20);
    for kind in HookKind::ALL {
        assert!(stack.has(kind), "{kind}");
    }
}
