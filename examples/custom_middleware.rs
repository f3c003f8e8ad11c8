//! Custom middleware: three free fns and one impl block with state, on one
//! stack, run on the scripted model.
//!
//! * `stamp_user` (free fn, `#[before_model]`) reads the app state and
//!   writes it into the volatile tail of the system prompt;
//! * `mask_digits` (free fn, `#[on_model_delta]`) is a plain fn, so it takes
//!   the sync fast path: no boxed future per streamed token;
//! * `time_tool` (free fn, `#[wrap_tool]`) measures each tool call;
//! * `Budget` (`#[middleware]` impl block) counts model calls in a field,
//!   ends the run early when over budget (a declared jump), and sees errors.
//!
//! Run it with `cargo run -p tinyagents-examples --example custom_middleware`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use serde_json::json;
use tinyagents::docs::MiddlewareMetadata;
use tinyagents::prelude::*;

/// The application's state, shared read-only by every hook of a run.
struct App {
    user: String,
}

/// Tells the model who it is talking to.
#[before_model]
async fn stamp_user(state: &App, request: &mut ModelRequest) -> Result<()> {
    println!("  stamp_user: adding the user to the prompt's volatile tail");
    request.set_volatile("user", format!("You are talking to {}.", state.user));
    Ok(())
}

/// Masks digits as they stream: a plain fn, so the stack calls it without a future.
#[on_model_delta]
fn mask_digits(delta: &mut ModelDelta) -> Result<()> {
    if let Some(text) = delta.text_mut()
        && text.chars().any(|c| c.is_ascii_digit())
    {
        *text = text.chars().map(|c| if c.is_ascii_digit() { '#' } else { c }).collect();
    }
    Ok(())
}

/// Times each tool call.
#[wrap_tool]
async fn time_tool(
    ctx: &mut RunContext,
    state: &App,
    call: ToolCall,
    next: ToolHandler<'_, App>,
) -> Result<MiddlewareToolOutcome> {
    let (name, started) = (call.name.clone(), Instant::now());
    let outcome = next.run(ctx, state, call).await;
    println!("  time_tool: `{name}` took {:?}", started.elapsed());
    outcome
}

/// A model-call budget: state in a field, a declared jump, an error hook.
struct Budget {
    max_calls: u32,
    calls: AtomicU32,
}

#[middleware(
    name = "budget",
    can_jump_to = [end],
    doc(summary = "Ends a run after `max_calls` model calls.")
)]
impl Budget {
    #[before_model]
    fn count(&self, ctx: &mut RunContext) -> Result<()> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        println!(
            "  budget: model call {n} of {} (step {})",
            self.max_calls,
            ctx.counters().steps
        );
        Ok(())
    }

    #[after_model]
    async fn enforce(&self, ctx: &mut RunContext, response: &mut ModelResponse) -> Result<()> {
        if self.calls.load(Ordering::Relaxed) >= self.max_calls && !response.message.tool_calls.is_empty() {
            println!("  budget: spent; ending the run instead of calling tools");
            ctx.flow_mut().jump_to(JumpTarget::End);
        }
        Ok(())
    }

    #[on_error]
    fn report(&self, error: &TinyAgentsError) -> Result<()> {
        println!("  budget: saw an error: {error}");
        Ok(())
    }
}

fn build_stack(max_calls: u32) -> Result<MiddlewareStack<App>> {
    MiddlewareStack::new()
        .with(StampUser)?
        .with(MaskDigits)?
        .with(TimeTool)?
        .with(Budget {
            max_calls,
            calls: AtomicU32::new(0),
        })
}

fn tools() -> Result<ToolRegistry> {
    ToolRegistry::new().with(tool_fn("lookup_order", "Finds an order.", |_cx, args| async move {
        Ok(format!("order {} shipped on day 3", args["id"]).into())
    }))
}

fn script() -> ScriptedModel {
    ScriptedModel::new([
        ScriptedTurn::tool_call("lookup_order", json!({"id": 42})),
        ScriptedTurn::text("Your order 42 shipped 3 days ago."),
    ])
}

#[tokio::main]
async fn main() {
    // Errors are printed with their readable `Display` form, and the process exits non-zero.
    if let Err(e) = run().await {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Result<()> {
    let app = App { user: "Ada".into() };

    let stack = build_stack(5)?;
    println!("stack: {:?}", stack.names());
    for hook in [
        HookKind::BeforeModel,
        HookKind::OnModelDelta,
        HookKind::AfterModel,
        HookKind::WrapTool,
    ] {
        println!("  {:<16} {:?}", hook.as_str(), stack.implementors(hook));
    }
    println!(
        "mask_digits declares the sync fast path: {}",
        MaskDigits::HOOKS.contains(HookSet::SYNC_MODEL_DELTA)
    );

    println!("\nrun 1 (budget of 5 model calls):");
    let agent: Agent<App> = Agent::new(script()).with_tools(tools()?).with_stack(stack);
    let run = agent
        .run(
            &mut RunContext::new(RunConfig::new("run-1"), ()),
            &app,
            "Where is my order?",
        )
        .await?;
    println!("final answer: {:?} ({:?})", run.final_text(), run.stop);

    println!("\nrun 2 (budget of 1 model call):");
    let agent: Agent<App> = Agent::new(script()).with_tools(tools()?).with_stack(build_stack(1)?);
    let run = agent
        .run(
            &mut RunContext::new(RunConfig::new("run-2"), ()),
            &app,
            "Where is my order?",
        )
        .await?;
    println!(
        "stopped: {:?}, after {} model call(s)",
        run.stop, run.counters.model_calls
    );
    Ok(())
}
