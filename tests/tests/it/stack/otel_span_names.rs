//! The `tracing` built-in names its spans for OpenTelemetry by the GenAI
//! conventions' rule (`otel.name`: `chat {model}`, `execute_tool {tool}`) and
//! splits this crate's `provider:model` ids into `gen_ai.provider.name` and
//! `gen_ai.request.model`.

use crate::capture;

use serde_json::json;
use tinyagents::middleware::TracingMiddleware;
use tinyagents::prelude::*;

fn agent(tracing: TracingMiddleware) -> Agent<()> {
    let tools = ToolRegistry::new()
        .with(tool_fn(
            "web_search",
            "Searches.",
            |_cx, _a| async move { Ok("r".into()) },
        ))
        .unwrap();
    Agent::new(ScriptedModel::new(vec![
        ScriptedTurn::Reply(ModelResponse::tool_calls(vec![ToolCall::new(
            "call-9",
            "web_search",
            json!({}),
        )])),
        ScriptedTurn::text("ok"),
    ]))
    .with_tools(tools)
    .with_stack(MiddlewareStack::new().with(tracing).unwrap())
}

#[tokio::test]
async fn span_names_follow_the_gen_ai_naming_rule() {
    let (captured, _guard) = capture::capture();
    let mut ctx = RunContext::new(RunConfig::new("run-otel").with_model("openai:gpt-4o-mini"), ());
    agent(TracingMiddleware::new()).run(&mut ctx, &(), "q").await.unwrap();

    let chats = captured.spans_named("chat");
    assert_eq!(chats.len(), 2);
    let chat = &chats[0].fields;
    assert_eq!(chat["otel.name"], "chat gpt-4o-mini");
    assert_eq!(chat["otel.kind"], "client");
    assert_eq!(chat["gen_ai.provider.name"], "openai");
    assert_eq!(chat["gen_ai.request.model"], "gpt-4o-mini");

    let tools = captured.spans_named("execute_tool");
    assert_eq!(tools.len(), 1);
    assert_eq!(tools[0].fields["otel.name"], "execute_tool web_search");
    assert_eq!(tools[0].fields["otel.kind"], "internal");
    assert_eq!(tools[0].fields["gen_ai.tool.name"], "web_search");

    let run = &captured.spans_named("invoke_agent")[0].fields;
    assert_eq!(run["otel.name"], "invoke_agent");
}

#[tokio::test]
async fn a_configured_provider_wins_and_other_ids_stay_whole() {
    let (captured, _guard) = capture::capture();
    let mut ctx = RunContext::new(RunConfig::new("run-otel-2").with_model("my-local:llama"), ());
    agent(TracingMiddleware::new().provider("vllm"))
        .run(&mut ctx, &(), "q")
        .await
        .unwrap();
    let chat = &captured.spans_named("chat")[0].fields;
    assert_eq!(chat["gen_ai.provider.name"], "vllm");
    assert_eq!(
        chat["gen_ai.request.model"], "my-local:llama",
        "an unknown prefix is not a provider"
    );
    assert_eq!(chat["otel.name"], "chat my-local:llama");
}
