//! [`AgentTool`]: a sub-agent run as a tool of its parent.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{Agent, AgentInput};
use crate::harness::child_run::{ChildRun, ChildRunHooks};
use crate::harness::context::{RunConfig, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::model::SharedList;
use crate::harness::tool::{call_digest, Tool, ToolContext, ToolOutput, ToolSchema};

type MakeRun<S, C> = dyn Fn() -> (S, C) + Send + Sync;

/// A sub-agent exposed as a tool: each call runs the agent as a child run
/// (depth + 1, the parent's sink, tags, workspace and cancellation), and its
/// usage rolls up into the parent's.
///
/// The tool takes `{"input": "…"}` and answers with the child's final text.
/// Give the child the parent's stack (`Agent::with_shared_stack`) and the same
/// middleware brackets the nested run.
///
/// The parent's middleware acts around each child run through the hooks it
/// installed ([`ChildRunHook`](crate::harness::child_run::ChildRunHook)):
/// the child spends the parent's price budget (its `limits` budget is linked
/// to the parent's, and usage the child's stack did not price is charged to
/// the parent's budget when the child returns).
///
/// Every restriction of the parent run (its allow and deny lists, tool
/// policy, read-only mode, approval gates, and those it inherited) holds in
/// the child, enforced by the agent loop whatever the child's own stack
/// holds: the child's guards can only narrow them. A call they refuse never
/// runs; the refusal is the call's result for the child's model.
///
/// When the child pauses (it records an
/// [`Interrupt`](crate::harness::interrupt::Interrupt), say its
/// `human_in_the_loop`), the parent pauses too: a hook of the parent carries
/// the child's interrupt up into its own (`human_in_the_loop`'s `children`),
/// and the parent's resume resumes the child with the decisions. A child
/// pause no hook of the parent carries is a `Config` error.
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
        let digest = call_digest(&self.schema.name, &arguments);
        let child_locals = crate::harness::locals::RunLocalsHandle(ctx.run_locals().clone());
        let child_run_id = ctx.run_id().clone();
        let child = ChildRun {
            call_id: cx.call_id(),
            tool: &self.schema.name,
            digest: &digest,
            run_id: &child_run_id,
            model: &self.agent.model_id,
            parent,
            locals: &child_locals,
        };
        let hooks = parent.locals.get::<ChildRunHooks>().all();
        // An answer given in the parent's resume to this child's earlier pause.
        for hook in &hooks {
            if let Some((resumed_from, resume)) = hook.resume_child(&child)? {
                input = resumed_from;
                ctx.locals().interrupts().attach(resume, true);
                break;
            }
        }
        let run = match self.agent.run(&mut ctx, &state, input).await {
            Ok(run) => run,
            Err(TinyAgentsError::Interrupted { node, message }) => {
                let Some(mut interrupt) = ctx.locals().interrupts().take_any() else {
                    return Err(TinyAgentsError::Interrupted { node, message });
                };
                // Carry the child's interrupt up: the parent's holds it, and its resume resumes the child.
                for hook in &hooks {
                    match hook.carry_pause(&child, interrupt) {
                        Ok(paused) => return Err(paused),
                        Err(back) => interrupt = back,
                    }
                }
                // Nobody above can answer: fail clearly rather than pause for ever.
                return Err(TinyAgentsError::config(format!(
                    "sub-agent run `{}` (call `{}` to `{}`) paused for a decision of `{owner}` ({message}), but the \
                     parent run has no `{owner}` to carry the request up to its caller; add `{owner}` to the \
                     parent's stack; nothing ran",
                    ctx.run_id(),
                    cx.call_id(),
                    self.schema.name,
                    owner = interrupt.owner,
                )));
            }
            Err(e) => return Err(e),
        };
        for hook in &hooks {
            hook.child_finished(&child, run.usage)?;
        }
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
    pub(crate) fn exposed_tools(&self, ctx: &RunContext<C>) -> SharedList<ToolSchema> {
        let mut tools = self.schemas.clone();
        if ctx.policy().is_restricted() {
            tools.retain(|t| {
                let declared = self.tools.get(&t.name).map(|tool| tool.policy());
                ctx.policy().exposes_inherited(&t.name, declared.as_ref())
            });
        }
        tools
    }
}
