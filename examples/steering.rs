//! Steering a running agent from outside: inject a message, redirect the
//! goal, switch mode, and have a gatekeeper middleware reject or defer
//! commands — all applied at safe points between steps, on the scripted model.
//!
//! Run it with `cargo run -p tinyagents-examples --example steering`.

use std::sync::Arc;

use serde_json::json;
use tinyagents::harness::event::FnSink;
use tinyagents::harness::steering::{SteeringAction, SteeringHandle};
use tinyagents::prelude::*;
use tinyagents::testing::trace_line;

/// A gatekeeper: cancels from outside are refused, mode switches wait until
/// the agent has taken its first step.
#[before_steering]
fn gatekeeper(ctx: &mut RunContext, command: &mut SteeringCommand) -> Result<()> {
    match &command.action {
        SteeringAction::Cancel { .. } => command.reject("this agent finishes what it starts"),
        SteeringAction::SwitchMode { .. } if ctx.counters().steps == 0 => command.defer(),
        _ => {}
    }
    Ok(())
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
    let handle = SteeringHandle::new();
    // A tool that, while it runs, receives a command from "outside": it is
    // queued and applied at the next safe point, never inside the call.
    let outside = handle.clone();
    let tools = ToolRegistry::new().with(tool_fn("survey", "Surveys the codebase.", move |_cx, _| {
        let outside = outside.clone();
        async move {
            outside.send(SteeringCommand::new(
                "late-note",
                SteeringAction::InjectMessage {
                    message: Message::user("Also mention the tests."),
                },
            ));
            Ok("42 modules, 3 without tests".into())
        }
    }))?;
    let model = ScriptedModel::new([
        ScriptedTurn::tool_call("survey", json!({})),
        ScriptedTurn::text("Survey done: 42 modules; the 3 untested ones need tests."),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(tools)
        .with_stack(MiddlewareStack::new().with(Gatekeeper)?);

    // Commands sent before the run starts.
    handle.send(SteeringCommand::new(
        "focus",
        SteeringAction::Redirect {
            goal: "Focus on test coverage.".into(),
        },
    ));
    handle.send(SteeringCommand::new(
        "stop",
        SteeringAction::Cancel {
            reason: "changed my mind".into(),
        },
    ));
    handle.send(SteeringCommand::new(
        "plan",
        SteeringAction::SwitchMode { mode: "plan".into() },
    ));

    let sink = Arc::new(FnSink::new(|event: AgentEvent| {
        if let Some(line) = trace_line(&event)
            && (line.starts_with("steering") || line.starts_with("state") || line.starts_with("model_call"))
        {
            println!("  {line}");
        }
    }));
    let mut ctx = RunContext::new(RunConfig::new("steered"), ())
        .with_sink(sink)
        .with_steering(handle);
    let run = agent.run(&mut ctx, &(), "Survey the codebase.").await?;

    println!("\nconversation:");
    for m in &run.messages {
        println!("  {:>9}: {}", m.role.as_str(), m.text());
    }
    println!(
        "mode after the run: {}",
        ctx.flow()
            .state_updates()
            .last()
            .map_or("-".into(), |u| u.value.to_string())
    );
    Ok(())
}
