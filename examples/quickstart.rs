//! Quickstart: an agent on the built-in scripted model that calls a tool,
//! with three small middleware written as plain functions — one observing,
//! one editing the request, one wrapping the tool call — and a readable
//! trace of every event.
//!
//! Run it with `cargo run -p tinyagents-examples --example quickstart`.
//!
//! On a real model instead: build with the `providers` feature and name the
//! model in `TINYAGENTS_MODEL` (`provider:model`), with its key in the
//! provider's usual variable, e.g.
//! `TINYAGENTS_MODEL=openai:gpt-4o-mini OPENAI_API_KEY=… cargo run -p tinyagents-examples --features providers --example quickstart`.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tinyagents::harness::event::FnSink;
use tinyagents::prelude::*;
use tinyagents::testing::trace_line;

/// Observes: reports what each model call answered.
#[after_model]
async fn report_response(ctx: &mut RunContext, response: &mut ModelResponse) -> Result<()> {
    println!(
        "    · step {} answered {:?} with {} tool call(s)",
        ctx.counters().steps,
        response.message.text(),
        response.message.tool_calls.len()
    );
    Ok(())
}

/// Edits the request: writes today's date into the volatile tail of the
/// system prompt, so the cacheable prefix stays untouched.
#[before_model]
fn add_date(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("date", "Today is Monday, 30 November 2026.");
    Ok(())
}

/// Wraps each tool call: times it and notes the time in the result.
#[wrap_tool]
async fn time_tools(
    ctx: &mut RunContext,
    state: &(),
    call: ToolCall,
    next: ToolHandler<'_, ()>,
) -> Result<MiddlewareToolOutcome> {
    let started = Instant::now();
    let mut result = next.run(ctx, state, call).await?.into_result();
    result.content.push_str(&format!(" (took {:?})", started.elapsed()));
    Ok(result.into())
}

/// The scripted model (first it asks for the weather tool, then it
/// answers), or the real model `TINYAGENTS_MODEL` names.
fn model() -> Result<Arc<dyn ChatModel>> {
    #[cfg(feature = "providers")]
    if let Some(real) = tinyagents::harness::model::providers::model_from_default_env()? {
        println!("model: {}", real.id());
        return Ok(real);
    }
    Ok(Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("weather", json!({"city": "Paris"})),
        ScriptedTurn::text("It is 18°C and sunny in Paris today."),
    ])))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    // Errors are printed with their readable `Display` form, and the process exits non-zero.
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<()> {
    let model = model()?;
    let tools = ToolRegistry::new().with(tool_fn(
        "weather",
        "Current weather for a city.",
        |_cx, args| async move { Ok(format!("{}: 18°C, sunny", args["city"].as_str().unwrap_or("?")).into()) },
    ))?;
    let stack = MiddlewareStack::new()
        .with(ReportResponse)?
        .with(AddDate)?
        .with(TimeTools)?;
    println!("stack: {:?}\n", stack.names());

    let agent: Agent<()> = Agent::from_shared(model)
        .with_system_prompt("You are a concise weather assistant.")
        .with_tools(tools)
        .with_stack(stack);

    // Print every event as it happens.
    let sink = Arc::new(FnSink::new(|event: AgentEvent| {
        if let Some(line) = trace_line(&event) {
            println!("  {line}");
        }
    }));
    let mut ctx = RunContext::new(RunConfig::new("quickstart"), ()).with_sink(sink);
    let run = agent.run(&mut ctx, &(), "What's the weather in Paris?").await?;

    println!("\nfinal answer: {}", run.final_text());
    println!(
        "steps: {}, model calls: {}, tool calls: {}",
        run.counters.steps, run.counters.model_calls, run.counters.tool_calls
    );
    Ok(())
}
