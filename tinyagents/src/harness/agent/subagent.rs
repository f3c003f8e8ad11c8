//! [`AgentTool`]: a sub-agent run as a tool of its parent.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::Agent;
use crate::harness::context::{RunConfig, RunContext};
use crate::harness::error::Result;
use crate::harness::middleware::PriceBudget;
use crate::harness::model::Usage;
use crate::harness::tool::{ParentRun, Tool, ToolContext, ToolOutput, ToolSchema};

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
        let input = match arguments.get("input").and_then(Value::as_str) {
            Some(text) => text.to_owned(),
            None => arguments.to_string(),
        };
        let parent = cx.parent();
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
        let run = self.agent.run(&mut ctx, &state, input).await?;
        charge_unpriced_usage(&ctx, parent, &self.agent.model_id, run.usage)?;
        Ok(ToolOutput {
            content: run.final_text(),
            data: run.structured_output.clone(),
            usage: Some(run.usage),
        })
    }
}
