//! [`GraphRoute`]: how a middleware (or an accepted steering command) running
//! inside an [`AgentNode`](super::AgentNode) asks the graph where to go when
//! the node ends — another node ([`Command::Goto`]) or a fan-out
//! ([`Command::Fork`]) — without knowing it runs in a graph.

use std::sync::{Arc, Mutex};

use super::command::{Branch, Command};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};

/// Where a run asked its graph node to go: the per-run slot an
/// [`AgentNode`](super::AgentNode) opens before it runs its agent and reads
/// when the agent's run ends.
#[derive(Debug, Default)]
pub struct GraphRoute {
    slot: Mutex<Slot>,
}

#[derive(Debug, Default)]
struct Slot {
    /// Whether a graph node drives this run now.
    open: bool,
    request: Option<Command>,
    /// Whether the request came from steering (the run ends at once).
    steered: bool,
}

impl GraphRoute {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        // a panic elsewhere cannot leave the slot half-written: it is plain data
        self.slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn of<C>(ctx: &RunContext<C>) -> Option<Arc<Self>> {
        ctx.locals().try_local::<Self>().filter(|r| r.lock().open)
    }

    fn request<C>(ctx: &RunContext<C>, command: Command, steered: bool, what: &str) -> Result<()> {
        let Some(route) = Self::of(ctx) else {
            return Err(TinyAgentsError::validation(format!(
                "{what}, but run `{}` is not driven by a graph node: only a run an `AgentNode` drives can route \
                 its graph; run the agent as an `AgentNode` of a `StateGraph`, or drop the request",
                ctx.run_id()
            )));
        };
        let mut slot = route.lock();
        // one answer per node: the first request wins, later ones are refused
        if let Some(first) = &slot.request {
            return Err(TinyAgentsError::conflict(format!(
                "{what}, but the run already asked for {first:?}; a graph node routes once: ask once per run"
            )));
        }
        slot.request = Some(command);
        slot.steered |= steered;
        Ok(())
    }

    /// Asks the graph to go to `node` when the agent's run ends (the node
    /// returns [`Command::Goto`], whatever the graph's edges say). The graph
    /// refuses a node it does not have with a `Config` error naming it and
    /// the nodes it has.
    ///
    /// Fails with a `Validation` error when no graph node drives the run
    /// (under [`Agent::run`](crate::harness::agent::Agent::run)), and with a
    /// `Conflict` error when the run already asked for a route.
    pub fn goto<C>(ctx: &RunContext<C>, node: impl Into<String>) -> Result<()> {
        let node = node.into();
        let what = format!("a middleware asked the graph to go to node `{node}`");
        Self::request(ctx, Command::Goto(node), false, &what)
    }

    /// Asks the graph to fan out when the agent's run ends: the node returns
    /// [`Command::Fork`], so the graph runs `branches` on its state, merges
    /// their updates in branch order, then follows the node's edges. Fails
    /// as [`goto`](Self::goto) does.
    pub fn fork<C>(ctx: &RunContext<C>, branches: Vec<Branch>) -> Result<()> {
        let names: Vec<&str> = branches.iter().map(|b| b.node.as_str()).collect();
        let what = format!("a middleware asked the graph to fan out to [{}]", names.join(", "));
        Self::request(ctx, Command::Fork(branches), false, &what)
    }

    /// An accepted steering command's `Goto`: the run ends at this safe point
    /// and the node returns [`Command::Goto`].
    pub(crate) fn steer<C>(ctx: &RunContext<C>, node: &str) -> Result<()> {
        let what = format!("a steering command asked the graph to go to node `{node}`");
        Self::request(ctx, Command::Goto(node.to_owned()), true, &what)
    }

    /// Whether steering asked the run to leave its node (the loop ends the run).
    pub(crate) fn steered<C>(ctx: &RunContext<C>) -> bool {
        ctx.locals().try_local::<Self>().is_some_and(|r| r.lock().steered)
    }

    /// Opens the slot for a node's run (a fresh one: nothing asked yet).
    pub(crate) fn open<C>(ctx: &RunContext<C>) {
        *ctx.locals().local::<Self>().lock() = Slot {
            open: true,
            ..Slot::default()
        };
    }

    /// Closes the slot and takes what the run asked for.
    pub(crate) fn close<C>(ctx: &RunContext<C>) -> Option<Command> {
        let route = ctx.locals().try_local::<Self>()?;
        std::mem::take(&mut *route.lock()).request
    }
}
