//! Spans to an OpenTelemetry collector: an agent whose stack holds the
//! `tracing` built-in, its spans exported with `tracing-opentelemetry` and
//! `opentelemetry-otlp` over HTTP/protobuf.
//!
//! Start a collector (Jaeger's all-in-one, the OpenTelemetry Collector, …)
//! listening for OTLP/HTTP on port 4318, then:
//!
//! ```text
//! cargo run -p tinyagents-examples --features otlp --example otlp
//! OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318 cargo run -p tinyagents-examples --features otlp --example otlp
//! ```
//!
//! The trace shows `invoke_agent` with `chat scripted` and
//! `execute_tool get_weather` children, each with `gen_ai.*` attributes.
//! `examples/tests/otlp_export.rs` runs the same code against a collector
//! of its own on loopback and checks what arrives.

use serde_json::json;
use tinyagents::harness::secrets::{mask_url, redactor};
use tinyagents::middleware::TracingMiddleware;
use tinyagents::prelude::*;
use tinyagents_examples::otlp;

#[tokio::main]
async fn main() -> std::result::Result<(), Box<dyn std::error::Error>> {
    let endpoint = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").unwrap_or_else(|_| "http://localhost:4318".to_owned());
    // A collector's URL may carry a token (user info, `?api-key=`): learnt,
    // so no message below shows it.
    redactor().add_url(&endpoint);
    let provider = otlp::provider(&endpoint).map_err(|e| redactor().redact(&e.to_string()).into_owned())?;
    tracing::subscriber::set_global_default(otlp::subscriber(&provider))?;

    let tools = ToolRegistry::new().with(tool_fn(
        "get_weather",
        "The weather in a city.",
        |_cx, _args| async move { Ok("Sunny, 21 °C".into()) },
    ))?;
    let agent: Agent<()> = Agent::new(ScriptedModel::new(vec![
        ScriptedTurn::tool_calls(vec![ToolCall::new("call-1", "get_weather", json!({"city": "Lyon"}))]),
        ScriptedTurn::text("It is sunny in Lyon."),
    ]))
    .with_tools(tools)
    .with_stack(MiddlewareStack::new().with(TracingMiddleware::new())?);
    let mut ctx = RunContext::new(RunConfig::new("otlp-demo"), ());
    let run = agent.run(&mut ctx, &(), "What is the weather in Lyon?").await?;
    println!("{}", run.final_text());

    // Sends the last batch; spans not yet exported are lost without it.
    provider.shutdown()?;
    println!("spans exported to {}/v1/traces", mask_url(&endpoint));
    Ok(())
}
