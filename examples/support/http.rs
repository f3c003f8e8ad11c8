//! An agent served over HTTP with axum: `POST /run` with `{"prompt": "…"}`
//! runs one agent for that request, around a middleware stack shared by
//! every request, and answers with its events as server-sent events (SSE).
//! `GET /` serves the run viewer (`tinyagents::harness::event::live_html`),
//! which sends a prompt to `POST /run` and draws the run from its events as
//! they arrive. Used by the `http_sse` example and its test.
//!
//! Each SSE event is named after the event's `type` and carries its JSON
//! (the shape of `docs/events.md`) as data; the stream ends with one
//! `finished` event (`{"run_id", "final", "steps", "model_calls",
//! "tool_calls"}`) or one `error` event (`{"run_id", "kind", "message"}`).
//! A client that hangs up cancels its run (the run's cancellation token), so
//! a closed tab stops spending model calls.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::Html;
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::stream::{self, Stream, StreamExt};
use serde::Deserialize;
use tinyagents::harness::context::CancellationToken;
use tinyagents::harness::event::ChannelSink;
use tinyagents::prelude::*;

/// The longest prompt a request may send, in bytes.
pub const MAX_PROMPT: usize = 64 * 1024;

/// Builds the model for one run (a shared real model, or a fresh scripted one).
pub type ModelFactory = Arc<dyn Fn() -> Arc<dyn ChatModel> + Send + Sync>;

/// Builds the tools for one run.
pub type ToolsFactory = Arc<dyn Fn() -> ToolRegistry + Send + Sync>;

/// What every request shares: the stack (one `Arc`, built once), how to get
/// a model and tools, and the run counter.
pub struct AppState {
    stack: Arc<MiddlewareStack<()>>,
    model: ModelFactory,
    tools: ToolsFactory,
    runs: AtomicU64,
}

impl AppState {
    /// The shared state of a server.
    pub fn new(stack: MiddlewareStack<()>, model: ModelFactory, tools: ToolsFactory) -> Self {
        Self {
            stack: Arc::new(stack),
            model,
            tools,
            runs: AtomicU64::new(0),
        }
    }
}

/// The body of `POST /run`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// The user prompt.
    pub prompt: String,
}

/// The server's routes: `GET /` (the live run viewer) and `POST /run`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/", get(viewer))
        .route("/run", post(run))
        .with_state(Arc::new(state))
}

/// The run viewer, live: one self-contained page that runs a prompt through `POST /run`.
async fn viewer() -> Html<String> {
    Html(tinyagents::harness::event::live_html("/run", "tinyagents · live run"))
}

/// An SSE event of `name` carrying `data` as JSON.
fn sse(name: &str, data: &serde_json::Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

/// Cancels the run when the response stream is dropped (the client hung up).
struct CancelOnDrop(CancellationToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

async fn run(
    State(state): State<Arc<AppState>>,
    Json(request): Json<RunRequest>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, (axum::http::StatusCode, String)> {
    if request.prompt.len() > MAX_PROMPT {
        return Err((
            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the prompt is {} bytes; the limit is {MAX_PROMPT}: send a shorter one",
                request.prompt.len()
            ),
        ));
    }
    let n = state.runs.fetch_add(1, Ordering::Relaxed) + 1;
    let run_id = format!("http-{n}");
    let (sink, events) = ChannelSink::new();
    let cancel = CancellationToken::new();
    let mut ctx = RunContext::new(RunConfig::new(run_id.clone()), ())
        .with_sink(Arc::new(sink))
        .with_cancellation(cancel.clone());
    let agent: Agent<()> = Agent::from_shared((state.model)())
        .with_tools((state.tools)())
        .with_shared_stack(state.stack.clone());
    let (done_tx, done_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let result = agent.run(&mut ctx, &(), request.prompt.as_str()).await;
        // Dropping the context closes the event channel: the stream below
        // sends every event before the outcome.
        drop(ctx);
        let _ = done_tx.send(result);
    });

    // A run's events are finite (bounded by its step limit): the unbounded
    // channel holds at most one run's worth.
    let guard = CancelOnDrop(cancel);
    let events = stream::unfold(events, |mut rx| async move {
        let event = rx.recv().await?;
        let value = serde_json::to_value(&event)
            .unwrap_or_else(|e| serde_json::json!({"type": "unserializable", "error": e.to_string()}));
        let name = value["type"].as_str().unwrap_or("event").to_owned();
        Some((Ok(sse(&name, &value)), rx))
    });
    let outcome = stream::once(async move {
        let _guard = guard;
        let event = match done_rx.await {
            Ok(Ok(run)) => sse(
                "finished",
                &serde_json::json!({
                    "run_id": run_id,
                    "final": run.final_text(),
                    "steps": run.counters.steps,
                    "model_calls": run.counters.model_calls,
                    "tool_calls": run.counters.tool_calls,
                }),
            ),
            Ok(Err(e)) => sse(
                "error",
                &serde_json::json!({"run_id": run_id, "kind": e.kind(), "message": e.to_string()}),
            ),
            Err(_) => sse(
                "error",
                &serde_json::json!({"run_id": run_id, "kind": "middleware_panic", "message": "the run's task ended without an outcome"}),
            ),
        };
        Ok(event)
    });
    Ok(Sse::new(events.chain(outcome)).keep_alive(KeepAlive::default()))
}
