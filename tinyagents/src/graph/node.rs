//! [`Node`]: one step of a graph, and [`node_fn`] for nodes made from closures.

use std::future::Future;

use async_trait::async_trait;

use super::command::Command;
use super::state::GraphState;
use crate::harness::error::Result;

/// One node of a graph: it reads the state (and a context `G` of your
/// choosing, passed `&mut` to every node) and returns a [`Command`].
#[async_trait]
pub trait Node<G: Send>: Send + Sync {
    /// Runs the node.
    async fn run(&self, ctx: &mut G, state: &GraphState) -> Result<Command>;
}

/// A [`Node`] made from an async closure over a copy of the state. See [`node_fn`].
pub struct FnNode<F>(F);

/// Makes a node from an async closure over a copy of the state (it ignores the context).
///
/// ```
/// use serde_json::json;
/// use tinyagents::graph::{node_fn, update, Command};
///
/// let count = node_fn(|state| async move {
///     let n = state.get("n").and_then(|v| v.as_i64()).unwrap_or(0);
///     Ok(Command::Update(update([("n", json!(n + 1))])))
/// });
/// # let _ = count;
/// ```
pub fn node_fn<F, Fut>(f: F) -> FnNode<F>
where
    F: Fn(GraphState) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Command>> + Send,
{
    FnNode(f)
}

#[async_trait]
impl<G, F, Fut> Node<G> for FnNode<F>
where
    G: Send,
    F: Fn(GraphState) -> Fut + Send + Sync,
    Fut: Future<Output = Result<Command>> + Send,
{
    async fn run(&self, _ctx: &mut G, state: &GraphState) -> Result<Command> {
        (self.0)(state.clone()).await
    }
}
