//! The agent loop: an [`Agent`] drives a [`MiddlewareStack`] around a
//! [`ChatModel`] and a [`ToolRegistry`].
//!
//! `before_agent` → loop { `before_model` → `before_model_stream` → the
//! wrap-model onion around the streamed model call (each delta through
//! `on_model_delta`, then to the sink, then accumulated) → `after_model` →
//! control requests and jumps → each call under its tool's name (aliases
//! resolved) → `on_tool_batch` → `before_tool` for every call, in the model's
//! order → `on_prepared_tool_calls` (the effective arguments and their
//! declared file access, which the scheduler then orders by) → per call: the
//! wrap-tool onion → `after_tool` } → `after_agent`, bounded by a step limit.

mod calls;
mod run_loop;
mod schedule;
mod subagent;

use std::sync::Arc;

pub use crate::harness::run::{AgentInput, AgentRun, StopReason};
pub(crate) use run_loop::{unanswered_calls, StepOutcome, MAX_STEPS_STATE};
pub use subagent::AgentTool;

use crate::harness::error::{ErrorKind, TinyAgentsError};
use crate::harness::middleware::MiddlewareStack;
use crate::harness::model::{ChatModel, ModelParams, PromptSegment, SharedList};
use crate::harness::tool::{ToolRegistry, ToolSchema};

/// Which tool-path errors become the call's error result (shown to the
/// model) instead of ending the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolErrorPolicy {
    /// Refusals (`Validation`) and tool failures (`Tool`) become error
    /// results; every other error ends the run. The default.
    RefusalsAndToolFailures,
    /// Only tool failures become error results; a refusal ends the run.
    ToolFailuresOnly,
    /// Every tool-path error ends the run.
    FailRun,
}

impl ToolErrorPolicy {
    pub(crate) fn to_result(self, error: &TinyAgentsError) -> bool {
        match self {
            Self::RefusalsAndToolFailures => matches!(error.kind(), ErrorKind::Validation | ErrorKind::Tool),
            Self::ToolFailuresOnly => error.kind() == ErrorKind::Tool,
            Self::FailRun => false,
        }
    }
}

/// Copies the user context for one concurrent tool call.
type ForkFn<C> = fn(&C) -> C;

/// An agent: a model, tools, a middleware stack and limits.
///
/// One agent serves any number of concurrent runs; per-run state lives in the
/// [`RunContext`](crate::harness::context::RunContext) passed to
/// [`run`](Agent::run).
///
/// ```
/// use std::sync::Arc;
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let model = ScriptedModel::new([ScriptedTurn::text("Hello!")]);
/// let agent: Agent<()> = Agent::new(model);
/// let mut ctx = RunContext::new(RunConfig::new("run-1"), ());
/// let run = agent.run(&mut ctx, &(), "Hi").await?;
/// assert_eq!(run.final_text(), "Hello!");
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
pub struct Agent<S, C = ()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    model: Arc<dyn ChatModel>,
    model_id: Arc<str>,
    /// The tools given with `with_tools`.
    own_tools: Arc<ToolRegistry>,
    /// Those and the tools the stack's middleware contribute.
    tools: Arc<ToolRegistry>,
    /// The schemas of `tools`, made once and shared by every request.
    schemas: SharedList<ToolSchema>,
    /// A tool name both given and contributed: every run fails with it.
    tool_conflict: Option<TinyAgentsError>,
    stack: Arc<MiddlewareStack<S, C>>,
    system: SharedList<PromptSegment>,
    params: ModelParams,
    max_steps: u32,
    tool_errors: ToolErrorPolicy,
    fork: Option<ForkFn<C>>,
}

impl<S, C> std::fmt::Debug for Agent<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.model_id)
            .field("tools", &self.tools)
            .field("stack", &self.stack)
            .field("max_steps", &self.max_steps)
            .finish_non_exhaustive()
    }
}

impl<S, C> Agent<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// The default step limit (model turns per run).
    pub const DEFAULT_MAX_STEPS: u32 = 25;

    /// An agent on `model` with no tools, no middleware and the default step limit.
    pub fn new(model: impl ChatModel + 'static) -> Self {
        Self::from_shared(Arc::new(model))
    }

    /// An agent on a shared model.
    pub fn from_shared(model: Arc<dyn ChatModel>) -> Self {
        Self {
            model_id: Arc::from(model.id()),
            model,
            own_tools: Arc::new(ToolRegistry::new()),
            tools: Arc::new(ToolRegistry::new()),
            schemas: SharedList::new(),
            tool_conflict: None,
            stack: Arc::new(MiddlewareStack::new()),
            system: SharedList::new(),
            params: ModelParams::default(),
            max_steps: Self::DEFAULT_MAX_STEPS,
            tool_errors: ToolErrorPolicy::RefusalsAndToolFailures,
            fork: None,
        }
    }

    /// The same agent with these tools (the stack's middleware may
    /// contribute more: see [`Middleware::tools`](crate::harness::middleware::Middleware::tools)).
    pub fn with_tools(mut self, tools: ToolRegistry) -> Self {
        self.own_tools = Arc::new(tools);
        self.merge_tools();
        self
    }

    /// The agent's tools plus those its middleware contribute. A name in
    /// both is kept as a `Config` error that every run then fails with
    /// (before `before_agent`), naming the tool and the middleware.
    fn merge_tools(&mut self) {
        self.tool_conflict = None;
        self.tools = if self.stack.contributed_tools().next().is_none() {
            self.own_tools.clone()
        } else {
            let mut merged = (*self.own_tools).clone();
            for (owner, tool) in self.stack.contributed_tools() {
                if merged.register_arc(tool.clone()).is_err() {
                    self.tool_conflict = Some(TinyAgentsError::config(format!(
                        "middleware `{owner}` contributes a tool named `{}`, but the agent's own tools (`with_tools`) \
                         have one too; tool names must be unique — drop it from the agent's tools, since the \
                         middleware provides it",
                        tool.schema().name
                    )));
                    break;
                }
            }
            Arc::new(merged)
        };
        self.schemas = self.tools.schemas().into();
    }

    /// The conflict [`merge_tools`](Self::merge_tools) found, as the run's error.
    pub(crate) fn check_tools(&self) -> crate::harness::error::Result<()> {
        match &self.tool_conflict {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The same agent with this middleware stack.
    pub fn with_stack(self, stack: MiddlewareStack<S, C>) -> Self {
        self.with_shared_stack(Arc::new(stack))
    }

    /// The same agent with a shared middleware stack (one stack, many agents and runs).
    pub fn with_shared_stack(mut self, stack: Arc<MiddlewareStack<S, C>>) -> Self {
        self.stack = stack;
        self.merge_tools();
        self
    }

    /// The same agent with one more system prompt segment.
    pub fn with_system(mut self, segment: PromptSegment) -> Self {
        self.system.push(segment);
        self
    }

    /// The same agent with a stable system prompt (segment id `system`).
    pub fn with_system_prompt(self, text: impl Into<String>) -> Self {
        self.with_system(PromptSegment::stable("system", text))
    }

    /// The same agent with these model parameters.
    pub fn with_params(mut self, params: ModelParams) -> Self {
        self.params = params;
        self
    }

    /// The same agent with a step limit (model turns per run).
    pub fn with_max_steps(mut self, max_steps: u32) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// The same agent with a tool error policy.
    pub fn with_tool_errors(mut self, policy: ToolErrorPolicy) -> Self {
        self.tool_errors = policy;
        self
    }

    /// The agent's middleware stack.
    pub fn stack(&self) -> &Arc<MiddlewareStack<S, C>> {
        &self.stack
    }

    /// The agent's tools: its own and those its middleware contribute.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// The agent's model id.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }
}

impl<S, C> Agent<S, C>
where
    S: Send + Sync + 'static,
    C: Clone + Send + Sync + 'static,
{
    /// Runs the calls of one tool batch concurrently (results keep the
    /// model's order). Each call gets a branch of the run context, with a
    /// clone of the user context; branches merge back after the batch.
    pub fn with_concurrent_tools(mut self) -> Self {
        self.fork = Some(C::clone);
        self
    }
}
