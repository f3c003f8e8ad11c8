//! The control requests middleware send the agent loop: stop or pause
//! ([`MiddlewareControl`]) and jumps ([`JumpTarget`], [`JumpRequest`],
//! [`JumpSet`]). Plain data: the run context holds them, the loop drains them
//! at its safe points.

use std::sync::Arc;

/// A control request from middleware to the loop, resolved by precedence.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MiddlewareControl {
    /// Stop now, with this text as the final assistant response.
    StopWithFinal(String),
    /// Pause at the next safe point; the run ends with [`TinyAgentsError::Interrupted`](crate::harness::error::TinyAgentsError::Interrupted).
    Interrupt {
        /// Where the run paused.
        node: Option<String>,
        /// Why.
        message: String,
    },
}

impl MiddlewareControl {
    /// Higher wins: `Interrupt` (2) outranks `StopWithFinal` (1).
    pub const fn precedence(&self) -> u8 {
        match self {
            Self::StopWithFinal(_) => 1,
            Self::Interrupt { .. } => 2,
        }
    }

    /// The control's label, as used in [`AgentEvent::ControlApplied`](crate::harness::event::AgentEvent::ControlApplied).
    pub const fn kind(&self) -> &'static str {
        match self {
            Self::StopWithFinal(_) => "stop_with_final",
            Self::Interrupt { .. } => "interrupt",
        }
    }
}

/// Where a middleware may send the loop.
///
/// Asked from a tool hook (`before_tool`, `wrap_tool`, `after_tool`), a jump
/// to the model or the end (or a stop with a final text) leaves the batch at
/// once: the call whose `before_tool` asked, and every call after the one
/// that asked, are answered "not run" and never run; the jump applies after
/// the batch. (Calls already running concurrently finish.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JumpTarget {
    /// Call the model (again). Pending tool calls (those of the reply, or of
    /// the batch under review) are skipped: each gets a "not run" result right
    /// after its assistant message and never runs.
    Model,
    /// Run the pending tool calls. After a reply or from the batch review:
    /// run the batch (what the loop does anyway). From `before_agent` or
    /// before the model call: run the unanswered calls of the last assistant
    /// message (for a conversation that ends with calls not yet answered)
    /// instead of calling the model. With no such calls the jump is refused:
    /// the run fails with a `Validation` error naming the middleware.
    Tools,
    /// End the run with the latest response (pending calls get a "not run" result).
    End,
}

impl JumpTarget {
    /// The target's label (`model`, `tools`, `end`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Model => "model",
            Self::Tools => "tools",
            Self::End => "end",
        }
    }

    /// The one-target [`JumpSet`].
    pub const fn as_set(self) -> JumpSet {
        match self {
            Self::Model => JumpSet::MODEL,
            Self::Tools => JumpSet::TOOLS,
            Self::End => JumpSet::END,
        }
    }
}

bitflags::bitflags! {
    /// The jump targets a middleware declared (`can_jump_to`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct JumpSet: u8 {
        /// May jump to the model.
        const MODEL = 1;
        /// May jump to the tools.
        const TOOLS = 1 << 1;
        /// May jump to the end.
        const END = 1 << 2;
    }
}

/// A jump requested by a middleware.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpRequest {
    /// Where to.
    pub target: JumpTarget,
    /// The middleware that asked (set by the stack when it checks the declaration).
    pub by: Option<Arc<str>>,
}
