//! The Anthropic provider against a loopback server speaking the Messages
//! wire format (named SSE events), run through an `Agent`: every case asserts
//! what the stack (the `Watch` middleware), the event sink and the run saw,
//! and what went out on the wire.
#![cfg(feature = "providers")]

use crate::providers::support as provider_support;

use std::time::Duration;

use provider_support::*;
use serde_json::{json, Value};
use tinyagents::harness::model::providers::{AnthropicModel, ProviderConfig};
use tinyagents::harness::model::{DeltaContent, FinishReason, ModelParams, ReasoningEffort};
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

fn agent(config: ProviderConfig, watch: &Watch) -> Agent<()> {
    Agent::from_shared(config.build().unwrap()).with_stack(stack_with(watch))
}

fn block_start(index: u32, block: Value) -> Value {
    json!({"type": "content_block_start", "index": index, "content_block": block})
}

fn block_delta(index: u32, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

fn block_stop(index: u32) -> Value {
    json!({"type": "content_block_stop", "index": index})
}

fn message_delta(stop_reason: &str, output_tokens: u64) -> Value {
    json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
           "usage": {"output_tokens": output_tokens}})
}

fn stop() -> Value {
    json!({"type": "message_stop"})
}

#[tokio::test]
async fn text_streamed_over_many_small_chunks_arrives_delta_by_delta() {
    let text = "Grüß dich, 🌍 turns. ";
    let server = Server::start(vec![Reply::sse(&an_text_reply(text, 21, 9), 3)]).await;
    let watch = Watch::default();
    let (mut ctx, sink) = context();
    let run = agent(anthropic(&server), &watch)
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();

    assert_eq!(run.final_text(), text);
    let words: Vec<String> = text.split_inclusive(' ').map(str::to_owned).collect();
    assert_eq!(watch.texts(), words);
    // the input usage, reported in `message_start`, is forwarded at once; the output's at the end
    let mut expected = vec![
        "run_started".to_owned(),
        "model_call step=1 attempt=1".to_owned(),
        "usage".to_owned(),
    ];
    expected.extend(words.iter().map(|w| format!("delta {w:?}")));
    expected.extend(["usage", "finish Stop", "model_done", "run_completed"].map(String::from));
    assert_eq!(model_trace(&sink), expected);
    assert_eq!(run.usage, Usage::new(21, 9));
    assert_eq!(watch.responses()[0].model.as_deref(), Some("anthropic:claude-test"));

    let request = server.only_request();
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(request.header("authorization"), None);
    assert_eq!(request.body["model"], "claude-test");
    assert_eq!(request.body["stream"], true);
    assert_eq!(request.body["max_tokens"], 4096, "the default output limit");
    assert_eq!(
        request.body["messages"],
        json!([{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    );
    assert!(request.body.get("system").is_none() && request.body.get("tools").is_none());
}

#[tokio::test]
async fn tool_calls_split_over_many_chunks_are_assembled_and_run() {
    let turn1 = anthropic_sse(&[
        an_start(30, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        block_delta(0, json!({"type": "text_delta", "text": "Checking."})),
        block_stop(0),
        json!({"type": "ping"}),
        block_start(
            1,
            json!({"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {}}),
        ),
        block_delta(1, json!({"type": "input_json_delta", "partial_json": ""})),
        block_delta(1, json!({"type": "input_json_delta", "partial_json": "{\"city\": "})),
        block_delta(1, json!({"type": "input_json_delta", "partial_json": "\"Paris\"}"})),
        block_stop(1),
        block_start(
            2,
            json!({"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {}}),
        ),
        block_delta(2, json!({"type": "input_json_delta", "partial_json": "{\"tz\""})),
        block_delta(2, json!({"type": "input_json_delta", "partial_json": ":\"CET\"}"})),
        block_stop(2),
        message_delta("tool_use", 40),
        stop(),
    ]);
    let server = Server::start(vec![
        Reply::sse(&turn1, 7),
        Reply::sse(&an_text_reply("Sunny at noon.", 90, 6), 7),
    ])
    .await;
    let weather = RecordingTool::new("get_weather").returning("sunny");
    let time = RecordingTool::new("get_time").returning("12:00");
    let tools = ToolRegistry::new()
        .with(weather.clone())
        .unwrap()
        .with(time.clone())
        .unwrap();
    let watch = Watch::default();
    let (mut ctx, sink) = context();
    let run = agent(anthropic(&server), &watch)
        .with_tools(tools)
        .run(&mut ctx, &(), "Weather and time in Paris?")
        .await
        .unwrap();

    assert_eq!(weather.calls(), [json!({"city": "Paris"})]);
    assert_eq!(time.calls(), [json!({"tz": "CET"})]);
    assert_eq!(run.final_text(), "Sunny at noon.");
    assert_eq!(run.usage, Usage::new(120, 46));
    // content block 1 and 2 are tool calls 0 and 1
    let pieces: Vec<(u32, Option<String>, Option<String>, String)> = watch
        .deltas()
        .into_iter()
        .filter_map(|d| match d.content {
            DeltaContent::ToolCall {
                index,
                id,
                name,
                arguments,
            } => Some((index, id, name, arguments)),
            _ => None,
        })
        .collect();
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        pieces,
        [
            (0, s("toolu_a"), s("get_weather"), String::new()),
            (0, None, None, "{\"city\": ".into()),
            (0, None, None, "\"Paris\"}".into()),
            (1, s("toolu_b"), s("get_time"), String::new()),
            (1, None, None, "{\"tz\"".into()),
            (1, None, None, ":\"CET\"}".into()),
        ]
    );
    let first = &watch.responses()[0];
    assert_eq!(first.finish_reason, FinishReason::ToolCalls);
    assert_eq!(first.message.text(), "Checking.");
    assert_eq!(
        first.message.tool_calls,
        [
            ToolCall::new("toolu_a", "get_weather", json!({"city": "Paris"})),
            ToolCall::new("toolu_b", "get_time", json!({"tz": "CET"})),
        ]
    );
    let t = model_trace(&sink);
    assert!(t.contains(&"tool_call_delta \"\\\"Paris\\\"}\"".to_owned()), "{t:#?}");

    let requests = server.requests();
    assert_eq!(
        requests[0].body["tools"][0],
        json!({"name": "get_weather", "description": "The fake tool `get_weather`.",
               "input_schema": {"type": "object", "properties": {}}})
    );
    // the calls went back as tool_use blocks, both results in one user message
    assert_eq!(
        requests[1].body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Weather and time in Paris?"}]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "toolu_b", "name": "get_time", "input": {"tz": "CET"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "sunny"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "12:00"},
            ]},
        ])
    );
}

#[tokio::test]
async fn usage_maps_cache_reads_and_writes_and_thinking_streams_as_reasoning() {
    let body = anthropic_sse(&[
        an_start(100, 1200, 3000),
        block_start(0, json!({"type": "thinking", "thinking": ""})),
        block_delta(0, json!({"type": "thinking_delta", "thinking": "Hmm."})),
        block_delta(0, json!({"type": "signature_delta", "signature": "c2ln"})),
        block_stop(0),
        block_start(1, json!({"type": "text", "text": ""})),
        block_delta(1, json!({"type": "text_delta", "text": "Done."})),
        block_stop(1),
        message_delta("end_turn", 250),
        stop(),
    ]);
    let server = Server::start(vec![Reply::sse(&body, 13)]).await;
    let watch = Watch::default();
    let (mut ctx, sink) = context();
    let run = agent(anthropic(&server), &watch)
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();
    let expected = Usage {
        input_tokens: 100,
        output_tokens: 250,
        reasoning_tokens: 0,
        cache_read_tokens: 3000,
        cache_write_tokens: 1200,
    };
    assert_eq!(run.usage, expected);
    assert_eq!(watch.responses()[0].usage, expected);
    assert_eq!(watch.responses()[0].message.reasoning(), "Hmm.");
    assert_eq!(run.final_text(), "Done.");
    assert_eq!(
        model_trace(&sink),
        [
            "run_started",
            "model_call step=1 attempt=1",
            "usage",
            "reasoning \"Hmm.\"",
            "delta \"Done.\"",
            "usage",
            "finish Stop",
            "model_done",
            "run_completed"
        ]
    );
    let completed = sink.events().into_iter().find_map(|e| match e {
        AgentEvent::ModelCallCompleted { usage, .. } => Some(usage),
        _ => None,
    });
    assert_eq!(completed, Some(expected));
}

#[tokio::test]
async fn a_reply_cut_off_by_max_tokens_finishes_with_length() {
    let body = anthropic_sse(&[
        an_start(10, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        block_delta(0, json!({"type": "text_delta", "text": "The answer"})),
        block_delta(0, json!({"type": "text_delta", "text": " is"})),
        block_stop(0),
        message_delta("max_tokens", 16),
        stop(),
    ]);
    let server = Server::start(vec![Reply::sse(&body, 5)]).await;
    let watch = Watch::default();
    let (mut ctx, sink) = context();
    let run = agent(anthropic(&server), &watch)
        .with_params(ModelParams {
            max_tokens: Some(16),
            ..ModelParams::default()
        })
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();
    assert_eq!(watch.responses()[0].finish_reason, FinishReason::Length);
    assert_eq!(run.final_text(), "The answer is");
    assert!(model_trace(&sink).contains(&"finish Length".to_owned()));
    assert_eq!(server.only_request().body["max_tokens"], 16);
}

#[tokio::test]
async fn an_agent_with_the_default_stack_asks_for_32000_tokens_and_continues_a_cut_reply() {
    // seed 002: with no max_tokens configured, Anthropic requests start at
    // min(32000, the model's output limit), 32000 when the limit is unknown
    let cut = anthropic_sse(&[
        an_start(10, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        block_delta(0, json!({"type": "text_delta", "text": "The answer"})),
        block_stop(0),
        message_delta("max_tokens", 32000),
        stop(),
    ]);
    let server = Server::start(vec![
        Reply::sse(&cut, 7),
        Reply::sse(&an_text_reply(" is 42.", 12, 4), 7),
    ])
    .await;
    let (mut ctx, _) = context();
    let run = Agent::<()>::from_shared(anthropic(&server).build().unwrap())
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "the cut reply was continued, not final");
    assert_eq!(requests[0].body["max_tokens"], 32000);
    let continued = requests[1].body["messages"].to_string();
    assert!(continued.contains("cut off by the output-token limit"), "{continued}");
    assert_eq!(run.final_text(), "The answer is 42.");
}

async fn failing_run(reply: Reply) -> (TinyAgentsError, Watch, Vec<String>) {
    let server = Server::start(vec![reply]).await;
    let watch = Watch::default();
    let (mut ctx, sink) = context();
    let err = agent(anthropic(&server), &watch)
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap_err();
    assert_eq!(
        watch.errors(),
        std::slice::from_ref(&err),
        "on_error saw the same error"
    );
    (err, watch, model_trace(&sink))
}

#[tokio::test]
async fn http_429_is_a_rate_limit_with_its_retry_after_hint() {
    let (err, _, trace) = failing_run(Reply::status(
        429,
        &[("retry-after", "3"), ("request-id", "req_an_1")],
        r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
    ))
    .await;
    assert_eq!(err.kind(), ErrorKind::RateLimited);
    assert_eq!(err.retry_after(), Some(Duration::from_secs(3)));
    assert!(
        err.to_string().contains("(rate_limit_error) to POST http://127.0.0.1:"),
        "the error names the method and the URL: {err}"
    );
    assert!(
        err.to_string().contains("/v1/messages: Number of request tokens"),
        "{err}"
    );
    assert!(err.to_string().contains("req_an_1"), "{err}");
    assert_eq!(
        trace,
        [
            "run_started",
            "model_call step=1 attempt=1",
            "model_done error:rate_limited",
            "discarded attempt=1",
            "run_completed error:rate_limited"
        ]
    );
}

#[tokio::test]
async fn http_500_and_529_overloaded_are_retryable() {
    for (status, kind) in [(500, "api_error"), (529, "overloaded_error")] {
        let body = json!({"type": "error", "error": {"type": kind, "message": "try later"}}).to_string();
        let (err, _, _) = failing_run(Reply::status(status, &[], &body)).await;
        assert_eq!(err.kind(), ErrorKind::Model);
        assert!(err.is_retryable(), "{status}: {err}");
        assert!(err.to_string().contains(&format!("HTTP {status} ({kind})")), "{err}");
    }
}

#[tokio::test]
async fn http_401_is_not_retryable_and_names_the_key_variable() {
    let (err, _, _) = failing_run(Reply::status(
        401,
        &[],
        r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
    ))
    .await;
    assert!(!err.is_retryable());
    let msg = err.to_string();
    assert!(
        msg.contains("invalid x-api-key") && msg.contains("`ANTHROPIC_API_KEY`"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_stream_dropped_midway_is_retryable_after_the_deltas_that_came() {
    let body = anthropic_sse(&[
        an_start(10, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        block_delta(0, json!({"type": "text_delta", "text": "Once "})),
        block_delta(0, json!({"type": "text_delta", "text": "upon"})),
    ]);
    let (err, watch, trace) = failing_run(Reply::SseDrop(split(&body, 10))).await;
    assert_eq!(err.kind(), ErrorKind::Model);
    assert!(err.is_retryable(), "{err}");
    assert_eq!(watch.texts(), ["Once ", "upon"]);
    assert_eq!(
        trace,
        [
            "run_started",
            "model_call step=1 attempt=1",
            "usage",
            "delta \"Once \"",
            "delta \"upon\"",
            "model_done error:model",
            "discarded attempt=1",
            "run_completed error:model"
        ]
    );
}

#[tokio::test]
async fn malformed_json_in_a_chunk_is_a_classified_error_not_a_panic() {
    let mut body = anthropic_sse(&[
        an_start(10, 0, 0),
        block_start(0, json!({"type": "text", "text": ""})),
        block_delta(0, json!({"type": "text_delta", "text": "ok"})),
    ]);
    body.push_str(
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"text\":\"bro\n\n",
    );
    let (err, watch, _) = failing_run(Reply::sse(&body, 6)).await;
    assert_eq!(err.kind(), ErrorKind::Model);
    assert!(err.is_retryable());
    assert!(err.to_string().contains("malformed stream chunk"), "{err}");
    assert_eq!(watch.texts(), ["ok"]);
}

#[tokio::test]
async fn an_error_event_inside_the_stream_is_classified() {
    let body = anthropic_sse(&[
        an_start(10, 0, 0),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    let (err, _, _) = failing_run(Reply::sse(&body, 9)).await;
    assert!(err.is_retryable());
    assert!(err.to_string().contains("(overloaded_error): Overloaded"), "{err}");
}

#[tokio::test]
async fn system_segments_go_stable_first_with_a_cache_breakpoint_and_thinking_budget() {
    let server = Server::start(vec![Reply::sse(&an_text_reply("ok", 1, 1), 64)]).await;
    let watch = Watch::default();
    let (mut ctx, _) = context();
    agent(anthropic(&server), &watch)
        .with_system(PromptSegment::stable("persona", "You are terse."))
        .with_system(PromptSegment::volatile("date", "Today is Monday."))
        .with_system(PromptSegment::stable("rules", "Always cite."))
        .with_params(ModelParams {
            max_tokens: Some(512),
            reasoning_effort: Some(ReasoningEffort::Medium),
            ..ModelParams::default()
        })
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();
    let body = server.only_request().body;
    assert_eq!(
        body["system"],
        json!([
            {"type": "text", "text": "You are terse."},
            {"type": "text", "text": "Always cite.", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": "Today is Monday."},
        ])
    );
    let budget = AnthropicModel::thinking_budget(ReasoningEffort::Medium);
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": budget}));
    assert_eq!(body["max_tokens"], 512 + budget, "the answer keeps its own limit");
}

#[tokio::test]
async fn temperature_and_extra_are_sent_and_caching_can_be_turned_off() {
    let server = Server::start(vec![Reply::sse(&an_text_reply("ok", 1, 1), 64)]).await;
    let mut extra = serde_json::Map::new();
    extra.insert("top_k".into(), json!(5));
    let (mut ctx, _) = context();
    agent(anthropic(&server).with_prompt_caching(false), &Watch::default())
        .with_system_prompt("You are terse.")
        .with_params(ModelParams {
            temperature: Some(0.5),
            extra,
            ..ModelParams::default()
        })
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();
    let body = server.only_request().body;
    assert_eq!(body["system"], json!([{"type": "text", "text": "You are terse."}]));
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["top_k"], 5);
    assert!(body.get("thinking").is_none());
}

#[tokio::test]
async fn without_streaming_one_json_reply_is_replayed_as_deltas() {
    let message = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "Search it.", "signature": "c2ln"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "rust"}},
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 50, "output_tokens": 9, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 20},
    });
    let server = Server::start(vec![Reply::status(200, &[], &message.to_string())]).await;
    let model = AnthropicModel::new(anthropic(&server).with_streaming(false)).unwrap();
    let response = model
        .complete(&ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap();
    assert_eq!(response.message.text(), "Let me look.");
    assert_eq!(response.message.reasoning(), "Search it.");
    assert_eq!(
        response.message.tool_calls,
        [ToolCall::new("toolu_1", "search", json!({"q": "rust"}))]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage {
            cache_read_tokens: 20,
            ..Usage::new(50, 9)
        }
    );
    assert_eq!(server.only_request().body["stream"], false);
}

/// Anthropic reports the input usage of a reply in `message_start`, before
/// any content: the decoder emits it at once, so an attempt that fails after
/// it (an `overloaded_error` event, a dropped stream) still reaches the run
/// and `limits` with the million input tokens the server said it counted.
#[tokio::test]
async fn input_usage_reported_in_message_start_is_charged_when_the_stream_then_fails() {
    let body = anthropic_sse(&[
        an_start(1_000_000, 0, 0),
        json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
    ]);
    let server = Server::start(vec![Reply::sse(&body, 16)]).await;
    let config = ProviderConfig::parse("anthropic:claude-test")
        .unwrap()
        .with_base_url(&server.base)
        .with_api_key("sk-ant-test");
    let stack = MiddlewareStack::empty()
        .with(limits_of(
            "max_price_usd = 100.0\ninput_cost_per_million = 1.0\noutput_cost_per_million = 0.0",
        ))
        .unwrap();
    let (mut ctx, _sink) = context();
    let err = Agent::<()>::from_shared(config.build().unwrap())
        .with_stack(stack)
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("overloaded_error"), "{err}");
    assert_eq!(
        ctx.usage().input_tokens,
        1_000_000,
        "the usage the server reported before failing is the run's"
    );
    let budget = tinyagents::middleware::LimitsMiddleware::budget(&ctx);
    assert!(
        (budget.spent_usd.unwrap_or(0.0) - 1.0).abs() < 1e-9,
        "the failed attempt's reported input counts against max_price_usd: {budget:?}"
    );
}

/// Running totals become increments: `message_start` and `message_delta`
/// each add what grew, and the reply's usage is their sum, never double.
#[tokio::test]
async fn usage_reported_twice_is_counted_once() {
    let body = anthropic_sse(&[
        an_start(1_000, 0, 0),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
               "usage": {"input_tokens": 1_000, "output_tokens": 25}}),
        json!({"type": "message_stop"}),
    ]);
    let server = Server::start(vec![Reply::sse(&body, 16)]).await;
    let (mut ctx, _sink) = context();
    let run = Agent::<()>::from_shared(anthropic(&server).build().unwrap())
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();
    assert_eq!(ctx.usage().input_tokens, 1_000, "{:?}", run.usage);
    assert_eq!(ctx.usage().output_tokens, 25);
}

fn limits_of(toml: &str) -> tinyagents::middleware::LimitsMiddleware {
    use tinyagents::config::{from_toml_str, BuildMiddleware};
    from_toml_str::<tinyagents::middleware::LimitsConfig>(toml)
        .unwrap()
        .build()
}
