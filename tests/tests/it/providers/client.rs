//! Providers and the caller's world: a caller's own `reqwest::Client` (custom
//! CAs, proxies) carries the calls; errors keep the HTTP status and their
//! source chain; `Retry-After` dates in each of the three HTTP forms are
//! honoured. Against the loopback wire-format server of the provider tests.
#![cfg(feature = "providers")]

use crate::providers::support as provider_support;

use std::error::Error as _;
use std::time::{Duration, SystemTime};

use provider_support::{context, oa_text_reply, Reply, Server};
use tinyagents::harness::error::{ErrorKind, ErrorSource};
use tinyagents::harness::model::providers::ProviderConfig;
use tinyagents::prelude::*;

fn openai(base: &str) -> ProviderConfig {
    ProviderConfig::parse("openai:gpt-test")
        .unwrap()
        .with_base_url(format!("{base}/v1"))
        .with_api_key("sk-test")
}

async fn run(config: ProviderConfig) -> Result<AgentRun> {
    let (mut ctx, _sink) = context();
    Agent::<()>::from_shared(config.build().unwrap())
        .run(&mut ctx, &(), "Hi")
        .await
}

#[tokio::test]
async fn a_callers_client_carries_the_calls_and_the_key_is_still_sent() {
    let server = Server::start(vec![Reply::sse(&oa_text_reply("hello", 3, 1), 8)]).await;
    let mut team = reqwest::header::HeaderMap::new();
    team.insert("x-team", reqwest::header::HeaderValue::from_static("blue"));
    let client = reqwest::Client::builder()
        .default_headers(team)
        .no_proxy()
        .user_agent("team-agent/2")
        .build()
        .unwrap();
    let done = run(openai(&server.base).with_http_client(client)).await.unwrap();
    assert_eq!(done.final_text(), "hello");
    let request = server.only_request();
    assert_eq!(
        request.header("x-team"),
        Some("blue"),
        "the caller's client made the call"
    );
    assert_eq!(request.header("user-agent"), Some("team-agent/2"));
    assert_eq!(request.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(request.body["model"], "gpt-test");
}

#[tokio::test]
async fn error_statuses_are_kept_on_the_error() {
    for (status, kind) in [
        (503, ErrorKind::Model),
        (401, ErrorKind::Model),
        (400, ErrorKind::Model),
        (429, ErrorKind::RateLimited),
    ] {
        let server = Server::start(vec![Reply::status(status, &[], r#"{"error":{"message":"no"}}"#)]).await;
        let err = run(openai(&server.base)).await.unwrap_err();
        assert_eq!(err.kind(), kind, "{status}: {err}");
        assert_eq!(err.status(), Some(status), "{err}");
    }
    assert_eq!(TinyAgentsError::rate_limited("local bucket", None).status(), None);
}

#[tokio::test]
async fn a_transport_failure_keeps_the_http_clients_error_as_its_source() {
    // A port nothing listens on: the connection is refused.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let err = run(openai(&base)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Model);
    assert!(err.is_retryable());
    assert_eq!(err.status(), None, "no reply, no status");
    let source = err.source().expect("the transport error is kept");
    let kept = source.downcast_ref::<ErrorSource>().expect("an ErrorSource");
    let reqwest_error = kept
        .get()
        .downcast_ref::<reqwest::Error>()
        .expect("the reqwest error itself");
    assert!(reqwest_error.is_connect(), "{reqwest_error:?}");
    // The chain goes on below reqwest's own error.
    let mut depth = 0;
    let mut next = err.source();
    while let Some(e) = next {
        depth += 1;
        next = e.source();
    }
    assert!(depth >= 2, "the whole chain is walkable, got {depth} levels");
    // The clone keeps it; equal errors stay equal.
    assert_eq!(err.clone(), err);
}

/// `Retry-After` as a date `secs` seconds from now, in `form`.
fn date_in(secs: u64, form: &str) -> String {
    let at = SystemTime::now() + Duration::from_secs(secs);
    let imf = httpdate::fmt_http_date(at); // "Tue, 01 Dec 2026 03:14:13 GMT"
    let parts: Vec<&str> = imf.split([' ', ',']).filter(|p| !p.is_empty()).collect();
    let [wd, day, month, year, time, _gmt] = parts[..] else {
        panic!("{imf}")
    };
    let weekday = match wd {
        "Mon" => "Monday",
        "Tue" => "Tuesday",
        "Wed" => "Wednesday",
        "Thu" => "Thursday",
        "Fri" => "Friday",
        "Sat" => "Saturday",
        _ => "Sunday",
    };
    match form {
        "imf" => imf.clone(),
        "rfc850" => format!("{weekday}, {day}-{month}-{} {time} GMT", &year[2..]),
        "asctime" => format!("{wd} {month} {:>2} {time} {year}", day.trim_start_matches('0')),
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn retry_after_dates_in_every_http_form_become_the_hint() {
    for form in ["imf", "rfc850", "asctime"] {
        let date = date_in(40, form);
        let server = Server::start(vec![Reply::status(
            429,
            &[("retry-after", date.as_str())],
            r#"{"error":{"message":"slow down","code":"rate_limit_exceeded"}}"#,
        )])
        .await;
        let err = run(openai(&server.base)).await.unwrap_err();
        assert_eq!(err.kind(), ErrorKind::RateLimited, "{form}");
        let hint = err
            .retry_after()
            .unwrap_or_else(|| panic!("{form}: `{date}` gave no hint"));
        // Whole seconds on the wire, and the run itself takes a moment.
        assert!(
            (Duration::from_secs(30)..=Duration::from_secs(40)).contains(&hint),
            "{form} `{date}`: {hint:?}"
        );
    }
}
