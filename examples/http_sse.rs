//! An agent over HTTP: an axum server that runs one agent per request around
//! a shared middleware stack and streams the run's events as server-sent
//! events (see `tinyagents_examples::http` for the protocol).
//!
//! ```text
//! cargo run -p tinyagents-examples --features http --example http_sse
//! curl -N -X POST localhost:3000/run -H 'content-type: application/json' -d '{"prompt": "Weather in Lyon?"}'
//! ```
//!
//! Open <http://localhost:3000/> for the run viewer, drawing a run live from
//! its events (`#prompt=TEXT` in the address runs TEXT at once).
//!
//! Each request gets a fresh scripted model here (it calls `get_weather`,
//! then answers); serve a real one by returning a shared
//! `model_from_env("openai:gpt-4o-mini")?` from the model factory instead.
//! `examples/tests/http_sse.rs` drives this server with a real HTTP client.

use std::sync::Arc;

use serde_json::json;
use tinyagents::middleware::TracingMiddleware;
use tinyagents::prelude::*;
use tinyagents_examples::http::{router, AppState};

/// The demo's model: one tool call, then the answer.
pub fn scripted() -> Arc<dyn ChatModel> {
    Arc::new(ScriptedModel::new(vec![
        ScriptedTurn::tool_calls(vec![ToolCall::new("call-1", "get_weather", json!({"city": "Lyon"}))]),
        ScriptedTurn::text("It is sunny in Lyon."),
    ]))
}

#[tokio::main]
async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    // Built once, shared by every request.
    let stack = MiddlewareStack::new().with(TracingMiddleware::new())?;
    let tools = || {
        ToolRegistry::new()
            .with(tool_fn(
                "get_weather",
                "The weather in a city.",
                |_cx, _args| async move { Ok("Sunny, 21 °C".into()) },
            ))
            .expect("one tool registers")
    };
    let app = router(AppState::new(stack, Arc::new(scripted), Arc::new(tools)));
    let addr = std::env::var("ADDR").unwrap_or_else(|_| "127.0.0.1:3000".to_owned());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    let addr = listener.local_addr()?;
    println!("POST http://{addr}/run  {{\"prompt\": \"…\"}}; the live run viewer: http://{addr}/");
    axum::serve(listener, app).await?;
    Ok(())
}
