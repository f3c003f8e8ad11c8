//! Steering: commands from outside a running agent (a parent orchestrator or
//! a person), reviewed by `before_steering` hooks and reported to `after_steering` hooks.

use serde::{Deserialize, Serialize};

use crate::harness::message::Message;

/// What a steering command asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SteeringAction {
    /// Add a message to the conversation before the next model call.
    InjectMessage {
        /// The message.
        message: Message,
    },
    /// Replace the goal the agent works towards.
    Redirect {
        /// The new goal.
        goal: String,
    },
    /// Pause the run (an interrupt at the next safe point).
    Pause {
        /// Why.
        reason: String,
    },
    /// Resume a paused run.
    Resume,
    /// Cancel the run.
    Cancel {
        /// Why.
        reason: String,
    },
    /// Switch the agent's mode (`build`, `plan`, `review`, …).
    SwitchMode {
        /// The mode.
        mode: String,
    },
    /// Change the run's step limit.
    AdjustLimits {
        /// The new step limit.
        max_steps: Option<u32>,
    },
    /// Leave the graph node the run is in and go to `node`: the run ends at
    /// this safe point and its [`AgentNode`](crate::graph::AgentNode)
    /// returns [`Command::Goto`](crate::graph::Command::Goto). A run no graph
    /// node drives fails with a `Validation` error (fail closed).
    Goto {
        /// The graph node to go to.
        node: String,
    },
}

/// How a `before_steering` hook decided on a command.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum SteeringDecision {
    /// Apply it at the next safe point (the default).
    #[default]
    Accept,
    /// Drop it, with a reason.
    Reject {
        /// Why.
        reason: String,
    },
    /// Keep it queued, in order, for a later safe point.
    Defer,
}

/// A steering command, as `before_steering` hooks see it: they may edit the
/// action (transform), or decide to reject or defer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteeringCommand {
    /// The command's id.
    pub id: String,
    /// The run it is for; `None` for the run that receives it.
    pub target_run: Option<String>,
    /// What it asks for.
    pub action: SteeringAction,
    /// The decision so far.
    pub decision: SteeringDecision,
}

impl SteeringCommand {
    /// A command for the receiving run.
    pub fn new(id: impl Into<String>, action: SteeringAction) -> Self {
        Self {
            id: id.into(),
            target_run: None,
            action,
            decision: SteeringDecision::Accept,
        }
    }

    /// The same command addressed to a child run.
    pub fn for_run(mut self, run_id: impl Into<String>) -> Self {
        self.target_run = Some(run_id.into());
        self
    }

    /// Rejects the command.
    pub fn reject(&mut self, reason: impl Into<String>) {
        self.decision = SteeringDecision::Reject { reason: reason.into() };
    }

    /// Defers the command to a later safe point.
    pub fn defer(&mut self) {
        self.decision = SteeringDecision::Defer;
    }
}

/// What became of a steering command, as `after_steering` hooks see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SteeringOutcome {
    /// The command as finally decided (transformed actions included).
    pub command: SteeringCommand,
    /// Whether a hook changed the action.
    pub transformed: bool,
    /// Whether it was applied.
    pub applied: bool,
}

/// A cloneable handle to steer running agents from outside.
///
/// Attach it to a run with [`RunContext::with_steering`](crate::harness::context::RunContext::with_steering);
/// sub-agent runs started under that run share it. A command without a
/// target goes to the run the handle was attached to; a command
/// [`for_run`](SteeringCommand::for_run) a child run id waits until that
/// child reaches a safe point. Commands are applied only at safe points
/// (between steps), never inside a model call or a tool call.
///
/// ```
/// use tinyagents::harness::steering::{SteeringAction, SteeringCommand, SteeringHandle};
///
/// let handle = SteeringHandle::new();
/// handle.send(SteeringCommand::new("c1", SteeringAction::Pause { reason: "lunch".into() }));
/// assert_eq!(handle.pending(None), 1);
/// ```
#[derive(Clone, Default, educe::Educe)]
#[educe(Debug)]
pub struct SteeringHandle {
    #[educe(Debug(ignore))]
    queues: std::sync::Arc<
        std::sync::Mutex<std::collections::HashMap<String, std::collections::VecDeque<SteeringCommand>>>,
    >,
}

impl SteeringHandle {
    /// A handle with nothing queued.
    pub fn new() -> Self {
        Self::default()
    }

    fn key(target: Option<&str>) -> String {
        target.unwrap_or("").to_owned()
    }

    /// Queues a command for its target run (the root run when it has none).
    pub fn send(&self, command: SteeringCommand) {
        let key = Self::key(command.target_run.as_deref());
        self.queues
            .lock()
            .expect("steering lock")
            .entry(key)
            .or_default()
            .push_back(command);
    }

    /// How many commands wait for `run` (`None`: the root run).
    pub fn pending(&self, run: Option<&str>) -> usize {
        self.queues
            .lock()
            .expect("steering lock")
            .get(&Self::key(run))
            .map_or(0, std::collections::VecDeque::len)
    }

    /// Takes every command waiting for a run: those addressed to its id, and,
    /// for the root run (`root`), those without a target.
    pub(crate) fn take_for(&self, run_id: &str, root: bool) -> Vec<SteeringCommand> {
        let mut queues = self.queues.lock().expect("steering lock");
        let mut out: Vec<SteeringCommand> = Vec::new();
        if root {
            out.extend(queues.remove("").unwrap_or_default());
        }
        out.extend(queues.remove(run_id).unwrap_or_default());
        out
    }

    /// Puts deferred commands back at the front of their queue, in order.
    pub(crate) fn requeue_front(&self, commands: Vec<SteeringCommand>, run_id: &str, root: bool) {
        let mut queues = self.queues.lock().expect("steering lock");
        for command in commands.into_iter().rev() {
            let key = match &command.target_run {
                Some(t) if t == run_id => t.clone(),
                Some(t) => t.clone(),
                None if root => String::new(),
                None => run_id.to_owned(),
            };
            queues.entry(key).or_default().push_front(command);
        }
    }
}

impl SteeringAction {
    /// The action's snake_case label (`inject_message`, `pause`, …).
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::InjectMessage { .. } => "inject_message",
            Self::Redirect { .. } => "redirect",
            Self::Pause { .. } => "pause",
            Self::Resume => "resume",
            Self::Cancel { .. } => "cancel",
            Self::SwitchMode { .. } => "switch_mode",
            Self::AdjustLimits { .. } => "adjust_limits",
            Self::Goto { .. } => "goto",
        }
    }
}

impl SteeringDecision {
    /// The decision's label (`accept`, `reject`, `defer`).
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::Accept => "accept",
            Self::Reject { .. } => "reject",
            Self::Defer => "defer",
        }
    }
}
