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
            inherited: Arc::default(),
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
/// ([`RunContext::local`]).
///
/// ```
/// use tinyagents::harness::context::{MiddlewareControl, RunConfig, RunContext};
///
/// let mut ctx: RunContext = RunContext::new(RunConfig::new("run-1"), ());
/// ctx.request_control(MiddlewareControl::Interrupt { node: None, message: "approve?".into() });
/// ctx.request_control(MiddlewareControl::StopWithFinal("done".into()));
/// // the weaker later request did not downgrade the interrupt
/// assert_eq!(ctx.pending_control().unwrap().kind(), "interrupt");
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
            sink: Arc::new(NullSink),
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

    /// The workspace, when the run has one.
    pub fn workspace(&self) -> Option<&WorkspaceDescriptor> {
        self.workspace.as_ref()
    }

    /// The run's event sink.
    pub fn sink(&self) -> &Arc<dyn EventSink> {
        &self.sink
    }

    /// Whether the sink wants events of `kind`.
    #[inline]
    pub fn wants(&self, kind: EventKind) -> bool {
        self.mask.contains(kind)
    }

    /// Emits an event if the sink wants its kind.
    pub fn emit(&self, event: AgentEvent) {
        if self.mask.contains(event.kind()) {
            self.sink.emit(event);
        }
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

    /// Builds and emits an event only if the sink wants `kind`.
    #[inline]
    pub fn emit_with(&self, kind: EventKind, build: impl FnOnce() -> AgentEvent) {
        if self.mask.contains(kind) {
            self.sink.emit(build());
        }
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

    /// The run's cancellation token.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancellation
    }

    /// Whether the run was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }

    /// Records an explicit state update and emits [`AgentEvent::StateUpdated`].
    pub fn update_state(&mut self, key: impl Into<String>, value: Value) {
        let update = StateUpdate { key: key.into(), value };
        self.emit_with(EventKind::StateUpdated, || AgentEvent::StateUpdated {
            key: update.key.clone(),
            by: None,
            value: update.value.clone(),
        });
        self.state_updates.push(update);
    }

    /// Restores an explicit state value a checkpoint kept, as the paused run
    /// had it (no event: nothing changed).
    pub(crate) fn restore_state(&mut self, key: String, value: Value) {
        self.state_updates.push(StateUpdate { key, value });
    }

    /// The explicit state updates made so far.
    pub fn state_updates(&self) -> &[StateUpdate] {
        &self.state_updates
    }

    /// Takes the state updates made so far.
    pub fn take_state_updates(&mut self) -> Vec<StateUpdate> {
        std::mem::take(&mut self.state_updates)
    }

    /// Asks the loop to stop or pause. The strongest request of a turn wins
    /// ([`MiddlewareControl::precedence`]); among equals the first is kept.
    pub fn request_control(&mut self, control: MiddlewareControl) {
        match &self.control {
            Some(current) if current.precedence() >= control.precedence() => {}
            _ => self.control = Some(control),
        }
    }

    /// The pending control request, if any.
    pub fn pending_control(&self) -> Option<&MiddlewareControl> {
        self.control.as_ref()
    }

    /// Takes the pending control request (the loop does this at its safe points).
    pub(crate) fn take_control(&mut self) -> Option<MiddlewareControl> {
        self.control.take()
    }

    /// Asks the loop to jump. The middleware must declare the target
    /// (`can_jump_to`); the stack refuses an undeclared jump with a
    /// `Validation` error naming the middleware and the target.
    pub fn jump_to(&mut self, target: JumpTarget) {
        self.jump = Some(JumpRequest { target, by: None });
        self.jump_unclaimed = true;
    }

    /// The pending jump, if any.
    pub fn pending_jump(&self) -> Option<&JumpRequest> {
        self.jump.as_ref()
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
    pub(crate) fn check_jump_in_place(&mut self, middleware: &Arc<str>, allowed: JumpSet, outcome: &mut Result<()>) {
        debug_assert_eq!(self.jump_unclaimed, matches!(&self.jump, Some(j) if j.by.is_none()));
        if self.jump_unclaimed {
            let taken = std::mem::replace(outcome, Ok(()));
            *outcome = self.claim_jump(middleware, allowed, taken);
        }
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

    /// Per-run state of type `T` for middleware, created with `T::default()` on first use.
    ///
    /// The value is shared by every part of the run (concurrent tool calls
    /// included), so `T` uses interior mutability (atomics, a mutex).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use tinyagents::harness::context::{RunConfig, RunContext};
    ///
    /// #[derive(Default)]
    /// struct Seen(AtomicU32);
    ///
    /// let ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    /// ctx.local::<Seen>().0.fetch_add(1, Ordering::Relaxed);
    /// assert_eq!(ctx.local::<Seen>().0.load(Ordering::Relaxed), 1);
    /// ```
    pub fn local<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        self.locals.get::<T>()
    }

    /// The run's pauses: the protocol of a middleware that pauses the run
    /// and of the answer that resumes it ([`Interrupts`](crate::harness::interrupt::Interrupts)).
    pub fn interrupts(&self) -> Arc<crate::harness::interrupt::Interrupts> {
        self.local()
    }

    /// What this run's middleware does around its child runs
    /// ([`ChildRunHooks`](crate::harness::child_run::ChildRunHooks)).
    pub fn child_run_hooks(&self) -> Arc<crate::harness::child_run::ChildRunHooks> {
        self.local()
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
    /// ctx.request_checkpoint("the plan was approved");
    /// assert_eq!(ctx.checkpoint_requested(), Some("the plan was approved"));
    /// ```
    pub fn request_checkpoint(&mut self, reason: impl Into<String>) {
        self.checkpoint_request.get_or_insert_with(|| reason.into());
    }

    /// The pending checkpoint request's reason, if any.
    pub fn checkpoint_requested(&self) -> Option<&str> {
        self.checkpoint_request.as_deref()
    }

    /// Takes the pending checkpoint request (the graph runtime does, at a safe point).
    pub(crate) fn take_checkpoint_request(&mut self) -> Option<String> {
        self.checkpoint_request.take()
    }

    /// Per-run state of type `T`, created with `init` on first use (see [`local`](Self::local)).
    pub fn local_with<T: Send + Sync + 'static>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        self.locals.get_with(init)
    }

    /// The parent run's per-run state of type `T`, when this is a child run
    /// (started with [`with_parent_locals`](Self::with_parent_locals)) and
    /// the parent created it. Never creates it.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use tinyagents::harness::context::{RunConfig, RunContext};
    ///
    /// #[derive(Default)]
    /// struct Tree(AtomicU32);
    ///
    /// let parent: RunContext = RunContext::new(RunConfig::new("p"), ());
    /// parent.local::<Tree>().0.store(7, Ordering::Relaxed);
    /// let link = parent.as_parent();
    /// let child: RunContext = RunContext::new(RunConfig::child_of(&link, "p/c"), ()).with_parent_locals(&link.locals);
    /// assert_eq!(child.parent_local::<Tree>().unwrap().0.load(Ordering::Relaxed), 7);
    /// assert!(parent.parent_local::<Tree>().is_none());
    /// ```
    pub fn parent_local<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.parent_locals.as_ref()?.try_get::<T>()
    }

    /// The same context as a child of the run `parent` came from: its
    /// per-run state becomes reachable through [`parent_local`](Self::parent_local).
    pub fn with_parent_locals(mut self, parent: &RunLocalsHandle) -> Self {
        self.parent_locals = Some(parent.0.clone());
        self
    }

    /// The per-run state of type `T` if some part of the run created it
    /// (with [`local`](Self::local)); never creates it, never allocates.
    #[inline]
    pub fn try_local<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.locals.try_get::<T>()
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
        self.try_local::<FailedAttemptUsage>()
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

    /// The restrictions this run inherited from its parent.
    pub fn inherited_restrictions(&self) -> &RunRestrictions {
        &self.config.inherited
    }

    /// Records (`Some`) or clears (`None`) the restriction of guard `by` on
    /// this run. Child runs inherit it; it never loosens what was inherited.
    ///
    /// ```
    /// use tinyagents::harness::context::{RunConfig, RunContext};
    /// use tinyagents::harness::tool::{Approval, Restriction};
    /// use tinyagents::harness::tool::ToolLists;
    ///
    /// let mut ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    /// let lists = ToolLists::new(None::<Vec<String>>, ["shell"]);
    /// ctx.restrict("my_guard", Some(Restriction::Tools(lists)));
    /// assert!(ctx.as_parent().restrictions.check("shell", None, None, Approval::Missing).is_err());
    /// ```
    pub fn restrict(&mut self, by: &str, restriction: Option<Restriction>) {
        self.own.retain(|(name, _)| &**name != by);
        if let Some(r) = restriction {
            self.own.push((Arc::from(by), r));
        }
    }

    /// Adds the restriction of guard `by` to this run (once: an equal one
    /// already recorded is not repeated). Child runs inherit it.
    pub fn add_restriction(&mut self, by: &str, restriction: Restriction) {
        if !self.own.iter().any(|(name, r)| &**name == by && *r == restriction) {
            self.own.push((Arc::from(by), restriction));
        }
    }

    /// Every restriction of the run: inherited, then its own guards'.
    pub fn restrictions(&self) -> RunRestrictions {
        self.config.inherited.and(self.own.iter().cloned())
    }

    /// Whether the run inherited any restriction.
    #[inline]
    pub fn is_restricted(&self) -> bool {
        !self.config.inherited.is_empty()
    }

    /// The run's approvals ledger ([`Approvals`](crate::harness::approvals::Approvals)):
    /// what a person approved, where a middleware that asks grants and a
    /// policy that requires approval reads.
    pub fn approvals(&self) -> Arc<crate::harness::approvals::Approvals> {
        self.local()
    }

    /// The run's ledger when anything made one (never creates it).
    fn ledger(&self) -> Option<Arc<dyn crate::harness::approvals::ApprovalLedger>> {
        self.try_local::<crate::harness::approvals::Approvals>()
            .map(|a| a.ledger())
    }

    /// Records that a person approved call `call_id`: it was shown as
    /// `shown` (tool and arguments) and runs as `effective` (an edit). The
    /// same as `approvals().ledger().grant(…)`.
    pub fn grant_approval(&self, call_id: &str, shown: &ToolCall, effective: &ToolCall) {
        self.approvals().ledger().grant(call_id, shown, effective);
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

    /// Whether a person approved this exact call. `strict` accepts only the
    /// call as it will run (after an edit); otherwise the call as shown is
    /// accepted too (a guard that runs before the edit is applied).
    pub fn approval_of(&self, call: &ToolCall, strict: bool) -> Approval {
        self.ledger()
            .map_or(Approval::Missing, |ledger| ledger.approval_of(call, strict))
    }

    /// Whether a person can be asked to approve calls to `tool` in this run
    /// (a middleware of this run recorded a [`Restriction::Approval`] gate on it).
    pub fn can_ask_approval(&self, tool: &str) -> bool {
        self.own
            .iter()
            .any(|(_, r)| matches!(r, Restriction::Approval(tools) if tools.contains(tool)))
    }

    /// `Ok` when the restrictions the run inherited let the model be shown
    /// tool `name` (an approval it can ask for counts).
    pub fn exposes_inherited(&self, name: &str, declared: Option<&ToolPolicy>) -> bool {
        let approval = if self.can_ask_approval(name) {
            Approval::Obtainable
        } else {
            Approval::Missing
        };
        self.config
            .inherited
            .check(name, declared, self.workspace(), approval)
            .is_ok()
    }

    /// `Err(reason)` when `call` may not run as it is now: the agent loop's
    /// own check, the last before the tool runs. A call a person approved
    /// must be exactly the call approved (or the person's edit of it); a
    /// tool whose policy requires approval (this run's `tool_policy`) needs
    /// that approval of this exact call; and the restrictions the run
    /// inherited must all admit it.
    pub fn check_call(&self, call: &ToolCall, declared: Option<&ToolPolicy>) -> std::result::Result<(), String> {
        if let Some(ledger) = self.ledger() {
            ledger.check_unchanged(call)?;
        }
        for (by, r) in &self.own {
            if matches!(r, Restriction::Policy(_))
                && RunRestrictions::new()
                    .with(by.clone(), r.clone())
                    .needs_approval(&call.name, declared)
                && self.approval_of(call, true) != Approval::Granted
            {
                return Err(format!(
                    "tool `{}` requires approval and no person approved this exact call (restriction of `{by}`)",
                    call.name
                ));
            }
        }
        if self.config.inherited.is_empty() {
            return Ok(());
        }
        let approval = if self.config.inherited.needs_approval(&call.name, declared) {
            self.approval_of(call, true)
        } else {
            Approval::Missing
        };
        let plan = self
            .config
            .inherited
            .check_call_planned(call, declared, self.workspace(), approval)
            .map_err(|reason| format!("{reason}; it is inherited from the parent run, and a sub-agent can only narrow its parent's restrictions"))?;
        // The plan an inherited shell guard admitted is what the shell tool
        // runs (the child's own stack may hold no such guard).
        if let Some(plan) = plan {
            self.local::<crate::sandbox::AdmittedPlans>()
                .record(&call.id, &call.arguments, plan);
        }
        Ok(())
    }

    /// `Err(reason)` when a guard the run inherited that asks something
    /// outside the process ([`Restriction::AsyncGuard`]: a parent's external
    /// `pre_tool_use` hooks) refuses `call`: the agent loop awaits this after
    /// [`check_call`](Self::check_call), the last thing before a tool runs. A
    /// guard the run also holds itself (a sub-agent sharing its parent's
    /// stack) already judged the call in `before_tool` and is not asked twice.
    pub async fn check_call_async(&self, call: &ToolCall) -> std::result::Result<(), String> {
        if self.config.inherited.is_empty() {
            return Ok(());
        }
        let run = crate::harness::tool::GuardedRun {
            run_id: &self.config.run_id,
            depth: self.config.depth,
            workspace: self.workspace.as_ref(),
            batch: self.batch,
        };
        let own = |r: &Restriction| self.own.iter().any(|(_, mine)| mine == r);
        let mut asked: Vec<usize> = Vec::new();
        for (by, guard) in self.config.inherited.async_guards(own) {
            // a guard inherited through several levels is asked once
            if asked.contains(&guard.key()) {
                continue;
            }
            asked.push(guard.key());
            guard.check_call(call, &run).await.map_err(|reason| {
                format!(
                    "{reason} (restriction of `{by}`, inherited from the parent run: a sub-agent can only narrow \
                     its parent's restrictions)"
                )
            })?;
        }
        Ok(())
    }

    /// This run as a parent, for a tool that starts a child run.
    pub fn as_parent(&self) -> ParentRun {
        ParentRun {
            run_id: self.config.run_id.clone(),
            depth: self.config.depth,
            tags: self.config.tags.clone().into(),
            requested_model: self.config.requested_model.clone(),
            session: self.config.session().cloned(),
            sink: self.sink.clone(),
            workspace: self.workspace.clone(),
            cancellation: self.cancellation.clone(),
            steering: self.steering.as_ref().map(|(h, _)| h.clone()),
            restrictions: Arc::new(self.restrictions()),
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
            self.request_control(c);
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
