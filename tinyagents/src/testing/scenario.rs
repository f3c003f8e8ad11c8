//! [`Scenario`]: a whole agent run in one expression, for tests.

use std::sync::Arc;

use crate::harness::agent::Agent;
use crate::harness::context::{RunConfig, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, CollectingSink};
use crate::harness::middleware::shape::LifecycleOnly;
use crate::harness::middleware::{Middleware, MiddlewareStack};
use crate::harness::model::{ScriptedModel, ScriptedTurn};
use crate::harness::run::{AgentInput, AgentRun};
use crate::harness::tool::{Tool, ToolRegistry};

use super::trace::trace;

/// A run to test: the model's scripted replies, the tools, the middleware,
/// and a sink collecting every event. [`run`](Self::run) builds the agent,
/// runs it once and hands back a [`ScenarioRun`].
///
/// The stack starts as [`MiddlewareStack::new`] does, with the default-on
/// built-ins (what a user's agent gets); [`without_defaults`](Self::without_defaults)
/// starts from an empty stack instead. A mistake in the set-up (two tools of
/// one name, a middleware the stack refuses) is not a panic: it is the run's
/// error.
///
/// ```
/// use serde_json::json;
/// use tinyagents::prelude::*;
/// use tinyagents::testing::{RecordingTool, Scenario, ScriptedTurn};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let search = RecordingTool::new("search").returning("3 results");
/// let done = Scenario::new([
///     ScriptedTurn::tool_calls(vec![ToolCall::new("c1", "search", json!({"q": "rust"}))]),
///     ScriptedTurn::text("found 3"),
/// ])
/// .tool(search.clone())
/// .run("look it up")
/// .await;
/// assert_eq!(done.text(), "found 3");
/// assert_eq!(search.calls(), [json!({"q": "rust"})]);
/// assert!(done.trace().contains(&"tool_done search".to_owned()));
/// # });
/// ```
pub struct Scenario {
    turns: Vec<ScriptedTurn>,
    tools: ToolRegistry,
    stack: MiddlewareStack<()>,
    run_id: String,
    setup_error: Option<TinyAgentsError>,
}

impl std::fmt::Debug for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scenario")
            .field("turns", &self.turns.len())
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl Scenario {
    /// A scenario whose model replies with `turns`, one per model call, on
    /// the default stack.
    pub fn new(turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        Self {
            turns: turns.into_iter().collect(),
            tools: ToolRegistry::new(),
            stack: MiddlewareStack::new(),
            run_id: "scenario".to_owned(),
            setup_error: None,
        }
    }

    /// Starts from an empty stack: no default-on built-ins.
    pub fn without_defaults(mut self) -> Self {
        self.stack = MiddlewareStack::empty();
        self
    }

    /// Offers `tool` to the model.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        if let Err(e) = self.tools.register(tool) {
            self.fail(e);
        }
        self
    }

    /// Adds `middleware` to the stack (after what is there).
    pub fn middleware<M, Shape>(mut self, middleware: M) -> Self
    where
        M: Middleware<()> + LifecycleOnly<(), (), Shape> + 'static,
    {
        if let Err(e) = self.stack.add(middleware) {
            self.fail(e);
        }
        self
    }

    /// Replaces the whole stack.
    pub fn stack(mut self, stack: MiddlewareStack<()>) -> Self {
        self.stack = stack;
        self
    }

    /// The run's id (default `scenario`).
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = run_id.into();
        self
    }

    /// The agent, for a test that runs it itself (twice, or with its own
    /// context).
    pub fn agent(self) -> Result<Agent<()>> {
        if let Some(e) = self.setup_error {
            return Err(e);
        }
        Ok(Agent::new(ScriptedModel::new(self.turns))
            .with_tools(self.tools)
            .with_stack(self.stack))
    }

    /// Builds the agent and runs it once on `input`.
    pub async fn run(self, input: impl Into<AgentInput>) -> ScenarioRun {
        let sink = Arc::new(CollectingSink::new());
        let mut ctx = RunContext::new(RunConfig::new(self.run_id.clone()), ()).with_sink(sink.clone());
        let result = match self.agent() {
            Ok(agent) => agent.run(&mut ctx, &(), input).await,
            Err(e) => Err(e),
        };
        ScenarioRun {
            result,
            events: sink.events(),
        }
    }

    fn fail(&mut self, error: TinyAgentsError) {
        self.setup_error.get_or_insert(error);
    }
}

/// What a [`Scenario`] run gave: the run or its error, and every event.
#[derive(Debug)]
pub struct ScenarioRun {
    /// The run, or why it failed (a set-up mistake included).
    pub result: Result<AgentRun>,
    /// Every event the run emitted, in order.
    pub events: Vec<AgentEvent>,
}

impl ScenarioRun {
    /// The finished run.
    ///
    /// # Panics
    /// If the run failed, with its error: the test's assertion.
    #[track_caller]
    pub fn run(&self) -> &AgentRun {
        match &self.result {
            Ok(run) => run,
            Err(e) => panic!("the scenario's run failed: {e}"),
        }
    }

    /// The final answer's text.
    ///
    /// # Panics
    /// If the run failed, with its error.
    #[track_caller]
    pub fn text(&self) -> String {
        self.run().final_text()
    }

    /// The run's error, if it failed.
    pub fn error(&self) -> Option<&TinyAgentsError> {
        self.result.as_ref().err()
    }

    /// The [`trace`] of the run's events.
    pub fn trace(&self) -> Vec<String> {
        trace(&self.events)
    }
}
