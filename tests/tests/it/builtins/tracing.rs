//! `TracingMiddleware`: spans per run, model call and tool call with
//! OpenTelemetry GenAI attribute names, errors on the span, nesting, and no
//! prompt or completion text unless opted in.

use crate::capture;

use serde_json::json;
use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use super::support::parent_of;

fn agent(tracing_mw: TracingMiddleware, turns: Vec<ScriptedTurn>) -> Agent<()> {
    let tools = ToolRegistry::new()
        .with(tool_fn("search", "Searches.", |_cx, _a| async move {
            Ok("secret result".into())
        }))
        .unwrap();
    Agent::new(ScriptedModel::new(turns))
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(tracing_mw).unwrap())
}

fn turns() -> Vec<ScriptedTurn> {
    vec![
        ScriptedTurn::Reply(
            ModelResponse::tool_calls(vec![ToolCall::new("call-1", "search", json!({"q": "secret query"}))])
                .with_usage(Usage::new(100, 7)),
        ),
        ScriptedTurn::Reply(ModelResponse::text("secret answer").with_usage(Usage {
            cache_read_tokens: 40,
            ..Usage::new(10, 3)
        })),
    ]
}

#[tokio::test]
async fn spans_carry_gen_ai_attributes_and_nest_under_the_run() {
    let (captured, _guard) = capture::capture();
    let agent = agent(TracingMiddleware::new().provider("scripted"), turns());
    let mut ctx = RunContext::new(
        RunConfig::new("run-7").with_thread("thread-1").with_model("m-large"),
        (),
    );
    agent.run(&mut ctx, &(), "secret question").await.unwrap();

    let runs = captured.spans_named("invoke_agent");
    assert_eq!(runs.len(), 1);
    let run = &runs[0].fields;
    assert_eq!(run["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(run["gen_ai.agent.id"], "run-7");
    assert_eq!(run["gen_ai.conversation.id"], "thread-1");
    assert_eq!(run["gen_ai.provider.name"], "scripted");
    assert_eq!(run["gen_ai.usage.input_tokens"], "150");
    assert_eq!(run["gen_ai.usage.output_tokens"], "10");
    assert!(!run.contains_key("error.type"));

    let chats = captured.spans_named("chat");
    assert_eq!(chats.len(), 2);
    assert!(chats.iter().all(|s| s.parent.as_deref() == Some("invoke_agent")));
    let first = &chats[0].fields;
    assert_eq!(first["gen_ai.operation.name"], "chat");
    assert_eq!(first["gen_ai.request.model"], "m-large");
    assert_eq!(first["gen_ai.response.model"], "scripted");
    assert_eq!(first["gen_ai.usage.input_tokens"], "100");
    assert_eq!(first["gen_ai.usage.output_tokens"], "7");
    assert_eq!(first["gen_ai.response.finish_reasons"], "tool_calls");
    let second = &chats[1].fields;
    assert_eq!(
        second["gen_ai.usage.input_tokens"], "50",
        "cache reads are input tokens"
    );
    assert_eq!(second["gen_ai.usage.cache_read.input_tokens"], "40");

    let tools = captured.spans_named("execute_tool");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].parent.as_deref(), Some("invoke_agent"));
    assert_eq!(tools[0].fields["gen_ai.operation.name"], "execute_tool");
    assert_eq!(tools[0].fields["gen_ai.tool.name"], "search");
    assert_eq!(tools[0].fields["gen_ai.tool.call.id"], "call-1");

    let everything = format!("{:?}", captured.spans());
    assert!(
        !everything.contains("secret"),
        "no content unless opted in: {everything}"
    );
}

#[tokio::test]
async fn content_is_recorded_only_when_opted_in() {
    let (captured, _guard) = capture::capture();
    let config: TracingConfig = from_toml_str("record_content = true").unwrap();
    let agent = agent(config.build(), turns());
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "secret question")
        .await
        .unwrap();
    let chats = captured.spans_named("chat");
    assert!(chats[0].fields["gen_ai.input.messages"].contains("secret question"));
    assert!(chats[1].fields["gen_ai.output.messages"].contains("secret answer"));
    let tool = &captured.spans_named("execute_tool")[0].fields;
    assert_eq!(tool["gen_ai.tool.call.arguments"], r#"{"q":"secret query"}"#);
    assert_eq!(tool["gen_ai.tool.call.result"], "secret result");
}

#[tokio::test]
async fn errors_are_recorded_on_the_call_and_run_spans() {
    let (captured, _guard) = capture::capture();
    let agent = agent(
        TracingMiddleware::new(),
        vec![ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true))],
    );
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Model);
    let chat = &captured.spans_named("chat")[0].fields;
    assert_eq!(chat["error.type"], "model");
    assert_eq!(chat["otel.status_code"], "ERROR");
    let run = &captured.spans_named("invoke_agent")[0].fields;
    assert_eq!(run["error.type"], "model");
    assert_eq!(run["otel.status_code"], "ERROR");
}

#[tokio::test]
async fn a_failed_tool_result_marks_the_tool_span() {
    let (captured, _guard) = capture::capture();
    let tools = ToolRegistry::new()
        .with(tool_fn("broken", "Fails.", |_cx, _a| async move {
            Err(TinyAgentsError::tool("broken", "disk full"))
        }))
        .unwrap();
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("broken", json!({})),
        ScriptedTurn::text("sorry"),
    ]))
    .with_tools(tools)
    .with_stack(MiddlewareStack::new().with(TracingMiddleware::new()).unwrap());
    agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await
        .unwrap();
    let tool = &captured.spans_named("execute_tool")[0].fields;
    assert_eq!(tool["error.type"], "tool");
    assert_eq!(tool["otel.status_code"], "ERROR");
    assert!(!captured.spans_named("invoke_agent")[0]
        .fields
        .contains_key("error.type"));
}

#[tokio::test]
async fn a_sub_agent_run_nests_under_the_tool_call_that_started_it() {
    let (captured, _guard) = capture::capture();
    let stack = std::sync::Arc::new(MiddlewareStack::new().with(TracingMiddleware::new()).unwrap());
    let child: Agent<()> =
        Agent::new(ScriptedModel::new([ScriptedTurn::text("child done")])).with_shared_stack(stack.clone());
    let parent = parent_of(child, stack);
    parent
        .run(&mut RunContext::new(RunConfig::new("p"), ()), &(), "go")
        .await
        .unwrap();
    let runs = captured.spans_named("invoke_agent");
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].parent, None);
    assert_eq!(runs[1].parent.as_deref(), Some("execute_tool"));
    assert_eq!(runs[1].fields["tinyagents.depth"], "1");
}
