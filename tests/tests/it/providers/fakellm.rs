//! The providers against `fakellm`, a mock server from PyPI that speaks the
//! OpenAI and Anthropic wire formats and that nobody here wrote: both
//! formats, streaming and not, a tool-call turn then an answer, parallel
//! calls with non-ASCII arguments, status errors, a refused connection and
//! the base-URL forms the official SDKs accept.
//!
//! `.ci/run` installs fakellm (pinned, in a virtual environment), starts it
//! on loopback with `tests/fakellm/fakellm.yaml` and sets `FAKELLM_URL`:
//!
//! ```text
//! python3 -m venv .venv-fakellm && .venv-fakellm/bin/pip install -r tests/fakellm/requirements.txt
//! .venv-fakellm/bin/fakellm serve --config tests/fakellm/fakellm.yaml --port 18431 &
//! FAKELLM_URL=http://127.0.0.1:18431 cargo test -p tinyagents-tests --features fakellm --test it providers::fakellm
//! ```
//!
//! What fakellm cannot produce (cache tokens, `length` finishes, malformed
//! streams, retry-after headers) stays in the loopback tests `provider_*.rs`.
#![cfg(feature = "fakellm")]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tinyagents::config::{from_toml_str, BuildMiddleware};
use tinyagents::harness::model::providers::ProviderConfig;
use tinyagents::middleware::ModelRetryConfig;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

/// The server's base URL (no version segment), from `FAKELLM_URL`.
fn server() -> String {
    std::env::var("FAKELLM_URL").unwrap_or_else(|_| {
        panic!(
            "FAKELLM_URL is not set: these tests need a running fakellm server \
             (see the top of tests/tests/provider_fakellm.rs, or run .ci/run)"
        )
    })
}

/// A conversation id no earlier run of the suite used, so fakellm's turn
/// counts start at 1.
fn conversation(scenario: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{scenario}-{}-{nanos}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

#[derive(Clone, Copy, Debug)]
enum Format {
    OpenAi,
    Anthropic,
}

const FORMATS: [Format; 2] = [Format::OpenAi, Format::Anthropic];

/// A provider config for `scenario`, with `base` as its base URL.
fn config_at(format: Format, base: &str, scenario: &str, streaming: bool) -> ProviderConfig {
    let spec = match format {
        Format::OpenAi => "openai-compatible:gpt-4o-mini",
        Format::Anthropic => "anthropic:claude-sonnet-4-5",
    };
    ProviderConfig::parse(spec)
        .unwrap()
        .with_base_url(base)
        .with_api_key("sk-mock")
        .with_streaming(streaming)
        .with_header("x-test-scenario", scenario)
        .with_header("x-fakellm-conversation-id", conversation(scenario))
}

/// The config the official SDKs' default form gives: OpenAI's base includes `/v1`, Anthropic's does not.
fn config(format: Format, scenario: &str, streaming: bool) -> ProviderConfig {
    let base = match format {
        Format::OpenAi => format!("{}/v1", server()),
        Format::Anthropic => server(),
    };
    config_at(format, &base, scenario, streaming)
}

fn context() -> (RunContext, Arc<CollectingSink>) {
    let sink = Arc::new(CollectingSink::new());
    (
        RunContext::new(RunConfig::new("fakellm"), ()).with_sink(sink.clone()),
        sink,
    )
}

/// `usage_reported` of every completed model call.
fn usage_reports(sink: &CollectingSink) -> Vec<bool> {
    sink.events()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ModelCallCompleted { usage_reported, .. } => Some(*usage_reported),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_text_reply_in_both_formats_streamed_and_not() {
    for format in FORMATS {
        for streaming in [false, true] {
            let model = config(format, "hello", streaming).build().unwrap();
            let (mut ctx, sink) = context();
            let run = Agent::from_shared(model).run(&mut ctx, &(), "Say hello").await.unwrap();
            assert_eq!(
                run.final_text(),
                "Hello from fakellm, grüße 👋",
                "{format:?} streaming={streaming}"
            );
            // fakellm reports usage everywhere but in OpenAI-format streams: there the
            // run says "not reported" instead of a zero that looks real.
            let reported = !(matches!(format, Format::OpenAi) && streaming);
            assert_eq!(usage_reports(&sink), [reported], "{format:?} streaming={streaming}");
            if reported {
                assert!(
                    run.usage.input_tokens > 0,
                    "{format:?} streaming={streaming}: {:?}",
                    run.usage
                );
            }
            if streaming {
                let deltas = sink
                    .events()
                    .iter()
                    .filter(|e| matches!(e, AgentEvent::ModelDelta { .. }))
                    .count();
                assert!(deltas > 2, "{format:?}: the reply arrived in pieces ({deltas} deltas)");
            }
        }
    }
}

#[tokio::test]
async fn a_tool_call_turn_then_an_answer_with_parallel_non_ascii_calls() {
    for format in FORMATS {
        for streaming in [false, true] {
            let weather = RecordingTool::new("weather").returning("sunny");
            let model = config(format, "weather", streaming).build().unwrap();
            let agent = Agent::from_shared(model).with_tools(ToolRegistry::new().with(weather.clone()).unwrap());
            let (mut ctx, _sink) = context();
            let run = agent
                .run(&mut ctx, &(), "What is the weather in Zürich and Tokyo?")
                .await
                .unwrap();
            assert_eq!(
                run.final_text(),
                "Both cities are sunny.",
                "{format:?} streaming={streaming}"
            );
            let mut cities: Vec<String> = weather
                .calls()
                .iter()
                .map(|args| args["city"].as_str().unwrap().to_owned())
                .collect();
            cities.sort();
            assert_eq!(cities, ["Zürich", "東京"], "{format:?} streaming={streaming}");
            // Each call answered once, right after the assistant message that asked for it.
            let roles: Vec<Role> = run.messages.iter().map(|m| m.role).collect();
            assert_eq!(
                roles,
                [Role::User, Role::Assistant, Role::Tool, Role::Tool, Role::Assistant],
                "{format:?} streaming={streaming}"
            );
        }
    }
}

/// Every HTTP status error names the method and the URL it hit, never the key.
#[tokio::test]
async fn status_errors_are_classified_and_name_the_url() {
    for format in FORMATS {
        let path = match format {
            Format::OpenAi => "/v1/chat/completions",
            Format::Anthropic => "/v1/messages",
        };
        let url = format!("POST {}{path}", server());
        for (scenario, status, retryable) in [
            ("unauthorized", 401, false),
            ("bad_request", 400, false),
            ("server_error", 500, true),
        ] {
            let model = config(format, scenario, false).build().unwrap();
            let err = Agent::from_shared(model)
                .run(&mut context().0, &(), "hi")
                .await
                .unwrap_err();
            let text = err.to_string();
            assert!(text.contains(&format!("answered HTTP {status}")), "{format:?}: {text}");
            assert!(text.contains(&format!(" to {url}: ")), "{format:?}: {text}");
            assert!(text.contains("(mock)"), "the server's message is kept: {text}");
            assert!(!text.contains("sk-mock"), "never the key: {text}");
            assert_eq!(err.is_retryable(), retryable, "{format:?} {status}: {text}");
        }
    }
}

#[tokio::test]
async fn a_429_is_retried_and_the_run_recovers() {
    for format in FORMATS {
        let retry = from_toml_str::<ModelRetryConfig>("max_attempts = 3\ninitial_delay_ms = 1\njitter = 0.0")
            .unwrap()
            .build();
        let model = config(format, "rate_limit_then_ok", false).build().unwrap();
        let (mut ctx, sink) = context();
        let run = Agent::from_shared(model)
            .with_stack(MiddlewareStack::new().with(retry).unwrap())
            .run(&mut ctx, &(), "hi")
            .await
            .unwrap();
        assert_eq!(run.final_text(), "recovered", "{format:?}");
        let failures: Vec<_> = sink
            .events()
            .into_iter()
            .filter_map(|e| match e {
                AgentEvent::ModelCallCompleted { error: Some(kind), .. } => Some(kind),
                _ => None,
            })
            .collect();
        assert_eq!(failures, [ErrorKind::RateLimited], "{format:?}: one 429, then success");
    }
}

#[tokio::test]
async fn a_refused_connection_is_retryable_and_names_the_url() {
    // Port 1 on loopback: nothing listens there.
    for format in FORMATS {
        let model = config_at(format, "http://127.0.0.1:1", "hello", false).build().unwrap();
        let err = Agent::from_shared(model)
            .run(&mut context().0, &(), "hi")
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(err.is_retryable(), "{text}");
        assert!(text.contains("could not connect"), "{text}");
        assert!(text.contains("POST http://127.0.0.1:1/v1/"), "{text}");
    }
}

/// Base URLs the way the official SDKs accept them: with or without the
/// version segment, with or without a trailing slash.
#[tokio::test]
async fn every_base_url_form_reaches_the_server() {
    let base = server();
    for format in FORMATS {
        for form in [
            base.clone(),
            format!("{base}/"),
            format!("{base}/v1"),
            format!("{base}/v1/"),
        ] {
            let model = config_at(format, &form, "hello", false).build().unwrap();
            let run = Agent::from_shared(model)
                .run(&mut context().0, &(), "hi")
                .await
                .unwrap_or_else(|e| panic!("{format:?} with base URL {form}: {e}"));
            assert_eq!(run.final_text(), "Hello from fakellm, grüße 👋", "{format:?} {form}");
        }
    }
}
