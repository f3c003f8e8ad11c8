//! The flow facet of a run context: state updates, control and jump
//! requests, checkpoint requests and cancellation.

use super::*;

/// What a run's hooks asked of its flow, read-only, from [`RunContext::flow`]:
/// state updates, the pending control and jump requests, the pending
/// checkpoint request, and cancellation.
///
/// ```
/// use tinyagents::harness::context::{JumpTarget, RunConfig, RunContext};
///
/// let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
/// assert!(!ctx.flow().is_cancelled());
/// ctx.flow_mut().jump_to(JumpTarget::End);
/// assert_eq!(ctx.flow().pending_jump().unwrap().target, JumpTarget::End);
/// ```
pub struct Flow<'a, Ctx = ()> {
    pub(super) ctx: &'a RunContext<Ctx>,
}

impl<'a, Ctx> Flow<'a, Ctx> {
    /// The explicit state updates made so far.
    pub fn state_updates(self) -> &'a [StateUpdate] {
        &self.ctx.state_updates
    }

    /// The pending control request, if any.
    pub fn pending_control(self) -> Option<&'a MiddlewareControl> {
        self.ctx.control.as_ref()
    }

    /// The pending jump, if any.
    pub fn pending_jump(self) -> Option<&'a JumpRequest> {
        self.ctx.jump.as_ref()
    }

    /// The pending checkpoint request's reason, if any.
    pub fn checkpoint_requested(self) -> Option<&'a str> {
        self.ctx.checkpoint_request.as_deref()
    }

    /// The run's cancellation token.
    pub fn cancellation(self) -> &'a CancellationToken {
        &self.ctx.cancellation
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(self) -> bool {
        self.ctx.cancellation.is_cancelled()
    }
}

/// What a hook asks of the run's flow, from [`RunContext::flow_mut`]:
/// update explicit state, stop or pause, jump, ask for a checkpoint.
///
/// ```
/// use serde_json::json;
/// use tinyagents::harness::context::{RunConfig, RunContext};
///
/// let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
/// ctx.flow_mut().update_state("mode", json!("plan"));
/// assert_eq!(ctx.flow().state_updates()[0].key, "mode");
/// assert_eq!(ctx.flow_mut().take_state_updates().len(), 1);
/// assert!(ctx.flow().state_updates().is_empty());
/// ```
pub struct FlowMut<'a, Ctx = ()> {
    pub(super) ctx: &'a mut RunContext<Ctx>,
}

impl<'a, Ctx> FlowMut<'a, Ctx> {
    /// Records an explicit state update and emits [`AgentEvent::StateUpdated`].
    pub fn update_state(&mut self, key: impl Into<String>, value: Value) {
        let update = StateUpdate { key: key.into(), value };
        self.ctx
            .events()
            .emit_with(EventKind::StateUpdated, || AgentEvent::StateUpdated {
                key: update.key.clone(),
                by: None,
                value: update.value.clone(),
            });
        self.ctx.state_updates.push(update);
    }

    /// Takes the state updates made so far.
    pub fn take_state_updates(&mut self) -> Vec<StateUpdate> {
        std::mem::take(&mut self.ctx.state_updates)
    }

    /// Asks the loop to stop or pause. The strongest request of a turn wins
    /// ([`MiddlewareControl::precedence`]); among equals the first is kept.
    pub fn request_control(&mut self, control: MiddlewareControl) {
        match &self.ctx.control {
            Some(current) if current.precedence() >= control.precedence() => {}
            _ => self.ctx.control = Some(control),
        }
    }

    /// Asks the loop to jump. The middleware must declare the target
    /// (`can_jump_to`); the stack refuses an undeclared jump with a
    /// `Validation` error naming the middleware and the target.
    pub fn jump_to(&mut self, target: JumpTarget) {
        self.ctx.jump = Some(JumpRequest { target, by: None });
        self.ctx.jump_unclaimed = true;
    }

    /// Asks for a checkpoint to be persisted at the next safe point (the
    /// "persist checkpoint" outcome), for `reason`. A middleware need not know
    /// how the run is driven: under [`AgentGraph::run_durable`](crate::graph::AgentGraph::run_durable)
    /// every safe point is persisted anyway, and with
    /// [`checkpoint_on_request`](crate::graph::AgentGraph::checkpoint_on_request)
    /// only the safe points asked for (plus interrupts and the end) are;
    /// under [`Agent::run`](crate::harness::agent::Agent::run), which has
    /// no store, the request has no effect.
    ///
    /// ```
    /// use tinyagents::harness::context::{RunConfig, RunContext};
    ///
    /// let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    /// ctx.flow_mut().request_checkpoint("the plan was approved");
    /// assert_eq!(ctx.flow().checkpoint_requested(), Some("the plan was approved"));
    /// ```
    pub fn request_checkpoint(&mut self, reason: impl Into<String>) {
        self.ctx.checkpoint_request.get_or_insert_with(|| reason.into());
    }
}

impl<Ctx> Clone for Flow<'_, Ctx> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Ctx> Copy for Flow<'_, Ctx> {}
