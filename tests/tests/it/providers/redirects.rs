//! A provider's key, auth headers and conversation never follow a redirect
//! to another host, and invalid UTF-8 in a whole reply is refused, not repaired.
#![cfg(feature = "providers")]

use crate::providers::support::*;
use tinyagents::harness::model::providers::ProviderConfig;
use tinyagents::harness::model::ModelRequest;
use tinyagents::prelude::*;

async fn drain(config: ProviderConfig) -> Result<()> {
    use futures::StreamExt;
    let model = config.build().unwrap();
    let request = ModelRequest::new(vec![Message::user("the secret plan")]);
    let mut stream = model.stream(&request).await?;
    while let Some(item) = stream.next().await {
        item?;
    }
    Ok(())
}

/// Anthropic authenticates with `x-api-key`. A provider (or anything on
/// the path that can answer) replying `307 Location: <other host>` gets
/// the key and the whole conversation re-posted there: reqwest's default
/// redirect policy strips only `Authorization`/`Cookie` across hosts.
#[tokio::test]
async fn anthropic_key_and_conversation_do_not_follow_a_redirect_to_another_host() {
    let other = Server::start(vec![Reply::sse(&an_text_reply("hi", 1, 1), 64)]).await;
    let target = other.url("/v1/messages");
    let first = Server::start(vec![Reply::status(307, &[("location", target.as_str())], "")]).await;
    let config = ProviderConfig::parse("anthropic:claude-test")
        .unwrap()
        .with_base_url(first.url(""))
        .with_api_key("sk-ant-SECRET");
    let _ = drain(config).await;
    let leaked: Vec<_> = other
        .requests()
        .iter()
        .filter_map(|r| r.header("x-api-key").map(str::to_owned))
        .collect();
    assert!(leaked.is_empty(), "the API key reached another host: {leaked:?}");
    assert!(
        other.requests().is_empty(),
        "the conversation was re-posted to another host: {:?}",
        other.requests().iter().map(|r| r.body.clone()).collect::<Vec<_>>()
    );
}

/// A non-streamed reply with invalid UTF-8 in the model's text is a
/// malformed reply, as it is in a stream: never repaired into
/// replacement characters the model did not send.
#[tokio::test]
async fn invalid_utf8_in_a_whole_reply_is_refused_not_repaired() {
    use tinyagents::harness::model::providers::{AnthropicModel, OpenAiModel};
    let mut openai_body =
        br#"{"id":"c","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"caf"#
            .to_vec();
    openai_body.extend_from_slice(b"\xff\xfe");
    openai_body.extend_from_slice(br#""}}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#);
    let server = Server::start(vec![Reply::bytes(200, &openai_body)]).await;
    let config = ProviderConfig::parse("openai-compatible:m")
        .unwrap()
        .with_base_url(server.url("/v1"))
        .with_streaming(false);
    let err = OpenAiModel::new(config)
        .unwrap()
        .complete(&ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("invalid UTF-8"), "{err}");
    let mut anthropic_body =
        br#"{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"caf"#.to_vec();
    anthropic_body.extend_from_slice(b"\xff");
    anthropic_body.extend_from_slice(br#""}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}"#);
    let server = Server::start(vec![Reply::bytes(200, &anthropic_body)]).await;
    let config = ProviderConfig::parse("anthropic:claude-test")
        .unwrap()
        .with_base_url(server.url(""))
        .with_api_key("k")
        .with_streaming(false);
    let err = AnthropicModel::new(config)
        .unwrap()
        .complete(&ModelRequest::new(vec![Message::user("Hi")]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("invalid UTF-8"), "{err}");
}

/// The same with an OpenAI-compatible server authenticated by a
/// configured header (`api-key`, as Azure OpenAI uses).
#[tokio::test]
async fn a_configured_auth_header_does_not_follow_a_redirect_to_another_host() {
    let other = Server::start(vec![Reply::sse(&oa_text_reply("hi", 1, 1), 64)]).await;
    let target = other.url("/v1/chat/completions");
    let first = Server::start(vec![Reply::status(308, &[("location", target.as_str())], "")]).await;
    let config = ProviderConfig::parse("openai-compatible:m")
        .unwrap()
        .with_base_url(first.url("/v1"))
        .with_header("api-key", "azure-SECRET");
    let _ = drain(config).await;
    let leaked: Vec<_> = other
        .requests()
        .iter()
        .filter_map(|r| r.header("api-key").map(str::to_owned))
        .collect();
    assert!(
        leaked.is_empty(),
        "the configured auth header reached another host: {leaked:?}"
    );
}
