//! [`AgentNode`]: a whole agent run as one node of a [`StateGraph`](super::StateGraph),
//! routed by what its middleware and its steering asked for.

use std::sync::Arc;

use async_trait::async_trait;

use super::command::Command;
use super::node::Node;
use super::route::GraphRoute;
use super::state::{update, GraphState};
use crate::harness::agent::Agent;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::message::Message;

/// The state key an [`AgentNode`] reads its conversation from and writes it back to.
pub const AGENT_MESSAGES: &str = "messages";

/// Runs an [`Agent`] to its end as one node of a graph whose context is the
/// agent's [`RunContext`]: the node reads the conversation from the state's
/// [`AGENT_MESSAGES`] list, runs the agent on it, and writes the whole
/// conversation back under the same key (the default reducer, replace).
///
/// Where the graph goes next is the run's to say, at the graph boundary:
///
/// * a middleware that called [`GraphRoute::goto`] makes the node return
///   [`Command::Goto`]; one that called [`GraphRoute::fork`] makes it return
///   [`Command::Fork`] (its branches run on the state the node left);
/// * an accepted steering command
///   [`SteeringAction::Goto`](crate::harness::steering::SteeringAction::Goto)
///   ends the run at its next safe point and the node returns
///   [`Command::Goto`];
/// * otherwise the node follows its edges.
///
/// A node the graph does not have is refused by the graph with a `Config`
/// error naming it and the nodes it has.
///
/// The node is one step of the graph: a run that pauses (an `Interrupted`
/// error) pauses the graph at this node, and a resume runs the agent again
/// from the conversation the node started with (what the paused run said is
/// not kept). The run's counters live in the context, so a node visited
/// again counts on from its earlier visits. For a run resumable between its
/// own model and tool steps, use [`AgentGraph`](super::AgentGraph).
///
/// ```
/// use std::sync::Arc;
/// use tinyagents::graph::{update, AgentNode, GraphState, StateGraph, END};
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("hi")]));
/// let graph = StateGraph::new()
///     .node("chat", AgentNode::new(Arc::new(agent), Arc::new(())))
///     .entry("chat")
///     .edge("chat", END)
///     .compile()?;
/// let mut ctx = RunContext::new(RunConfig::new("r1"), ());
/// let input = GraphState::from_update(update([("messages", serde_json::json!([Message::user("hello")]))]));
/// let run = graph.run(&mut ctx, input).await?;
/// assert_eq!(run.state.get("messages").and_then(|m| m.as_array()).map(Vec::len), Some(2));
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
pub struct AgentNode<S, C = ()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    agent: Arc<Agent<S, C>>,
    state: Arc<S>,
}

impl<S, C> AgentNode<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// A node running `agent` with the middleware run state `state`.
    pub fn new(agent: Arc<Agent<S, C>>, state: Arc<S>) -> Self {
        Self { agent, state }
    }
}

#[async_trait]
impl<S, C> Node<RunContext<C>> for AgentNode<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    async fn run(&self, ctx: &mut RunContext<C>, state: &GraphState) -> Result<Command> {
        let messages: Vec<Message> = state.get_as(AGENT_MESSAGES)?.unwrap_or_default();
        GraphRoute::open(ctx);
        let result = self.agent.run(ctx, &self.state, messages).await;
        // closed whatever happened: a later run on this context routes nothing by mistake
        let route = GraphRoute::close(ctx);
        let run = result?;
        let conversation = serde_json::to_value(&run.messages).map_err(|e| {
            TinyAgentsError::validation(format!("the agent node's conversation cannot be serialised: {e}"))
        })?;
        let progress = update([(AGENT_MESSAGES, conversation)]);
        Ok(Command::update_then(progress, route.unwrap_or(Command::Continue)))
    }
}
