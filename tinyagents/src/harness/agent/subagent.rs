//! [`AgentTool`]: a sub-agent run as a tool of its parent.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{Agent, AgentInput};
use crate::harness::context::{RunConfig, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::model::Usage;
use crate::harness::tool::{call_digest, ParentRun, Tool, ToolContext, ToolOutput, ToolSchema};
use crate::middleware::{ChildApproval, HumanInTheLoopMiddleware, PriceBudget, RoutedApprovals};

type MakeRun<S, C> = dyn Fn() -> (S, C) + Send + Sync;

/// Charges to the parent's price budget the usage of a child run that no
/// attempt of the child priced (a child stack without `limits`): the run
/// tree has one budget whatever the child's stack holds. A child that priced
/// its own attempts already charged the parent through its linked budget.
fn charge_unpriced_usage<C>(ctx: &RunContext<C>, parent: &ParentRun, model: &str, usage: Usage) -> Result<()> {
    let Some(budget) = ctx.parent_local::<PriceBudget>() else {
        return Ok(());
    };
    let priced = ctx
        .try_local::<PriceBudget>()
        .map(|b| b.priced_usage())
        .unwrap_or_default();
    let unpriced = Usage {
        input_tokens: usage.input_tokens.saturating_sub(priced.input_tokens),
        output_tokens: usage.output_tokens.saturating_sub(priced.output_tokens),
        reasoning_tokens: usage.reasoning_tokens.saturating_sub(priced.reasoning_tokens),
        cache_read_tokens: usage.cache_read_tokens.saturating_sub(priced.cache_read_tokens),
        cache_write_tokens: usage.cache_write_tokens.saturating_sub(priced.cache_write_tokens),
    };
    if unpriced.is_zero() {
        return Ok(());
    }
    budget.settle_late(&parent.run_id, &parent.sink, model, unpriced)
}

/// A sub-agent exposed as a tool: each call runs the agent as a child run
/// (depth + 1, the parent's sink, tags, workspace and cancellation), and its
/// usage rolls up into the parent's.
///
/// The tool takes `{"input": "…"}` and answers with the child's final text.
/// Give the child the parent's stack (`Agent::with_shared_stack`) and the same
/// middleware brackets the nested run.
///
/// The child spends the parent's price budget: its `limits` budget is linked
/// to the parent's (a child attempt is refused at the parent's cap), and
/// usage the child's stack did not price is charged to the parent's budget
/// when the child returns.
///
/// Every restriction of the parent run (its allow and deny lists, tool
/// policy, read-only mode, approval gates, and those it inherited) holds in
/// the child, enforced by the agent loop whatever the child's own stack
/// holds: the child's guards can only narrow them. A call they refuse never
/// runs; the refusal is the call's result for the child's model.
///
/// When the child pauses for a person's approval (its `human_in_the_loop`),
/// the parent pauses too, and the child's requests travel up into the
/// parent's `human_in_the_loop` interrupt ([`HitlInterrupt::children`](crate::middleware::HitlInterrupt::children),
/// naming the child run and the parent's call): decide them there, and the
/// parent's resume resumes the child with the decisions.
pub struct AgentTool<S, C = ()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    agent: Arc<Agent<S, C>>,
    schema: ToolSchema,
    make: Box<MakeRun<S, C>>,
}

impl<S, C> AgentTool<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// A tool named `name` that runs `agent`; `make` gives each child run its state and context.
    pub fn new(
        agent: Arc<Agent<S, C>>,
        name: impl Into<String>,
        description: impl Into<String>,
        make: impl Fn() -> (S, C) + Send + Sync + 'static,
    ) -> Self {
        let schema = ToolSchema::new(name, description).with_parameters(serde_json::json!({
            "type": "object",
            "properties": {"input": {"type": "string", "description": "The task for the sub-agent."}},
            "required": ["input"]
        }));
        Self {
            agent,
            schema,
            make: Box::new(make),
        }
    }
}

#[async_trait]
impl<S, C> Tool for AgentTool<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    async fn call(&self, cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        let mut input = match arguments.get("input").and_then(Value::as_str) {
            Some(text) => AgentInput::from(text),
            None => AgentInput::from(arguments.to_string()),
        };
        let parent = cx.parent();
        // `child_of` carries every restriction of the parent: they hold in the child whatever its stack holds.
        let config = RunConfig::child_of(parent, format!("{}/{}", parent.run_id, cx.call_id()));
        let (state, context) = (self.make)();
        let mut ctx = RunContext::new(config, context)
            .with_parent_locals(&parent.locals)
            .with_sink(parent.sink.clone())
            .with_cancellation(parent.cancellation.child_token());
        if let Some(ws) = &parent.workspace {
            ctx = ctx.with_workspace(ws.clone());
        }
        if let Some(handle) = &parent.steering {
            ctx = ctx.with_child_steering(handle.clone());
        }
        // A person's decisions on this child's paused calls, given to the parent's resume.
        let digest = call_digest(&self.schema.name, &arguments);
        let routed = parent.locals.get::<RoutedApprovals>();
        let decided = routed.0.lock().expect("routed lock").resumes.remove(cx.call_id());
        if let Some((decided_on, resume)) = decided {
            if decided_on != digest {
                return Err(TinyAgentsError::validation(format!(
                    "call `{}` to sub-agent `{}` is not the call the person decided under: its arguments changed \
                     since; nothing ran",
                    cx.call_id(),
                    self.schema.name
                )));
            }
            input = resume.input();
            resume.spent_by_parent().attach(&ctx);
        }
        let run = match self.agent.run(&mut ctx, &state, input).await {
            Ok(run) => run,
            Err(TinyAgentsError::Interrupted { node, message }) => {
                // Carry the child's approval request up: the parent's interrupt holds it, and its resume resumes the child.
                if let Some(interrupt) = HumanInTheLoopMiddleware::take_interrupt(&ctx) {
                    let mut routed = routed.0.lock().expect("routed lock");
                    if !routed.carrier {
                        // Nobody above can decide: fail clearly rather than pause for ever.
                        return Err(TinyAgentsError::config(format!(
                            "sub-agent run `{}` (call `{}` to `{}`) paused for a person's decision ({message}), but \
                             the parent run has no `human_in_the_loop` to carry the request up to its caller; add \
                             `human_in_the_loop` to the parent's stack; nothing ran",
                            ctx.run_id(),
                            cx.call_id(),
                            self.schema.name
                        )));
                    }
                    routed.paused.push(ChildApproval {
                        call_id: cx.call_id().to_owned(),
                        tool: self.schema.name.clone(),
                        digest,
                        run_id: ctx.run_id().to_string(),
                        interrupt,
                    });
                    return Err(TinyAgentsError::interrupted(
                        Some("human_in_the_loop".to_owned()),
                        format!(
                            "sub-agent run `{}` (call `{}` to `{}`) paused: {message}; its requests are in the \
                             parent run's `human_in_the_loop` interrupt (`children`), to decide and resume there",
                            ctx.run_id(),
                            cx.call_id(),
                            self.schema.name
                        ),
                    ));
                }
                return Err(TinyAgentsError::Interrupted { node, message });
            }
            Err(e) => return Err(e),
        };
        charge_unpriced_usage(&ctx, parent, &self.agent.model_id, run.usage)?;
        Ok(ToolOutput {
            content: run.final_text(),
            data: run.structured_output.clone(),
            usage: Some(run.usage),
        })
    }
}

impl<S, C> Agent<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// The tools shown to the model: the registry's, less those the
    /// restrictions inherited from a parent run refuse.
    pub(crate) fn exposed_tools(&self, ctx: &RunContext<C>) -> Vec<ToolSchema> {
        let mut tools = self.tools.schemas();
        if ctx.is_restricted() {
            tools.retain(|t| {
                let declared = self.tools.get(&t.name).map(|tool| tool.policy());
                ctx.exposes_inherited(&t.name, declared.as_ref())
            });
        }
        tools
    }
}
