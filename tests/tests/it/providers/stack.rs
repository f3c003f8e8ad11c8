//! Real providers under a middleware stack: retry and fallback against
//! loopback servers (a 429 on the primary is retried, a 500 falls back to
//! another provider, and the final response and usage totals are exact),
//! cancellation closing the HTTP connection, and configuration errors.
#![cfg(feature = "providers")]

use crate::providers::support as provider_support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use provider_support::*;
use serde_json::json;
use tinyagents::harness::model::providers::ProviderConfig;
use tinyagents::harness::model::{ChatModel, FinishReason, ModelRoute};
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

/// Retries rate-limited calls, waiting the provider's hint (capped), and
/// records the hints it saw. Other errors pass through.
struct RetryRateLimits {
    attempts: u32,
    hints: Arc<Mutex<Vec<Option<Duration>>>>,
}

#[async_trait]
impl Middleware<()> for RetryRateLimits {
    fn name(&self) -> &str {
        "RetryRateLimits"
    }
    fn hooks(&self) -> HookSet {
        HookSet::WRAP_MODEL
    }
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        let mut attempt = 1;
        loop {
            match next.run(ctx, state, request.clone()).await {
                Err(e) if e.kind() == ErrorKind::RateLimited && attempt < self.attempts => {
                    self.hints.lock().unwrap().push(e.retry_after());
                    let wait = e.retry_after().unwrap_or_default().min(Duration::from_millis(200));
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}

/// Sends a call that failed with a retryable error (other than a rate
/// limit, which the inner retry owns) to another model.
struct FallbackTo {
    model: Arc<dyn ChatModel>,
}

#[async_trait]
impl Middleware<()> for FallbackTo {
    fn name(&self) -> &str {
        "FallbackTo"
    }
    fn hooks(&self) -> HookSet {
        HookSet::WRAP_MODEL
    }
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        match next.run(ctx, state, request.clone()).await {
            Err(e) if e.is_retryable() && e.kind() != ErrorKind::RateLimited => {
                let mut request = request;
                request.route = Some(ModelRoute(self.model.clone()));
                next.run(ctx, state, request).await
            }
            other => other,
        }
    }
}

#[tokio::test]
async fn a_429_is_retried_a_500_falls_back_and_usage_totals_are_exact() {
    let tool_turn = openai_sse(&[
        oa_delta(json!({"role": "assistant", "content": null})),
        oa_delta(json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
            "function": {"name": "get_weather", "arguments": ""}}]})),
        oa_delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\":"}}]})),
        oa_delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"Paris\"}"}}]})),
        oa_finish("tool_calls"),
        oa_usage(400, 10, 300, 0),
    ]);
    let primary = Server::start(vec![
        Reply::status(
            429,
            &[("retry-after-ms", "20")],
            r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
        ),
        Reply::sse(&tool_turn, 9),
        Reply::status(
            500,
            &[],
            r#"{"error":{"message":"The server had an error","type":"server_error"}}"#,
        ),
    ])
    .await;
    let answer = anthropic_sse(&[
        an_start(60, 40, 100),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Paris is "}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "sunny."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 8}}),
        json!({"type": "message_stop"}),
    ]);
    let secondary = Server::start(vec![Reply::sse(&answer, 9)]).await;

    let openai = ProviderConfig::parse("openai:gpt-test")
        .unwrap()
        .with_base_url(primary.url("/v1"))
        .with_api_key("sk-test")
        .build()
        .unwrap();
    let anthropic = ProviderConfig::parse("anthropic:claude-test")
        .unwrap()
        .with_base_url(&secondary.base)
        .with_api_key("sk-ant-test")
        .build()
        .unwrap();
    let hints = Arc::new(Mutex::new(Vec::new()));
    let watch = Watch::default();
    let stack = MiddlewareStack::new()
        .with(FallbackTo { model: anthropic })
        .unwrap()
        .with(RetryRateLimits {
            attempts: 3,
            hints: hints.clone(),
        })
        .unwrap()
        .with(watch.clone())
        .unwrap();
    let weather = RecordingTool::new("get_weather").returning("sunny, 24°C");
    let agent: Agent<()> = Agent::from_shared(openai)
        .with_tools(ToolRegistry::new().with(weather.clone()).unwrap())
        .with_stack(stack);
    let (mut ctx, sink) = context();
    let run = agent.run(&mut ctx, &(), "Weather in Paris?").await.unwrap();

    // the answer came from the fallback, after the primary's tool call ran
    assert_eq!(run.final_text(), "Paris is sunny.");
    assert_eq!(weather.calls(), [json!({"city": "Paris"})]);
    assert_eq!(*hints.lock().unwrap(), [Some(Duration::from_millis(20))]);
    // usage totals: the two successful calls, nothing from the failed ones
    let primary_usage = Usage {
        input_tokens: 100,
        output_tokens: 10,
        reasoning_tokens: 0,
        cache_read_tokens: 300,
        cache_write_tokens: 0,
    };
    let fallback_usage = Usage {
        input_tokens: 60,
        output_tokens: 8,
        reasoning_tokens: 0,
        cache_read_tokens: 100,
        cache_write_tokens: 40,
    };
    assert_eq!(run.usage, primary_usage + fallback_usage);
    assert_eq!(ctx.usage(), &(primary_usage + fallback_usage));
    assert_eq!((run.counters.steps, run.counters.model_calls), (2, 4));
    let responses = watch.responses();
    assert_eq!(responses.len(), 2);
    assert_eq!(responses[0].model.as_deref(), Some("openai:gpt-test"));
    assert_eq!(responses[0].finish_reason, FinishReason::ToolCalls);
    assert_eq!(responses[1].model.as_deref(), Some("anthropic:claude-test"));
    assert_eq!(responses[1].usage, fallback_usage);

    let models = crate::support::models_called(&sink.events());
    assert_eq!(
        models,
        [
            "openai:gpt-test",
            "openai:gpt-test",
            "openai:gpt-test",
            "anthropic:claude-test"
        ]
    );
    assert_eq!(
        model_trace(&sink),
        [
            "run_started",
            "model_call step=1 attempt=1",
            "model_done error:rate_limited",
            "discarded attempt=1",
            "model_call step=1 attempt=2",
            "tool_call_delta \"\"",
            "tool_call_delta \"{\\\"city\\\":\"",
            "tool_call_delta \"\\\"Paris\\\"}\"",
            "usage",
            "finish ToolCalls",
            "model_done",
            "tool_call get_weather",
            "tool_done get_weather",
            "model_call step=2 attempt=1",
            "model_done error:model",
            "discarded attempt=1",
            "model_call step=2 attempt=2",
            "usage",
            "delta \"Paris is \"",
            "delta \"sunny.\"",
            "usage",
            "finish Stop",
            "model_done",
            "run_completed"
        ]
    );

    // the fallback got the whole conversation, in its own wire format
    assert_eq!(primary.requests().len(), 3);
    let fallback_request = secondary.only_request();
    assert_eq!(
        fallback_request.body["messages"],
        json!([
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_a", "name": "get_weather", "input": {"city": "Paris"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "sunny, 24°C"},
            ]},
        ])
    );
}

/// Cancels the run when it sees the first text delta.
struct CancelOnFirstText;

#[async_trait]
impl Middleware<()> for CancelOnFirstText {
    fn name(&self) -> &str {
        "CancelOnFirstText"
    }
    fn hooks(&self) -> HookSet {
        HookSet::ON_MODEL_DELTA
    }
    async fn on_model_delta(&self, ctx: &mut RunContext, _: &(), delta: &mut ModelDelta) -> Result<()> {
        if delta.as_text().is_some() {
            ctx.flow().cancellation().cancel();
        }
        Ok(())
    }
}

/// A stream that stays open after two text deltas.
fn held_stream() -> Reply {
    let body = format!(
        "data: {}\n\ndata: {}\n\n",
        oa_delta(json!({"content": "Hello"})),
        oa_delta(json!({"content": " world"}))
    );
    Reply::SseHold(split(&body, 1000))
}

fn openai_model(server: &Server) -> Arc<dyn ChatModel> {
    ProviderConfig::parse("openai:gpt-test")
        .unwrap()
        .with_base_url(server.url("/v1"))
        .with_api_key("sk-test")
        .build()
        .unwrap()
}

#[tokio::test]
async fn cancelling_the_run_drops_the_stream_and_closes_the_connection() {
    let server = Server::start(vec![held_stream()]).await;
    let watch = Watch::default();
    let stack = MiddlewareStack::new()
        .with(watch.clone())
        .unwrap()
        .with(CancelOnFirstText)
        .unwrap();
    let agent: Agent<()> = Agent::from_shared(openai_model(&server)).with_stack(stack);
    let (mut ctx, sink) = context();
    let err = agent.run(&mut ctx, &(), "Hi").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Cancelled);
    // the delta after the cancellation never reached the stack
    assert_eq!(watch.texts(), ["Hello"]);
    assert!(
        server.client_hung_up(Duration::from_secs(5)).await,
        "the server saw the connection closed"
    );
    let trace = model_trace(&sink);
    assert_eq!(
        trace[trace.len() - 3..],
        [
            "model_done error:cancelled",
            "discarded attempt=1",
            "run_completed error:cancelled"
        ]
    );
}

#[tokio::test]
async fn dropping_a_run_mid_stream_closes_the_connection() {
    let server = Server::start(vec![held_stream()]).await;
    let agent: Agent<()> = Agent::from_shared(openai_model(&server));
    let (mut ctx, _) = context();
    // the stream stalls after two deltas; the caller gives up and drops the run
    let gave_up = tokio::time::timeout(Duration::from_millis(300), agent.run(&mut ctx, &(), "Hi")).await;
    assert!(gave_up.is_err());
    assert!(server.client_hung_up(Duration::from_secs(5)).await);
}

#[tokio::test]
async fn dropping_the_delta_stream_closes_the_connection() {
    use futures::StreamExt;
    let server = Server::start(vec![held_stream()]).await;
    let model = openai_model(&server);
    let mut stream = model
        .stream(&ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap();
    assert_eq!(stream.next().await.unwrap().unwrap(), ModelDelta::text("Hello"));
    assert!(
        !server.client_hung_up(Duration::from_millis(50)).await,
        "still streaming"
    );
    drop(stream);
    assert!(server.client_hung_up(Duration::from_secs(5)).await);
}

#[tokio::test]
async fn a_missing_key_or_feature_is_a_clear_config_error() {
    let build_err = |config: ProviderConfig| match config.build() {
        Ok(model) => panic!("{} built without a key", model.id()),
        Err(e) => e,
    };
    let err = build_err(ProviderConfig::from_env_with("openai:gpt-4o-mini", |_| None).unwrap());
    assert_eq!(err.kind(), ErrorKind::Config);
    assert!(
        err.to_string()
            .contains("the environment variable `OPENAI_API_KEY` is not set"),
        "{err}"
    );
    let err = build_err(
        ProviderConfig::from_env_with("anthropic:claude", |_| None)
            .unwrap()
            .with_api_key_env("MY_CLAUDE_KEY_THAT_IS_NOT_SET"),
    );
    assert!(err.to_string().contains("`MY_CLAUDE_KEY_THAT_IS_NOT_SET`"), "{err}");
    // a refused connection is a retryable model error, not a panic
    let closed_port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let model = ProviderConfig::parse("openai-compatible:m")
        .unwrap()
        .with_base_url(format!("http://127.0.0.1:{closed_port}/v1"))
        .build()
        .unwrap();
    let err = match model.stream(&ModelRequest::new(vec![Message::user("Hi")])).await {
        Ok(_) => panic!("nothing listens on port {closed_port}"),
        Err(e) => e,
    };
    assert!(
        err.is_retryable() && err.to_string().contains("could not connect"),
        "{err}"
    );
}
