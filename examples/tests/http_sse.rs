//! The `http_sse` example's server on loopback (port 0), driven by a real
//! HTTP client: one agent per request around one shared stack, its events as
//! server-sent events ending in `finished`; concurrent requests keep their
//! runs apart; bad requests are refused; a client that hangs up cancels its run.
#![cfg(feature = "http")]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use tinyagents::harness::model::ModelStream;
use tinyagents::prelude::*;
use tinyagents_examples::http::{router, AppState, ModelFactory, MAX_PROMPT};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Counts the runs the shared stack has seen.
#[derive(Clone, Default)]
struct RunCounter(Arc<AtomicU32>);

#[async_trait]
impl Middleware<()> for RunCounter {
    fn name(&self) -> &str {
        "run_counter"
    }

    async fn before_agent(&self, _ctx: &mut RunContext, _state: &()) -> Result<()> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

fn scripted() -> Arc<dyn ChatModel> {
    Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::tool_calls(vec![ToolCall::new("call-1", "get_weather", json!({"city": "Lyon"}))]),
        ScriptedTurn::text("It is sunny in Lyon."),
    ]))
}

fn tools() -> ToolRegistry {
    ToolRegistry::new()
        .with(tool_fn("get_weather", "The weather.", |_cx, _a| async move {
            Ok("sunny".into())
        }))
        .unwrap()
}

/// Serves on 127.0.0.1:0; returns the base URL.
async fn serve(model: ModelFactory, counter: &RunCounter) -> String {
    let stack = MiddlewareStack::new().with(counter.clone()).unwrap();
    let app = router(AppState::new(stack, model, Arc::new(tools)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// The `(event, data)` pairs of an SSE body.
fn parse_sse(body: &str) -> Vec<(String, Value)> {
    body.split("\n\n")
        .filter(|block| !block.trim().is_empty())
        .filter_map(|block| {
            let mut name = None;
            let mut data = String::new();
            for line in block.lines() {
                if let Some(n) = line.strip_prefix("event: ") {
                    name = Some(n.to_owned());
                } else if let Some(d) = line.strip_prefix("data: ") {
                    data.push_str(d);
                }
            }
            // Keep-alive comments carry no event.
            name.map(|n| (n, serde_json::from_str(&data).expect("JSON data")))
        })
        .collect()
}

async fn post(base: &str, body: Value) -> reqwest::Response {
    reqwest::Client::new()
        .post(format!("{base}/run"))
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_request_streams_its_runs_events_and_ends_with_finished() {
    let counter = RunCounter::default();
    let base = serve(Arc::new(scripted), &counter).await;
    let response = post(&base, json!({"prompt": "Weather?"})).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let events = parse_sse(&response.text().await.unwrap());
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"run_started"), "{names:?}");
    assert!(names.contains(&"tool_call_completed"), "{names:?}");
    for (name, data) in &events[..events.len() - 1] {
        assert_eq!(&data["type"], name, "the SSE event is named after its type");
    }
    let (last, data) = events.last().unwrap();
    assert_eq!(last, "finished");
    assert_eq!(data["final"], "It is sunny in Lyon.");
    assert_eq!(data["tool_calls"], 1);
    assert_eq!(counter.0.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn concurrent_requests_share_the_stack_and_keep_their_runs_apart() {
    let counter = RunCounter::default();
    let base = serve(Arc::new(scripted), &counter).await;
    let (a, b) = tokio::join!(post(&base, json!({"prompt": "a"})), post(&base, json!({"prompt": "b"})));
    let (a, b) = tokio::join!(a.text(), b.text());
    let mut ids = Vec::new();
    for body in [a.unwrap(), b.unwrap()] {
        let events = parse_sse(&body);
        let (last, done) = events.last().unwrap();
        assert_eq!(last, "finished");
        let id = done["run_id"].as_str().unwrap().to_owned();
        for (_, data) in &events {
            if let Some(run) = data.get("run_id") {
                assert_eq!(run, id.as_str(), "a stream carries its own run only");
            }
        }
        ids.push(id);
    }
    ids.sort();
    assert_eq!(ids, ["http-1", "http-2"]);
    assert_eq!(counter.0.load(Ordering::SeqCst), 2, "one stack saw both runs");
}

#[tokio::test]
async fn bad_requests_are_refused() {
    let counter = RunCounter::default();
    let base = serve(Arc::new(scripted), &counter).await;
    assert_eq!(
        post(&base, json!({"prompt": "x", "temperature": 2})).await.status(),
        422
    );
    assert_eq!(post(&base, json!({})).await.status(), 422);
    let long = post(&base, json!({"prompt": "x".repeat(MAX_PROMPT + 1)})).await;
    assert_eq!(long.status(), 413);
    assert!(long.text().await.unwrap().contains("the limit is 65536"));
    assert_eq!(counter.0.load(Ordering::SeqCst), 0, "no run started");
}

/// A model that never answers; it reports when its call is dropped.
struct Hanging(Mutex<Option<tokio::sync::oneshot::Sender<()>>>);

struct SignalOnDrop(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for SignalOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

#[async_trait]
impl ChatModel for Hanging {
    fn id(&self) -> &str {
        "hanging"
    }

    async fn stream(&self, _request: &ModelRequest) -> Result<ModelStream> {
        let _signal = SignalOnDrop(self.0.lock().unwrap().take());
        futures::future::pending::<()>().await;
        unreachable!("never answers")
    }
}

#[tokio::test]
async fn a_client_that_hangs_up_cancels_its_run() {
    let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel();
    let model: Arc<dyn ChatModel> = Arc::new(Hanging(Mutex::new(Some(dropped_tx))));
    let counter = RunCounter::default();
    let base = serve(Arc::new(move || model.clone()), &counter).await;
    let addr = base.trim_start_matches("http://").to_owned();
    let mut socket = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let body = r#"{"prompt":"hi"}"#;
    socket
        .write_all(
            format!(
                "POST /run HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    // Read until the run has started and the model call is under way.
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains("event: model_call_started") {
        let n = socket.read(&mut buf).await.unwrap();
        assert!(n > 0, "the server closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    drop(socket);
    // The run is cancelled: the model's call is dropped. (A bound on the
    // wait so a regression fails instead of hanging; it is not a sleep.)
    tokio::time::timeout(Duration::from_secs(30), dropped_rx)
        .await
        .expect("the hung-up client's run was cancelled")
        .unwrap();
}

#[path = "../../tinyagents-cli/tests/browser/mod.rs"]
mod browser;

/// The live viewer (`GET /`) in headless Chromium: `#prompt=` runs a prompt
/// through `POST /run`, and the page draws the run from its server-sent events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_viewer_draws_the_run_from_its_events() {
    let Some(chrome) = browser::chromium() else { return };
    let counter = RunCounter::default();
    let base = serve(Arc::new(scripted), &counter).await;
    let page = reqwest::get(format!("{base}/")).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains(r#""live":{"url":"/run"}"#));
    let url = format!("{base}/#prompt=Weather%20in%20Lyon%3F&select=tool:call-1");
    let shot = browser::out_dir().join("live.png");
    let dom = tokio::task::spawn_blocking(move || browser::open(&chrome, &url, 1200, Some(&shot)))
        .await
        .unwrap();
    assert!(dom.contains("data-live=\"done\""), "the stream ended");
    assert_eq!(
        browser::between(&dom, "<span id=\"live-status\">", "</span>"),
        Some("finished: It is sunny in Lyon.")
    );
    let rows = browser::rows(&dom);
    assert_eq!(browser::row(&rows, "run", "run http-1").outcome, "ok");
    assert_eq!(browser::row(&rows, "hook", "run_counter · before_agent").outcome, "ok");
    let tool = browser::row(&rows, "tool", "tool get_weather (call-1)");
    assert_eq!((tool.outcome.as_str(), tool.depth), ("ok", 1));
    assert!(tool.selected && rows.iter().filter(|r| r.selected).all(|r| r.id == tool.id));
    assert_eq!(browser::stat(&dom, "model calls"), "2");
    // a live page has no price table: the cost is unknown, not zero
    assert_eq!(browser::stat(&dom, "cost"), "cost unknown");
    assert_eq!(browser::field(&dom, "result"), "sunny");
    assert!(browser::unescape(&dom).contains("Lyon"));
    assert_eq!(counter.0.load(Ordering::SeqCst), 1);
}
