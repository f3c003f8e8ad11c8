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
