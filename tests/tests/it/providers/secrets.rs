//! Secrets never leave in text: every failure mode of a provider call
//! (refused connection, TLS failure, timeout, an error status whose body
//! and headers echo the key, a stream error event, a malformed chunk, a
//! redirect refused or followed) × every place its text goes (the error's
//! `Display` and `Debug`, each level of its `source()` chain, the events,
//! the `tracing` output, the middleware's `on_error`, the model's and the
//! configuration's `Debug`), for both wire formats. The key, a header's
//! value, the base URL's password and its query key are planted, and the
//! servers quote them back; none of their bytes may show anywhere.
//! Loopback servers only.
#![cfg(feature = "providers")]

use crate::capture;
use crate::providers::support as provider_support;

use std::error::Error as _;
use std::sync::Arc;
use std::time::Duration;

use provider_support::{anthropic_sse, oa_delta, openai_sse, Reply, Server, Watch};
use serde_json::json;
use tinyagents::harness::model::providers::{AnthropicModel, OpenAiModel, ProviderConfig, ProviderKind};
use tinyagents::harness::secrets::redactor;
use tinyagents::middleware::{LoggingMiddleware, TracingMiddleware};
use tinyagents::prelude::*;
use tinyagents::testing::CollectingSink;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The API key (sent as `Authorization: Bearer` or `x-api-key`).
const KEY: &str = "sk-matrix-Zq7Wd93kLmNpRt5Vx8Yb2Cf4Gh6Jk";
/// The value of a configured header (a gateway's `api-key`).
const HEADER_KEY: &str = "hk-matrix-Pq2Lm8Nx4Rt6Vw9Yz3Bc5Df7";
/// The password of the base URL's user info.
const URL_PASSWORD: &str = "pw-matrix-Jh5Kl8Mn2Qr4St7Uv";
/// A key in the base URL's query (`…/v1?api-key=…`).
const QUERY_KEY: &str = "qk-matrix-Ab3Cd6Ef9Gh2Ij5Kl8Mn";

const SECRETS: [&str; 4] = [KEY, HEADER_KEY, URL_PASSWORD, QUERY_KEY];

/// Fails when any secret, or any 16 bytes in a row of one, shows in `text`.
fn assert_clean(mode: &str, place: &str, text: &str) {
    for secret in SECRETS {
        for piece in secret.as_bytes().windows(16) {
            let piece = std::str::from_utf8(piece).unwrap();
            assert!(
                !text.contains(piece),
                "{mode}: {place} shows `{piece}` of a secret:\n{text}"
            );
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Format {
    OpenAi,
    Anthropic,
}

/// A base URL at `host_port` carrying a password and a query key.
fn base(scheme: &str, host_port: &str) -> String {
    format!("{scheme}://user:{URL_PASSWORD}@{host_port}/v1?api-key={QUERY_KEY}")
}

fn config(format: Format, base: &str) -> ProviderConfig {
    let spec = match format {
        Format::OpenAi => "openai:gpt-test",
        Format::Anthropic => "anthropic:claude-test",
    };
    ProviderConfig::parse(spec)
        .unwrap()
        .with_base_url(base)
        .with_api_key(KEY)
        .with_header("api-key", HEADER_KEY)
        .with_connect_timeout(Duration::from_secs(5))
        .with_idle_timeout(Duration::from_secs(5))
}

/// Every secret and the whole base URL, as a hostile server quotes them.
fn echo() -> String {
    format!("key {KEY}, header {HEADER_KEY}, url {}", base("http", "127.0.0.1:1"))
}

/// Runs one call of `config` under a stack that logs and traces, and checks
/// every place its failure shows: the error, its chain, the events, the
/// log, `on_error`, and the model's and configuration's `Debug`.
async fn check(mode: &str, config: ProviderConfig) -> TinyAgentsError {
    assert_clean(mode, "the configuration's Debug", &format!("{config:?} {config:#?}"));
    let shown = match config.kind() {
        ProviderKind::Anthropic => format!("{:?}", AnthropicModel::new(config.clone()).unwrap()),
        _ => format!("{:?}", OpenAiModel::new(config.clone()).unwrap()),
    };
    assert!(shown.contains("user:***@127.0.0.1"), "{mode}: {shown}");
    assert_clean(mode, "the model's Debug", &shown);
    let model = config.build().expect("the model builds");
    let (captured, _guard) = capture::capture();
    let watch = Watch::default();
    let stack = MiddlewareStack::empty()
        .with(watch.clone())
        .and_then(|s| s.with(LoggingMiddleware::new()))
        .and_then(|s| s.with(TracingMiddleware::new()))
        .unwrap();
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("secrets"), ()).with_sink(sink.clone());
    let err = Agent::<()>::from_shared(model)
        .with_stack(stack)
        .run(&mut ctx, &(), "Hi")
        .await
        .expect_err("the call fails");

    assert_clean(mode, "the error's Display", &err.to_string());
    assert_clean(mode, "the error's Debug", &format!("{err:?} {err:#?}"));
    let mut level = err.source();
    let mut depth = 0;
    while let Some(e) = level {
        depth += 1;
        assert_clean(mode, &format!("source level {depth}"), &format!("{e} {e:?} {e:#?}"));
        level = e.source();
    }
    for event in sink.events() {
        let line = serde_json::to_string(&event).expect("an event is JSON");
        assert_clean(mode, "an event", &line);
        assert_clean(mode, "an event's Debug", &format!("{event:?}"));
    }
    let log: Vec<String> = captured
        .events()
        .iter()
        .map(|e| format!("{} {:?}", e.target, e.fields))
        .chain(captured.spans().iter().map(|s| format!("{} {:?}", s.name, s.fields)))
        .collect();
    assert!(
        log.iter().any(|l| l.contains("error")),
        "{mode}: the failure is logged: {log:?}"
    );
    assert_clean(mode, "the tracing output", &log.join("\n"));
    let seen = watch.errors();
    assert!(!seen.is_empty(), "{mode}: on_error saw the failure");
    for e in seen {
        assert_clean(mode, "on_error", &format!("{e} {e:?}"));
    }
    err
}

/// A port nothing listens on.
fn closed_port() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    addr
}

/// A server that accepts, reads the request and never answers; its
/// connections are held until it is dropped.
async fn silent_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = socket.read(&mut buf).await;
            held.push(socket);
        }
    });
    (addr, task)
}

/// A server that answers a TLS handshake with plain text: the client's TLS fails.
async fn plaintext_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut buf = [0u8; 4096];
            let _ = socket.read(&mut buf).await;
            let _ = socket
                .write_all(format!("HTTP/1.1 400 Bad Request\r\n\r\n{}", echo()).as_bytes())
                .await;
            let _ = socket.shutdown().await;
        }
    });
    (addr, task)
}

fn host_port(server: &Server) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

const FORMATS: [Format; 2] = [Format::OpenAi, Format::Anthropic];

#[tokio::test]
async fn a_refused_connection_names_no_secret() {
    for format in FORMATS {
        let mode = format!("{format:?} connect refused");
        let err = check(&mode, config(format, &base("http", &closed_port()))).await;
        assert!(err.to_string().contains("could not connect"), "{err}");
        assert!(
            err.to_string().contains("http://127.0.0.1:"),
            "the host is still named: {err}"
        );
    }
}

#[tokio::test]
async fn a_tls_failure_names_no_secret() {
    for format in FORMATS {
        let (addr, task) = plaintext_server().await;
        let mode = format!("{format:?} TLS failure");
        let err = check(&mode, config(format, &base("https", &addr))).await;
        assert_eq!(err.kind(), ErrorKind::Model, "{err}");
        task.abort();
    }
}

#[tokio::test]
async fn a_timeout_names_no_secret() {
    for format in FORMATS {
        let (addr, task) = silent_server().await;
        let mode = format!("{format:?} timeout");
        let config = config(format, &base("http", &addr)).with_idle_timeout(Duration::from_millis(200));
        let err = check(&mode, config).await;
        assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
        task.abort();
    }
}

/// The server's error replies, each quoting the secrets back: OpenAI's
/// `Incorrect API key provided: …`, Anthropic's `invalid x-api-key`, a 500
/// page quoting the URL, a request id that is the key.
fn echoing_statuses(format: Format) -> Vec<(u16, Reply)> {
    let auth = match format {
        Format::OpenAi => json!({"error": {
            "message": format!("Incorrect API key provided: {KEY}. {}", echo()),
            "type": "invalid_request_error", "code": "invalid_api_key",
        }}),
        Format::Anthropic => json!({"type": "error", "error": {
            "type": "authentication_error",
            "message": format!("invalid x-api-key: {KEY}. {}", echo()),
        }}),
    };
    vec![
        (401, Reply::status(401, &[("x-request-id", KEY)], &auth.to_string())),
        (
            429,
            Reply::status(
                429,
                &[("retry-after", "1")],
                &json!({"error": {"message": echo(), "code": KEY}}).to_string(),
            ),
        ),
        (500, Reply::status(500, &[], &format!("<html>{}</html>", echo()))),
    ]
}

#[tokio::test]
async fn an_error_status_echoing_the_secrets_names_none() {
    for format in FORMATS {
        for streaming in [true, false] {
            for (status, reply) in echoing_statuses(format) {
                let server = Server::start(vec![reply]).await;
                let mode = format!("{format:?} HTTP {status} (streaming {streaming})");
                let err = check(
                    &mode,
                    config(format, &base("http", &host_port(&server))).with_streaming(streaming),
                )
                .await;
                assert_eq!(err.status(), Some(status), "{mode}: {err}");
                assert!(err.to_string().contains("***"), "{mode}: the echo is masked: {err}");
                let request = server.only_request();
                assert!(
                    request.path.contains(QUERY_KEY),
                    "the query key still reaches the server"
                );
            }
        }
    }
}

#[tokio::test]
async fn a_stream_error_event_echoing_the_key_names_none() {
    for format in FORMATS {
        let body = match format {
            Format::OpenAi => openai_sse(&[
                oa_delta(json!({"role": "assistant", "content": "partial"})),
                json!({"error": {"message": format!("quota for {KEY}: {}", echo()), "type": "server_error"}}),
            ]),
            Format::Anthropic => anthropic_sse(&[json!({"type": "error", "error": {
                "type": "overloaded_error", "message": format!("overloaded for {KEY}: {}", echo()),
            }})]),
        };
        let server = Server::start(vec![Reply::sse(&body, 7)]).await;
        let mode = format!("{format:?} stream error event");
        let err = check(&mode, config(format, &base("http", &host_port(&server)))).await;
        assert!(err.to_string().contains("in the stream"), "{err}");
    }
}

#[tokio::test]
async fn a_malformed_chunk_quoting_the_key_names_none() {
    for format in FORMATS {
        let body = match format {
            Format::OpenAi => format!("data: {{\"broken\": \"{KEY}\n\n"),
            Format::Anthropic => format!("event: message_start\ndata: {{\"broken\": \"{KEY}\n\n"),
        };
        let server = Server::start(vec![Reply::sse(&body, 5)]).await;
        let mode = format!("{format:?} malformed chunk");
        let err = check(&mode, config(format, &base("http", &host_port(&server)))).await;
        assert!(err.to_string().contains("malformed"), "{err}");
    }
}

#[tokio::test]
async fn a_redirect_names_no_secret_refused_or_followed() {
    for format in FORMATS {
        // Refused (the built-in client follows none), its target and body quoting the secrets.
        let target = base("http", &closed_port());
        let server = Server::start(vec![Reply::status(307, &[("location", target.as_str())], &echo())]).await;
        let mode = format!("{format:?} redirect refused");
        let err = check(&mode, config(format, &base("http", &host_port(&server)))).await;
        assert!(err.to_string().contains("redirects are not followed"), "{err}");

        // Followed by a caller's client to a closed port: reqwest's own
        // error names the target URL, query key included, which is never
        // shown. (No user info in this target: hyper's own DEBUG log names
        // the authority of a URL it connects to, and a client that follows
        // redirects is the caller's choice.)
        let target = format!("http://{}/v1?api-key={QUERY_KEY}", closed_port());
        let server = Server::start(vec![Reply::status(307, &[("location", target.as_str())], "")]).await;
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::limited(2))
            .no_proxy()
            .build()
            .unwrap();
        let mode = format!("{format:?} redirect followed");
        let err = check(
            &mode,
            config(format, &base("http", &host_port(&server))).with_http_client(client),
        )
        .await;
        assert_eq!(err.kind(), ErrorKind::Model, "{err}");
    }
}

/// The redactor is the process's one: what a provider configuration learnt,
/// any text passed through it has masked, a short prefix and suffix passes.
#[test]
fn the_redactor_knows_every_secret_a_configuration_was_given() {
    let _ = config(Format::OpenAi, &base("http", "127.0.0.1:1"));
    for secret in SECRETS {
        assert_eq!(redactor().redact(&format!("<{secret}>")), "<***>", "{secret}");
    }
    assert_eq!(redactor().redact("sk-mat***8Jk"), "sk-mat***8Jk");
    let half = &KEY[..KEY.len() / 2];
    assert_eq!(redactor().redact(half), "***", "a long piece is masked");
}
