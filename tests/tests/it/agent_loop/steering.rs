//! Steering: commands from outside, decided by `before_steering` (accept,
//! reject, transform, defer), reported to `after_steering`, applied only at
//! safe points, and delivered to child runs by id.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use tinyagents::harness::steering::{SteeringAction, SteeringHandle};
use tinyagents::prelude::*;
use tinyagents::testing::{trace, CollectingSink};

/// Rejects cancels, turns redirects into a plain injected note, defers mode
/// switches until the second step, and records every outcome.
#[derive(Default)]
struct Gatekeeper {
    outcomes: Mutex<Vec<(String, bool, bool)>>,
}

#[async_trait]
impl Middleware<()> for Gatekeeper {
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_STEERING | HookSet::AFTER_STEERING
    }
    async fn before_steering(&self, ctx: &mut RunContext, _: &(), command: &mut SteeringCommand) -> Result<()> {
        match &command.action {
            SteeringAction::Cancel { .. } => command.reject("this agent cannot be cancelled from outside"),
            SteeringAction::Redirect { goal } => {
                command.action = SteeringAction::InjectMessage {
                    message: Message::user(format!("note: {goal}")),
                };
            }
            SteeringAction::SwitchMode { .. } if ctx.counters().steps < 1 => command.defer(),
            _ => {}
        }
        Ok(())
    }
    async fn after_steering(&self, _: &mut RunContext, _: &(), outcome: &mut SteeringOutcome) -> Result<()> {
        self.outcomes
            .lock()
            .unwrap()
            .push((outcome.command.id.clone(), outcome.transformed, outcome.applied));
        Ok(())
    }
}

fn cmd(id: &str, action: SteeringAction) -> SteeringCommand {
    SteeringCommand::new(id, action)
}

#[tokio::test]
async fn commands_are_accepted_rejected_transformed_and_deferred_at_safe_points() {
    let gate = Arc::new(Gatekeeper::default());
    let mut stack = MiddlewareStack::new();
    stack.add_shared(gate.clone()).unwrap();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("t", json!({})),
        ScriptedTurn::text("done"),
    ]));
    let agent = Agent::from_shared(model.clone())
        .with_tools(
            ToolRegistry::new()
                .with(tinyagents::testing::RecordingTool::new("t"))
                .unwrap(),
        )
        .with_stack(stack);

    let handle = SteeringHandle::new();
    handle.send(cmd(
        "inject",
        SteeringAction::InjectMessage {
            message: Message::user("also check the logs"),
        },
    ));
    handle.send(cmd("cancel", SteeringAction::Cancel { reason: "stop".into() }));
    handle.send(cmd(
        "redirect",
        SteeringAction::Redirect {
            goal: "be brief".into(),
        },
    ));
    handle.send(cmd("mode", SteeringAction::SwitchMode { mode: "plan".into() }));
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ())
        .with_sink(sink.clone())
        .with_steering(handle.clone());
    let run = agent.run(&mut ctx, &(), "start").await.unwrap();
    assert_eq!(run.final_text(), "done");

    // accepted and transformed commands reached the first model call; the cancel did not apply
    let first = model.requests()[0]
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect::<Vec<_>>();
    assert_eq!(first, ["start", "also check the logs", "note: be brief"]);
    assert!(!ctx.flow().is_cancelled());
    // the deferred mode switch applied at the next safe point (before step 2), in order
    let t = trace(&sink.events());
    let steering: Vec<&String> = t
        .iter()
        .filter(|l| l.starts_with("steering") || l.starts_with("state"))
        .collect();
    assert_eq!(
        steering,
        [
            "steering inject inject_message accept",
            "steering cancel cancel reject",
            "steering redirect inject_message accept transformed",
            "steering mode switch_mode defer",
            "steering mode switch_mode accept",
            "state mode",
        ]
    );
    assert_eq!(ctx.flow().state_updates()[0].value, json!("plan"));
    assert_eq!(
        *gate.outcomes.lock().unwrap(),
        [
            ("inject".to_owned(), false, true),
            ("cancel".to_owned(), false, false),
            ("redirect".to_owned(), true, true),
            ("mode".to_owned(), false, false),
            ("mode".to_owned(), false, true),
        ]
    );
    assert_eq!(handle.pending(None), 0);
}

#[tokio::test]
async fn a_command_sent_during_a_tool_call_applies_at_the_next_safe_point_not_inside_the_call() {
    let handle = SteeringHandle::new();
    let h = handle.clone();
    let tool = tool_fn("slow", "sends a steering command while it runs", move |_cx, _| {
        let h = h.clone();
        async move {
            h.send(SteeringCommand::new(
                "late",
                SteeringAction::InjectMessage {
                    message: Message::user("from outside"),
                },
            ));
            // still inside the call: nothing was applied yet
            assert_eq!(h.pending(None), 1);
            Ok("tool result".into())
        }
    });
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("slow", json!({})),
        ScriptedTurn::text("ok"),
    ]));
    let agent = Agent::<()>::from_shared(model.clone()).with_tools(ToolRegistry::new().with(tool).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_steering(handle.clone());
    agent.run(&mut ctx, &(), "go").await.unwrap();
    let second: Vec<String> = model.requests()[1]
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(
        second.last().map(String::as_str),
        Some("from outside"),
        "injected after the tool result: {second:?}"
    );
}

#[tokio::test]
async fn pause_interrupts_the_run_and_later_commands_stay_queued_in_order() {
    let handle = SteeringHandle::new();
    handle.send(cmd(
        "p",
        SteeringAction::Pause {
            reason: "a person wants to look".into(),
        },
    ));
    handle.send(cmd("m1", SteeringAction::SwitchMode { mode: "review".into() }));
    handle.send(cmd("m2", SteeringAction::AdjustLimits { max_steps: Some(3) }));
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("never")]));
    let agent = Agent::<()>::from_shared(model.clone());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_steering(handle.clone());
    let err = agent.run(&mut ctx, &(), "go").await.unwrap_err();
    assert_eq!(
        err,
        TinyAgentsError::interrupted(Some("steering".into()), "a person wants to look")
    );
    assert_eq!(model.calls(), 0, "paused before any model call");
    assert_eq!(handle.pending(None), 2);
}

#[tokio::test]
async fn a_command_for_a_child_run_waits_for_that_child_and_only_it_applies_it() {
    let handle = SteeringHandle::new();
    handle.send(
        SteeringCommand::new(
            "c",
            SteeringAction::InjectMessage {
                message: Message::user("child only"),
            },
        )
        .for_run("p/k1"),
    );
    let child_model = Arc::new(ScriptedModel::new([ScriptedTurn::text("child done")]));
    let child = Arc::new(Agent::<()>::from_shared(child_model.clone()));
    let parent_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![ToolCall::new("k1", "helper", json!({"input": "work"}))]),
        ScriptedTurn::text("parent done"),
    ]));
    let parent = Agent::<()>::from_shared(parent_model.clone()).with_tools(
        ToolRegistry::new()
            .with(AgentTool::new(child, "helper", "helps", || ((), ())))
            .unwrap(),
    );
    let mut ctx = RunContext::new(RunConfig::new("p"), ()).with_steering(handle.clone());
    // queued for the child until it runs
    assert_eq!(handle.pending(Some("p/k1")), 1);
    parent.run(&mut ctx, &(), "go").await.unwrap();
    let child_msgs: Vec<String> = child_model.requests()[0]
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(child_msgs, ["work", "child only"]);
    let parent_first: Vec<String> = parent_model.requests()[0]
        .messages
        .iter()
        .map(|m| m.text().into_owned())
        .collect();
    assert_eq!(parent_first, ["go"], "the parent never applied the child's command");
    assert_eq!(handle.pending(Some("p/k1")), 0);
}
