//! Typed tools and outputs on the wire (issue 18, item 1): what the OpenAI
//! and Anthropic providers send for a `#[tool]`, a
//! `StructuredOutputMiddleware::for_type` (`response_format`) and a `tool_choice`,
//! asserted on the request body a loopback server received.
#![cfg(feature = "providers")]

use crate::providers::support as provider_support;

use provider_support::*;
use serde::Deserialize;
use serde_json::json;
use tinyagents::harness::model::providers::ProviderConfig;
use tinyagents::harness::model::{ModelParams, ReasoningEffort, ToolChoice};
use tinyagents::harness::tool::typed::schema_for_type;
use tinyagents::middleware::StructuredOutputMiddleware;
use tinyagents::prelude::*;

#[derive(Debug, PartialEq, Deserialize, schemars::JsonSchema)]
struct City {
    /// The city's name.
    name: String,
    population: u64,
}

/// The city the scripted structured replies answer.
fn lyon() -> City {
    City {
        name: "Lyon".into(),
        population: 522250,
    }
}

/// Returns the weather in a city.
#[tool]
async fn get_weather(
    /// The city's name.
    city: String,
) -> Result<String> {
    Ok(format!("{city}: sunny"))
}

/// A middleware forcing a tool choice on every request.
struct Force(ToolChoice);

#[async_trait::async_trait]
impl Middleware<()> for Force {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL
    }
    async fn before_model(&self, _: &mut RunContext, _: &(), request: &mut ModelRequest) -> Result<()> {
        request.tool_choice = Some(self.0.clone());
        Ok(())
    }
}

fn weather_tools() -> ToolRegistry {
    ToolRegistry::new().with(GetWeather).unwrap()
}

#[tokio::test]
async fn openai_gets_the_typed_schema_as_response_format_and_the_run_returns_a_typed_value() {
    let server = Server::start(vec![Reply::sse(
        &oa_text_reply(r#"{"name": "Lyon", "population": 522250}"#, 5, 9),
        7,
    )])
    .await;
    let stack = MiddlewareStack::new()
        .with(StructuredOutputMiddleware::for_type::<City>().unwrap())
        .unwrap();
    let agent: Agent<()> = Agent::from_shared(openai(&server).build().unwrap())
        .with_tools(weather_tools())
        .with_stack(stack);
    let (mut ctx, _sink) = context();
    let run = agent.run(&mut ctx, &(), "Which city?").await.unwrap();
    assert_eq!(run.structured::<City>().unwrap(), lyon());

    let body = server.only_request().body;
    assert_eq!(
        body["response_format"],
        json!({"type": "json_schema", "json_schema": {
            "name": "City", "schema": schema_for_type::<City>(), "strict": false,
        }})
    );
    let schema = &body["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["properties"]["name"]["description"], "The city's name.");
    assert_eq!(schema["required"], json!(["name", "population"]));
    // The typed tool goes out with the schema `#[tool]` made.
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "get_weather",
            "description": "Returns the weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city's name."}},
                "required": ["city"],
                "additionalProperties": false,
            },
        }}])
    );
    assert!(body.get("tool_choice").is_none(), "no choice, no field");
}

#[tokio::test]
async fn native_false_sends_no_response_format() {
    let server = Server::start(vec![Reply::sse(
        &oa_text_reply(r#"{"name": "A", "population": 1}"#, 1, 1),
        64,
    )])
    .await;
    let stack = MiddlewareStack::new()
        .with(StructuredOutputMiddleware::for_type::<City>().unwrap().native(false))
        .unwrap();
    let agent: Agent<()> = Agent::from_shared(openai(&server).build().unwrap()).with_stack(stack);
    let (mut ctx, _sink) = context();
    let run = agent.run(&mut ctx, &(), "Which city?").await.unwrap();
    assert_eq!(run.structured::<City>().unwrap().name, "A");
    assert!(server.only_request().body.get("response_format").is_none());
}

/// The `tool_choice` a run forcing `choice` sends to the provider that
/// `config` points at a server replying `reply`.
async fn sent_choice(config: fn(&Server) -> ProviderConfig, reply: String, choice: ToolChoice) -> serde_json::Value {
    let server = Server::start(vec![Reply::sse(&reply, 64)]).await;
    let agent: Agent<()> = Agent::from_shared(config(&server).build().unwrap())
        .with_tools(weather_tools())
        .with_stack(MiddlewareStack::new().with(Force(choice)).unwrap());
    let (mut ctx, _sink) = context();
    agent.run(&mut ctx, &(), "Hi").await.unwrap();
    server.only_request().body["tool_choice"].clone()
}

async fn openai_choice(choice: ToolChoice) -> serde_json::Value {
    sent_choice(openai, oa_text_reply("ok", 1, 1), choice).await
}

#[tokio::test]
async fn openai_tool_choice_in_each_form() {
    assert_eq!(openai_choice(ToolChoice::Auto).await, json!("auto"));
    assert_eq!(openai_choice(ToolChoice::None).await, json!("none"));
    assert_eq!(openai_choice(ToolChoice::Required).await, json!("required"));
    assert_eq!(
        openai_choice(ToolChoice::Tool("get_weather".into())).await,
        json!({"type": "function", "function": {"name": "get_weather"}})
    );
}

async fn anthropic_choice(choice: ToolChoice) -> serde_json::Value {
    sent_choice(anthropic, an_text_reply("ok", 1, 1), choice).await
}

#[tokio::test]
async fn anthropic_tool_choice_in_each_form() {
    assert_eq!(anthropic_choice(ToolChoice::Auto).await, json!({"type": "auto"}));
    assert_eq!(anthropic_choice(ToolChoice::None).await, json!({"type": "none"}));
    assert_eq!(anthropic_choice(ToolChoice::Required).await, json!({"type": "any"}));
    assert_eq!(
        anthropic_choice(ToolChoice::Tool("get_weather".into())).await,
        json!({"type": "tool", "name": "get_weather"})
    );
}

/// An Anthropic reply calling the tool `name` with `input` streamed in pieces.
fn an_tool_reply(name: &str, input: &str, piece: usize) -> String {
    let mut events = vec![
        an_start(3, 0, 0),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}}),
    ];
    let chars: Vec<char> = input.chars().collect();
    for part in chars.chunks(piece) {
        let text: String = part.iter().collect();
        events.push(json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "input_json_delta", "partial_json": text}}));
    }
    events.push(json!({"type": "content_block_stop", "index": 0}));
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                       "usage": {"output_tokens": 9}}),
    );
    events.push(json!({"type": "message_stop"}));
    anthropic_sse(&events)
}

fn city_stack() -> MiddlewareStack<()> {
    MiddlewareStack::new()
        .with(StructuredOutputMiddleware::for_type::<City>().unwrap())
        .unwrap()
}

#[tokio::test]
async fn anthropic_gets_the_schema_as_a_forced_answer_tool_whose_input_becomes_the_reply() {
    let server = Server::start(vec![Reply::sse(
        &an_tool_reply("City", r#"{"name": "Lyon", "population": 522250}"#, 5),
        11,
    )])
    .await;
    let agent: Agent<()> = Agent::from_shared(anthropic(&server).build().unwrap()).with_stack(city_stack());
    let (mut ctx, _sink) = context();
    let run = agent.run(&mut ctx, &(), "Which city?").await.unwrap();
    assert_eq!(run.structured::<City>().unwrap(), lyon());
    assert_eq!(run.counters.tool_calls, 0, "the answer tool is not a tool call");
    assert!(run.final_message.as_ref().unwrap().tool_calls.is_empty());

    let body = server.only_request().body;
    assert_eq!(body["tool_choice"], json!({"type": "tool", "name": "City"}));
    assert_eq!(body["tools"][0]["name"], "City");
    assert_eq!(body["tools"][0]["input_schema"], schema_for_type::<City>());
    assert!(body.get("response_format").is_none());
}

#[tokio::test]
async fn anthropic_with_tools_of_its_own_lets_the_model_call_them_before_answering() {
    let server = Server::start(vec![
        Reply::sse(
            &anthropic_sse(&[
                an_start(3, 0, 0),
                json!({"type": "content_block_start", "index": 0, "content_block":
                       {"type": "tool_use", "id": "toolu_w", "name": "get_weather", "input": {}}}),
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Lyon\"}"}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}}),
                json!({"type": "message_stop"}),
            ]),
            64,
        ),
        Reply::sse(&an_tool_reply("City", r#"{"name": "Lyon", "population": 1}"#, 64), 64),
    ])
    .await;
    let agent: Agent<()> = Agent::from_shared(anthropic(&server).build().unwrap())
        .with_tools(weather_tools())
        .with_stack(city_stack());
    let (mut ctx, _sink) = context();
    let run = agent.run(&mut ctx, &(), "Which city?").await.unwrap();
    assert_eq!(run.structured::<City>().unwrap().population, 1);
    assert_eq!(run.counters.tool_calls, 1, "the real tool ran once");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for r in &requests {
        assert_eq!(r.body["tool_choice"], json!({"type": "any"}));
        let names: Vec<&str> = r.body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["get_weather", "City"]);
    }
    // The weather result went back as the tool's result.
    assert!(requests[1].body.to_string().contains("Lyon: sunny"));
}

#[tokio::test]
async fn anthropic_non_streamed_answer_tool_reply_is_text_too() {
    let reply = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "City", "input": {"name": "Oslo", "population": 7}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 4}});
    let server = Server::start(vec![Reply::status(
        200,
        &[("content-type", "application/json")],
        &reply.to_string(),
    )])
    .await;
    let agent: Agent<()> =
        Agent::from_shared(anthropic(&server).with_streaming(false).build().unwrap()).with_stack(city_stack());
    let (mut ctx, _sink) = context();
    let run = agent.run(&mut ctx, &(), "Which city?").await.unwrap();
    assert_eq!(run.structured::<City>().unwrap().name, "Oslo");
    assert_eq!(server.only_request().body["stream"], false);
}

#[tokio::test]
async fn anthropic_with_extended_thinking_keeps_the_schema_in_the_prompt_only() {
    let server = Server::start(vec![Reply::sse(
        &an_text_reply(r#"{"name": "B", "population": 2}"#, 1, 1),
        64,
    )])
    .await;
    let agent: Agent<()> = Agent::from_shared(anthropic(&server).build().unwrap())
        .with_params(ModelParams {
            reasoning_effort: Some(ReasoningEffort::Low),
            ..ModelParams::default()
        })
        .with_stack(city_stack());
    let (mut ctx, _sink) = context();
    let run = agent.run(&mut ctx, &(), "Which city?").await.unwrap();
    assert_eq!(run.structured::<City>().unwrap().population, 2);
    let body = server.only_request().body;
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none());
    assert!(body["system"][0]["text"].as_str().unwrap().contains("\"population\""));
}

#[tokio::test]
async fn forcing_a_tool_the_request_does_not_offer_is_refused_before_anything_is_sent() {
    for (config_of, choice) in [
        (
            openai as fn(&Server) -> ProviderConfig,
            ToolChoice::Tool("get_time".into()),
        ),
        (anthropic, ToolChoice::Tool("get_time".into())),
    ] {
        let server = Server::start(vec![]).await;
        let agent: Agent<()> = Agent::from_shared(config_of(&server).build().unwrap())
            .with_tools(weather_tools())
            .with_stack(MiddlewareStack::new().with(Force(choice)).unwrap());
        let (mut ctx, _sink) = context();
        let e = agent.run(&mut ctx, &(), "Hi").await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config, "{e}");
        let msg = e.to_string();
        assert!(msg.contains("`get_time`") && msg.contains("`get_weather`"), "{msg}");
        assert!(server.requests().is_empty());
    }
    // `required` without tools, too.
    let server = Server::start(vec![]).await;
    let agent: Agent<()> = Agent::from_shared(openai(&server).build().unwrap())
        .with_stack(MiddlewareStack::new().with(Force(ToolChoice::Required)).unwrap());
    let (mut ctx, _sink) = context();
    assert_eq!(
        agent.run(&mut ctx, &(), "Hi").await.unwrap_err().kind(),
        ErrorKind::Config
    );
    assert!(server.requests().is_empty());
    // A non-forcing choice without tools is simply not sent.
    let server = Server::start(vec![Reply::sse(&oa_text_reply("ok", 1, 1), 64)]).await;
    let agent: Agent<()> = Agent::from_shared(openai(&server).build().unwrap())
        .with_stack(MiddlewareStack::new().with(Force(ToolChoice::None)).unwrap());
    let (mut ctx, _sink) = context();
    agent.run(&mut ctx, &(), "Hi").await.unwrap();
    assert!(server.only_request().body.get("tool_choice").is_none());
}

#[tokio::test]
async fn anthropic_refuses_a_forced_tool_with_extended_thinking() {
    let server = Server::start(vec![]).await;
    let agent: Agent<()> = Agent::from_shared(anthropic(&server).build().unwrap())
        .with_tools(weather_tools())
        .with_params(ModelParams {
            reasoning_effort: Some(ReasoningEffort::Low),
            ..ModelParams::default()
        })
        .with_stack(MiddlewareStack::new().with(Force(ToolChoice::Required)).unwrap());
    let (mut ctx, _sink) = context();
    let e = agent.run(&mut ctx, &(), "Hi").await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config);
    assert!(e.to_string().contains("extended thinking"), "{e}");
    assert!(server.requests().is_empty());
}
