//! A real model behind the same agent: the provider is one string.
//!
//! ```text
//! TINYAGENTS_MODEL=openai:gpt-4o-mini         OPENAI_API_KEY=sk-...
//! TINYAGENTS_MODEL=anthropic:claude-sonnet-4-5 ANTHROPIC_API_KEY=sk-ant-...
//! TINYAGENTS_MODEL=ollama:llama3.2             (a local Ollama, no key)
//! TINYAGENTS_MODEL=openai-compatible:qwen3     OPENAI_COMPATIBLE_BASE_URL=http://127.0.0.1:8000/v1
//!
//! cargo run -p tinyagents-examples --features providers --example providers
//! ```
//!
//! The reply streams to the terminal delta by delta through an
//! `on_model_delta` hook; the model may call a clock tool; the run ends with
//! the usage the provider reported (cache reads and writes included).

use std::io::Write;

use tinyagents::harness::model::providers::{model_from_default_env, MODEL_ENV, PROVIDER_NAMES};
use tinyagents::harness::model::DeltaContent;
use tinyagents::prelude::*;

/// Prints answer text as it streams (a plain fn: no boxed future per delta).
#[on_model_delta]
fn print_delta(delta: &mut ModelDelta) -> Result<()> {
    if let DeltaContent::Text { text } = &delta.content {
        print!("{text}");
        let _ = std::io::stdout().flush();
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<()> {
    let Some(model) = model_from_default_env()? else {
        eprintln!(
            "Set {MODEL_ENV} to `provider:model` (providers: {}) and the provider's key, e.g.\n  \
             {MODEL_ENV}=openai:gpt-4o-mini OPENAI_API_KEY=sk-... \
             cargo run -p tinyagents-examples --features providers --example providers",
            PROVIDER_NAMES.join(", ")
        );
        return Ok(());
    };
    let clock = tool_fn(
        "utc_time",
        "The current UTC time, as seconds since 1970.",
        |_cx, _args| async {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default();
            Ok(format!("{} seconds since 1970-01-01T00:00:00Z", now.as_secs()).into())
        },
    );
    println!("model: {}", model.id());
    let agent: Agent<()> = Agent::from_shared(model)
        .with_system_prompt("You are terse. Use the tool when the question needs the time.")
        .with_tools(ToolRegistry::new().with(clock)?)
        .with_stack(MiddlewareStack::new().with(PrintDelta)?);
    let mut ctx = RunContext::new(RunConfig::new("providers-example"), ());
    let run = agent
        .run(&mut ctx, &(), "What time is it in UTC? Answer in one sentence.")
        .await?;
    println!(
        "\n\nsteps: {}, model calls: {}",
        run.counters.steps, run.counters.model_calls
    );
    println!("usage: {:?}", run.usage);
    Ok(())
}
