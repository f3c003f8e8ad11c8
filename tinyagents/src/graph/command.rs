//! [`Command`]: what a graph node returns, and the boundary adapter that
//! maps the harness's native control outcomes onto commands.

use serde_json::Value;

use super::state::{update, Update};
use crate::harness::context::{JumpTarget, MiddlewareControl};
use crate::harness::steering::{SteeringAction, SteeringCommand};

/// One branch of a fan-out: a node to run on the state as it was when the
/// fork was returned, with `input` laid over that snapshot for this branch only.
#[derive(Debug, Clone, PartialEq)]
pub struct Branch {
    /// The node to run.
    pub node: String,
    /// Fields overlaid on the branch's snapshot.
    pub input: Update,
}

impl Branch {
    /// A branch running `node` on the snapshot as it is.
    pub fn new(node: impl Into<String>) -> Self {
        Self {
            node: node.into(),
            input: Update::new(),
        }
    }

    /// The same branch with `input` laid over its snapshot.
    pub fn with_input(mut self, input: Update) -> Self {
        self.input = input;
        self
    }
}

/// What a node tells the graph to do next.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Command {
    /// Follow the node's edges.
    Continue,
    /// Go to this node next.
    Goto(String),
    /// End the run.
    End,
    /// Pause the run; a checkpoint is written and [`resume`](super::CompiledGraph::resume)
    /// runs this node again with the value it is given.
    Interrupt {
        /// Where the run paused (the node, when `None`).
        node: Option<String>,
        /// Why.
        message: String,
    },
    /// Merge this update into the state, then follow the node's edges.
    Update(Update),
    /// Run these branches on the current state, merge their updates in
    /// branch order (a deterministic merge through the reducers), then
    /// follow the node's edges.
    Fork(Vec<Branch>),
    /// Merge this update into the state, then do `then` (LangGraph's
    /// `Command(update=…, goto=…)`): how a node reports its progress and
    /// routes in one answer. Built with [`Command::update_then`].
    UpdateThen {
        /// Merged first.
        update: Update,
        /// Then this (`Goto`, `End`, `Interrupt`, …).
        then: Box<Command>,
    },
}

impl Command {
    /// Merge `update`, then do `then`; an empty update is just `then`, and
    /// `Continue` after an update is a plain [`Command::Update`].
    ///
    /// ```
    /// use tinyagents::graph::{update, Command, Update};
    ///
    /// let c = Command::update_then(update([("x", 1.into())]), Command::End);
    /// assert!(matches!(c, Command::UpdateThen { .. }));
    /// assert_eq!(Command::update_then(Update::new(), Command::End), Command::End);
    /// ```
    pub fn update_then(update: Update, then: Command) -> Self {
        match then {
            _ if update.is_empty() => then,
            Command::Continue => Command::Update(update),
            then => Command::UpdateThen {
                update,
                then: Box::new(then),
            },
        }
    }
}

/// A harness-native outcome reaching the graph boundary.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HarnessOutcome {
    /// Go on as planned.
    Continue,
    /// A middleware jumped (`ctx.jump_to`).
    Jump(JumpTarget),
    /// A control request (`ctx.request_control`).
    Control(MiddlewareControl),
    /// A steering command that `before_steering` accepted.
    SteeringAccepted(SteeringCommand),
    /// Branch/fan-out middleware asked for these branches.
    FanOut(Vec<Branch>),
    /// A retry or a fallback (already handled inside the node's wrap hooks).
    RetryOrFallback,
}

/// What the boundary does with an outcome.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BoundaryAction {
    /// Return this command from the node.
    Command(Command),
    /// Queue the command for the child run `run_id` (delivered at its next safe point).
    DeliverToChild {
        /// The child run.
        run_id: String,
        /// The command.
        command: SteeringCommand,
    },
    /// Nothing reaches the graph: the node already handled it (retry, fallback).
    HandledInNode,
}

/// The graph node names the agent loop's jumps map to.
pub const MODEL_NODE: &str = "model";
/// See [`MODEL_NODE`].
pub const TOOLS_NODE: &str = "tools";

/// Maps a harness-native outcome onto a graph command, at the graph
/// boundary:
///
/// | outcome | command |
/// | --- | --- |
/// | continue | `Continue` |
/// | jump to model / tools / end | `Goto("model")` / `Goto("tools")` / `End` |
/// | human interrupt | `Interrupt` |
/// | stop with a final text | `End` (the final text is already in the conversation) |
/// | accepted steering | `Update` then `Goto("model")` (inject a message, redirect: the model sees it next), `Goto` (goto a node), `Update` (mode, limits), `Interrupt` (pause), `End` (cancel), `Continue` (resume), or delivery to a child run when it targets one |
/// | branch / fan-out | `Fork` |
/// | retry / fallback | handled inside the node |
///
/// ```
/// use tinyagents::graph::{to_command, BoundaryAction, Command, HarnessOutcome};
/// use tinyagents::harness::context::JumpTarget;
///
/// assert_eq!(to_command(HarnessOutcome::Jump(JumpTarget::End)), BoundaryAction::Command(Command::End));
/// ```
pub fn to_command(outcome: HarnessOutcome) -> BoundaryAction {
    let command = match outcome {
        HarnessOutcome::Continue => Command::Continue,
        HarnessOutcome::Jump(JumpTarget::Model) => Command::Goto(MODEL_NODE.to_owned()),
        HarnessOutcome::Jump(JumpTarget::Tools) => Command::Goto(TOOLS_NODE.to_owned()),
        HarnessOutcome::Jump(JumpTarget::End) => Command::End,
        HarnessOutcome::Control(MiddlewareControl::Interrupt { node, message }) => Command::Interrupt { node, message },
        HarnessOutcome::Control(MiddlewareControl::StopWithFinal(_)) => Command::End,
        HarnessOutcome::SteeringAccepted(command) => {
            if let Some(run_id) = command.target_run.clone() {
                return BoundaryAction::DeliverToChild { run_id, command };
            }
            steering_command(command.action)
        }
        HarnessOutcome::FanOut(branches) => Command::Fork(branches),
        HarnessOutcome::RetryOrFallback => return BoundaryAction::HandledInNode,
    };
    BoundaryAction::Command(command)
}

/// The command for a harness-native interrupt reaching the graph boundary
/// (a node failing with `Interrupted`), through [`to_command`].
pub(crate) fn interrupt_command(node: Option<String>, message: String) -> Command {
    match to_command(HarnessOutcome::Control(MiddlewareControl::Interrupt { node, message })) {
        BoundaryAction::Command(command) => command,
        other => unreachable!("an interrupt maps onto a command, not {other:?}"),
    }
}

fn steering_command(action: SteeringAction) -> Command {
    match action {
        // what the model must consider now: merged, then straight to the model node
        SteeringAction::InjectMessage { message } => Command::update_then(
            update([(
                "messages",
                Value::Array(vec![serde_json::to_value(message).unwrap_or(Value::Null)]),
            )]),
            Command::Goto(MODEL_NODE.to_owned()),
        ),
        SteeringAction::Redirect { goal } => Command::update_then(
            update([("goal", Value::from(goal))]),
            Command::Goto(MODEL_NODE.to_owned()),
        ),
        SteeringAction::SwitchMode { mode } => Command::Update(update([("mode", Value::from(mode))])),
        SteeringAction::AdjustLimits { max_steps } => Command::Update(update([("max_steps", Value::from(max_steps))])),
        SteeringAction::Pause { reason } => Command::Interrupt {
            node: Some("steering".to_owned()),
            message: reason,
        },
        SteeringAction::Cancel { .. } => Command::End,
        SteeringAction::Resume => Command::Continue,
        SteeringAction::Goto { node } => Command::Goto(node),
    }
}
