//! Per-run state: [`RunConfig`] and [`RunContext`].
//!
//! Everything that belongs to one run lives here, never in the middleware
//! stack: that is what lets one stack serve any number of concurrent runs.

use std::sync::Arc;

use serde_json::Value;
/// The cancellation token of a run (re-exported from `tokio-util`).
pub use tokio_util::sync::CancellationToken;

pub use crate::harness::control::{JumpRequest, JumpSet, JumpTarget, MiddlewareControl};
pub use crate::harness::locals::RunLocalsHandle;
pub use crate::harness::run::RunCounters;

use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::request::RequestLog;
use crate::harness::event::{AgentEvent, EventKind, EventMask, EventSink, NullSink};
use crate::harness::locals::RunLocals;
use crate::harness::middleware::run_state::StateSlot;
use crate::harness::model::Usage;
use crate::harness::run::FailedAttemptUsage;
use crate::harness::steering::SteeringHandle;
use crate::harness::tool::{Approval, ParentRun, Restriction, RunRestrictions, ToolCall, ToolPolicy};
use crate::harness::workspace::WorkspaceDescriptor;

mod events;
mod flow;
mod locals;
mod policy;

pub use events::Events;
pub use flow::{Flow, FlowMut};
pub use locals::Locals;
pub use policy::{Policy, PolicyMut};

/// The identity and options of one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunConfig {
    /// The run's id.
    pub run_id: Arc<str>,
    /// The parent run's id, for a sub-agent run.
    pub parent_run_id: Option<Arc<str>>,
    /// The conversation thread the run belongs to (per-thread limits count across its runs).
    pub thread_id: Option<Arc<str>>,
    /// For a sub-agent run: the session of its parent (the parent's thread,
    /// or its parent's session), which per-session limits count the
    /// sub-agent's calls toward. See [`session`](Self::session).
    pub parent_session: Option<Arc<str>>,
    /// Nesting depth: 0 for a top-level run, parent + 1 for a sub-agent.
    pub depth: u32,
    /// Free-form tags (a security tier, `background`, …).
    pub tags: Vec<String>,
    /// The model the caller asked for.
    pub requested_model: Option<String>,
    /// Restrictions inherited from the parent run: the agent loop enforces
    /// them whatever the run's stack holds ([`RunConfig::child_of`] fills it in).
    pub inherited: Arc<RunRestrictions>,
}

/// A top-level run's inherited restrictions: none, one shared value (a run
/// is made without allocating it).
fn no_restrictions() -> Arc<RunRestrictions> {
    static NONE: std::sync::LazyLock<Arc<RunRestrictions>> = std::sync::LazyLock::new(Arc::default);
    Arc::clone(&NONE)
}

/// The sink of a run that has none: one shared [`NullSink`].
fn null_sink() -> Arc<dyn EventSink> {
    static NULL: std::sync::LazyLock<Arc<dyn EventSink>> = std::sync::LazyLock::new(|| Arc::new(NullSink));
    Arc::clone(&NULL)
}

impl RunConfig {
    /// A top-level run with this id.
    pub fn new(run_id: impl Into<Arc<str>>) -> Self {
        Self {
            run_id: run_id.into(),
            parent_run_id: None,
            thread_id: None,
            parent_session: None,
            depth: 0,
            tags: Vec::new(),
            requested_model: None,
            inherited: no_restrictions(),
        }
    }

    /// A child run of `parent`, one level deeper, with the parent's tags,
    /// model and every restriction of the parent run (its own guards' and
    /// those it inherited), which the agent loop enforces in the child.
    pub fn child_of(parent: &ParentRun, run_id: impl Into<Arc<str>>) -> Self {
        Self {
            run_id: run_id.into(),
            parent_run_id: Some(parent.run_id.clone()),
            thread_id: None,
            parent_session: parent.session.clone(),
            depth: parent.depth + 1,
            tags: parent.tags.to_vec(),
            requested_model: parent.requested_model.clone(),
            inherited: parent.restrictions.clone(),
        }
    }

    /// The same config with one more tag.
    pub fn with_tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// The session per-session limits count this run's calls toward: its
    /// thread, or for a sub-agent without one its parent's session, so a
    /// session's `max_steps` (and the thread limits of `tool_call_limit`
    /// and `model_call_limit`) hold over the sub-agents it starts.
    ///
    /// ```
    /// use tinyagents::harness::context::{RunConfig, RunContext};
    ///
    /// let parent: RunContext = RunContext::new(RunConfig::new("p").with_thread("session-1"), ());
    /// let child = RunConfig::child_of(&parent.as_parent(), "p/c");
    /// assert_eq!(child.thread_id, None);
    /// assert_eq!(child.session().map(|s| &**s), Some("session-1"));
    /// ```
    pub fn session(&self) -> Option<&Arc<str>> {
        self.thread_id.as_ref().or(self.parent_session.as_ref())
    }

    /// The same config in a thread.
    pub fn with_thread(mut self, thread_id: impl Into<Arc<str>>) -> Self {
        self.thread_id = Some(thread_id.into());
        self
    }

    /// The same config asking for a model.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.requested_model = Some(model.into());
        self
    }
}

/// One explicit state update made by middleware, kept on the run and emitted as an event.
#[derive(Debug, Clone, PartialEq)]
pub struct StateUpdate {
    /// The key updated.
    pub key: String,
    /// The new value.
    pub value: Value,
}

/// The context of one run, passed `&mut` to every hook.
///
/// It holds the run's identity, the user's context value `Ctx`, the event
/// sink, the workspace, counters, usage, explicit state updates, control
/// requests, jumps, cancellation, and per-run middleware state
/// ([`Locals::local`](crate::harness::context::Locals::local)).
///
/// ```
/// use tinyagents::harness::context::{MiddlewareControl, RunConfig, RunContext};
///
/// let mut ctx: RunContext = RunContext::new(RunConfig::new("run-1"), ());
/// ctx.flow_mut().request_control(MiddlewareControl::Interrupt { node: None, message: "approve?".into() });
/// ctx.flow_mut().request_control(MiddlewareControl::StopWithFinal("done".into()));
/// // the weaker later request did not downgrade the interrupt
/// assert_eq!(ctx.flow().pending_control().unwrap().kind(), "interrupt");
/// ```
pub struct RunContext<Ctx = ()> {
    config: RunConfig,
    context: Ctx,
    sink: Arc<dyn EventSink>,
    mask: EventMask,
    workspace: Option<WorkspaceDescriptor>,
    counters: RunCounters,
    usage: Usage,
    state_updates: Vec<StateUpdate>,
    control: Option<MiddlewareControl>,
    jump: Option<JumpRequest>,
    /// Whether `jump` holds a request no hook has claimed yet: the one flag
    /// every hook dispatch reads after each hook (kept equal to
    /// `matches!(jump, Some(j) if j.by.is_none())`).
    jump_unclaimed: bool,
    /// Which tool batch of the run is at hand (the loop counts them): with a
    /// call's id, it names one call of the run, whatever its retries.
    batch: u64,
    cancellation: CancellationToken,
    locals: RunLocals,
    parent_locals: Option<RunLocals>,
    /// The run state slot of the hook the stack is about to call (taken by
    /// the hook's DSL glue).
    state_slot: Option<StateSlot>,
    steering: Option<(SteeringHandle, bool)>,
    max_steps: Option<u32>,
    /// Restrictions this run's own guards recorded, by guard name.
    own: Vec<(Arc<str>, Restriction)>,
    checkpoint_request: Option<String>,
    /// The step of the last model attempt, and its number within that step.
    attempt: (u32, u32),
    /// The run's previous model request, kept while the sink wants `ModelRequest`.
    requests: RequestLog,
}

impl<Ctx> std::fmt::Debug for RunContext<Ctx> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunContext")
            .field("config", &self.config)
            .field("counters", &self.counters)
            .field("usage", &self.usage)
            .field("control", &self.control)
            .field("jump", &self.jump)
            .finish_non_exhaustive()
    }
}

impl<Ctx> RunContext<Ctx> {
    /// A context for a run, with the user's context value and no event sink.
    pub fn new(config: RunConfig, context: Ctx) -> Self {
        Self {
            config,
            context,
            sink: null_sink(),
            mask: EventMask::NONE,
            workspace: None,
            counters: RunCounters::default(),
            usage: Usage::default(),
            state_updates: Vec::new(),
            control: None,
            jump: None,
            jump_unclaimed: false,
            batch: 0,
            cancellation: CancellationToken::new(),
            locals: RunLocals::default(),
            parent_locals: None,
            state_slot: None,
            checkpoint_request: None,
            steering: None,
            max_steps: None,
            own: Vec::new(),
            attempt: (0, 0),
            requests: RequestLog::default(),
        }
    }

    /// The same context steered by `handle`: commands without a target go to this run.
    pub fn with_steering(mut self, handle: SteeringHandle) -> Self {
        self.steering = Some((handle, true));
        self
    }

    /// The same context under a parent's steering handle: it receives only
    /// commands addressed to its own run id.
    pub fn with_child_steering(mut self, handle: SteeringHandle) -> Self {
        self.steering = Some((handle, false));
        self
    }

    /// The steering handle, and whether this run is its root.
    pub(crate) fn steering(&self) -> Option<&(SteeringHandle, bool)> {
        self.steering.as_ref()
    }

    /// This run's step limit, when steering adjusted it.
    pub fn max_steps_override(&self) -> Option<u32> {
        self.max_steps
    }

    /// Sets this run's step limit (steering's `AdjustLimits`).
    pub(crate) fn set_max_steps(&mut self, max_steps: Option<u32>) {
        self.max_steps = max_steps;
    }

    /// The same context reporting to `sink`.
    pub fn with_sink(mut self, sink: Arc<dyn EventSink>) -> Self {
        self.mask = sink.interest();
        self.sink = sink;
        self
    }

    /// The same context with a workspace.
    pub fn with_workspace(mut self, workspace: WorkspaceDescriptor) -> Self {
        self.workspace = Some(workspace);
        self
    }

    /// The same context cancelled by `token`.
    pub fn with_cancellation(mut self, token: CancellationToken) -> Self {
        self.cancellation = token;
        self
    }

    /// The run's config.
    pub fn config(&self) -> &RunConfig {
        &self.config
    }

    /// The run's id.
    pub fn run_id(&self) -> &Arc<str> {
        &self.config.run_id
    }

    /// The run's nesting depth.
    pub fn depth(&self) -> u32 {
        self.config.depth
    }

    /// The run's tags.
    pub fn tags(&self) -> &[String] {
        &self.config.tags
    }

    /// Adds a tag to this run (once). Child runs started from it inherit its
    /// tags, so a restriction recorded as a tag cannot be dropped by a sub-agent.
    pub fn add_tag(&mut self, tag: impl Into<String>) {
        let tag = tag.into();
        if !self.config.tags.contains(&tag) {
            self.config.tags.push(tag);
        }
    }

    /// The model the caller asked for.
    pub fn requested_model(&self) -> Option<&str> {
        self.config.requested_model.as_deref()
    }

    /// The user's context value.
    pub fn context(&self) -> &Ctx {
        &self.context
    }

    /// The user's context value, mutably.
    pub fn context_mut(&mut self) -> &mut Ctx {
        &mut self.context
    }
    /// The run's events facet: the sink and what it wants ([`Events`]).
    #[inline]
    pub fn events(&self) -> Events<'_, Ctx> {
        Events { ctx: self }
    }

    /// The run's flow facet, read-only: state updates, control and jump
    /// requests, checkpoint requests, cancellation ([`Flow`]).
    #[inline]
    pub fn flow(&self) -> Flow<'_, Ctx> {
        Flow { ctx: self }
    }

    /// The run's flow facet, to ask for something: update state, stop or
    /// pause, jump, checkpoint ([`FlowMut`]).
    #[inline]
    pub fn flow_mut(&mut self) -> FlowMut<'_, Ctx> {
        FlowMut { ctx: self }
    }

    /// Asks the loop to stop or pause, as the middleware design writes it
    /// (`RunContext::request_control`): the same request as
    /// [`flow_mut().request_control`](FlowMut::request_control), where the
    /// strongest request of a turn wins.
    ///
    /// ```
    /// use tinyagents::harness::context::{MiddlewareControl, RunConfig, RunContext};
    ///
    /// let mut ctx = RunContext::new(RunConfig::new("r"), ());
    /// ctx.request_control(MiddlewareControl::StopWithFinal("done".into()));
    /// ctx.request_control(MiddlewareControl::Interrupt { node: None, message: "approve?".into() });
    /// assert!(matches!(ctx.flow().pending_control(), Some(MiddlewareControl::Interrupt { .. })));
    /// ```
    pub fn request_control(&mut self, control: MiddlewareControl) {
        self.flow_mut().request_control(control);
    }

    /// The run's per-run locals facet: state of any type shared by every
    /// part of the run, and the parent run's ([`Locals`]).
    #[inline]
    pub fn locals(&self) -> Locals<'_, Ctx> {
        Locals { ctx: self }
    }

    /// The run's policy facet, read-only: restrictions, approvals and the
    /// loop's last check of a call ([`Policy`]).
    #[inline]
    pub fn policy(&self) -> Policy<'_, Ctx> {
        Policy { ctx: self }
    }

    /// The run's policy facet, to record a guard's restriction ([`PolicyMut`]).
    #[inline]
    pub fn policy_mut(&mut self) -> PolicyMut<'_, Ctx> {
        PolicyMut { ctx: self }
    }

    /// The workspace, when the run has one.
    pub fn workspace(&self) -> Option<&WorkspaceDescriptor> {
        self.workspace.as_ref()
    }

    /// Emits the `ModelRequest` event of an attempt (a delta against the
    /// run's previous request) if the sink wants that kind; else does nothing.
    #[inline]
    pub(crate) fn emit_request(&mut self, step: u32, attempt: u32, request: &crate::harness::model::ModelRequest) {
        if self.mask.contains(EventKind::ModelRequest) {
            let event = self.requests.event(self.config.run_id.clone(), step, attempt, request);
            self.sink.emit(event);
        }
    }

    /// Forgets the previous model request: the next `ModelRequest` is whole.
    pub(crate) fn reset_requests(&mut self) {
        self.requests = RequestLog::default();
    }

    /// The run's counters.
    pub fn counters(&self) -> &RunCounters {
        &self.counters
    }

    /// The run's counters, mutably (the agent loop maintains them).
    pub(crate) fn counters_mut(&mut self) -> &mut RunCounters {
        &mut self.counters
    }

    /// Usage so far, sub-agent runs included.
    pub fn usage(&self) -> &Usage {
        &self.usage
    }

    /// Adds usage to the run's total.
    pub fn add_usage(&mut self, usage: Usage) {
        self.usage += usage;
    }

    /// Restores an explicit state value a checkpoint kept, as the paused run
    /// had it (no event: nothing changed).
    pub(crate) fn restore_state(&mut self, key: String, value: Value) {
        self.state_updates.push(StateUpdate { key, value });
    }

    /// Takes the pending control request (the loop does this at its safe points).
    pub(crate) fn take_control(&mut self) -> Option<MiddlewareControl> {
        self.control.take()
    }

    /// Takes the pending jump (the loop does this at its safe points).
    pub(crate) fn take_jump(&mut self) -> Option<JumpRequest> {
        self.jump_unclaimed = false;
        self.jump.take()
    }

    /// Counts one model attempt of the current step and returns its number
    /// within the step (1 for the first attempt of every step).
    pub(crate) fn next_attempt(&mut self) -> u32 {
        let step = self.counters.steps;
        self.attempt = match self.attempt {
            (s, n) if s == step => (s, n.saturating_add(1)),
            _ => (step, 1),
        };
        self.attempt.1
    }

    /// Checks a jump requested during the hook of `middleware` (which declared
    /// `allowed`) whatever the hook returned: an undeclared jump is refused
    /// (dropped, and the hook's outcome becomes a `Validation` error naming
    /// the middleware, the target and the fix, quoting the hook's own error
    /// when it failed); a declared one is kept, marked as made by `middleware`.
    #[inline(always)]
    pub(crate) fn checked_jump<T>(&mut self, middleware: &Arc<str>, allowed: JumpSet, outcome: Result<T>) -> Result<T> {
        // The common case (no jump asked for, or one already claimed) passes
        // the outcome through untouched: inlined, it is not even moved.
        debug_assert_eq!(self.jump_unclaimed, matches!(&self.jump, Some(j) if j.by.is_none()));
        if self.jump_unclaimed {
            self.claim_jump(middleware, allowed, outcome)
        } else {
            outcome
        }
    }

    /// [`checked_jump`](Self::checked_jump) in place: the outcome is read and
    /// replaced only when a jump was asked for, so the common case never
    /// moves it (a moved `Result` costs a store-forwarding stall per hook).
    #[inline(always)]
    pub(crate) fn check_jump_in_place<T>(&mut self, middleware: &Arc<str>, allowed: JumpSet, outcome: &mut Result<T>) {
        debug_assert_eq!(self.jump_unclaimed, matches!(&self.jump, Some(j) if j.by.is_none()));
        if self.jump_unclaimed {
            self.claim_jump_in_place(middleware, allowed, outcome);
        }
    }

    /// [`claim_jump`](Self::claim_jump) on an outcome in place (cold: only
    /// when a jump was asked for).
    #[cold]
    fn claim_jump_in_place<T>(&mut self, middleware: &Arc<str>, allowed: JumpSet, outcome: &mut Result<T>) {
        let taken = std::mem::replace(outcome, Err(TinyAgentsError::Cancelled { reason: String::new() }));
        *outcome = self.claim_jump(middleware, allowed, taken);
    }

    /// A jump was asked for by the hook that just returned: keep it if
    /// declared, refuse it otherwise (see [`checked_jump`](Self::checked_jump)).
    #[cold]
    #[inline(never)]
    fn claim_jump<T>(&mut self, middleware: &Arc<str>, allowed: JumpSet, outcome: Result<T>) -> Result<T> {
        self.jump_unclaimed = false;
        let Some(j) = &mut self.jump else { return outcome };
        if allowed.contains(j.target.as_set()) {
            j.by = Some(middleware.clone());
            return outcome;
        }
        let target = j.target.as_str();
        self.jump = None;
        let also = match &outcome {
            Ok(_) => String::new(),
            Err(e) => format!(" (the hook also failed: {e})"),
        };
        Err(TinyAgentsError::validation(format!(
            "middleware `{middleware}` asked to jump to `{target}` but did not declare it; \
             add `can_jump_to = [{target}]` to its attribute{also}"
        )))
    }

    /// Takes the pending checkpoint request (the graph runtime does, at a safe point).
    pub(crate) fn take_checkpoint_request(&mut self) -> Option<String> {
        self.checkpoint_request.take()
    }

    /// The same context as a child of the run `parent` came from: its
    /// per-run state becomes reachable through [`parent_local`](Locals::parent_local).
    pub fn with_parent_locals(mut self, parent: &RunLocalsHandle) -> Self {
        self.parent_locals = Some(parent.0.clone());
        self
    }

    /// Names the run state slot of the hook the stack calls next.
    #[inline(always)]
    pub(crate) fn set_state_slot(&mut self, slot: StateSlot) {
        self.state_slot = Some(slot);
    }

    /// Takes the run state slot the stack named for this hook.
    #[inline]
    pub(crate) fn take_state_slot(&mut self) -> Option<StateSlot> {
        self.state_slot.take()
    }

    /// The run's locals (for the hook observers' flag).
    pub(crate) fn run_locals(&self) -> &RunLocals {
        &self.locals
    }

    /// Takes (and clears) the usage the run's failed model attempts reported
    /// and no budget has charged yet (`FailedAttemptUsage`).
    pub(crate) fn take_failed_attempt_usage(&self) -> Usage {
        self.locals()
            .try_local::<FailedAttemptUsage>()
            .map(|u| std::mem::take(&mut *u.0.lock().expect("failed attempt usage lock")))
            .unwrap_or_default()
    }

    /// The same context under restrictions inherited from a parent run
    /// (what [`ParentRun::restrictions`] carries). The agent loop enforces
    /// them at exposure and at every tool call, whatever the stack holds;
    /// a child's own guards can only add to them.
    pub fn with_inherited_restrictions(mut self, restrictions: Arc<RunRestrictions>) -> Self {
        self.config.inherited = restrictions;
        self
    }

    /// The run's ledger when anything made one (never creates it).
    fn ledger(&self) -> Option<Arc<dyn crate::harness::approvals::ApprovalLedger>> {
        self.locals()
            .try_local::<crate::harness::approvals::Approvals>()
            .map(|a| a.ledger())
    }

    /// Spends every approval granted so far: the agent loop does this when
    /// the batch the approvals were given for has run, so an approval never
    /// outlives the calls it was given for (a later call reusing an approved
    /// call's id is not approved).
    pub(crate) fn spend_approvals(&self) {
        if let Some(ledger) = self.ledger() {
            ledger.spend_all();
        }
    }

    /// The loop starts the run's next tool batch.
    pub(crate) fn next_batch(&mut self) {
        self.batch += 1;
    }

    /// Records that the approved call `call_id` runs now, at the last check
    /// before the tool: `Err` when it already ran under this approval (a
    /// retry inside the call). A person approved one run of the call shown.
    pub(crate) fn use_approval(&self, call_id: &str) -> std::result::Result<(), String> {
        self.ledger().map_or(Ok(()), |ledger| ledger.use_approval(call_id))
    }

    /// This run as a parent, for a tool that starts a child run.
    pub fn as_parent(&self) -> ParentRun {
        ParentRun {
            run_id: self.config.run_id.clone(),
            depth: self.config.depth,
            tags: shared_tags(&self.config.tags),
            requested_model: self.config.requested_model.clone(),
            session: self.config.session().cloned(),
            sink: self.sink.clone(),
            workspace: self.workspace.clone(),
            cancellation: self.cancellation.clone(),
            steering: self.steering.as_ref().map(|(h, _)| h.clone()),
            // The inherited set itself when the run added none: no copy.
            restrictions: if self.own.is_empty() {
                self.config.inherited.clone()
            } else {
                Arc::new(self.policy().restrictions())
            },
            locals: RunLocalsHandle(self.locals.clone()),
        }
    }

    /// A context for one concurrent branch of this run (a tool call of a
    /// batch): same identity, sink, workspace, cancellation and run locals;
    /// fresh counters, usage, updates and requests, merged back by [`RunContext::merge`].
    pub fn fork(&self, context: Ctx) -> Self {
        Self {
            config: self.config.clone(),
            context,
            sink: self.sink.clone(),
            mask: self.mask,
            workspace: self.workspace.clone(),
            counters: RunCounters::default(),
            usage: Usage::default(),
            state_updates: Vec::new(),
            control: None,
            jump: None,
            jump_unclaimed: false,
            batch: self.batch,
            cancellation: self.cancellation.clone(),
            locals: self.locals.clone(),
            parent_locals: self.parent_locals.clone(),
            state_slot: None,
            steering: self.steering.clone(),
            max_steps: self.max_steps,
            own: self.own.clone(),
            checkpoint_request: None,
            attempt: self.attempt,
            // a branch's first request is recorded whole
            requests: RequestLog::default(),
        }
    }

    /// Merges a branch made by [`RunContext::fork`] back: usage and counters
    /// add up, state updates append, control requests keep precedence, a
    /// checked jump is kept if none is pending.
    pub fn merge(&mut self, branch: Self) {
        self.usage += branch.usage;
        self.counters.steps += branch.counters.steps;
        self.counters.model_calls += branch.counters.model_calls;
        self.counters.tool_calls += branch.counters.tool_calls;
        self.state_updates.extend(branch.state_updates);
        if let Some(c) = branch.control {
            self.flow_mut().request_control(c);
        }
        if self.jump.is_none() {
            self.jump = branch.jump;
            self.jump_unclaimed = branch.jump_unclaimed;
        }
        if self.checkpoint_request.is_none() {
            self.checkpoint_request = branch.checkpoint_request;
        }
    }
}

/// A run's tags as a child run shares them: one process-wide empty list
/// for a run without tags (every tool call hands its tags on; no allocation
/// for the common case), a copy otherwise.
fn shared_tags(tags: &[String]) -> Arc<[String]> {
    static EMPTY: std::sync::LazyLock<Arc<[String]>> = std::sync::LazyLock::new(|| Arc::from(Vec::new()));
    if tags.is_empty() {
        EMPTY.clone()
    } else {
        tags.into()
    }
}
