//! The DSL's hook attributes on free fns, in a real stack and agent loop:
//! every hook kind is called with the right values, in the right order, and
//! what one hook changes is what the next one sees.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tinyagents::harness::steering::{SteeringAction, SteeringDecision};
use tinyagents::prelude::*;

/// The state of these tests: an ordered log of what the hooks saw.
#[derive(Default)]
struct Log(Mutex<Vec<String>>);

impl Log {
    fn push(&self, line: impl Into<String>) {
        self.0.lock().unwrap().push(line.into());
    }

    fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

// ----- one free fn per hook kind, parameters in varied orders and subsets -----

#[before_agent]
fn log_start(state: &Log, ctx: &mut RunContext) -> Result<()> {
    state.push(format!("before_agent run={}", ctx.run_id()));
    Ok(())
}

#[after_agent]
async fn log_end(run: &mut AgentRun, state: &Log) -> Result<()> {
    state.push(format!("after_agent final={}", run.final_text()));
    Ok(())
}

#[before_model]
async fn tag_request(request: &mut ModelRequest, state: &Log, ctx: &mut RunContext) -> Result<()> {
    state.push(format!("before_model step={}", ctx.counters().steps));
    request.set_volatile("tag", "tagged");
    Ok(())
}

/// The current time of day, for the prompt's volatile tail.
#[dynamic_prompt]
fn clock(state: &Log) -> String {
    state.push("dynamic_prompt");
    "It is noon.".to_owned()
}

#[before_model_stream]
fn check_stream(state: &Log, request: &ModelRequest) -> Result<()> {
    // sees what `tag_request` and `clock` wrote
    state.push(format!("before_model_stream system={:?}", request.system_prompt()));
    Ok(())
}

#[wrap_model]
async fn around_model(
    ctx: &mut RunContext,
    state: &Log,
    request: ModelRequest,
    next: ModelHandler<'_, Log>,
) -> Result<ModelResponse> {
    state.push("wrap_model enter");
    let response = next.run(ctx, state, request).await?;
    state.push("wrap_model exit");
    Ok(response.into_response())
}

#[on_model_delta]
fn shout(delta: &mut ModelDelta, state: &Log) -> Result<()> {
    if let Some(text) = delta.text_mut() {
        state.push(format!("on_model_delta {text:?}"));
        *text = text.to_uppercase();
    }
    Ok(())
}

#[after_model]
async fn read_response(state: &Log, response: &mut ModelResponse) -> Result<()> {
    state.push(format!(
        "after_model text={:?} calls={}",
        response.message.text(),
        response.tool_calls_requested().len()
    ));
    Ok(())
}

#[on_tool_batch]
fn review_batch(batch: &mut PreparedBatch, state: &Log) -> Result<()> {
    state.push(format!("on_tool_batch n={}", batch.len()));
    Ok(())
}

#[before_tool]
fn rewrite_args(state: &Log, call: &mut ToolCall) -> Result<()> {
    state.push(format!("before_tool {}", call.arguments));
    call.arguments = json!({"x": 2});
    Ok(())
}

#[wrap_tool]
async fn around_tool(
    call: ToolCall,
    next: ToolHandler<'_, Log>,
    state: &Log,
    ctx: &mut RunContext,
) -> Result<MiddlewareToolOutcome> {
    state.push(format!("wrap_tool enter {}", call.arguments));
    let outcome = next.run(ctx, state, call).await?;
    state.push("wrap_tool exit");
    Ok(outcome)
}

#[on_tool_delta]
async fn progress(delta: &mut ToolDelta, state: &Log) -> Result<()> {
    state.push(format!("on_tool_delta {}", delta.content));
    Ok(())
}

#[after_tool]
fn read_result(result: &mut ToolResult, state: &Log) -> Result<()> {
    state.push(format!("after_tool {}", result.content));
    result.content.push_str(" (checked)");
    Ok(())
}

#[on_error]
fn log_error(error: &TinyAgentsError, state: &Log) -> Result<()> {
    state.push(format!("on_error {}", error.kind()));
    Ok(())
}

#[before_steering]
fn veto_cancel(command: &mut SteeringCommand, state: &Log) -> Result<()> {
    state.push(format!("before_steering {}", command.id));
    if matches!(command.action, SteeringAction::Cancel { .. }) {
        command.reject("cancelling is not allowed here");
    }
    Ok(())
}

#[after_steering]
fn log_outcome(outcome: &mut SteeringOutcome, state: &Log) -> Result<()> {
    state.push(format!("after_steering applied={}", outcome.applied));
    Ok(())
}

fn full_stack() -> MiddlewareStack<Log> {
    let mut stack = MiddlewareStack::empty();
    stack
        .add(LogStart)
        .unwrap()
        .add(LogEnd)
        .unwrap()
        .add(TagRequest)
        .unwrap()
        .add(Clock)
        .unwrap()
        .add(CheckStream)
        .unwrap()
        .add(AroundModel)
        .unwrap()
        .add(Shout)
        .unwrap()
        .add(ReadResponse)
        .unwrap()
        .add(ReviewBatch)
        .unwrap()
        .add(RewriteArgs)
        .unwrap()
        .add(AroundTool)
        .unwrap()
        .add(Progress)
        .unwrap()
        .add(ReadResult)
        .unwrap()
        .add(LogError)
        .unwrap()
        .add(VetoCancel)
        .unwrap()
        .add(LogOutcome)
        .unwrap();
    stack
}

fn echo_tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(tool_fn("echo", "Echoes its arguments.", |cx, args| async move {
            cx.progress("halfway");
            Ok(args.to_string().into())
        }))
        .unwrap()
}

#[tokio::test]
async fn every_hook_kind_runs_in_the_agent_loop_with_the_right_values() {
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("echo", json!({"x": 1})),
        ScriptedTurn::text("all done"),
    ]);
    let agent: Agent<Log> = Agent::new(model).with_tools(echo_tools()).with_stack(full_stack());
    let log = Log::default();
    let mut ctx = RunContext::new(RunConfig::new("run-7"), ());
    let run = agent.run(&mut ctx, &log, "go").await.unwrap();

    // the delta hook upper-cased the streamed text before it was accumulated
    assert_eq!(run.final_text(), "ALL DONE");
    // after_tool's edit reached the conversation
    assert!(run.messages.iter().any(|m| m.text().contains(r#"{"x":2} (checked)"#)));

    let lines = log.lines();
    let expected = [
        "before_agent run=run-7",
        "before_model step=1",
        "dynamic_prompt",
        r#"before_model_stream system="tagged\n\nIt is noon.""#,
        "wrap_model enter",
        "wrap_model exit",
        r#"after_model text="" calls=1"#,
        "on_tool_batch n=1",
        r#"before_tool {"x":1}"#,
        r#"wrap_tool enter {"x":2}"#,
        "on_tool_delta halfway",
        "wrap_tool exit",
        r#"after_tool {"x":2}"#,
        "before_model step=2",
        "dynamic_prompt",
        r#"before_model_stream system="tagged\n\nIt is noon.""#,
        "wrap_model enter",
        r#"on_model_delta "all ""#,
        r#"on_model_delta "done""#,
        "wrap_model exit",
        r#"after_model text="ALL DONE" calls=0"#,
        "after_agent final=ALL DONE",
    ];
    assert_eq!(lines, expected);
}

#[tokio::test]
async fn dynamic_prompt_writes_the_volatile_segment_named_after_the_middleware() {
    let model = ScriptedModel::new([ScriptedTurn::text("ok")]);
    let model = Arc::new(model);
    let agent: Agent<Log> = Agent::from_shared(model.clone())
        .with_system_prompt("You are terse.")
        .with_stack(MiddlewareStack::empty().with(Clock).unwrap());
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &Log::default(), "hi")
        .await
        .unwrap();
    let request = &model.requests()[0];
    let segment = request.segment("Clock").expect("a segment named after the middleware");
    assert_eq!(segment.text, "It is noon.");
    assert_eq!(request.system_prompt(), "You are terse.\n\nIt is noon.");
}

#[tokio::test]
async fn steering_hooks_see_and_edit_the_command() {
    let stack = full_stack();
    let log = Log::default();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let mut command = SteeringCommand::new("cmd-1", SteeringAction::Cancel { reason: "bored".into() });
    stack.run_before_steering(&mut ctx, &log, &mut command).await.unwrap();
    assert_eq!(
        command.decision,
        SteeringDecision::Reject {
            reason: "cancelling is not allowed here".into()
        }
    );
    let mut outcome = SteeringOutcome {
        command,
        transformed: false,
        applied: false,
    };
    stack.run_after_steering(&mut ctx, &log, &mut outcome).await.unwrap();
    assert_eq!(log.lines(), ["before_steering cmd-1", "after_steering applied=false"]);
}

#[before_model]
fn refuse(request: &ModelRequest) -> Result<()> {
    Err(TinyAgentsError::validation(format!(
        "{} messages is too many",
        request.messages.len()
    )))
}

#[tokio::test]
async fn on_error_sees_the_error_of_another_hook() {
    let stack = MiddlewareStack::empty().with(LogError).unwrap().with(Refuse).unwrap();
    let log = Log::default();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let mut request = ModelRequest::new(vec![Message::user("a"), Message::user("b")]);
    let err = stack.run_before_model(&mut ctx, &log, &mut request).await.unwrap_err();
    assert_eq!(err, TinyAgentsError::validation("2 messages is too many"));
    assert_eq!(log.lines(), ["on_error validation"]);
}

#[tokio::test]
async fn the_annotated_fn_stays_callable() {
    let log = Log::default();
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let mut request = ModelRequest::default();
    tag_request(&mut request, &log, &mut ctx).await.unwrap();
    assert_eq!(request.system_prompt(), "tagged");
    assert_eq!(clock(&log), "It is noon.");
    let mut delta = ModelDelta::text("hi");
    shout(&mut delta, &log).unwrap();
    assert_eq!(delta.as_text(), Some("HI"));
}

// ----- generic state and context -----

/// Works on any state: it only reads the request.
#[before_model]
async fn count_messages<S>(state: &S, request: &mut ModelRequest) -> Result<()> {
    let _ = state;
    let n = request.messages.len();
    request.set_volatile("count", format!("{n} messages"));
    Ok(())
}

#[derive(Clone, Default)]
struct Tenant {
    id: &'static str,
}

/// Works on any context that can name a tenant.
trait HasTenant {
    fn tenant(&self) -> &'static str;
}

impl HasTenant for Tenant {
    fn tenant(&self) -> &'static str {
        self.id
    }
}

#[before_model]
fn stamp_tenant<C>(ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()>
where
    C: HasTenant,
{
    let tenant = ctx.context().tenant();
    request.set_volatile("tenant", tenant);
    Ok(())
}

#[tokio::test]
async fn a_generic_hook_serves_stacks_of_any_state_and_context() {
    let mut request = ModelRequest::new(vec![Message::user("a")]);

    let on_unit: MiddlewareStack<()> = MiddlewareStack::empty().with(CountMessages).unwrap();
    on_unit
        .run_before_model(&mut RunContext::new(RunConfig::new("r"), ()), &(), &mut request)
        .await
        .unwrap();

    let on_log: MiddlewareStack<Log, Tenant> = MiddlewareStack::empty()
        .with(CountMessages)
        .unwrap()
        .with(StampTenant)
        .unwrap();
    let mut ctx = RunContext::new(RunConfig::new("r"), Tenant { id: "acme" });
    on_log
        .run_before_model(&mut ctx, &Log::default(), &mut request)
        .await
        .unwrap();
    assert_eq!(request.system_prompt(), "1 messages\n\nacme");
}

/// A generic wrap: the handler's type arguments are the generic state and context.
#[wrap_model(name = "passthrough")]
async fn passthrough<S, C>(
    ctx: &mut RunContext<C>,
    state: &S,
    request: ModelRequest,
    next: ModelHandler<'_, S, C>,
) -> Result<MiddlewareModelOutcome> {
    next.run(ctx, state, request).await
}

#[tokio::test]
async fn a_generic_wrap_runs_in_a_typed_agent() {
    let agent: Agent<Log, Tenant> = Agent::new(ScriptedModel::new([ScriptedTurn::text("fine")]))
        .with_stack(MiddlewareStack::empty().with(Passthrough).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), Tenant::default());
    let run = agent.run(&mut ctx, &Log::default(), "hi").await.unwrap();
    assert_eq!(run.final_text(), "fine");
    assert_eq!(agent.stack().implementors(HookKind::WrapModel), ["passthrough"]);
    assert!(agent.stack().implementors(HookKind::BeforeModel).is_empty());
}
