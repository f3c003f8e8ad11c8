//! The loop itself: [`Agent::run`].

use std::sync::Arc;

use super::calls::{FailedCall, ModelCall, ToolCallBase, ToolCallEvents};
use super::schedule::{conflict_groups, declared_access};
use super::{Agent, AgentInput, AgentRun, StopReason};
use crate::harness::compression;
use crate::harness::context::{JumpTarget, MiddlewareControl, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::message::{Message, Role};
use crate::harness::middleware::HookKind;
use crate::harness::model::{ModelRequest, ModelRequestFields};
use crate::harness::steering::{SteeringAction, SteeringDecision, SteeringOutcome};
use crate::harness::tool::batch::{AccessFn, PreparedBatch, PreparedCallVerdict, PreparedToolCall};
use crate::harness::tool::{FileAccess, ToolCall, ToolResult};

/// One call of a batch after its `before_tool`, or after the batch review
/// rejected it: what is left to answer it.
enum Prepared {
    /// Run it (with the arguments the hooks left).
    Ready(ToolCall),
    /// A `before_tool` hook refused it, and the tool error policy makes the
    /// refusal its result.
    Refused(ToolCall, TinyAgentsError),
    /// The batch review rejected it with this result.
    Rejected(ToolResult),
    /// A hook of this batch ended it (a jump to the end or the model, a
    /// stop) before this call ran: its "not run" answer, which no hook sees.
    Skipped(ToolResult),
}

impl Prepared {
    fn id_and_name(&self) -> (&str, &str) {
        match self {
            Self::Ready(call) | Self::Refused(call, _) => (&call.id, &call.name),
            Self::Rejected(result) | Self::Skipped(result) => (&result.call_id, &result.name),
        }
    }

    /// This call's "not run" answer, for a batch a hook ended before it ran.
    fn not_run(&self, why: &str) -> ToolResult {
        let (id, name) = self.id_and_name();
        not_run(&ToolCall::new(id, name, serde_json::Value::Null), why)
    }
}

/// Why a pending call was answered "not run", at a safe point or when a tool
/// hook left the batch: a stop with a final text, a jump to the end, a jump
/// back to the model.
const NOT_RUN_STOPPED: &str = "the run stopped before this call ran";
const NOT_RUN_ENDED: &str = "the run ended (a jump to the end) before this call ran";
const NOT_RUN_BACK_TO_MODEL: &str = "a middleware sent the run back to the model before this call ran";

/// The "not run" answer of a call a hook's jump or stop left behind: the
/// same words the safe points answer pending calls with.
fn not_run(call: &ToolCall, why: &str) -> ToolResult {
    ToolResult::error(call, format!("not run: {why}"))
}

/// `ToolCallRefused` for a call answered by `result` without running.
fn refused_event<C>(ctx: &RunContext<C>, result: &ToolResult) {
    ctx.events()
        .emit_with(EventKind::ToolCallRefused, || AgentEvent::ToolCallRefused {
            run_id: ctx.run_id().clone(),
            call_id: result.call_id.clone(),
            tool: result.name.clone(),
            reason: result.content.clone(),
        });
}

/// Whether a hook of the batch at hand asked to leave it: a jump to the end
/// or to the model, or a stop with a final text. The calls it has not
/// reached are then answered "not run" and never run; the jump or stop
/// itself is applied at the safe point after the batch. (An interrupt
/// pauses there, after the batch, as it does from any tool hook.)
fn leaves_batch<C>(ctx: &RunContext<C>) -> Option<&'static str> {
    if matches!(ctx.flow().pending_control(), Some(MiddlewareControl::StopWithFinal(_))) {
        return Some(NOT_RUN_STOPPED);
    }
    match ctx.flow().pending_jump().map(|j| j.target) {
        Some(JumpTarget::End) => Some(NOT_RUN_ENDED),
        Some(JumpTarget::Model) => Some(NOT_RUN_BACK_TO_MODEL),
        _ => None,
    }
}

/// The tool calls waiting at a safe point: a reply's calls, or a reviewed batch.
#[derive(Clone, Copy)]
enum Pending<'a> {
    Calls(&'a [ToolCall]),
    Batch(&'a [PreparedToolCall]),
}

impl<'a> Pending<'a> {
    const NONE: Self = Self::Calls(&[]);

    fn is_empty(self) -> bool {
        match self {
            Self::Calls(calls) => calls.is_empty(),
            Self::Batch(batch) => batch.is_empty(),
        }
    }

    fn iter(self) -> impl Iterator<Item = &'a ToolCall> {
        let (calls, batch) = match self {
            Self::Calls(calls) => (calls, &[][..]),
            Self::Batch(batch) => (&[][..], batch),
        };
        calls.iter().chain(batch.iter().map(|p| &p.call))
    }
}

/// Where a model turn leaves the loop.
pub(crate) enum StepOutcome {
    /// Run these tool calls next.
    Tools(Vec<ToolCall>),
    /// Call the model again (a middleware jumped back to it).
    Model,
    /// The run ends.
    Stop(StopReason),
}

/// Where the loop stands at a safe point: which tool calls are pending there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// After `before_agent`, before the first model turn.
    Start,
    /// After `before_model*`, before the model call.
    BeforeModel,
    /// After `after_model`: the reply's tool calls are pending.
    AfterModel,
    /// After the batch review, before any call of the batch runs.
    AfterReview,
    /// After every call of the batch was answered.
    AfterTools,
}

/// What the loop does after a safe point. Every stop and every jump to the
/// model has already answered the pending tool calls (a "not run" result
/// each, right after their assistant message) when it is returned.
enum Next {
    Continue,
    /// Call the model (the pending calls were answered as skipped).
    Model,
    /// Run these calls: the unanswered calls of the last assistant message
    /// (a jump to `tools` from before the model call).
    Tools(Vec<ToolCall>),
    Stop(StopReason),
}

/// The state key of a step limit steering set (`AdjustLimits`).
pub(crate) const MAX_STEPS_STATE: &str = "max_steps";

/// The calls of the last assistant message that have no result yet, when
/// nothing but their results follows it (so their results can still go
/// right after it).
pub(crate) fn unanswered_calls(messages: &[Message]) -> Vec<ToolCall> {
    let Some(pos) = messages.iter().rposition(|m| m.role != Role::Tool) else {
        return Vec::new();
    };
    let ask = &messages[pos];
    if ask.role != Role::Assistant {
        return Vec::new();
    }
    let answered: Vec<&str> = messages[pos + 1..]
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    ask.tool_calls
        .iter()
        .filter(|c| !answered.contains(&c.id.as_str()))
        .cloned()
        .collect()
}

impl<S, C> Agent<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// Runs the agent from `input` to a final answer.
    ///
    /// Errors: whatever ends the run (a middleware error, a model error no
    /// middleware recovered, the step limit as `LimitExceeded`, an interrupt
    /// as `Interrupted`, a cancellation). `on_error` hooks have seen it, and
    /// `after_agent` hooks have seen the partial run.
    pub async fn run(&self, ctx: &mut RunContext<C>, state: &S, input: impl Into<AgentInput>) -> Result<AgentRun> {
        let mut run = self.begin(ctx, input.into().0);
        let result = self.drive(ctx, state, &mut run).await;
        self.end(ctx, state, run, result).await
    }

    /// Emits `RunStarted` and makes the run record.
    pub(crate) fn begin(&self, ctx: &mut RunContext<C>, messages: Vec<Message>) -> AgentRun {
        // a run's first request is recorded whole, even on a reused context
        ctx.reset_requests();
        ctx.events()
            .emit_with(EventKind::RunStarted, || AgentEvent::RunStarted {
                run_id: ctx.run_id().clone(),
                parent_run_id: ctx.config().parent_run_id.clone(),
                depth: ctx.depth(),
            });
        self.stack.drive(ctx);
        let mut run = AgentRun::new(ctx.run_id().clone());
        run.messages = messages.into();
        run
    }

    /// Runs `after_agent` (also on failure) and emits `RunCompleted`.
    pub(crate) async fn end(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        mut run: AgentRun,
        result: Result<StopReason>,
    ) -> Result<AgentRun> {
        run.usage = *ctx.usage();
        run.counters = *ctx.counters();
        // The run's compressions are on the record `after_agent` sees, and
        // those made during `after_agent` are added after it.
        compression::attach(ctx, &mut run);
        let result = match result {
            Ok(stop) => {
                run.stop = stop;
                let after = self.stack.run_after_agent(ctx, state, &mut run).await;
                compression::attach(ctx, &mut run);
                after.map(|()| run)
            }
            Err(e) => {
                run.stop = StopReason::Failed(e.kind());
                // The run already failed: after_agent sees it, and its own errors are moot.
                let _ = self.stack.run_after_agent(ctx, state, &mut run).await;
                Err(e)
            }
        };
        ctx.events()
            .emit_with(EventKind::RunCompleted, || AgentEvent::RunCompleted {
                run_id: ctx.run_id().clone(),
                error: result.as_ref().err().map(TinyAgentsError::kind),
            });
        result
    }

    async fn drive(&self, ctx: &mut RunContext<C>, state: &S, run: &mut AgentRun) -> Result<StopReason> {
        if let Some(stop) = self.start_step(ctx, state, run).await? {
            return Ok(stop);
        }
        loop {
            match self.model_step(ctx, state, run).await? {
                StepOutcome::Tools(calls) => {
                    if let Some(stop) = self.tools_step(ctx, state, run, calls).await? {
                        return Ok(stop);
                    }
                }
                StepOutcome::Model => {}
                StepOutcome::Stop(stop) => return Ok(stop),
            }
        }
    }

    /// `before_agent` and the first safe point.
    pub(crate) async fn start_step(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        run: &mut AgentRun,
    ) -> Result<Option<StopReason>> {
        self.check_tools()?;
        self.stack.run_before_agent(ctx, state).await?;
        Ok(
            match self
                .safe_point_or_fail(ctx, state, run, Stage::Start, Pending::NONE)
                .await?
            {
                Next::Stop(stop) => Some(stop),
                // (a jump to `tools` from here is kept for the first turn's safe point)
                Next::Continue | Next::Model | Next::Tools(_) => None,
            },
        )
    }

    /// One model turn: steering, limits, `before_model*`, the model onion,
    /// `after_model`, and the safe point after the response.
    pub(crate) async fn model_step(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        run: &mut AgentRun,
    ) -> Result<StepOutcome> {
        self.steer(ctx, state, run).await?;
        if crate::graph::GraphRoute::steered(ctx) {
            // steering sent the run to another graph node: it ends here
            return Ok(StepOutcome::Stop(StopReason::JumpedToEnd));
        }
        if ctx.flow().is_cancelled() {
            let e = TinyAgentsError::cancelled("the run was cancelled");
            return self.fail(ctx, state, e).await.map(StepOutcome::Stop);
        }
        let max_steps = ctx.max_steps_override().unwrap_or(self.max_steps);
        if ctx.counters().steps >= max_steps {
            let e = TinyAgentsError::limit(
                "max_steps",
                format!(
                    "the run reached its step limit of {max_steps} model turns without a final answer; \
                     raise it with `Agent::with_max_steps` or make the agent finish sooner"
                ),
            );
            return self.fail(ctx, state, e).await.map(StepOutcome::Stop);
        }
        ctx.counters_mut().steps += 1;

        let mut request = ModelRequest::from(ModelRequestFields {
            messages: run.messages.clone(),
            system: self.system.clone(),
            tools: self.exposed_tools(ctx),
            model: ctx.requested_model().map(str::to_owned),
            params: self.params.clone(),
            ..ModelRequestFields::default()
        });
        self.stack.run_before_model(ctx, state, &mut request).await?;
        self.stack.run_before_model_stream(ctx, state, &mut request).await?;
        match self
            .safe_point_or_fail(ctx, state, run, Stage::BeforeModel, Pending::NONE)
            .await?
        {
            Next::Stop(stop) => return Ok(StepOutcome::Stop(stop)),
            Next::Tools(calls) => return Ok(StepOutcome::Tools(calls)),
            Next::Continue | Next::Model => {}
        }

        let base = ModelCall { agent: self };
        let mut response = if self.stack.has(HookKind::WrapModel) {
            self.stack.run_wrapped_model(ctx, state, request, &base).await?
        } else {
            // No wrap layer: the call runs in this future (not boxed behind
            // the trait), and its error is shown to `on_error` as the onion's is.
            let res = base.run(ctx, state, request).await;
            self.stack.shown_to_on_error(ctx, state, res).await?
        };
        self.stack.run_after_model(ctx, state, &mut response).await?;
        run.messages.push(response.message.clone());
        run.final_message = Some(response.message.clone());

        let calls = response.message.tool_calls.clone();
        match self
            .safe_point_or_fail(ctx, state, run, Stage::AfterModel, Pending::Calls(&calls))
            .await?
        {
            Next::Stop(stop) => Ok(StepOutcome::Stop(stop)),
            Next::Model => Ok(StepOutcome::Model),
            Next::Continue if calls.is_empty() => Ok(StepOutcome::Stop(StopReason::Finished)),
            Next::Continue => Ok(StepOutcome::Tools(calls)),
            Next::Tools(more) => Ok(StepOutcome::Tools(more)),
        }
    }

    /// One tool batch: each call under its tool's name (an alias resolved),
    /// the batch review, every `before_tool`, the review of the prepared
    /// calls, the scheduled run answering every call, and the safe point after it.
    pub(crate) async fn tools_step(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        run: &mut AgentRun,
        mut calls: Vec<ToolCall>,
    ) -> Result<Option<StopReason>> {
        ctx.next_batch();
        self.canonical_names(&mut calls);
        let batch = self.review_batch(ctx, state, calls).await?;
        // A safe point between the review and the calls: a review that asks for a
        // person (an interrupt), ends the run or jumps back to the model stops
        // here, before any call runs (each call is answered as not run).
        match self
            .safe_point_or_fail(ctx, state, run, Stage::AfterReview, Pending::Batch(&batch))
            .await?
        {
            Next::Stop(stop) => return Ok(Some(stop)),
            Next::Model => return Ok(None),
            Next::Continue | Next::Tools(_) => {}
        }
        let results = self.run_batch(ctx, state, batch).await;
        // A person's approval is good for the batch it was given in, and no
        // longer: a later call that reuses the id needs its own.
        ctx.spend_approvals();
        let results = match results {
            Ok(results) => results,
            Err((done, e)) => {
                // A pause in the middle of the batch (a sub-agent paused, a
                // tool answered `Interrupted`) keeps the results of the calls
                // that finished: a resume answers only the others and never
                // runs a finished call again. (When a middleware holds the
                // pause, its interrupt keeps them instead.)
                if matches!(e, TinyAgentsError::Interrupted { .. }) && !ctx.locals().interrupts().pause_pending() {
                    run.messages
                        .extend(done.into_iter().map(|r| Message::tool(r.call_id, r.name, r.content)));
                }
                return Err(e);
            }
        };
        run.messages
            .extend(results.into_iter().map(|r| Message::tool(r.call_id, r.name, r.content)));
        Ok(
            match self
                .safe_point_or_fail(ctx, state, run, Stage::AfterTools, Pending::NONE)
                .await?
            {
                Next::Stop(stop) => Some(stop),
                Next::Continue | Next::Model | Next::Tools(_) => None,
            },
        )
    }

    /// Decides and applies the steering commands waiting for this run (a safe point).
    async fn steer(&self, ctx: &mut RunContext<C>, state: &S, run: &mut AgentRun) -> Result<()> {
        let Some((handle, root)) = ctx.steering().cloned() else {
            return Ok(());
        };
        let commands = handle.take_for(ctx.run_id(), root);
        if commands.is_empty() {
            return Ok(());
        }
        let mut deferred = Vec::new();
        let mut stop = None;
        for mut command in commands {
            if stop.is_some() {
                // The run pauses or ends here: later commands wait, in order.
                deferred.push(command);
                continue;
            }
            let original = command.action.clone();
            self.stack.run_before_steering(ctx, state, &mut command).await?;
            let transformed = command.action != original;
            ctx.events().emit_with(EventKind::Steering, || AgentEvent::Steering {
                run_id: ctx.run_id().clone(),
                command_id: command.id.clone(),
                action: command.action.kind(),
                decision: command.decision.kind(),
                transformed,
            });
            let applied = match &command.decision {
                SteeringDecision::Accept => {
                    if let Err(e) = self.apply_steering(ctx, run, &command.action) {
                        stop = Some(e);
                    }
                    true
                }
                SteeringDecision::Reject { .. } => false,
                SteeringDecision::Defer => {
                    let mut again = command.clone();
                    again.decision = SteeringDecision::Accept;
                    deferred.push(again);
                    false
                }
            };
            let mut outcome = SteeringOutcome {
                command,
                transformed,
                applied,
            };
            self.stack.run_after_steering(ctx, state, &mut outcome).await?;
        }
        if !deferred.is_empty() {
            handle.requeue_front(deferred, ctx.run_id(), root);
        }
        match stop {
            Some(e) => self.fail(ctx, state, e).await.map(|_| ()),
            None => Ok(()),
        }
    }

    /// Applies one accepted steering action.
    fn apply_steering(&self, ctx: &mut RunContext<C>, run: &mut AgentRun, action: &SteeringAction) -> Result<()> {
        match action {
            SteeringAction::InjectMessage { message } => run.messages.push(message.clone()),
            SteeringAction::Redirect { goal } => {
                run.messages
                    .push(Message::user(format!("[steering] The goal has changed: {goal}")));
            }
            SteeringAction::Pause { reason } => {
                return Err(TinyAgentsError::interrupted(
                    Some("steering".to_owned()),
                    reason.clone(),
                ));
            }
            SteeringAction::Resume => {}
            SteeringAction::Cancel { reason } => {
                ctx.flow().cancellation().cancel();
                return Err(TinyAgentsError::cancelled(reason.clone()));
            }
            SteeringAction::SwitchMode { mode } => ctx
                .flow_mut()
                .update_state("mode", serde_json::Value::from(mode.as_str())),
            SteeringAction::AdjustLimits { max_steps } => {
                ctx.set_max_steps(*max_steps);
                // kept in the run's state, so a checkpoint carries it to a resumed run
                ctx.flow_mut()
                    .update_state(MAX_STEPS_STATE, serde_json::json!(max_steps));
            }
            SteeringAction::Goto { node } => crate::graph::GraphRoute::steer(ctx, node)?,
        }
        Ok(())
    }

    /// Reports an error the loop itself raised to every `on_error`, then returns it.
    async fn fail(&self, ctx: &mut RunContext<C>, state: &S, error: TinyAgentsError) -> Result<StopReason> {
        self.stack.run_on_error(ctx, state, &error).await;
        Err(error)
    }

    /// Every tool call of a reply gets one result, even when it never runs.
    fn answer_skipped(&self, run: &mut AgentRun, calls: Pending<'_>, why: &str) {
        for call in calls.iter() {
            let answer = not_run(call, why);
            run.messages
                .push(Message::tool(answer.call_id, answer.name, answer.content));
        }
    }

    /// [`safe_point`](Self::safe_point), with an error it raises shown to every `on_error`.
    async fn safe_point_or_fail(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        run: &mut AgentRun,
        stage: Stage,
        pending: Pending<'_>,
    ) -> Result<Next> {
        match self.safe_point(ctx, run, stage, pending) {
            Ok(next) => Ok(next),
            Err(e) => self.fail(ctx, state, e).await.map(Next::Stop),
        }
    }

    /// Drains control requests and jumps at a safe point.
    ///
    /// `pending` are the calls of the batch at hand (the reply's calls after
    /// the model, the reviewed batch after the review). Where there is no
    /// batch at hand (before the model call), the pending calls are the
    /// unanswered calls of the last assistant message. A stop or a jump to the
    /// model answers each pending call with a "not run" result right after its
    /// assistant message, before a final message is added, so the transcript
    /// stays one providers accept. An interrupt leaves them unanswered: the
    /// paused run resumes them.
    fn safe_point(
        &self,
        ctx: &mut RunContext<C>,
        run: &mut AgentRun,
        stage: Stage,
        pending: Pending<'_>,
    ) -> Result<Next> {
        let control = ctx.take_control();
        if control.is_none() && ctx.flow().pending_jump().is_none() {
            return Ok(Next::Continue);
        }
        let unanswered;
        let pending = match stage {
            Stage::AfterModel | Stage::AfterReview => pending,
            Stage::Start | Stage::BeforeModel | Stage::AfterTools => {
                unanswered = unanswered_calls(&run.messages);
                Pending::Calls(&unanswered)
            }
        };
        if let Some(control) = control {
            ctx.take_jump();
            let kind = control.kind();
            return match control {
                MiddlewareControl::StopWithFinal(text) => {
                    ctx.events()
                        .emit_with(EventKind::ControlApplied, || AgentEvent::ControlApplied {
                            control: kind,
                            detail: "the run stopped with the final text a middleware gave".to_owned(),
                        });
                    self.answer_skipped(run, pending, NOT_RUN_STOPPED);
                    let message = Message::assistant(text);
                    run.messages.push(message.clone());
                    run.final_message = Some(message);
                    Ok(Next::Stop(StopReason::StoppedByMiddleware))
                }
                MiddlewareControl::Interrupt { node, message } => {
                    ctx.events()
                        .emit_with(EventKind::ControlApplied, || AgentEvent::ControlApplied {
                            control: kind,
                            detail: format!("the run paused: {message}"),
                        });
                    Err(TinyAgentsError::interrupted(node, message))
                }
            };
        }
        if stage == Stage::Start && ctx.flow().pending_jump().is_some_and(|j| j.target == JumpTarget::Tools) {
            // Kept for the first turn's safe point, after `before_model`: the
            // pending calls of the input run there, before any model call.
            return Ok(Next::Continue);
        }
        let Some(jump) = ctx.take_jump() else {
            return Ok(Next::Continue);
        };
        let by = jump.by.as_deref().unwrap_or("a middleware");
        let (label, next) = match jump.target {
            JumpTarget::End => {
                self.answer_skipped(run, pending, NOT_RUN_ENDED);
                ("jump_to_end", Next::Stop(StopReason::JumpedToEnd))
            }
            JumpTarget::Model => {
                self.answer_skipped(run, pending, NOT_RUN_BACK_TO_MODEL);
                ("jump_to_model", Next::Model)
            }
            JumpTarget::Tools if !pending.is_empty() => match stage {
                Stage::AfterModel | Stage::AfterReview => ("jump_to_tools", Next::Continue),
                _ => ("jump_to_tools", Next::Tools(pending.iter().cloned().collect())),
            },
            JumpTarget::Tools => {
                return Err(TinyAgentsError::validation(format!(
                    "middleware `{by}` jumped to `tools` {}, but the last assistant message has no \
                     unanswered tool calls to run; jump to `tools` only when a reply asked for tools \
                     (or jump to `model` or `end`)",
                    match stage {
                        Stage::Start => "from `before_agent`",
                        Stage::BeforeModel => "before the model call",
                        Stage::AfterModel => "after a reply without tool calls",
                        Stage::AfterReview => "from the batch review",
                        Stage::AfterTools => "after every call of the batch was answered",
                    }
                )));
            }
        };
        ctx.events()
            .emit_with(EventKind::ControlApplied, || AgentEvent::ControlApplied {
                control: label,
                detail: format!("requested by `{by}`"),
            });
        Ok(next)
    }

    /// Renames each call made under an alias of a tool's name
    /// ([`ToolRegistry::alias`](crate::harness::tool::ToolRegistry::alias))
    /// to the tool's name, before any hook sees it: policies, guards, the
    /// reviews and the scheduler judge it as the tool it is. (The model's
    /// reply in the transcript keeps the name the model wrote.) A name the
    /// registry does not know is left as it is: the call fails as a call to
    /// an unknown tool does.
    fn canonical_names(&self, calls: &mut [ToolCall]) {
        for call in calls {
            if let Some(name) = self.tools.canonical(&call.name)
                && name != call.name
            {
                call.name = name.to_owned();
            }
        }
    }

    /// The declared file access of a call, from its effective arguments.
    fn access_fn(&self) -> AccessFn {
        let tools = self.tools.clone();
        Arc::new(move |call: &ToolCall| declared_access(&tools, call))
    }

    /// Runs the batch review (`on_tool_batch`) over the calls as the model
    /// made them, before any `before_tool`.
    ///
    /// A review that rewrites a call's arguments with
    /// [`PreparedBatch::set_arguments`] gets its file access recomputed, so
    /// the reviews after it see the arguments the call goes on with.
    async fn review_batch(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        calls: Vec<ToolCall>,
    ) -> Result<Vec<PreparedToolCall>> {
        if !self.stack.has(HookKind::OnToolBatch) {
            return Ok(calls
                .into_iter()
                .map(|c| PreparedToolCall::new(c, Vec::new()))
                .collect());
        }
        let mut batch = PreparedBatch::with_access(calls, self.access_fn());
        let tag = batch.tag();
        self.stack.run_on_tool_batch(ctx, state, &mut batch).await?;
        if batch.tag() != tag {
            return Err(self.replaced_batch(HookKind::OnToolBatch));
        }
        Ok(batch.into_calls())
    }

    /// The run's error for a hook that broke a rule of the loop: `rule` (what
    /// happened, why the run stops, the fix), then the middleware that
    /// implement `hook`, named as the error's source.
    fn hook_misuse(&self, hook: HookKind, rule: std::fmt::Arguments<'_>) -> TinyAgentsError {
        let who = self.stack.implementors(hook);
        TinyAgentsError::middleware(
            who.join(", "),
            format!(
                "{rule} `{hook}` is implemented by: {}",
                crate::config::suggest::list(who.iter().copied())
            ),
        )
    }

    /// The error when a review of a tool batch hands back another batch than
    /// the one it was given (`*batch = PreparedBatch::new(…)`): its calls
    /// would not be the model's, each answered once, so the run stops.
    fn replaced_batch(&self, hook: HookKind) -> TinyAgentsError {
        self.hook_misuse(
            hook,
            format_args!(
                "a review of the tool batch (`{hook}`) replaced the batch it was given with another: the calls of \
                 the model's reply each get exactly one result, so a review may only reject calls or rewrite \
                 their arguments on the batch it was given (`reject`, `reject_with`, `set_arguments`); the run \
                 stops here."
            ),
        )
    }

    /// `before_tool` for every call the batch review let through, in the
    /// model's order, before any call runs. A hook's jump or stop answers the
    /// calls after it "not run"; a `before_tool` that fails the run stops the
    /// preparing there (the calls before it still run, none after it is
    /// prepared), and the error comes back beside the prepared calls.
    async fn prepare_batch(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        batch: Vec<PreparedToolCall>,
    ) -> (Vec<Prepared>, Option<TinyAgentsError>) {
        let mut prepared = Vec::with_capacity(batch.len());
        let mut cut = None;
        for p in batch {
            if let Some(why) = cut {
                // nothing of this call ran: answered, never scheduled
                prepared.push(Prepared::Skipped(not_run(&p.call, why)));
                continue;
            }
            match p.into_parts() {
                (call, PreparedCallVerdict::Proceed) => {
                    let step = match self.prepare_one(ctx, state, call).await {
                        Ok(step) => step,
                        Err(e) => return (prepared, Some(e)),
                    };
                    cut = leaves_batch(ctx);
                    prepared.push(match cut {
                        Some(why) => Prepared::Skipped(step.not_run(why)),
                        None => step,
                    });
                }
                (_, PreparedCallVerdict::Reject(result)) => prepared.push(Prepared::Rejected(result)),
            }
        }
        (prepared, None)
    }

    /// The review of the prepared calls (`on_prepared_tool_calls`): the
    /// calls ready to run, with their final effective arguments (after every
    /// `before_tool`) and the file access declared for them. Returns each
    /// call's declared access as the review saw it — what the scheduler then
    /// plans from (none for a call that does not run) — or `None` when no
    /// review ran (the scheduler declares it from the same arguments). A review that rejects
    /// a call answers it with its result; one that asks to leave the batch
    /// (a jump, a stop) answers every ready call "not run". (A `before_tool`
    /// that asked it already answered the calls after it; the calls before
    /// it still run.)
    async fn review_prepared(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        prepared: &mut [Prepared],
    ) -> Result<Option<Vec<Vec<FileAccess>>>> {
        if !self.stack.has(HookKind::OnPreparedToolCalls) || !prepared.iter().any(|p| matches!(p, Prepared::Ready(_))) {
            return Ok(None);
        }
        let mut access: Vec<Vec<FileAccess>> = vec![Vec::new(); prepared.len()];
        let ready: Vec<usize> = (0..prepared.len())
            .filter(|&i| matches!(prepared[i], Prepared::Ready(_)))
            .collect();
        // the calls move into the review and back (an empty placeholder meanwhile: no copy)
        let calls: Vec<ToolCall> = ready
            .iter()
            .map(|&i| {
                match std::mem::replace(
                    &mut prepared[i],
                    Prepared::Ready(ToolCall::new("", "", serde_json::Value::Null)),
                ) {
                    Prepared::Ready(call) => call,
                    _ => unreachable!("only ready calls are reviewed"),
                }
            })
            .collect();
        let mut batch = PreparedBatch::with_access(calls, self.access_fn());
        let asked_before = leaves_batch(ctx).is_some();
        let tag = batch.tag();
        self.stack.run_on_prepared_tool_calls(ctx, state, &mut batch).await?;
        if batch.tag() != tag {
            return Err(self.replaced_batch(HookKind::OnPreparedToolCalls));
        }
        if batch.rewritten() {
            // after every `before_tool`, a rewrite would run unjudged by the guards
            return Err(self.hook_misuse(
                HookKind::OnPreparedToolCalls,
                format_args!(
                    "a review of the prepared tool calls rewrote a call's arguments (`PreparedBatch::set_arguments`), \
                     after every `before_tool` hook had judged them: the rewrite would run unjudged, so the run \
                     stops here; rewrite in `on_tool_batch` or `before_tool`, or reject the call."
                ),
            ));
        }
        let leave = if asked_before { None } else { leaves_batch(ctx) };
        for (&i, mut p) in ready.iter().zip(batch.into_calls()) {
            let declared = std::mem::take(&mut p.access);
            prepared[i] = match (p.into_parts(), leave) {
                ((call, _), Some(why)) => Prepared::Skipped(not_run(&call, why)),
                ((call, PreparedCallVerdict::Proceed), None) => {
                    access[i] = declared;
                    Prepared::Ready(call)
                }
                ((_, PreparedCallVerdict::Reject(result)), None) => Prepared::Rejected(result),
            };
        }
        Ok(Some(access))
    }

    /// Runs one reviewed batch; results keep the model's order, one per call.
    ///
    /// Every call's `before_tool` runs first, in the model's order (its
    /// rewrites — an external hook's updated input, a person's edit — are
    /// the arguments the call runs with); then the prepared calls are
    /// reviewed once (`on_prepared_tool_calls`) with the file access declared
    /// for those effective arguments, and that same access decides the
    /// schedule: calls that touch a common file (a write and any other
    /// access) run one after another in the model's order; independent
    /// groups run concurrently (with [`Agent::with_concurrent_tools`]).
    ///
    /// On failure, the results of the calls that had finished come back with
    /// the error (in the model's order): a pause keeps them.
    async fn run_batch(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        batch: Vec<PreparedToolCall>,
    ) -> std::result::Result<Vec<ToolResult>, (Vec<ToolResult>, TinyAgentsError)> {
        let (mut prepared, failed) = self.prepare_batch(ctx, state, batch).await;
        let access = match self.review_prepared(ctx, state, &mut prepared).await {
            Ok(access) => access,
            // the run ends here, before any call of the batch ran
            Err(e) => return Err((Vec::new(), e)),
        };
        let ready = prepared.iter().filter(|p| matches!(p, Prepared::Ready(_))).count();
        // a jump or stop asked while preparing already answered the calls
        // after it; the calls prepared before it run
        let asked_before = leaves_batch(ctx).is_some();
        let fork = match self.fork {
            Some(fork) if ready > 1 => fork,
            _ => {
                let mut results = Vec::with_capacity(prepared.len());
                let mut cut = None;
                for step in prepared {
                    if let Some(why) = cut {
                        results.push(step.not_run(why));
                        continue;
                    }
                    match self.finish_one(ctx, state, step).await {
                        Ok(result) => results.push(result),
                        Err(e) => return Err((results, e)),
                    }
                    // a wrap or `after_tool` that asks to leave: the calls after it do not run
                    if !asked_before {
                        cut = leaves_batch(ctx);
                    }
                }
                return match failed {
                    Some(e) => Err((results, e)),
                    None => Ok(results),
                };
            }
        };
        let access = access.unwrap_or_else(|| {
            prepared
                .iter()
                .map(|p| match p {
                    Prepared::Ready(call) => declared_access(&self.tools, call),
                    _ => Vec::new(),
                })
                .collect()
        });
        let groups = conflict_groups(&access);
        let mut slots: Vec<Option<Prepared>> = prepared.into_iter().map(Some).collect();
        let futures = groups.into_iter().map(|group| {
            let mut branch = ctx.fork(fork(ctx.context()));
            let calls: Vec<(usize, Prepared)> = group
                .into_iter()
                .map(|i| (i, slots[i].take().expect("each call is in one group")))
                .collect();
            async move {
                let mut out = Vec::with_capacity(calls.len());
                for (i, step) in calls {
                    let r = self.finish_one(&mut branch, state, step).await;
                    let failed = r.is_err();
                    out.push((i, r));
                    if failed {
                        break;
                    }
                }
                (branch, out)
            }
        });
        let outputs = futures::future::join_all(futures).await;
        let mut results: Vec<Option<ToolResult>> = vec![None; slots.len()];
        let mut first_err: Option<(usize, TinyAgentsError)> = None;
        for (branch, out) in outputs {
            ctx.merge(branch);
            for (i, r) in out {
                match r {
                    Ok(res) => results[i] = Some(res),
                    Err(e) if first_err.as_ref().is_none_or(|(j, _)| i < *j) => first_err = Some((i, e)),
                    Err(_) => {}
                }
            }
        }
        // A call that failed comes before the call whose `before_tool` failed.
        if let Some(e) = first_err.map(|(_, e)| e).or(failed) {
            return Err((results.into_iter().flatten().collect(), e));
        }
        Ok(results
            .into_iter()
            .map(|r| r.expect("every call of a finished batch has its result"))
            .collect())
    }

    /// A call's `before_tool`: ready to run (with the arguments the hooks
    /// left), refused (a hook refused it and the tool error policy makes that
    /// its result), or `Err` when the refusal ends the run.
    async fn prepare_one(&self, ctx: &mut RunContext<C>, state: &S, mut call: ToolCall) -> Result<Prepared> {
        if !self.stack.has(HookKind::BeforeTool) {
            // No hook to run, none to change the id: no copy of it to compare.
            return Ok(Prepared::Ready(call));
        }
        let id = call.id.clone();
        let outcome = self.stack.run_before_tool(ctx, state, &mut call).await;
        self.answers_its_call(&id, &call.id, HookKind::BeforeTool)?;
        match outcome {
            Ok(()) => Ok(Prepared::Ready(call)),
            Err(e) if self.tool_errors.to_result(&e) && !e.is_control_flow() => Ok(Prepared::Refused(call, e)),
            Err(e) => Err(e),
        }
    }

    /// Every call is answered by exactly one result carrying its own id: a
    /// hook that changed the id would leave the call unanswered (a transcript
    /// providers reject) and answer one that was never made, so the run fails
    /// here, naming the hook's implementors.
    fn answers_its_call(&self, id: &str, now: &str, hook: HookKind) -> Result<()> {
        if id == now {
            return Ok(());
        }
        Err(self.hook_misuse(
            hook,
            format_args!(
                "tool call `{id}` came back from `{hook}` with the call id `{now}`: a call's id is the model's, and \
                 its result must carry it (every call is answered by exactly one result); leave `call_id`/`id` as \
                 they are (a cached answer copies the content, not the id)."
            ),
        ))
    }

    /// Answers one prepared call: the wrap-tool onion (when ready), then `after_tool`.
    ///
    /// `ToolCallStarted` and `ToolCallCompleted` are paired by one guard for
    /// every call that runs: the completed event is emitted exactly once, also
    /// when the run ends on this call's error or the call's future is dropped.
    /// A call refused by `before_tool` or rejected by the batch review never
    /// starts: it emits `ToolCallRefused` alone.
    async fn finish_one(&self, ctx: &mut RunContext<C>, state: &S, prepared: Prepared) -> Result<ToolResult> {
        if let Prepared::Skipped(result) = prepared {
            // answered as a safe point answers a pending call: no run, no hook, no event
            return Ok(result);
        }
        let (mut result, events) = match prepared {
            Prepared::Rejected(result) => {
                refused_event(ctx, &result);
                (result, None)
            }
            Prepared::Skipped(_) => unreachable!("a skipped call returned above"),
            Prepared::Refused(call, e) => {
                let result = ToolResult::error(&call, e.to_string());
                refused_event(ctx, &result);
                (result, None)
            }
            Prepared::Ready(call) => {
                let events = ToolCallEvents::open(ctx, &call.id, &call.name, &call.arguments);
                ctx.counters_mut().tool_calls += 1;
                let base = ToolCallBase { agent: self };
                let answered = if self.stack.has(HookKind::WrapTool) {
                    let (id, name) = (call.id.clone(), call.name.clone());
                    match self.stack.run_wrapped_tool(ctx, state, call, &base).await {
                        Ok(r) => {
                            self.answers_its_call(&id, &r.call_id, HookKind::WrapTool)?;
                            Ok(r)
                        }
                        Err(error) => Err(FailedCall { id, name, error }),
                    }
                } else {
                    // No wrap layer: the call runs in this future (not boxed
                    // behind the trait) and answers itself; its error is
                    // shown to `on_error` as the onion's is.
                    let answered = base.run(ctx, state, call).await;
                    if let Err(failed) = &answered {
                        self.stack.run_on_error(ctx, state, &failed.error).await;
                    }
                    answered
                };
                let result = match answered {
                    Ok(r) => r,
                    Err(failed) if self.tool_errors.to_result(&failed.error) => failed.into_result(),
                    // The run ends with this error; the guard still ends the call's events.
                    Err(failed) => return Err(failed.error),
                };
                (result, Some(events))
            }
        };
        if self.stack.has(HookKind::AfterTool) {
            // no hook, no change of the id: no copy of it to compare
            let id = result.call_id.clone();
            self.stack.run_after_tool(ctx, state, &mut result).await?;
            self.answers_its_call(&id, &result.call_id, HookKind::AfterTool)?;
        }
        if let Some(events) = events {
            events.close(&result);
        }
        Ok(result)
    }
}
