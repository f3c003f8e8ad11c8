//! [`AgentGraph`]: the agent loop run as a state graph of a `model` node and
//! a `tools` node, with the same middleware, steps and events as
//! [`Agent::run`], and the conversation in the graph state so a checkpoint
//! can resume it in another process.

use async_trait::async_trait;
use serde_json::{json, Value};

use super::builder::{StateGraph, END};
use super::checkpoint::Checkpointer;
use super::command::{interrupt_command, to_command, BoundaryAction, Command, HarnessOutcome, MODEL_NODE, TOOLS_NODE};
use super::node::Node;
use super::run::{CompiledGraph, GraphOutcome, GraphRun};
use super::state::{update, GraphState, Reducer};
use crate::harness::agent::{unanswered_calls, Agent, AgentInput, AgentRun, StepOutcome, StopReason, MAX_STEPS_STATE};
use crate::harness::context::{JumpTarget, MiddlewareControl, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::interrupt::Resume;
use crate::harness::message::{Message, Role};
use crate::harness::model::Usage;
use crate::harness::tool::ToolCall;

const MESSAGES: &str = "messages";
const PENDING: &str = "pending_calls";
const STOP: &str = "stop";
const COUNTERS: &str = "counters";
const USAGE: &str = "usage";
/// The refusal of a resume whose token `id` (a decision's request id, for
/// `human_in_the_loop`) was already used (a replay, or the loser of two
/// resumes racing): a `Conflict`.
fn already_used(owner: &str, id: &str, thread_id: &str) -> TinyAgentsError {
    TinyAgentsError::conflict(format!(
        "the answer to `{owner}`'s pause with token `{id}` (for a person's decision: its request id) was already \
         used on thread `{thread_id}`: an answer resumes its pause at most once; a replayed or concurrent resume is \
         refused and nothing ran: reload the thread's latest checkpoint to see what the other resume did"
    ))
}

/// The state keys the graph keeps itself: no middleware may write them.
const GRAPH_KEYS: [&str; 5] = [MESSAGES, PENDING, STOP, COUNTERS, USAGE];

/// Refuses an explicit state update of a key the graph keeps itself (it would
/// rewrite the conversation, the pending calls, the counters a limit reads…).
fn not_graph_key(key: &str) -> Result<()> {
    if GRAPH_KEYS.contains(&key) {
        return Err(TinyAgentsError::validation(format!(
            "a middleware wrote the state key `{key}`, which the agent graph keeps itself ({}): the checkpoint \
             would carry the middleware's value in its place; use another key",
            GRAPH_KEYS
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    Ok(())
}

/// What the `model` and `tools` nodes work on.
struct Turn<'r, S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    agent: &'r Agent<S, C>,
    ctx: &'r mut RunContext<C>,
    state: &'r S,
    run: AgentRun,
    /// How many of the context's explicit state updates are already in the graph state.
    updates_seen: usize,
}

fn stop_label(stop: &StopReason) -> &'static str {
    match stop {
        StopReason::StoppedByMiddleware => "stopped_by_middleware",
        StopReason::JumpedToEnd => "jumped_to_end",
        _ => "finished",
    }
}

/// The graph command for how a step ended, through the boundary adapter
/// ([`to_command`]): a jump to the model is `Goto("model")`, a jump to the
/// end or a stop with a final answer is `End`; pending tool calls and a
/// natural finish follow the edges (the router reads the state).
fn boundary_command(outcome: &StepOutcome) -> Command {
    let harness = match outcome {
        StepOutcome::Tools(_) => HarnessOutcome::Continue,
        StepOutcome::Model => HarnessOutcome::Jump(JumpTarget::Model),
        StepOutcome::Stop(StopReason::JumpedToEnd) => HarnessOutcome::Jump(JumpTarget::End),
        StepOutcome::Stop(StopReason::StoppedByMiddleware) => {
            HarnessOutcome::Control(MiddlewareControl::StopWithFinal(String::new()))
        }
        StepOutcome::Stop(_) => HarnessOutcome::Continue,
    };
    match to_command(harness) {
        BoundaryAction::Command(command) => command,
        // Retries, fallbacks and child deliveries never reach here: they are handled in the node.
        _ => Command::Continue,
    }
}

/// Same for the end of a tool batch: a stop ends the graph, anything else
/// goes back to the model along the edges.
fn tools_command(stop: Option<&StopReason>) -> Command {
    match stop {
        Some(stop) => boundary_command(&StepOutcome::Stop(stop.clone())),
        None => Command::Continue,
    }
}

fn stop_from_label(label: &str) -> StopReason {
    match label {
        "stopped_by_middleware" => StopReason::StoppedByMiddleware,
        "jumped_to_end" => StopReason::JumpedToEnd,
        _ => StopReason::Finished,
    }
}

impl<S, C> Turn<'_, S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// The graph update for what this node added: new messages, counters, usage.
    /// Explicit state updates middleware made (`FlowMut::update_state`)
    /// become graph state too, so checkpoints carry them and a replay explains them.
    fn progress(&mut self, from: usize) -> Result<super::state::Update> {
        let new: Vec<&Message> = self.run.messages[from..].iter().collect();
        let counters = self.ctx.counters();
        let explicit: Vec<(String, Value)> = self.ctx.flow().state_updates()[self.updates_seen..]
            .iter()
            .map(|u| not_graph_key(&u.key).map(|()| (u.key.clone(), u.value.clone())))
            .collect::<Result<_>>()?;
        self.updates_seen += explicit.len();
        let mut u = update(explicit);
        u.extend(update([
            (MESSAGES, serde_json::to_value(new).map_err(ser)?),
            (
                COUNTERS,
                json!({"steps": counters.steps, "model_calls": counters.model_calls, "tool_calls": counters.tool_calls}),
            ),
            (USAGE, serde_json::to_value(self.ctx.usage()).map_err(ser)?),
        ]));
        Ok(u)
    }
}

impl<S, C> Turn<'_, S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// A step that failed with `e` after adding messages (results of calls
    /// that ran, a reply, accepted steering injections). An interrupt keeps
    /// them: the graph merges them into the state before it records the
    /// pause, so a resume neither runs those calls again nor loses what was
    /// said. The state also says what comes next: the calls of the last reply
    /// still unanswered wait for the `tools` node, and a reply without calls
    /// is the final answer. Any other error fails the step as it stands.
    fn paused_with_progress(&mut self, from: usize, e: TinyAgentsError) -> Result<Command> {
        let TinyAgentsError::Interrupted { node, message } = e else {
            return Err(e);
        };
        if self.run.messages.len() == from {
            return Err(TinyAgentsError::Interrupted { node, message });
        }
        let mut u = self.progress(from)?;
        let pending = unanswered_calls(&self.run.messages);
        let last = self.run.messages.last();
        if pending.is_empty() && last.is_some_and(|m| m.role == Role::Assistant && m.tool_calls.is_empty()) {
            u.insert(STOP.into(), Value::from(stop_label(&StopReason::Finished)));
        }
        u.insert(PENDING.into(), serde_json::to_value(pending).map_err(ser)?);
        let pause = interrupt_command(node, message);
        Ok(Command::update_then(u, pause))
    }
}

fn ser(e: serde_json::Error) -> TinyAgentsError {
    TinyAgentsError::validation(format!("the agent graph state cannot be serialised: {e}"))
}

struct ModelNode;
struct ToolsNode;

#[async_trait]
impl<'r, S, C> Node<Turn<'r, S, C>> for ModelNode
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    async fn run(&self, turn: &mut Turn<'r, S, C>, state: &GraphState) -> Result<Command> {
        // Resumed after a pause this node recorded with its progress: the
        // reply it paused on is in the state, and says what comes next.
        if state.get(STOP).is_some_and(|v| !v.is_null()) {
            // the final reply it paused on is the run's answer
            turn.run.final_message = turn
                .run
                .messages
                .iter()
                .rev()
                .find(|m| m.role == Role::Assistant)
                .cloned();
            return Ok(Command::End);
        }
        if state
            .get(PENDING)
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        {
            return Ok(Command::Continue);
        }
        let from = turn.run.messages.len();
        let outcome = match turn.agent.model_step(turn.ctx, turn.state, &mut turn.run).await {
            Ok(outcome) => outcome,
            Err(e) => return turn.paused_with_progress(from, e),
        };
        let mut u = turn.progress(from)?;
        let command = boundary_command(&outcome);
        match outcome {
            StepOutcome::Tools(calls) => {
                u.insert(PENDING.into(), serde_json::to_value(calls).map_err(ser)?);
            }
            StepOutcome::Model => {
                u.insert(PENDING.into(), json!([]));
            }
            StepOutcome::Stop(stop) => {
                u.insert(PENDING.into(), json!([]));
                u.insert(STOP.into(), Value::from(stop_label(&stop)));
            }
        }
        Ok(Command::update_then(u, command))
    }
}

#[async_trait]
impl<'r, S, C> Node<Turn<'r, S, C>> for ToolsNode
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    async fn run(&self, turn: &mut Turn<'r, S, C>, state: &GraphState) -> Result<Command> {
        let calls: Vec<ToolCall> = state.get_as(PENDING)?.unwrap_or_default();
        if calls.is_empty() {
            // resumed after a pause that followed a finished batch: nothing waits here
            return Ok(Command::Continue);
        }
        let from = turn.run.messages.len();
        let stop = match turn.agent.tools_step(turn.ctx, turn.state, &mut turn.run, calls).await {
            Ok(stop) => stop,
            Err(e) => return turn.paused_with_progress(from, e),
        };
        let mut u = turn.progress(from)?;
        u.insert(PENDING.into(), json!([]));
        let command = tools_command(stop.as_ref());
        if let Some(stop) = stop {
            u.insert(STOP.into(), Value::from(stop_label(&stop)));
        }
        Ok(Command::update_then(u, command))
    }
}

/// Runs an [`Agent`] as a graph: a `model` node (one model turn) and a
/// `tools` node (one tool batch), routed by the graph state. The middleware
/// sees exactly what it sees under [`Agent::run`] — the same hooks, in the
/// same order, with the same events — and the conversation, counters and
/// usage live in the graph state, so a durable run can be resumed from its
/// checkpoint by a new process.
///
/// ```
/// use tinyagents::graph::{AgentGraph, MemoryCheckpointer};
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let agent: Agent<()> = Agent::new(ScriptedModel::new([ScriptedTurn::text("hi")]));
/// let store = MemoryCheckpointer::new();
/// let mut ctx = RunContext::new(RunConfig::new("r1"), ());
/// let run = AgentGraph::new(&agent).run_durable(&mut ctx, &(), "hello", "thread-1", &store).await?;
/// assert_eq!(run.final_text(), "hi");
/// assert!(store.history("thread-1").len() >= 2);
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
pub struct AgentGraph<'a, S, C = ()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    agent: &'a Agent<S, C>,
    on_request: bool,
}

impl<'a, S, C> AgentGraph<'a, S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// The graph form of `agent`.
    pub fn new(agent: &'a Agent<S, C>) -> Self {
        Self {
            agent,
            on_request: false,
        }
    }

    /// The same graph persisting checkpoints of a durable run only where a
    /// middleware asked for one ([`FlowMut::request_checkpoint`](crate::harness::context::FlowMut::request_checkpoint)), at
    /// interrupts and at the end, instead of at every safe point: fewer
    /// writes, at the price of redoing the unpersisted steps after a crash.
    pub fn checkpoint_on_request(mut self) -> Self {
        self.on_request = true;
        self
    }

    fn compile<'r>(&self) -> Result<CompiledGraph<Turn<'r, S, C>>> {
        let route = |state: &GraphState| -> String {
            if state.get(STOP).is_some_and(|v| !v.is_null()) {
                END.to_owned()
            } else if state
                .get(PENDING)
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
            {
                TOOLS_NODE.to_owned()
            } else {
                MODEL_NODE.to_owned()
            }
        };
        StateGraph::new()
            .node(MODEL_NODE, ModelNode)
            .node(TOOLS_NODE, ToolsNode)
            .entry(MODEL_NODE)
            .conditional_edge(MODEL_NODE, route)
            .conditional_edge(TOOLS_NODE, route)
            .reducer(MESSAGES, Reducer::Append)
            // one node step per model turn or tool batch; the agent's own step limit bounds the run
            .max_steps(u32::MAX)
            .persist_when({
                let on_request = self.on_request;
                move |turn: &mut Turn<'r, S, C>| {
                    let asked = turn.ctx.take_checkpoint_request().is_some();
                    asked || !on_request
                }
            })
            .compile()
    }

    /// Runs from `input` without checkpoints (like [`Agent::run`]).
    pub async fn run(&self, ctx: &mut RunContext<C>, state: &S, input: impl Into<AgentInput>) -> Result<AgentRun> {
        self.drive(ctx, state, input.into().0, None).await
    }

    /// Runs from `input`, checkpointing thread `thread_id` in `store` at every safe point.
    pub async fn run_durable(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        input: impl Into<AgentInput>,
        thread_id: &str,
        store: &dyn Checkpointer,
    ) -> Result<AgentRun> {
        self.drive(ctx, state, input.into().0, Some((thread_id, store))).await
    }

    /// Goes on with thread `thread_id` from its latest checkpoint (after an
    /// interrupt, or a crash): the conversation, counters and usage come from
    /// the checkpoint; the node that was about to run, runs. A resumed run is
    /// a new run segment: `before_agent` and `after_agent` bracket it again.
    ///
    /// An answer [attached](crate::harness::interrupt::Interrupts::attach)
    /// to `ctx` (`HitlResume::attach`, say) is checked
    /// against the checkpoint first, exactly as
    /// [`resume_with`](Self::resume_with) checks its own: decisions for
    /// another thread or another pause, or already used, are refused and
    /// nothing runs.
    pub async fn resume(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        thread_id: &str,
        store: &dyn Checkpointer,
    ) -> Result<AgentRun> {
        if let Some(decisions) = ctx.locals().interrupts().take_attached() {
            return self.resume_answered(ctx, state, thread_id, store, decisions).await;
        }
        self.resume_checked(ctx, state, thread_id, store).await
    }

    /// [`resume`](Self::resume) once any decisions were checked.
    async fn resume_checked(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        thread_id: &str,
        store: &dyn Checkpointer,
    ) -> Result<AgentRun> {
        let checkpoint = store.latest(thread_id).await?.ok_or_else(|| {
            TinyAgentsError::config(format!(
                "there is no checkpoint for thread `{thread_id}`; start it with `run_durable`"
            ))
        })?;
        let saved = &checkpoint.state;
        let messages: Vec<Message> = saved.get_as(MESSAGES)?.unwrap_or_default();
        if let Some(c) = saved.get(COUNTERS) {
            // the counters a limit reads: a checkpoint without them whole is refused, never read as zero
            let get = |k: &str| {
                c.get(k)
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| {
                        TinyAgentsError::validation(format!(
                            "thread `{thread_id}`'s checkpoint #{} holds counters without a valid `{k}`: the \
                             limits they feed cannot be restored; resume from an intact checkpoint",
                            checkpoint.seq
                        ))
                    })
            };
            let (steps, model_calls, tool_calls) = (get("steps")?, get("model_calls")?, get("tool_calls")?);
            let counters = ctx.counters_mut();
            counters.steps = steps;
            counters.model_calls = model_calls;
            counters.tool_calls = tool_calls;
        }
        if let Some(usage) = saved.get_as::<Usage>(USAGE)? {
            ctx.add_usage(usage);
        }
        // The explicit state the paused run had (a mode steering switched, a
        // step limit it set, what middleware recorded) holds in the resumed run.
        for (key, value) in saved.values() {
            if !GRAPH_KEYS.contains(&key.as_str()) {
                ctx.restore_state(key.clone(), value.clone());
            }
        }
        match saved.get(MAX_STEPS_STATE) {
            Some(Value::Null) => ctx.set_max_steps(None),
            Some(n) => ctx.set_max_steps(Some(n.as_u64().and_then(|n| u32::try_from(n).ok()).ok_or_else(
                || {
                    TinyAgentsError::validation(format!(
                        "thread `{thread_id}`'s checkpoint #{} holds the step limit `{n}`, not a number of steps",
                        checkpoint.seq
                    ))
                },
            )?)),
            None => {}
        }
        let agent = self.agent;
        let mut seen = usize::MAX;
        let mut run = agent.begin(ctx, messages);
        let result = match agent.start_step(ctx, state, &mut run).await {
            Ok(Some(stop)) => Ok(stop),
            Ok(None) => {
                let graph = self.compile()?;
                let updates_seen = ctx.flow().state_updates().len();
                let mut turn = Turn {
                    agent,
                    ctx: &mut *ctx,
                    state,
                    run,
                    updates_seen,
                };
                let out = graph.resume(&mut turn, thread_id, store, None).await;
                seen = turn.updates_seen;
                run = turn.run;
                Self::outcome(out)
            }
            Err(e) => Err(e),
        };
        let result = agent.end(ctx, state, run, result).await;
        Self::persist_pause(ctx, seen, thread_id, store, result).await
    }

    /// Goes on with thread `thread_id`, paused by a middleware (a person's
    /// approval: `human_in_the_loop`), with the answer to its pause (a
    /// [`Resume`]: the person's decisions, `HitlResume`): in this process
    /// or in another one started fresh on the same store (the interrupt and
    /// the decisions serialise).
    ///
    /// Before anything runs, the answer is checked against the paused
    /// checkpoint — the store is the authority on what was asked: it must
    /// answer the interrupt the pause recorded there (under its
    /// [`interrupt_key`](Resume::interrupt_key), `hitl_interrupt`: the same
    /// requests, ids and digests), at the reply it paused on — and its
    /// [tokens](Resume::tokens) are
    /// recorded as used in a new checkpoint, so a second resume with them —
    /// replayed, given fresh ids, or racing this one — is refused with a
    /// `Conflict` error (reload the thread's latest state; do not retry).
    /// The pending batch then runs from the `tools` node with the decisions
    /// applied there: an approved call runs once, with the arguments the
    /// person saw (a call whose tool or arguments differ from the digest of
    /// the call decided on is refused and nothing runs), an edited one with
    /// the person's arguments, a rejected one never.
    ///
    /// ```
    /// use serde_json::json;
    /// use tinyagents::graph::{AgentGraph, MemoryCheckpointer};
    /// use tinyagents::middleware::{Decision, HitlInterrupt, HumanInTheLoopMiddleware, InterruptOn};
    /// use tinyagents::prelude::*;
    /// use tinyagents::testing::RecordingTool;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let delete = RecordingTool::new("delete").returning("deleted");
    /// let agent: Agent<()> = Agent::new(ScriptedModel::new([
    ///     ScriptedTurn::tool_call("delete", json!({"path": "a.txt"})),
    ///     ScriptedTurn::text("done"),
    /// ]))
    /// .with_tools(ToolRegistry::new().with(delete.clone())?)
    /// .with_stack(MiddlewareStack::new().with(HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new()))?);
    /// let store = MemoryCheckpointer::new();
    /// let mut ctx = RunContext::new(RunConfig::new("r1"), ());
    /// let err = AgentGraph::new(&agent).run_durable(&mut ctx, &(), "tidy", "t1", &store).await.unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::Interrupted);
    /// // what the person sees travels as JSON
    /// let shown = serde_json::to_string(&HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap()).unwrap();
    /// let paused: HitlInterrupt = serde_json::from_str(&shown).unwrap();
    /// let resume = paused.decide([("call-delete", Decision::Approve)])?;
    /// let mut ctx = RunContext::new(RunConfig::new("r2"), ());
    /// let run = AgentGraph::new(&agent).resume_with(&mut ctx, &(), "t1", &store, resume.clone()).await?;
    /// assert_eq!(run.final_text(), "done");
    /// assert_eq!(delete.calls().len(), 1);
    /// // single-use: the same decisions again are refused
    /// let mut ctx = RunContext::new(RunConfig::new("r3"), ());
    /// let again = AgentGraph::new(&agent).resume_with(&mut ctx, &(), "t1", &store, resume).await;
    /// assert_eq!(again.unwrap_err().kind(), ErrorKind::Conflict);
    /// assert_eq!(delete.calls().len(), 1);
    /// # Ok::<(), TinyAgentsError>(()) }).unwrap();
    /// ```
    pub async fn resume_with(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        thread_id: &str,
        store: &dyn Checkpointer,
        resume: impl Resume,
    ) -> Result<AgentRun> {
        self.resume_answered(ctx, state, thread_id, store, Box::new(resume))
            .await
    }

    /// [`resume_with`](Self::resume_with) for any owner's answer.
    async fn resume_answered(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        thread_id: &str,
        store: &dyn Checkpointer,
        resume: Box<dyn Resume>,
    ) -> Result<AgentRun> {
        let checkpoint = store.latest(thread_id).await?.ok_or_else(|| {
            TinyAgentsError::config(format!(
                "there is no checkpoint for thread `{thread_id}`; start it with `run_durable`"
            ))
        })?;
        let spent_key = resume.spent_key().to_owned();
        let used: Vec<String> = checkpoint.state.get_as(&spent_key)?.unwrap_or_default();
        // (checked again below, on the tokens the store recorded)
        if let Some(id) = resume.tokens().iter().find(|id| used.contains(id)) {
            return Err(already_used(resume.owner(), id, thread_id));
        }
        if checkpoint.interrupt.is_none() || checkpoint.next.as_deref() != Some(TOOLS_NODE) {
            return Err(TinyAgentsError::validation(format!(
                "thread `{thread_id}` is not paused before a tool batch (its latest checkpoint, #{}, {}); decisions \
                 apply only to the pause they answer, and nothing ran",
                checkpoint.seq,
                match &checkpoint.next {
                    None => "finished".to_owned(),
                    Some(next) => format!("goes on at `{next}`"),
                }
            )));
        }
        // The store is the authority on what was asked: the answer must answer the interrupt this pause recorded.
        let recorded = checkpoint.state.get(resume.interrupt_key()).cloned();
        let resume = resume.rebind(recorded, thread_id)?;
        let ids = resume.tokens();
        if let Some(id) = ids.iter().find(|id| used.contains(id)) {
            return Err(already_used(resume.owner(), id, thread_id));
        }
        let messages: Vec<Message> = checkpoint.state.get_as(MESSAGES)?.unwrap_or_default();
        if messages.last() != Some(resume.paused_reply()) {
            return Err(TinyAgentsError::validation(format!(
                "these decisions answer another pause than thread `{thread_id}`'s: its paused reply is not the \
                 interrupt's; decide on the interrupt of this pause; nothing ran"
            )));
        }
        // Spend the decisions before anything runs: a second resume (replayed or racing) is refused.
        let mut spent = used.clone();
        spent.extend(ids);
        let u = update([(spent_key.as_str(), json!(spent))]);
        let mut marked = checkpoint.clone();
        marked.seq = marked.next_seq()?;
        marked.updates.push(super::checkpoint::UpdateRecord {
            step: marked.steps,
            node: "resume".to_owned(),
            update: u.clone(),
        });
        marked.state.apply(u, &Default::default());
        store.put(&marked).await?;
        let interrupts = ctx.locals().interrupts();
        interrupts.spend(resume.owner(), used);
        // The run starts at the paused batch (its reply is in the checkpoint): nothing is replayed.
        interrupts.attach(resume, false);
        self.resume_checked(ctx, state, thread_id, store).await
    }

    async fn drive(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        messages: Vec<Message>,
        durable: Option<(&str, &dyn Checkpointer)>,
    ) -> Result<AgentRun> {
        let agent = self.agent;
        let input = update([(MESSAGES, serde_json::to_value(&messages).map_err(ser)?)]);
        let mut seen = usize::MAX;
        let mut run = agent.begin(ctx, messages);
        let result = match agent.start_step(ctx, state, &mut run).await {
            Ok(Some(stop)) => Ok(stop),
            Ok(None) => {
                let graph = self.compile()?;
                let updates_seen = ctx.flow().state_updates().len();
                let mut turn = Turn {
                    agent,
                    ctx: &mut *ctx,
                    state,
                    run,
                    updates_seen,
                };
                let initial = GraphState::from_update(input);
                let out = match durable {
                    Some((thread_id, store)) => graph.run_durable(&mut turn, initial, thread_id, store).await,
                    None => graph.run(&mut turn, initial).await,
                };
                seen = turn.updates_seen;
                run = turn.run;
                Self::outcome(out)
            }
            Err(e) => Err(e),
        };
        let result = agent.end(ctx, state, run, result).await;
        match durable {
            Some((thread_id, store)) => Self::persist_pause(ctx, seen, thread_id, store, result).await,
            None => result,
        }
    }

    /// A pause keeps what middleware recorded while pausing (the explicit
    /// state updates made since the last checkpoint: `human_in_the_loop`'s
    /// requests, say): they are written into one more checkpoint of the
    /// paused thread, so another process finds them there.
    async fn persist_pause(
        ctx: &RunContext<C>,
        seen: usize,
        thread_id: &str,
        store: &dyn Checkpointer,
        result: Result<AgentRun>,
    ) -> Result<AgentRun> {
        if !matches!(result, Err(TinyAgentsError::Interrupted { .. })) {
            return result;
        }
        let fresh = ctx.flow().state_updates().get(seen..).unwrap_or_default();
        if fresh.is_empty() {
            return result;
        }
        let Some(mut checkpoint) = store.latest(thread_id).await? else {
            return result;
        };
        let Some(node) = checkpoint.interrupt.as_ref().map(|i| i.node.clone()) else {
            return result;
        };
        for u in fresh {
            not_graph_key(&u.key)?;
        }
        let u = update(fresh.iter().map(|u| (u.key.clone(), u.value.clone())));
        checkpoint.seq = checkpoint.next_seq()?;
        checkpoint.updates.push(super::checkpoint::UpdateRecord {
            step: checkpoint.steps,
            node,
            update: u.clone(),
        });
        checkpoint.state.apply(u, &Default::default());
        store.put(&checkpoint).await?;
        result
    }

    /// The agent's stop reason from a graph run (an interrupt is the same error `Agent::run` returns).
    fn outcome(out: Result<GraphRun>) -> Result<StopReason> {
        let run = out?;
        match run.outcome {
            GraphOutcome::Finished => {
                let label = run.state.get(STOP).and_then(Value::as_str).unwrap_or("finished");
                Ok(stop_from_label(label))
            }
            GraphOutcome::Interrupted(record) => Err(TinyAgentsError::interrupted(Some(record.node), record.message)),
        }
    }
}
