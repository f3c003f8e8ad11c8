//! Control requests (precedence, stop with final, interrupt), jumps (to end,
//! to model, undeclared jumps refused) and the step limit.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::json;
use tinyagents::harness::context::JumpSet;
use tinyagents::prelude::*;
use tinyagents::testing::{trace, CollectingSink, RecordingTool};

use crate::support::run_into;

/// Requests a control in `after_model`.
struct Requests(Vec<MiddlewareControl>);

#[async_trait]
impl Middleware<()> for Requests {
    fn hooks(&self) -> HookSet {
        HookSet::AFTER_MODEL
    }
    async fn after_model(&self, ctx: &mut RunContext, _: &(), _: &mut ModelResponse) -> Result<()> {
        for c in &self.0 {
            ctx.flow_mut().request_control(c.clone());
        }
        Ok(())
    }
}

#[test]
fn control_precedence_never_downgrades_and_keeps_the_first_among_equals() {
    let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    ctx.flow_mut()
        .request_control(MiddlewareControl::StopWithFinal("first".into()));
    ctx.flow_mut()
        .request_control(MiddlewareControl::StopWithFinal("second".into()));
    assert_eq!(
        ctx.flow().pending_control(),
        Some(&MiddlewareControl::StopWithFinal("first".into()))
    );

    let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    ctx.flow_mut()
        .request_control(MiddlewareControl::StopWithFinal("stop".into()));
    ctx.flow_mut().request_control(MiddlewareControl::Interrupt {
        node: None,
        message: "pause".into(),
    });
    ctx.flow_mut()
        .request_control(MiddlewareControl::StopWithFinal("later stop".into()));
    assert_eq!(ctx.flow().pending_control().map(|c| c.kind()), Some("interrupt"));
}

#[tokio::test]
async fn interrupt_outranks_stop_in_a_real_run() {
    let stack = MiddlewareStack::new()
        .with(Requests(vec![
            MiddlewareControl::Interrupt {
                node: Some("approval".into()),
                message: "needs a human".into(),
            },
            MiddlewareControl::StopWithFinal("done".into()),
        ]))
        .unwrap();
    let agent = Agent::new(ScriptedModel::new([ScriptedTurn::text("x")])).with_stack(stack);
    let sink = Arc::new(CollectingSink::new());
    let err = run_into(&agent, sink.clone(), "hi").await;
    assert_eq!(
        err.unwrap_err(),
        TinyAgentsError::interrupted(Some("approval".into()), "needs a human")
    );
    assert!(trace(&sink.events()).contains(&"control interrupt".to_owned()));
}

#[tokio::test]
async fn stop_with_final_ends_the_run_and_answers_pending_tool_calls() {
    let tool = RecordingTool::new("t");
    let stack = MiddlewareStack::new()
        .with(Requests(vec![MiddlewareControl::StopWithFinal("enough".into())]))
        .unwrap();
    let agent = Agent::new(ScriptedModel::new([ScriptedTurn::tool_call("t", json!({}))]))
        .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
        .with_stack(stack);
    let run = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await
        .unwrap();
    assert_eq!(run.final_text(), "enough");
    assert_eq!(run.stop, StopReason::StoppedByMiddleware);
    assert!(tool.calls().is_empty(), "the tool never ran");
    // the requested call still got exactly one result
    let answers: Vec<_> = run
        .messages
        .iter()
        .filter(|m| m.tool_call_id.as_deref() == Some("call-t"))
        .collect();
    assert_eq!(answers.len(), 1);
}

/// Jumps to a target in `after_model`, declaring `declared`.
struct Jumper {
    target: JumpTarget,
    declared: JumpSet,
}

#[async_trait]
impl Middleware<()> for Jumper {
    fn hooks(&self) -> HookSet {
        HookSet::AFTER_MODEL
    }
    fn info(&self) -> MiddlewareInfo {
        MiddlewareInfo::new("jumper")
            .with_hooks(HookSet::AFTER_MODEL)
            .with_jumps(self.declared)
    }
    async fn after_model(&self, ctx: &mut RunContext, _: &(), _: &mut ModelResponse) -> Result<()> {
        ctx.flow_mut().jump_to(self.target);
        Ok(())
    }
}

#[tokio::test]
async fn jump_to_end_stops_before_tools_run() {
    let tool = RecordingTool::new("t");
    let agent = Agent::new(ScriptedModel::new([ScriptedTurn::tool_call("t", json!({}))]))
        .with_tools(ToolRegistry::new().with(tool.clone()).unwrap())
        .with_stack(
            MiddlewareStack::new()
                .with(Jumper {
                    target: JumpTarget::End,
                    declared: JumpSet::END,
                })
                .unwrap(),
        );
    let sink = Arc::new(CollectingSink::new());
    let run = run_into(&agent, sink.clone(), "hi").await.unwrap();
    assert_eq!(run.stop, StopReason::JumpedToEnd);
    assert!(tool.calls().is_empty());
    assert!(trace(&sink.events()).contains(&"control jump_to_end".to_owned()));
    assert_eq!(run.counters.model_calls, 1);
}

#[tokio::test]
async fn an_undeclared_jump_is_refused_with_an_error_naming_middleware_and_target() {
    let agent = Agent::new(ScriptedModel::new([ScriptedTurn::text("x")])).with_stack(
        MiddlewareStack::new()
            .with(Jumper {
                target: JumpTarget::Tools,
                declared: JumpSet::END,
            })
            .unwrap(),
    );
    let err = agent
        .run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Validation);
    let msg = err.to_string();
    assert!(
        msg.contains("`jumper`") && msg.contains("`tools`") && msg.contains("can_jump_to = [tools]"),
        "{msg}"
    );
}

#[tokio::test]
async fn the_step_limit_ends_a_looping_run_with_a_clear_error() {
    // The model asks for the same tool forever.
    let model = ScriptedModel::from_fn(|_| ScriptedTurn::tool_call("t", json!({})));
    let agent = Agent::new(model)
        .with_tools(ToolRegistry::new().with(RecordingTool::new("t")).unwrap())
        .with_max_steps(4);
    let mut ctx = RunContext::new(RunConfig::new("r"), ());
    let err = agent.run(&mut ctx, &(), "loop").await.unwrap_err();
    match err {
        TinyAgentsError::LimitExceeded { limit, message } => {
            assert_eq!(limit, "max_steps");
            assert!(message.contains("4 model turns"), "{message}");
        }
        other => panic!("expected the step limit, got {other:?}"),
    }
    assert_eq!(ctx.counters().steps, 4);
    assert_eq!(ctx.counters().tool_calls, 4);
}
