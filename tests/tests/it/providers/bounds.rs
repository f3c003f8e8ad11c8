//! Issue 14, class 5: every read from a provider is bounded and every number
//! from the wire is checked, against a loopback server playing a hostile
//! provider. Each case asserts the fail-closed outcome (a classified error,
//! a clamped value, a shortened message) and that no tool ran.
#![cfg(feature = "providers")]

use crate::providers::support as provider_support;

use std::time::Duration;

use provider_support::*;
use serde_json::json;
use tinyagents::harness::error::ErrorKind;
use tinyagents::harness::model::providers::ProviderConfig;
use tinyagents::harness::model::ModelRequest;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

async fn call(config: ProviderConfig) -> TinyAgentsError {
    let model = config.build().unwrap();
    let request = ModelRequest::new(vec![Message::user("Hi")]);
    match model.stream(&request).await {
        Err(e) => e,
        Ok(mut stream) => {
            use futures::StreamExt;
            while let Some(item) = stream.next().await {
                if let Err(e) = item {
                    return e;
                }
            }
            panic!("the stream ended without the error")
        }
    }
}

/// Runs an agent with a recording tool over one reply: the error and the tool.
async fn run_with_tool(config: ProviderConfig) -> (TinyAgentsError, RecordingTool) {
    let tool = RecordingTool::new("f");
    let (mut ctx, _sink) = context();
    let err = Agent::<()>::from_shared(config.build().unwrap())
        .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
        .run(&mut ctx, &(), "Hi")
        .await
        .unwrap_err();
    (err, tool)
}

#[tokio::test]
async fn a_tool_call_index_of_ten_million_or_u32_max_is_refused_and_nothing_runs() {
    for index in [10_000_000u64, 4_294_967_295] {
        let body = openai_sse(&[
            oa_delta(
                json!({"tool_calls": [{"index": index, "id": "c", "function": {"name": "f", "arguments": "{}"}}]}),
            ),
            oa_finish("tool_calls"),
        ]);
        let server = Server::start(vec![Reply::sse(&body, 40)]).await;
        let (err, tool) = run_with_tool(openai(&server)).await;
        assert_eq!(err.kind(), ErrorKind::Model, "{err}");
        assert!(!err.is_retryable(), "a hostile reply is not asked for again: {err}");
        assert!(
            err.to_string()
                .contains(&format!("tool-call index {index} is out of range")),
            "{err}"
        );
        assert!(tool.calls().is_empty(), "no tool ran");
    }
}

#[tokio::test]
async fn huge_retry_hints_are_clamped_not_a_panic() {
    for (name, value) in [
        ("retry-after", "1e20"),
        ("retry-after-ms", "1e300"),
        ("retry-after", "inf"),
        ("retry-after", "Fri, 31 Dec 99999999 23:59:59 GMT"),
    ] {
        let server = Server::start(vec![Reply::status(429, &[(name, value)], "{}")]).await;
        let err = call(openai(&server)).await;
        assert_eq!(err.kind(), ErrorKind::RateLimited, "{name}: {value}: {err}");
        let hint = err.retry_after();
        assert!(
            hint.is_none_or(|h| h <= Duration::from_secs(3600)),
            "{name}: {value}: {hint:?}"
        );
        if value.starts_with('1') {
            assert_eq!(hint, Some(Duration::from_secs(3600)), "{name}: {value}");
        }
    }
}

#[tokio::test]
async fn an_error_body_of_megabytes_is_read_only_in_part_and_shown_shortened() {
    let page = "<html>".to_owned() + &"oops ".repeat(600_000); // 3 MB
    let server = Server::start(vec![Reply::status(502, &[], &page)]).await;
    let err = call(openai(&server)).await;
    assert!(err.is_retryable());
    let text = err.to_string();
    assert!(text.len() < 4_000, "{} bytes", text.len());
    assert!(text.contains("bytes in all"), "{text}");
}

#[tokio::test]
async fn a_five_megabyte_json_error_message_is_shortened_and_control_characters_escaped() {
    // Small enough to be read whole: the message itself is cut.
    let message = format!("\u{1b}[31mfake\nline{}", "A".repeat(50_000));
    let body = json!({"error": {"message": message, "type": "invalid_request_error"}}).to_string();
    let server = Server::start(vec![Reply::status(400, &[], &body)]).await;
    let text = call(anthropic(&server)).await.to_string();
    assert!(text.len() < 4_000, "{} bytes", text.len());
    assert!(text.contains("\\u{1b}[31mfake\\nline"), "{text}");
    assert!(!text.contains('\n') && !text.contains('\u{1b}'));
    // Past the read limit: the JSON is cut, so it is shown as (shortened) text.
    let body = json!({"error": {"message": "B".repeat(5_000_000)}}).to_string();
    let server = Server::start(vec![Reply::status(400, &[], &body)]).await;
    let text = call(openai(&server)).await.to_string();
    assert!(text.len() < 4_000, "{} bytes", text.len());
}

#[tokio::test]
async fn a_non_streamed_body_above_the_limit_is_refused_unread() {
    let body = format!("{{\"choices\":[],\"x\":\"{}\"}}", "y".repeat(33 * 1024 * 1024));
    let server = Server::start(vec![Reply::status(200, &[], &body)]).await;
    let err = call(openai(&server).with_streaming(false)).await;
    assert!(!err.is_retryable(), "{err}");
    assert!(err.to_string().contains("above the limit of 33554432 bytes"), "{err}");
}

#[tokio::test]
async fn anthropic_unknown_content_and_orphan_tool_input_are_refused_not_dropped() {
    let start = an_start(5, 0, 0);
    let cases = [
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "hologram", "text": "hidden"}}),
        json!({"type": "content_block_delta", "index": 4, "delta": {"type": "input_json_delta", "partial_json": "{\"rm\":1}"}}),
    ];
    for event in cases {
        let body = anthropic_sse(&[
            start.clone(),
            event.clone(),
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}}),
            json!({"type": "message_stop"}),
        ]);
        let server = Server::start(vec![Reply::sse(&body, 17)]).await;
        let (err, tool) = run_with_tool(anthropic(&server)).await;
        assert!(!err.is_retryable(), "{event}: {err}");
        assert!(err.to_string().contains("refused"), "{err}");
        assert!(tool.calls().is_empty());
    }
}

#[tokio::test]
async fn absurd_usage_is_refused() {
    let body = openai_sse(&[
        oa_delta(json!({"content": "hi"})),
        oa_finish("stop"),
        json!({"choices": [], "usage": {"prompt_tokens": u64::MAX, "completion_tokens": 1}}),
    ]);
    let server = Server::start(vec![Reply::sse(&body, 9)]).await;
    let err = call(openai(&server)).await;
    assert!(!err.is_retryable());
    assert!(err.to_string().contains("usage field `prompt_tokens`"), "{err}");
}
