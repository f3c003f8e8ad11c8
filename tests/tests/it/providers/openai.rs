//! The OpenAI provider against a loopback server speaking the Chat Completions
//! wire format (SSE), run through an `Agent`: every case asserts what the
//! stack (the `Watch` middleware), the event sink and the run saw, and what
//! went out on the wire.
#![cfg(feature = "providers")]

use crate::providers::support as provider_support;

use std::time::Duration;

use provider_support::*;
use serde_json::json;
use tinyagents::harness::model::providers::{OpenAiModel, ProviderConfig};
use tinyagents::harness::model::{DeltaContent, FinishReason, ModelParams, ReasoningEffort};
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

fn agent(config: ProviderConfig, watch: &Watch) -> Agent<()> {
    Agent::from_shared(config.build().unwrap()).with_stack(stack_with(watch))
}

#[tokio::test]
async fn text_streamed_over_many_small_chunks_arrives_delta_by_delta() {
    let text = "Héllo wörld, 🌍 is round. ";
    // 3-byte pieces cut lines, JSON and multi-byte characters apart.
    let server = Server::start(vec![Reply::sse(&oa_text_reply(text, 12, 7), 3)]).await;
    let watch = Watch::default();
    let (mut ctx, sink) = context();
    let run = agent(openai(&server), &watch).run(&mut ctx, &(), "Hi").await.unwrap();

    assert_eq!(run.final_text(), text);
    let words: Vec<String> = text.split_inclusive(' ').map(str::to_owned).collect();
    assert_eq!(watch.texts(), words);
    let deltas = watch.deltas();
    assert_eq!(
        deltas[deltas.len() - 2..],
        [
            ModelDelta::usage(Usage::new(12, 7)),
            ModelDelta::finish(FinishReason::Stop)
        ]
    );
    let mut expected = vec!["run_started".to_owned(), "model_call step=1 attempt=1".to_owned()];
    expected.extend(words.iter().map(|w| format!("delta {w:?}")));
    expected.extend(["usage", "finish Stop", "model_done", "run_completed"].map(String::from));
    assert_eq!(model_trace(&sink), expected);
    assert_eq!(run.usage, Usage::new(12, 7));
    assert_eq!(watch.responses()[0].model.as_deref(), Some("openai:gpt-test"));

    let request = server.only_request();
    assert_eq!(request.path, "/v1/chat/completions");
    assert_eq!(request.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(request.header("accept"), Some("text/event-stream"));
    assert_eq!(request.body["model"], "gpt-test");
    assert_eq!(request.body["stream"], true);
    assert_eq!(request.body["stream_options"], json!({"include_usage": true}));
    assert_eq!(request.body["messages"], json!([{"role": "user", "content": "Hi"}]));
    assert!(request.body.get("tools").is_none());
}

#[tokio::test]
async fn tool_calls_split_over_many_chunks_are_assembled_and_run() {
    let turn1 = openai_sse(&[
        oa_delta(json!({"role": "assistant", "content": null})),
        oa_delta(json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "get_weather", "arguments": ""}}]})),
        oa_delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"ci"}}]})),
        oa_delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "ty\": \"Par"}}]})),
        oa_delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "is\"}"}}]})),
        oa_delta(json!({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
            "function": {"name": "get_time", "arguments": ""}}]})),
        oa_delta(json!({"tool_calls": [{"index": 1, "function": {"arguments": "{\"tz\":"}}]})),
        oa_delta(json!({"tool_calls": [{"index": 1, "function": {"arguments": " \"CET\"}"}}]})),
        oa_finish("tool_calls"),
        oa_usage(40, 25, 0, 0),
    ]);
    let server = Server::start(vec![
        Reply::sse(&turn1, 7),
        Reply::sse(&oa_text_reply("Sunny at noon.", 80, 5), 7),
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
    let run = agent(openai(&server), &watch)
        .with_tools(tools)
        .run(&mut ctx, &(), "Weather and time in Paris?")
        .await
        .unwrap();

    // the agent ran both calls with the assembled arguments
    assert_eq!(weather.calls(), [json!({"city": "Paris"})]);
    assert_eq!(time.calls(), [json!({"tz": "CET"})]);
    assert_eq!(run.final_text(), "Sunny at noon.");
    assert_eq!(run.usage, Usage::new(120, 30));
    // the stack saw the pieces: the first with id and name, then argument text
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
            (0, s("call_a"), s("get_weather"), String::new()),
            (0, None, None, "{\"ci".into()),
            (0, None, None, "ty\": \"Par".into()),
            (0, None, None, "is\"}".into()),
            (1, s("call_b"), s("get_time"), String::new()),
            (1, None, None, "{\"tz\":".into()),
            (1, None, None, " \"CET\"}".into()),
        ]
    );
    let first = &watch.responses()[0];
    assert_eq!(first.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        first.message.tool_calls,
        [
            ToolCall::new("call_a", "get_weather", json!({"city": "Paris"})),
            ToolCall::new("call_b", "get_time", json!({"tz": "CET"})),
        ]
    );
    let t = model_trace(&sink);
    assert!(t.contains(&"tool_call_delta \"ty\\\": \\\"Par\"".to_owned()), "{t:#?}");
    assert!(t.contains(&"tool_done get_weather".to_owned()) && t.contains(&"tool_done get_time".to_owned()));

    // the tools went out as functions; the second call carried the calls and results back
    let requests = server.requests();
    assert_eq!(requests[0].body["tools"][0]["type"], "function");
    assert_eq!(requests[0].body["tools"][0]["function"]["name"], "get_weather");
    assert_eq!(
        requests[0].body["tools"][0]["function"]["parameters"],
        json!({"type": "object", "properties": {}})
    );
    let messages = requests[1].body["messages"].as_array().unwrap().clone();
    assert_eq!(messages.len(), 4);
    assert_eq!(
        messages[1],
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"CET\"}"}},
        ]})
    );
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_call_id": "call_a", "content": "sunny"})
    );
    assert_eq!(
        messages[3],
        json!({"role": "tool", "tool_call_id": "call_b", "content": "12:00"})
    );
}

#[tokio::test]
async fn usage_maps_cached_and_reasoning_tokens() {
    let body = openai_sse(&[
        oa_delta(json!({"reasoning_content": "Think."})),
        oa_delta(json!({"content": "Done."})),
        oa_finish("stop"),
        oa_usage(2000, 300, 1500, 200),
    ]);
    let server = Server::start(vec![Reply::sse(&body, 11)]).await;
    let watch = Watch::default();
    let (mut ctx, sink) = context();
    let run = agent(openai(&server), &watch).run(&mut ctx, &(), "Hi").await.unwrap();
    let expected = Usage {
        input_tokens: 500, // prompt_tokens include the cached ones
        output_tokens: 300,
        reasoning_tokens: 200,
        cache_read_tokens: 1500,
        cache_write_tokens: 0,
    };
    assert_eq!(run.usage, expected);
    assert_eq!(watch.responses()[0].usage, expected);
    assert_eq!(watch.responses()[0].message.reasoning(), "Think.");
    assert!(watch.deltas().contains(&ModelDelta::usage(expected)));
    let completed = sink.events().into_iter().find_map(|e| match e {
        AgentEvent::ModelCallCompleted { usage, .. } => Some(usage),
        _ => None,
    });
    assert_eq!(completed, Some(expected));
    assert_eq!(
        model_trace(&sink),
        [
            "run_started",
            "model_call step=1 attempt=1",
            "reasoning \"Think.\"",
            "delta \"Done.\"",
            "usage",
            "finish Stop",
            "model_done",
            "run_completed"
        ]
    );
}

#[tokio::test]
async fn a_reply_cut_off_by_the_output_limit_finishes_with_length_and_runs_no_half_call() {
    let body = openai_sse(&[
        oa_delta(json!({"content": "The answer"})),
        oa_delta(json!({"content": " is"})),
        oa_delta(json!({"tool_calls": [{"index": 0, "id": "call_x", "type": "function",
            "function": {"name": "search", "arguments": "{\"q\": \"ab"}}]})),
        oa_finish("length"),
        oa_usage(10, 16, 0, 0),
    ]);
    let server = Server::start(vec![Reply::sse(&body, 5)]).await;
    let search = RecordingTool::new("search");
    let watch = Watch::default();
    let (mut ctx, sink) = context();
    let run = agent(openai(&server), &watch)
        .with_tools(ToolRegistry::new().with(search.clone()).unwrap())
        .with_params(ModelParams {
            max_tokens: Some(16),
            ..ModelParams::default()
        })
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();
    let response = &watch.responses()[0];
    assert_eq!(response.finish_reason, FinishReason::Length);
    assert!(response.message.tool_calls.is_empty(), "an unfinished call never runs");
    assert!(search.calls().is_empty());
    assert_eq!(run.final_text(), "The answer is");
    let finish = sink.events().into_iter().find_map(|e| match e {
        AgentEvent::ModelCallCompleted { finish_reason, .. } => finish_reason,
        _ => None,
    });
    assert_eq!(finish, Some(FinishReason::Length));
    assert_eq!(server.only_request().body["max_completion_tokens"], 16);
}

/// Runs one call against `reply` and returns the error and the watch.
async fn failing_run(reply: Reply) -> (TinyAgentsError, Watch, Vec<String>) {
    let server = Server::start(vec![reply]).await;
    let watch = Watch::default();
    let (mut ctx, sink) = context();
    let err = agent(openai(&server), &watch)
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
        &[("retry-after", "7"), ("x-request-id", "req_42")],
        r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#,
    ))
    .await;
    assert_eq!(err.kind(), ErrorKind::RateLimited);
    assert!(err.is_retryable());
    assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
    let msg = err.to_string();
    assert!(
        msg.contains("HTTP 429 (rate_limit_exceeded) to POST http://127.0.0.1:"),
        "{msg}"
    );
    assert!(
        msg.contains("/v1/chat/completions: Rate limit reached for requests"),
        "{msg}"
    );
    assert!(msg.contains("req_42"), "{msg}");
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
async fn http_500_is_retryable() {
    let (err, _, trace) = failing_run(Reply::status(
        500,
        &[],
        r#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
    ))
    .await;
    assert_eq!(err.kind(), ErrorKind::Model);
    assert!(err.is_retryable());
    assert!(
        err.to_string()
            .contains("HTTP 500 (server_error) to POST http://127.0.0.1:"),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("/v1/chat/completions: The server had an error"),
        "{err}"
    );
    assert!(trace.contains(&"model_done error:model".to_owned()));
}

#[tokio::test]
async fn http_401_is_not_retryable_and_names_the_key_variable() {
    let (err, _, _) = failing_run(Reply::status(
        401,
        &[],
        r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}"#,
    ))
    .await;
    assert_eq!(err.kind(), ErrorKind::Model);
    assert!(!err.is_retryable());
    let msg = err.to_string();
    assert!(
        msg.contains("Incorrect API key provided") && msg.contains("`OPENAI_API_KEY`"),
        "{msg}"
    );
}

#[tokio::test]
async fn a_stream_dropped_midway_is_retryable_after_the_deltas_that_came() {
    let body = openai_sse(&[
        oa_delta(json!({"content": "Once "})),
        oa_delta(json!({"content": "upon"})),
    ]);
    // everything but `[DONE]`, then the connection closes mid-body
    let cut = body.find("data: [DONE]").unwrap();
    let (err, watch, trace) = failing_run(Reply::SseDrop(split(&body[..cut], 9))).await;
    assert_eq!(err.kind(), ErrorKind::Model);
    assert!(err.is_retryable(), "{err}");
    assert!(
        err.to_string()
            .contains("the connection broke off while reading the stream"),
        "{err}"
    );
    assert_eq!(watch.texts(), ["Once ", "upon"]);
    assert_eq!(
        trace,
        [
            "run_started",
            "model_call step=1 attempt=1",
            "delta \"Once \"",
            "delta \"upon\"",
            "model_done error:model",
            "discarded attempt=1",
            "run_completed error:model"
        ]
    );
}

#[tokio::test]
async fn a_stream_ending_cleanly_without_its_end_is_retryable_too() {
    let body = format!("data: {}\n\n", oa_delta(json!({"content": "Once "})));
    let (err, watch, _) = failing_run(Reply::sse(&body, 4)).await;
    assert!(err.is_retryable());
    assert!(err.to_string().contains("ended before the reply was complete"), "{err}");
    assert_eq!(watch.texts(), ["Once "]);
}

#[tokio::test]
async fn malformed_json_in_a_chunk_is_a_classified_error_not_a_panic() {
    let body = format!(
        "data: {}\n\ndata: {{\"choices\":[{{\"delta\":{{\"content\":\"broken}}\n\n",
        oa_delta(json!({"content": "ok"}))
    );
    let (err, watch, trace) = failing_run(Reply::sse(&body, 6)).await;
    assert_eq!(err.kind(), ErrorKind::Model);
    assert!(err.is_retryable());
    let msg = err.to_string();
    assert!(
        msg.contains("malformed stream chunk") && msg.contains("invalid JSON"),
        "{msg}"
    );
    assert_eq!(watch.texts(), ["ok"]);
    assert!(trace.contains(&"model_done error:model".to_owned()));
}

#[tokio::test]
async fn an_error_event_inside_the_stream_is_classified() {
    let body = format!(
        "data: {}\n\ndata: {}\n\n",
        oa_delta(json!({"content": "Hel"})),
        json!({"error": {"message": "The server is overloaded", "type": "server_error"}})
    );
    let (err, _, _) = failing_run(Reply::sse(&body, 8)).await;
    assert!(err.is_retryable());
    assert!(err.to_string().contains("The server is overloaded"), "{err}");
}

#[tokio::test]
async fn system_segments_go_stable_first_with_params_and_reasoning_effort() {
    let server = Server::start(vec![Reply::sse(&oa_text_reply("ok", 1, 1), 64)]).await;
    let mut extra = serde_json::Map::new();
    extra.insert("seed".into(), json!(7));
    let watch = Watch::default();
    let (mut ctx, _) = context();
    agent(openai(&server), &watch)
        .with_system(PromptSegment::stable("persona", "You are terse."))
        .with_system(PromptSegment::volatile("date", "Today is Monday."))
        .with_system(PromptSegment::stable("rules", "Always cite."))
        .with_params(ModelParams {
            max_tokens: Some(256),
            temperature: Some(0.25),
            reasoning_effort: Some(ReasoningEffort::High),
            extra,
        })
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();
    let body = server.only_request().body;
    assert_eq!(
        body["messages"],
        json!([
            {"role": "system", "content": "You are terse.\n\nAlways cite.\n\nToday is Monday."},
            {"role": "user", "content": "Hi"},
        ])
    );
    assert_eq!(body["max_completion_tokens"], 256);
    assert!(body.get("max_tokens").is_none());
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["temperature"], 0.25);
    assert_eq!(body["seed"], 7);
}

#[tokio::test]
async fn a_compatible_server_gets_max_tokens_and_no_key() {
    let server = Server::start(vec![Reply::sse(&oa_text_reply("ok", 1, 1), 64)]).await;
    let config = ProviderConfig::parse("openai-compatible:qwen3")
        .unwrap()
        .with_base_url(server.url("/v1"));
    let (mut ctx, _) = context();
    let run = agent(config, &Watch::default())
        .with_params(ModelParams {
            max_tokens: Some(64),
            reasoning_effort: Some(ReasoningEffort::Low),
            ..ModelParams::default()
        })
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "ok");
    let request = server.only_request();
    assert_eq!(request.header("authorization"), None);
    assert_eq!(request.body["model"], "qwen3");
    assert_eq!(request.body["max_tokens"], 64);
    assert!(request.body.get("max_completion_tokens").is_none());
    assert_eq!(request.body["reasoning_effort"], "low");
}

#[tokio::test]
async fn without_streaming_one_json_reply_is_replayed_as_deltas() {
    let completion = json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me look.",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{\"q\":\"rust\"}"}}],
        }}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9, "prompt_tokens_details": {"cached_tokens": 20}},
    });
    let server = Server::start(vec![Reply::status(200, &[], &completion.to_string())]).await;
    let config = openai(&server).with_streaming(false);
    let model = OpenAiModel::new(config).unwrap();
    let response = model
        .complete(&ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap();
    assert_eq!(response.message.text(), "Let me look.");
    assert_eq!(
        response.message.tool_calls,
        [ToolCall::new("call_1", "search", json!({"q": "rust"}))]
    );
    assert_eq!(response.finish_reason, FinishReason::ToolCalls);
    assert_eq!(
        response.usage,
        Usage {
            cache_read_tokens: 20,
            ..Usage::new(30, 9)
        }
    );
    let request = server.only_request();
    assert_eq!(request.body["stream"], false);
    assert!(request.body.get("stream_options").is_none());
    assert_eq!(request.header("accept"), Some("application/json"));
}

#[tokio::test]
async fn a_request_may_name_another_model_of_the_same_provider() {
    let server = Server::start(vec![Reply::sse(&oa_text_reply("ok", 1, 1), 64)]).await;
    let mut ctx = RunContext::new(RunConfig::new("r").with_model("openai:gpt-other"), ());
    Agent::<()>::from_shared(openai(&server).build().unwrap())
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap();
    assert_eq!(server.only_request().body["model"], "gpt-other");
}
