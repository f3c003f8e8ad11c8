//! [`AgentTool`]: a sub-agent run as a tool of its parent.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::Agent;
use crate::harness::context::{RunConfig, RunContext};
use crate::harness::error::Result;
use crate::harness::tool::{Tool, ToolContext, ToolOutput, ToolSchema};

type MakeRun<S, C> = dyn Fn() -> (S, C) + Send + Sync;

/// A sub-agent exposed as a tool: each call runs the agent as a child run
/// (depth + 1, the parent's sink, tags, workspace and cancellation), and its
/// usage rolls up into the parent's.
///
/// The tool takes `{"input": "…"}` and answers with the child's final text.
/// Give the child the parent's stack (`Agent::with_shared_stack`) and the same
/// middleware brackets the nested run.
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
            .with_sink(parent.sink.clone())
            .with_cancellation(parent.cancellation.child_token());
        if let Some(ws) = &parent.workspace {
            ctx = ctx.with_workspace(ws.clone());
        }
        if let Some(handle) = &parent.steering {
            ctx = ctx.with_child_steering(handle.clone());
        }
        let run = self.agent.run(&mut ctx, &state, input).await?;
        Ok(ToolOutput {
            content: run.final_text(),
            data: run.structured_output.clone(),
            usage: Some(run.usage),
        })
    }
}
