//! [`HumanInTheLoopMiddleware`]: pauses a run before gated tool calls run,
//! with one request per gated call of the batch, and resumes it in a new run
//! with a person's decisions (approve, edit, reject, respond).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tinyagents_macros::{middleware, MiddlewareConfig};

use crate::config::ConfigViolation;
use crate::harness::agent::{AgentInput, AgentRun};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::message::Message;
use crate::harness::middleware::{MiddlewareModelOutcome, ModelHandler, PreparedBatch};
use crate::harness::model::{FinishReason, ModelRequest, ModelResponse, Usage};
use crate::harness::tool::{ToolCall, ToolResult};

/// A kind of decision a person may take on a gated call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Run the call as the model asked.
    Approve,
    /// Run the call with other arguments.
    Edit,
    /// Do not run it; the model is told it was rejected.
    Reject,
    /// Do not run it; the person's text is its result.
    Respond,
}

impl DecisionKind {
    const ALL: [DecisionKind; 4] = [Self::Approve, Self::Edit, Self::Reject, Self::Respond];

    /// The kind's label.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Edit => "edit",
            Self::Reject => "reject",
            Self::Respond => "respond",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A person's decision on one gated call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Decision {
    /// Run the call as asked.
    Approve,
    /// Run the call with these arguments (a JSON object).
    Edit {
        /// The arguments to run it with.
        arguments: Value,
    },
    /// Do not run the call.
    Reject {
        /// Why, for the model.
        message: Option<String>,
    },
    /// Do not run the call; this text is its result.
    Respond {
        /// The result the model sees.
        content: String,
    },
}

impl Decision {
    /// The decision's kind.
    pub const fn kind(&self) -> DecisionKind {
        match self {
            Self::Approve => DecisionKind::Approve,
            Self::Edit { .. } => DecisionKind::Edit,
            Self::Reject { .. } => DecisionKind::Reject,
            Self::Respond { .. } => DecisionKind::Respond,
        }
    }
}

type Condition = dyn Fn(&ToolCall) -> bool + Send + Sync;

/// How one tool is gated: the decisions allowed, and an optional condition
/// (the call is gated only when it holds).
#[derive(Clone)]
pub struct InterruptOn {
    allowed: Vec<DecisionKind>,
    condition: Option<Arc<Condition>>,
    description: Option<String>,
}

impl std::fmt::Debug for InterruptOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterruptOn")
            .field("allowed", &self.allowed)
            .field("conditional", &self.condition.is_some())
            .field("description", &self.description)
            .finish()
    }
}

impl Default for InterruptOn {
    fn default() -> Self {
        Self::new()
    }
}

impl InterruptOn {
    /// Every call is gated; every decision is allowed.
    pub fn new() -> Self {
        Self {
            allowed: DecisionKind::ALL.to_vec(),
            condition: None,
            description: None,
        }
    }

    /// Only these decisions are allowed.
    pub fn allow(mut self, kinds: impl IntoIterator<Item = DecisionKind>) -> Self {
        self.allowed = kinds.into_iter().collect();
        self
    }

    /// Only calls for which `condition` holds are gated.
    pub fn when(mut self, condition: impl Fn(&ToolCall) -> bool + Send + Sync + 'static) -> Self {
        self.condition = Some(Arc::new(condition));
        self
    }

    /// The text shown to the person with each request.
    pub fn describe(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// One call awaiting a decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments the model gave.
    pub arguments: Value,
    /// The decisions allowed.
    pub allowed: Vec<DecisionKind>,
    /// What the person is asked.
    pub description: String,
}

/// A paused run: every request of the batch, and what a new run needs to resume.
#[derive(Debug, Clone, PartialEq)]
pub struct HitlInterrupt {
    /// One request per gated call of the batch, in the model's order.
    pub requests: Vec<ApprovalRequest>,
    /// The conversation before the reply that asked for the calls.
    pub messages: Vec<Message>,
    /// The reply that asked for the calls (replayed, not re-asked, on resume).
    pub reply: Message,
}

impl HitlInterrupt {
    /// Checks `decisions` (by call id) against the requests: exactly one per
    /// request, none for anything else, each of an allowed kind, edits with
    /// object arguments. Any mismatch is a `Validation` error and nothing runs.
    pub fn decide<I, K>(self, decisions: I) -> Result<HitlResume>
    where
        I: IntoIterator<Item = (K, Decision)>,
        K: Into<String>,
    {
        let mut by_id: HashMap<String, Decision> = HashMap::new();
        for (id, d) in decisions {
            let id = id.into();
            if by_id.insert(id.clone(), d).is_some() {
                return Err(TinyAgentsError::validation(format!(
                    "two decisions for call `{id}`: give exactly one per request"
                )));
            }
        }
        check_decisions(&self.requests, &by_id)?;
        Ok(HitlResume {
            decisions: by_id,
            interrupt: self,
        })
    }
}

fn check_decisions(requests: &[ApprovalRequest], decisions: &HashMap<String, Decision>) -> Result<()> {
    let ids: HashSet<&str> = requests.iter().map(|r| r.call_id.as_str()).collect();
    let mut extra: Vec<&str> = decisions
        .keys()
        .map(String::as_str)
        .filter(|k| !ids.contains(k))
        .collect();
    extra.sort_unstable();
    if !extra.is_empty() {
        return Err(TinyAgentsError::validation(format!(
            "decisions for calls that await none: {}; nothing ran",
            extra.join(", ")
        )));
    }
    let missing: Vec<&str> = requests
        .iter()
        .filter(|r| !decisions.contains_key(&r.call_id))
        .map(|r| r.call_id.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(TinyAgentsError::validation(format!(
            "no decision for calls {}: every pending request needs one; nothing ran",
            missing.join(", ")
        )));
    }
    for r in requests {
        let d = &decisions[&r.call_id];
        if !r.allowed.contains(&d.kind()) {
            let allowed: Vec<&str> = r.allowed.iter().map(|k| k.as_str()).collect();
            return Err(TinyAgentsError::validation(format!(
                "decision `{}` is not allowed for call `{}` of `{}` (allowed: {}); nothing ran",
                d.kind().as_str(),
                r.call_id,
                r.tool,
                allowed.join(", ")
            )));
        }
        if let Decision::Edit { arguments } = d {
            if !arguments.is_object() {
                return Err(TinyAgentsError::validation(format!(
                    "the edited arguments of call `{}` must be a JSON object; nothing ran",
                    r.call_id
                )));
            }
        }
    }
    Ok(())
}

/// Checked decisions for a paused run: attach them to a new run's context
/// and start it from [`HitlResume::input`].
#[derive(Debug, Clone, PartialEq)]
pub struct HitlResume {
    interrupt: HitlInterrupt,
    decisions: HashMap<String, Decision>,
}

impl HitlResume {
    /// What the new run starts from: the conversation before the paused reply.
    pub fn input(&self) -> AgentInput {
        AgentInput(self.interrupt.messages.clone())
    }

    /// Gives the decisions to the run of `ctx` (its first model turn replays
    /// the paused reply instead of calling the model).
    pub fn attach<C>(self, ctx: &RunContext<C>) {
        let state = ctx.local::<HitlState>();
        let mut s = state.0.lock().expect("hitl lock");
        s.resume = Some(self);
        s.replayed = false;
    }
}

#[derive(Default)]
struct HitlState(Mutex<HitlInner>);

#[derive(Default)]
struct HitlInner {
    resume: Option<HitlResume>,
    replayed: bool,
    /// Gated calls admitted by a decision: call id → edited arguments, if any.
    admitted: HashMap<String, Option<Value>>,
    /// Requests of the batch that paused the run (until `after_agent` completes the interrupt).
    pending: Option<Vec<ApprovalRequest>>,
    interrupt: Option<HitlInterrupt>,
}

/// Options of [`HumanInTheLoopMiddleware`] (`type = "human_in_the_loop"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::HitlConfig;
///
/// let c: HitlConfig = from_toml_str("interrupt_on = { send_email = [\"approve\", \"reject\"] }").unwrap();
/// assert_eq!(c.interrupt_on["send_email"].len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "human_in_the_loop", builds = HumanInTheLoopMiddleware, validate = check_hitl_config)]
pub struct HitlConfig {
    /// Gated tools and the decisions allowed for each (`approve`, `edit`, `reject`, `respond`).
    pub interrupt_on: BTreeMap<String, Vec<String>>,
    /// The text shown with each request (the tool name is appended).
    #[config(default = "Tool execution requires approval".to_owned())]
    pub description: String,
}

fn check_hitl_config(c: &HitlConfig) -> std::result::Result<(), ConfigViolation> {
    for (tool, kinds) in &c.interrupt_on {
        if kinds.is_empty() {
            return Err(ConfigViolation::new(
                format!("interrupt_on.{tool}"),
                "must allow at least one decision",
            ));
        }
        for k in kinds {
            if DecisionKind::parse(k).is_none() {
                return Err(ConfigViolation::new(
                    format!("interrupt_on.{tool}"),
                    "each decision must be one of approve, edit, reject, respond",
                )
                .with_value(k));
            }
        }
    }
    Ok(())
}

impl From<HitlConfig> for HumanInTheLoopMiddleware {
    fn from(c: HitlConfig) -> Self {
        let mut m = Self::new().with_description(c.description);
        for (tool, kinds) in c.interrupt_on {
            let kinds: Vec<DecisionKind> = kinds.iter().filter_map(|k| DecisionKind::parse(k)).collect();
            m = m.interrupt_on(tool, InterruptOn::new().allow(kinds));
        }
        m
    }
}

/// Pauses a run before gated tool calls run and resumes it with a person's decisions.
///
/// When a reply asks for calls to gated tools (per-tool [`InterruptOn`],
/// with an optional condition), the batch review fails the run with
/// [`TinyAgentsError::Interrupted`] before **any** call of the batch runs;
/// [`HumanInTheLoopMiddleware::take_interrupt`] then gives every pending
/// request of the batch. [`HitlInterrupt::decide`] checks the decisions
/// (exactly one per request, an allowed kind), and a new run started from
/// [`HitlResume::input`] with the decisions [attached](HitlResume::attach)
/// replays the paused reply and applies them: approved calls run, edited
/// calls run with the edited arguments, rejected calls get a result saying
/// so, answered calls get the person's text. A gated call never runs without
/// a decision: `before_tool` refuses one that the batch review did not admit.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// use std::sync::Arc;
/// use tinyagents::middleware::{Decision, HumanInTheLoopMiddleware, InterruptOn};
/// use tinyagents::prelude::*;
///
/// let delete = tool_fn("delete", "Deletes.", |_cx, args| async move { Ok(format!("deleted {}", args["path"]).into()) });
/// let model = ScriptedModel::new([
///     ScriptedTurn::tool_call("delete", serde_json::json!({"path": "a.txt"})),
///     ScriptedTurn::text("done"),
/// ]);
/// let hitl = HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new());
/// let agent: Agent<()> = Agent::new(model)
///     .with_tools(ToolRegistry::new().with(delete)?)
///     .with_stack(MiddlewareStack::new().with(hitl)?);
///
/// let mut ctx = RunContext::new(RunConfig::new("r1"), ());
/// let err = agent.run(&mut ctx, &(), "clean up").await.unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::Interrupted);
/// let paused = HumanInTheLoopMiddleware::take_interrupt(&ctx).unwrap();
/// assert_eq!(paused.requests[0].tool, "delete");
///
/// let resume = paused.decide([("call-delete", Decision::Approve)])?;
/// let ctx2 = RunContext::new(RunConfig::new("r2"), ());
/// let input = resume.input();
/// resume.attach(&ctx2);
/// let mut ctx2 = ctx2;
/// let run = agent.run(&mut ctx2, &(), input).await?;
/// assert_eq!(run.final_text(), "done");
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(Debug, Clone, Default)]
pub struct HumanInTheLoopMiddleware {
    gates: HashMap<String, InterruptOn>,
    description: String,
}

impl HumanInTheLoopMiddleware {
    /// No tool gated yet.
    pub fn new() -> Self {
        Self {
            gates: HashMap::new(),
            description: "Tool execution requires approval".to_owned(),
        }
    }

    /// Gates calls to `tool`.
    pub fn interrupt_on(mut self, tool: impl Into<String>, on: InterruptOn) -> Self {
        self.gates.insert(tool.into(), on);
        self
    }

    /// The text shown with each request (the tool name is appended).
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The interrupt of a run that paused (taken: a second call gives `None`).
    pub fn take_interrupt<C>(ctx: &RunContext<C>) -> Option<HitlInterrupt> {
        ctx.local::<HitlState>().0.lock().expect("hitl lock").interrupt.take()
    }

    /// The gate of `call`, when it is gated.
    fn gate(&self, call: &ToolCall) -> Option<&InterruptOn> {
        self.gates
            .get(&call.name)
            .filter(|g| g.condition.as_ref().is_none_or(|c| c(call)))
    }

    fn request(&self, call: &ToolCall, gate: &InterruptOn) -> ApprovalRequest {
        ApprovalRequest {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            allowed: gate.allowed.clone(),
            description: gate
                .description
                .clone()
                .unwrap_or_else(|| format!("{}: `{}`", self.description, call.name)),
        }
    }
}

/// Pauses the run before gated tool calls run (one request per gated call of the batch) and resumes it in a new run with a person's decisions: approve, edit, reject or respond.
#[middleware(
    builtin,
    name = "human_in_the_loop",
    config = HitlConfig,
    doc(
        mutation = "On resume: replaces the first model call with the paused reply, rewrites an edited call's arguments, and gives rejected and answered calls their one result. Records `hitl_pending` with `update_state` when it pauses.",
        events = "`StateUpdated { key: \"hitl_pending\" }` and `Custom { middleware: \"human_in_the_loop\", name: \"interrupt\", data: { requests } }` when it pauses.",
        failure = "Fails closed: a batch with any gated call and no decisions fails the run with `Interrupted` before any call of the batch runs; decisions that are missing, extra, of a kind not allowed, or that do not match the replayed batch are a `Validation` error and nothing runs; `before_tool` refuses a gated call the batch review did not admit.",
        streaming = "None: the replayed reply is not streamed again (no deltas on the resumed turn).",
        cache = "None: it does not change the request; a resumed run sends the same history as the paused one.",
        retries = "The replay happens in its `wrap_model`, so register it outermost: inner retries and fallbacks never re-ask the model for the paused reply."
    )
)]
impl HumanInTheLoopMiddleware {
    #[wrap_model]
    async fn replay<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<MiddlewareModelOutcome> {
        let replay = {
            let st = ctx.local::<HitlState>();
            let mut s = st.0.lock().expect("hitl lock");
            match (&s.resume, s.replayed) {
                (Some(r), false) => {
                    let reply = r.interrupt.reply.clone();
                    s.replayed = true;
                    Some(reply)
                }
                _ => None,
            }
        };
        match replay {
            Some(message) => Ok(ModelResponse {
                message,
                // A replay of a reply already paid for: no call, a real zero.
                usage: Usage::default(),
                usage_reported: true,
                finish_reason: FinishReason::ToolCalls,
                model: None,
            }
            .into()),
            None => next.run(ctx, state, request).await,
        }
    }

    #[on_tool_batch]
    fn review<C>(&self, ctx: &mut RunContext<C>, batch: &mut PreparedBatch) -> Result<()> {
        let gated: Vec<(usize, ApprovalRequest)> = batch
            .calls()
            .iter()
            .enumerate()
            .filter_map(|(i, p)| self.gate(&p.call).map(|g| (i, self.request(&p.call, g))))
            .collect();
        let st = ctx.local::<HitlState>();
        let mut s = st.0.lock().expect("hitl lock");
        let resume = if s.replayed { s.resume.take() } else { None };
        if let Some(resume) = resume {
            // The replayed batch: the decisions must match its gated calls exactly.
            let requests: Vec<ApprovalRequest> = gated.iter().map(|(_, r)| r.clone()).collect();
            check_decisions(&requests, &resume.decisions)?;
            for (i, r) in &gated {
                match &resume.decisions[&r.call_id] {
                    Decision::Approve => {
                        s.admitted.insert(r.call_id.clone(), None);
                    }
                    Decision::Edit { arguments } => {
                        s.admitted.insert(r.call_id.clone(), Some(arguments.clone()));
                    }
                    Decision::Reject { message } => batch.reject(
                        *i,
                        format!(
                            "a person rejected this call to `{}`{}",
                            r.tool,
                            message.as_deref().map(|m| format!(": {m}")).unwrap_or_default()
                        ),
                    ),
                    Decision::Respond { content } => {
                        let call = &batch.calls()[*i].call;
                        let result = ToolResult::ok(call, content.clone());
                        batch.reject_with(*i, result);
                    }
                }
            }
            return Ok(());
        }
        if gated.is_empty() {
            return Ok(());
        }
        let requests: Vec<ApprovalRequest> = gated.into_iter().map(|(_, r)| r).collect();
        let names: Vec<String> = requests
            .iter()
            .map(|r| format!("`{}` ({})", r.tool, r.call_id))
            .collect();
        let message = format!(
            "{} tool call(s) await a person's decision: {}",
            requests.len(),
            names.join(", ")
        );
        s.pending = Some(requests.clone());
        drop(s);
        let data = json!({ "requests": requests });
        ctx.update_state("hitl_pending", data.clone());
        ctx.emit_with(EventKind::Custom, || AgentEvent::Custom {
            middleware: "human_in_the_loop".into(),
            name: "interrupt".into(),
            data,
        });
        Err(TinyAgentsError::interrupted(
            Some("human_in_the_loop".to_owned()),
            message,
        ))
    }

    #[before_tool]
    fn admit<C>(&self, ctx: &mut RunContext<C>, call: &mut ToolCall) -> Result<()> {
        let st = ctx.local::<HitlState>();
        let mut s = st.0.lock().expect("hitl lock");
        match s.admitted.remove(&call.id) {
            Some(Some(edited)) => {
                call.arguments = edited;
                Ok(())
            }
            Some(None) => Ok(()),
            None if self.gate(call).is_some() => Err(TinyAgentsError::validation(format!(
                "call `{}` to `{}` needs a person's decision and has none; it was not run",
                call.id, call.name
            ))),
            None => Ok(()),
        }
    }

    #[after_agent]
    fn complete<C>(&self, ctx: &mut RunContext<C>, run: &mut AgentRun) -> Result<()> {
        let st = ctx.local::<HitlState>();
        let mut s = st.0.lock().expect("hitl lock");
        if let Some(requests) = s.pending.take() {
            let mut messages = run.messages.clone();
            let reply = messages.pop().unwrap_or_else(|| Message::assistant(""));
            s.interrupt = Some(HitlInterrupt {
                requests,
                messages,
                reply,
            });
        }
        Ok(())
    }
}
