//! [`HumanInTheLoopMiddleware`]: pauses a run before gated tool calls run,
//! with one request per gated call of the batch, and resumes it in a new run
//! with a person's decisions (approve, edit, reject, respond).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tinyagents_macros::{middleware, MiddlewareConfig};

use crate::config::ConfigViolation;
use crate::harness::child_run::{ChildRun, ChildRunHook};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::interrupt::{Interrupt, PauseHolder, Resume};
use crate::harness::message::Message;
use crate::harness::middleware::{MiddlewareModelOutcome, ModelHandler, PreparedBatch};
use crate::harness::model::{FinishReason, ModelRequest, ModelResponse, Usage};
use crate::harness::run::{AgentInput, AgentRun};
use crate::harness::tool::{call_digest, Restriction, ToolCall, ToolResult};

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
///
/// As JSON: `{"type": "approve"}`, `{"type": "edit", "arguments": {…}}`,
/// `{"type": "reject", "message": "…"}` (the message optional),
/// `{"type": "respond", "content": "…"}`. A field a kind does not have
/// (`{"type": "approve", "arguments": …}`) is refused, never dropped: the
/// person meant something this decision would not do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", try_from = "serde_json::Map<String, Value>")]
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

/// [`Decision`]'s wire form, read once its fields were checked.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum DecisionWire {
    Approve,
    Edit { arguments: Value },
    Reject { message: Option<String> },
    Respond { content: String },
}

impl TryFrom<serde_json::Map<String, Value>> for Decision {
    type Error = String;

    fn try_from(map: serde_json::Map<String, Value>) -> std::result::Result<Self, String> {
        let kind = map.get("type").and_then(Value::as_str).unwrap_or_default().to_owned();
        let fields: &[&str] = match kind.as_str() {
            "edit" => &["type", "arguments"],
            "reject" => &["type", "message"],
            "respond" => &["type", "content"],
            _ => &["type"],
        };
        if let Some(unknown) = map.keys().find(|k| !fields.contains(&k.as_str())) {
            return Err(format!(
                "a `{kind}` decision has no field `{unknown}` (its fields: {}); a decision must say exactly what to \
                 do, so nothing ran",
                fields.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ")
            ));
        }
        Ok(
            match serde_json::from_value(Value::Object(map)).map_err(|e| e.to_string())? {
                DecisionWire::Approve => Self::Approve,
                DecisionWire::Edit { arguments } => Self::Edit { arguments },
                DecisionWire::Reject { message } => Self::Reject { message },
                DecisionWire::Respond { content } => Self::Respond { content },
            },
        )
    }
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
#[serde(deny_unknown_fields)] // a field this version does not know is refused, never dropped
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
    /// [`call_digest`] of `tool` and `arguments`: the exact call shown. A
    /// decision is bound to it, and a call whose tool or arguments differ
    /// from it never runs under that decision.
    pub digest: String,
    /// This request's unique id: a decision on it is used once, and a
    /// second resume with it is refused.
    pub request_id: String,
}

/// A sub-agent's approval requests, carried up in its parent's interrupt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)] // a field this version does not know is refused, never dropped
pub struct ChildApproval {
    /// The parent's call that ran the sub-agent (an [`AgentTool`](crate::harness::agent::AgentTool) call).
    pub call_id: String,
    /// The sub-agent tool's name.
    pub tool: String,
    /// [`call_digest`] of the parent's call: on resume the sub-agent resumes
    /// only under that exact call.
    pub digest: String,
    /// The sub-agent run that paused.
    pub run_id: String,
    /// Its interrupt.
    pub interrupt: HitlInterrupt,
}

/// A call of the paused batch that had already run when the run paused (a
/// sibling of a sub-agent call that paused): on resume it is not run again,
/// its result is given back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)] // a field this version does not know is refused, never dropped
pub struct CompletedCall {
    /// [`call_digest`] of the call that ran: the result is reused only for that exact call.
    pub digest: String,
    /// Its result.
    pub result: ToolResult,
}

/// A paused run: every request of the batch, and what a new run needs to resume.
///
/// It serialises (JSON through serde), so the process that paused can store
/// or show it and another process can decide and resume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)] // a field this version does not know is refused, never dropped
pub struct HitlInterrupt {
    /// The run that paused.
    #[serde(default)]
    pub run_id: String,
    /// One request per gated call of the batch, in the model's order.
    pub requests: Vec<ApprovalRequest>,
    /// The approval requests of sub-agent runs that paused under calls of
    /// this batch (a child's gated call pauses its parent).
    #[serde(default)]
    pub children: Vec<ChildApproval>,
    /// Calls of the batch that already ran when a sub-agent paused it: they
    /// are not run again on resume.
    #[serde(default)]
    pub completed: Vec<CompletedCall>,
    /// The conversation before the reply that asked for the calls.
    pub messages: Vec<Message>,
    /// The reply that asked for the calls (replayed, not re-asked, on resume).
    pub reply: Message,
}

/// A decision bound to the request it answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)] // a field this version does not know is refused, never dropped
pub struct BoundDecision {
    /// The decision.
    pub decision: Decision,
    /// The digest of the call the person saw ([`ApprovalRequest::digest`]).
    pub digest: String,
    /// The request it answers ([`ApprovalRequest::request_id`]): used once.
    pub request_id: String,
}

fn unique_id(seed: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let text = format!("{}:{nanos}:{n}:{seed}", std::process::id());
    call_digest("request_id", &Value::String(text))[..32].to_owned()
}

impl HitlInterrupt {
    /// Every pending request, its own and its sub-agents', with the address
    /// a decision gives it: the call id for its own requests, and
    /// `"<parent call id>/<address in the child>"` for a sub-agent's.
    pub fn pending(&self) -> Vec<(String, &ApprovalRequest)> {
        let mut out: Vec<(String, &ApprovalRequest)> = self.requests.iter().map(|r| (r.call_id.clone(), r)).collect();
        for child in &self.children {
            for (address, r) in child.interrupt.pending() {
                out.push((format!("{}/{address}", child.call_id), r));
            }
        }
        out
    }

    /// Checks `decisions` (by address, see [`pending`](Self::pending))
    /// against the requests: exactly one per request, none for anything
    /// else, each of an allowed kind, edits with object arguments, and each
    /// request's digest the digest of its tool and arguments. Each decision
    /// is then bound to that digest and to the request's id. Any mismatch is
    /// a `Validation` error and nothing runs.
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
        self.bind(by_id, None)
    }

    /// [`decide`](Self::decide) with the digest the person's screen showed
    /// for each request (`(address, digest, decision)`): a digest that is
    /// not the request's is refused, so a decision taken on other arguments
    /// than the ones stored here can never apply.
    pub fn decide_bound<I, K, D>(self, decisions: I) -> Result<HitlResume>
    where
        I: IntoIterator<Item = (K, D, Decision)>,
        K: Into<String>,
        D: Into<String>,
    {
        let mut by_id: HashMap<String, Decision> = HashMap::new();
        let mut seen: HashMap<String, String> = HashMap::new();
        for (id, digest, d) in decisions {
            let id = id.into();
            if by_id.insert(id.clone(), d).is_some() {
                return Err(TinyAgentsError::validation(format!(
                    "two decisions for call `{id}`: give exactly one per request"
                )));
            }
            seen.insert(id, digest.into());
        }
        self.bind(by_id, Some(&seen))
    }

    fn bind(self, mut by_id: HashMap<String, Decision>, seen: Option<&HashMap<String, String>>) -> Result<HitlResume> {
        let addresses: Vec<String> = self.pending().into_iter().map(|(a, _)| a).collect();
        let unique: HashSet<&String> = addresses.iter().collect();
        if unique.len() != addresses.len() {
            return Err(TinyAgentsError::validation(
                "two pending requests share an address (a call id containing `/` collides with a sub-agent's); \
                 nothing ran",
            ));
        }
        let known: HashSet<&str> = addresses.iter().map(String::as_str).collect();
        let mut extra: Vec<&str> = by_id
            .keys()
            .map(String::as_str)
            .filter(|k| !known.contains(k))
            .collect();
        extra.sort_unstable();
        if !extra.is_empty() {
            return Err(TinyAgentsError::validation(format!(
                "decisions for calls that await none: {}; nothing ran",
                extra.join(", ")
            )));
        }
        self.bind_at("", &mut by_id, seen)
    }

    fn bind_at(
        self,
        prefix: &str,
        by_id: &mut HashMap<String, Decision>,
        seen: Option<&HashMap<String, String>>,
    ) -> Result<HitlResume> {
        let mut own: HashMap<String, Decision> = HashMap::new();
        for r in &self.requests {
            if let Some(d) = by_id.remove(&format!("{prefix}{}", r.call_id)) {
                own.insert(r.call_id.clone(), d);
            }
        }
        check_decisions(&self.requests, &own)?;
        let mut decisions = BTreeMap::new();
        for r in &self.requests {
            let digest = call_digest(&r.tool, &r.arguments);
            if digest != r.digest {
                return Err(TinyAgentsError::validation(format!(
                    "the request for call `{}` to `{}` was altered: its digest is not the digest of its tool and \
                     arguments; decide on an interrupt as the run gave it; nothing ran",
                    r.call_id, r.tool
                )));
            }
            if let Some(shown) = seen.and_then(|m| m.get(&format!("{prefix}{}", r.call_id)))
                && *shown != digest
            {
                return Err(TinyAgentsError::validation(format!(
                    "the decision on call `{}` to `{}` was taken on another call than this request \
                         (digest {shown}, the request's is {digest}); show the request again and decide; nothing ran",
                    r.call_id, r.tool
                )));
            }
            let decision = own.remove(&r.call_id).expect("checked: one decision per request");
            decisions.insert(
                r.call_id.clone(),
                BoundDecision {
                    decision,
                    digest,
                    request_id: r.request_id.clone(),
                },
            );
        }
        let mut children = BTreeMap::new();
        let child_interrupts: Vec<ChildApproval> = self.children.clone();
        for child in child_interrupts {
            let nested = format!("{prefix}{}/", child.call_id);
            let resume = child.interrupt.clone().bind_at(&nested, by_id, seen)?;
            children.insert(child.call_id.clone(), (child.digest.clone(), resume));
        }
        Ok(HitlResume {
            interrupt: self,
            decisions,
            children,
            spent_by_parent: false,
        })
    }
}

fn check_decisions<D>(requests: &[ApprovalRequest], decisions: &HashMap<String, D>) -> Result<()>
where
    D: std::borrow::Borrow<Decision>,
{
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
        let d: &Decision = decisions[&r.call_id].borrow();
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
            if let Err(why) = crate::harness::tool::check_argument_value(arguments) {
                return Err(TinyAgentsError::validation(format!(
                    "the edit of call `{}` of `{}` is refused: {why}; nothing ran",
                    r.call_id, r.tool
                )));
            }
        }
    }
    Ok(())
}

/// Checked decisions for a paused run, each bound to the digest of the call
/// shown and to its request's id. Attach them to a new run's context and
/// start it from [`HitlResume::input`], or give them to
/// [`AgentGraph::resume_with`](crate::graph::AgentGraph::resume_with) to go
/// on from a checkpoint (in this process or another: it serialises).
///
/// Each decision is single-use: once applied, its request id is recorded
/// (in the middleware and, for a graph run, in the checkpoint), and a second
/// resume with it is refused before anything runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)] // a field this version does not know is refused, never dropped
pub struct HitlResume {
    interrupt: HitlInterrupt,
    decisions: BTreeMap<String, BoundDecision>,
    /// Sub-agent decisions by the parent call id: (digest of the parent's call, the child's resume).
    #[serde(default)]
    children: BTreeMap<String, (String, HitlResume)>,
    /// Already spent by the parent run that routed it here (never deserialised: only the runtime sets it).
    #[serde(skip)]
    spent_by_parent: bool,
}

impl HitlResume {
    /// What the new run starts from: the conversation before the paused reply.
    pub fn input(&self) -> AgentInput {
        AgentInput(self.interrupt.messages.clone())
    }

    /// The interrupt these decisions answer.
    pub fn interrupt(&self) -> &HitlInterrupt {
        &self.interrupt
    }

    /// The request ids of every decision, sub-agents' included.
    pub fn request_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.decisions.values().map(|d| d.request_id.clone()).collect();
        for (_, child) in self.children.values() {
            ids.extend(child.request_ids());
        }
        ids
    }

    /// Gives the decisions to the run of `ctx` (its first model turn replays
    /// the paused reply instead of calling the model; a graph run resumed at
    /// its `tools` node applies them to the pending batch directly).
    pub fn attach<C>(self, ctx: &RunContext<C>) {
        ctx.locals().interrupts().attach(Box::new(self), true);
    }

    /// Every decision with its address (see [`HitlInterrupt::pending`]) and
    /// the digest it is bound to, sub-agents' included: what a person
    /// decided, without the copy of the interrupt it travelled with.
    pub(crate) fn bound_decisions(&self) -> Vec<(String, String, Decision)> {
        let mut out: Vec<(String, String, Decision)> = self
            .decisions
            .iter()
            .map(|(id, d)| (id.clone(), d.digest.clone(), d.decision.clone()))
            .collect();
        for (call, (_, child)) in &self.children {
            out.extend(
                child
                    .bound_decisions()
                    .into_iter()
                    .map(|(address, digest, d)| (format!("{call}/{address}"), digest, d)),
            );
        }
        out
    }

    /// Marks decisions the parent run already spent (recorded as used there)
    /// before it hands them to the sub-agent run they answer.
    pub(crate) fn spent_by_parent(mut self) -> Self {
        self.spent_by_parent = true;
        self
    }
}

/// `human_in_the_loop`'s answer to its own pause, in the runtime's protocol.
impl Resume for HitlResume {
    fn owner(&self) -> &str {
        NAME
    }

    fn interrupt_key(&self) -> &str {
        INTERRUPT_KEY
    }

    fn spent_key(&self) -> &str {
        CONSUMED_KEY
    }

    fn tokens(&self) -> Vec<String> {
        self.request_ids()
    }

    fn paused_reply(&self) -> &Message {
        &self.interrupt.reply
    }

    fn rebind(self: Box<Self>, recorded: Option<Value>, thread_id: &str) -> Result<Box<dyn Resume>> {
        let Some(recorded) = recorded else {
            return Err(TinyAgentsError::validation(format!(
                "thread `{thread_id}` recorded no approval request at its pause (no `human_in_the_loop` paused \
                 it); go on with `resume`; nothing ran"
            )));
        };
        let asked: HitlInterrupt = serde_json::from_value(recorded).map_err(|e| {
            TinyAgentsError::validation(format!(
                "thread `{thread_id}`'s checkpoint holds `{INTERRUPT_KEY}` that is not an approval interrupt ({e}); \
                 resume from an intact checkpoint; nothing ran"
            ))
        })?;
        if asked != self.interrupt {
            return Err(TinyAgentsError::validation(format!(
                "these decisions answer another interrupt than the one thread `{thread_id}` recorded at its pause \
                 (other requests, ids or digests); decide on the interrupt of this pause; nothing ran"
            )));
        }
        // Only the decisions themselves come from the caller: the resume is
        // rebuilt from what the store recorded, sub-agents' interrupts and
        // request ids included (a caller's copy of a child's interrupt could
        // name calls nobody was asked about).
        Ok(Box::new(asked.decide_bound(self.bound_decisions())?))
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> {
        self
    }
}

/// The stack name of the built-in, and the owner of its interrupts.
const NAME: &str = "human_in_the_loop";

/// The graph-state key of the used decision ids.
const CONSUMED_KEY: &str = "hitl_consumed";

/// The state key of the interrupt a pause recorded (what was asked).
const INTERRUPT_KEY: &str = "hitl_interrupt";

/// Sub-agent approvals travelling between a parent run and its
/// [`AgentTool`](crate::harness::agent::AgentTool) calls: the parent's
/// child-run hook.
#[derive(Debug, Default)]
struct RoutedApprovals(Mutex<RoutedInner>);

#[derive(Debug, Default)]
struct RoutedInner {
    /// Children that paused for approval during this run.
    paused: Vec<ChildApproval>,
    /// Decisions for children to resume with, by the parent call id: (digest of that call, resume).
    resumes: HashMap<String, (String, HitlResume)>,
}

impl PauseHolder for RoutedApprovals {
    fn holds_pause(&self) -> bool {
        !self.0.lock().expect("routed lock").paused.is_empty()
    }
}

impl ChildRunHook for RoutedApprovals {
    fn resume_child(&self, child: &ChildRun<'_>) -> Result<Option<(AgentInput, Box<dyn Resume>)>> {
        let decided = self.0.lock().expect("routed lock").resumes.remove(child.call_id);
        let Some((decided_on, resume)) = decided else {
            return Ok(None);
        };
        if decided_on != child.digest {
            return Err(TinyAgentsError::validation(format!(
                "call `{}` to sub-agent `{}` is not the call the person decided under: its arguments changed \
                 since; nothing ran",
                child.call_id, child.tool
            )));
        }
        Ok(Some((resume.input(), Box::new(resume.spent_by_parent()))))
    }

    fn carry_pause(
        &self,
        child: &ChildRun<'_>,
        interrupt: Interrupt,
    ) -> std::result::Result<TinyAgentsError, Interrupt> {
        if interrupt.owner != NAME {
            return Err(interrupt);
        }
        let Ok(paused) = interrupt.decode::<HitlInterrupt>() else {
            return Err(interrupt);
        };
        self.0.lock().expect("routed lock").paused.push(ChildApproval {
            call_id: child.call_id.to_owned(),
            tool: child.tool.to_owned(),
            digest: child.digest.to_owned(),
            run_id: child.run_id.to_owned(),
            interrupt: paused,
        });
        Ok(TinyAgentsError::interrupted(
            Some(NAME.to_owned()),
            format!(
                "sub-agent run `{}` (call `{}` to `{}`) paused: its requests are in the parent run's \
                 `human_in_the_loop` interrupt (`children`), to decide and resume there",
                child.run_id, child.call_id, child.tool
            ),
        ))
    }
}

#[derive(Default)]
struct HitlState(Mutex<HitlInner>);

impl PauseHolder for HitlState {
    fn holds_pause(&self) -> bool {
        self.0.lock().expect("hitl lock").pending.is_some()
    }
}

/// Whether the next model turn of the run of `ctx` is the paused reply
/// replayed on resume (its `wrap_model` answers it; no model is called):
/// the call limits do not count it as a model call.
pub(crate) fn replays_next_turn<C>(ctx: &RunContext<C>) -> bool {
    ctx.locals().try_local::<HitlState>().is_some_and(|st| {
        let s = st.0.lock().expect("hitl lock");
        s.resume.is_some() && !s.replayed
    })
}

#[derive(Default)]
struct HitlInner {
    resume: Option<HitlResume>,
    replayed: bool,
    /// Gated calls admitted by a decision: call id → (digest shown, edited arguments, if any).
    admitted: HashMap<String, (String, Option<Value>)>,
    /// Requests of the batch that paused the run (until `after_agent` completes the interrupt).
    pending: Option<Vec<ApprovalRequest>>,
    /// The current batch's calls (id → digest), and the results of those that ran.
    batch: HashMap<String, String>,
    completed: Vec<CompletedCall>,
}

/// Options of [`HumanInTheLoopMiddleware`] (`type = "human_in_the_loop"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::HumanInTheLoopConfig;
///
/// let c: HumanInTheLoopConfig = from_toml_str("interrupt_on = { send_email = [\"approve\", \"reject\"] }").unwrap();
/// assert_eq!(c.interrupt_on["send_email"].len(), 2);
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "human_in_the_loop", builds = HumanInTheLoopMiddleware, validate = check_hitl_config)]
pub struct HumanInTheLoopConfig {
    /// Gated tools and the decisions allowed for each (`approve`, `edit`, `reject`, `respond`).
    pub interrupt_on: BTreeMap<String, Vec<String>>,
    /// The text shown with each request (the tool name is appended).
    #[config(default = "Tool execution requires approval".to_owned())]
    pub description: String,
}

fn check_hitl_config(c: &HumanInTheLoopConfig) -> std::result::Result<(), ConfigViolation> {
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

impl From<HumanInTheLoopConfig> for HumanInTheLoopMiddleware {
    fn from(c: HumanInTheLoopConfig) -> Self {
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
/// Each decision is bound to the digest of the call shown
/// ([`ApprovalRequest::digest`]): a replayed call whose tool or arguments
/// differ is refused and nothing runs, and the agent loop runs an approved
/// call only as approved (or as edited). Each decision is used once: a
/// second resume with it is refused. An approval of the exact call also
/// satisfies `tool_policy`'s `approval_required`. Its gates hold in sub-agent
/// runs, and a sub-agent's request pauses the parent and is carried in the
/// parent's interrupt ([`HitlInterrupt::children`]). A durable run
/// ([`AgentGraph::run_durable`](crate::graph::AgentGraph::run_durable))
/// paused here resumes in any process with
/// [`AgentGraph::resume_with`](crate::graph::AgentGraph::resume_with).
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
    /// Request ids of decisions already applied by this middleware (and its clones).
    consumed: Arc<Mutex<HashSet<String>>>,
}

impl HumanInTheLoopMiddleware {
    /// No tool gated yet.
    pub fn new() -> Self {
        Self {
            gates: HashMap::new(),
            description: "Tool execution requires approval".to_owned(),
            consumed: Arc::default(),
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
        ctx.locals().interrupts().take(NAME)?.decode().ok()
    }

    /// The gate of `call`, when it is gated.
    fn gate(&self, call: &ToolCall) -> Option<&InterruptOn> {
        self.gates
            .get(&call.name)
            .filter(|g| g.condition.as_ref().is_none_or(|c| c(call)))
    }

    fn request(&self, call: &ToolCall, gate: &InterruptOn, run_id: &str) -> ApprovalRequest {
        ApprovalRequest {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: call.arguments.clone(),
            allowed: gate.allowed.clone(),
            description: gate
                .description
                .clone()
                .unwrap_or_else(|| format!("{}: `{}`", self.description, call.name)),
            digest: call_digest(&call.name, &call.arguments),
            request_id: unique_id(&format!("{run_id}/{}", call.id)),
        }
    }

    /// Refuses a decision already used (here, or in the run's checkpoint), then records it as used.
    fn consume<C>(&self, ctx: &mut RunContext<C>, resume: &HitlResume) -> Result<()> {
        let ids = resume.request_ids();
        let run = ctx.locals().interrupts();
        let all = {
            let mut used = self.consumed.lock().expect("hitl ledger lock");
            let replayed = ids.iter().find(|id| used.contains(*id) || run.is_spent(NAME, id));
            if let Some(id) = replayed.filter(|_| !resume.spent_by_parent) {
                return Err(TinyAgentsError::conflict(format!(
                    "the decision on request `{id}` was already used: a person's decision runs a call at most \
                     once; a replayed or concurrent resume is refused and nothing ran (reload the thread to see \
                     what the other resume did, or pause again to ask anew)"
                )));
            }
            used.extend(ids.iter().cloned());
            run.spend(NAME, ids)
        };
        ctx.flow_mut().update_state(CONSUMED_KEY, json!(all));
        Ok(())
    }
}

/// Pauses the run before gated tool calls run (one request per gated call of the batch) and resumes it in a new run with a person's decisions: approve, edit, reject or respond.
#[middleware(
    builtin,
    name = "human_in_the_loop",
    config = HumanInTheLoopConfig,
    doc(
        mutation = "Records its gated tools as a run restriction (every call to them in a sub-agent run needs a person's approval of that call). On resume: replaces the first model call with the paused reply, rewrites an edited call's arguments, gives rejected and answered calls their one result, and records each approved call (its digest) so `tool_policy`'s `approval_required` accepts it. Records `hitl_pending` and `hitl_interrupt` (the whole interrupt) when it pauses and `hitl_consumed` (used decision ids) when it applies decisions, with `update_state`; a durable graph run keeps them in its checkpoint.",
        events = "`StateUpdated { key: \"hitl_pending\" }`, `StateUpdated { key: \"hitl_interrupt\" }` and `Custom { middleware: \"human_in_the_loop\", name: \"interrupt\", data: { requests } }` when it pauses; `StateUpdated { key: \"hitl_consumed\" }` and one `Custom { middleware: \"human_in_the_loop\", name: \"decided\", data: { call_id, tool, decision, request_id } }` per decided call when it applies decisions.",
        failure = "Fails closed: a batch with any gated call and no decisions fails the run with `Interrupted` before any call of the batch runs; decisions that are missing, extra, of a kind not allowed, that do not match the replayed batch, or whose call's tool or arguments differ from the digest the person decided on are a `Validation` error and nothing runs; decisions already used once (a replay, or the loser of two concurrent resumes) are a `Conflict` error and nothing runs; `before_tool` refuses a gated call the batch review did not admit. A sub-agent's request pauses the parent too and is carried in the parent's interrupt (`children`).",
        streaming = "None: the replayed reply is not streamed again (no deltas on the resumed turn).",
        cache = "None: it does not change the request; a resumed run sends the same history as the paused one.",
        retries = "Results of calls that ran before a sub-agent paused the batch are kept in the interrupt and given back on resume (not run again). The replay happens in its `wrap_model`, so register it outermost: inner retries and fallbacks never re-ask the model for the paused reply."
    )
)]
impl HumanInTheLoopMiddleware {
    #[before_agent]
    fn record<C>(&self, ctx: &mut RunContext<C>) -> Result<()> {
        // This run can carry a sub-agent's approval requests up in its interrupt.
        let routed = ctx.locals().local::<RoutedApprovals>();
        ctx.locals().child_run_hooks().install(routed.clone());
        let interrupts = ctx.locals().interrupts();
        interrupts.hold(routed);
        let st = ctx.locals().local::<HitlState>();
        interrupts.hold(st.clone());
        // Decisions given to this run: the first model turn replays the paused
        // reply, or (a checkpoint) the run starts at the paused batch.
        if let Some((resume, replay)) = interrupts.claim::<HitlResume>(NAME) {
            let mut s = st.0.lock().expect("hitl lock");
            s.resume = Some(resume);
            s.replayed = !replay;
        }
        if !self.gates.is_empty() {
            // A sub-agent inherits the gates (a condition is not inherited: every call to the tool needs approval there).
            let tools: BTreeSet<String> = self.gates.keys().cloned().collect();
            ctx.policy_mut()
                .add_restriction("human_in_the_loop", Restriction::Approval(tools));
        }
        Ok(())
    }

    #[wrap_model]
    async fn replay<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<MiddlewareModelOutcome> {
        let replay = {
            let st = ctx.locals().local::<HitlState>();
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
        let run_id = ctx.run_id().to_string();
        let gated: Vec<(usize, ApprovalRequest)> = batch
            .calls()
            .iter()
            .enumerate()
            .filter_map(|(i, p)| self.gate(&p.call).map(|g| (i, self.request(&p.call, g, &run_id))))
            .collect();
        let st = ctx.locals().local::<HitlState>();
        let resume = {
            let mut s = st.0.lock().expect("hitl lock");
            s.batch = batch
                .calls()
                .iter()
                .map(|p| (p.call.id.clone(), call_digest(&p.call.name, &p.call.arguments)))
                .collect();
            s.completed.clear();
            // The paused batch: replayed by this run's first model turn, or already pending (a run
            // resumed from a checkpoint at its tools node).
            let paused_batch = s.resume.as_ref().is_some_and(|r| {
                let ids: Vec<&str> = batch.calls().iter().map(|p| p.call.id.as_str()).collect();
                let asked: Vec<&str> = r.interrupt.reply.tool_calls.iter().map(|c| c.id.as_str()).collect();
                ids == asked
            });
            let resume = if s.replayed || paused_batch {
                s.replayed = true;
                s.resume.take()
            } else {
                None
            };
            if resume.is_none() {
                // decisions are for the batch they were made on: none carries over
                s.admitted.clear();
            }
            resume
        };
        if let Some(resume) = resume {
            // The replayed batch: the decisions must match its gated calls exactly, each the call the person saw.
            let requests: Vec<ApprovalRequest> = gated.iter().map(|(_, r)| r.clone()).collect();
            check_decisions(
                &requests,
                &resume
                    .decisions
                    .iter()
                    .map(|(k, d)| (k.clone(), d.decision.clone()))
                    .collect(),
            )?;
            for r in &requests {
                let bound = &resume.decisions[&r.call_id];
                if bound.digest != r.digest {
                    return Err(TinyAgentsError::validation(format!(
                        "call `{}` to `{}` is not the call the person decided on: its tool or arguments changed \
                         since (decided on digest {}, the call's is {}); nothing ran",
                        r.call_id, r.tool, bound.digest, r.digest
                    )));
                }
            }
            let calls: HashMap<&str, &ToolCall> = batch.calls().iter().map(|p| (p.call.id.as_str(), &p.call)).collect();
            for (call_id, (digest, _)) in &resume.children {
                let Some(call) = calls.get(call_id.as_str()) else {
                    return Err(TinyAgentsError::validation(format!(
                        "decisions for the sub-agent of call `{call_id}`, which is not in the resumed batch; nothing ran"
                    )));
                };
                if call_digest(&call.name, &call.arguments) != *digest {
                    return Err(TinyAgentsError::validation(format!(
                        "call `{call_id}` to `{}` is not the sub-agent call the person decided under: its tool or \
                         arguments changed since; nothing ran",
                        call.name
                    )));
                }
            }
            // Calls that ran before a sub-agent paused the batch are not run again: their results come back.
            let mut reused = Vec::new();
            for done in &resume.interrupt.completed {
                let Some(i) = batch.calls().iter().position(|p| p.call.id == done.result.call_id) else {
                    return Err(TinyAgentsError::validation(format!(
                        "the paused batch's call `{}` is not in the resumed batch; nothing ran",
                        done.result.call_id
                    )));
                };
                let call = &batch.calls()[i].call;
                if call_digest(&call.name, &call.arguments) != done.digest {
                    return Err(TinyAgentsError::validation(format!(
                        "call `{}` to `{}` is not the call that already ran before the pause (its tool or \
                         arguments changed); nothing ran",
                        call.id, call.name
                    )));
                }
                reused.push((i, done));
            }
            self.consume(ctx, &resume)?;
            for (_, r) in &gated {
                let decision = resume.decisions[&r.call_id].decision.kind();
                ctx.events().emit_with(EventKind::Custom, || AgentEvent::Custom {
                    middleware: "human_in_the_loop".into(),
                    name: "decided".into(),
                    data: json!({
                        "call_id": r.call_id,
                        "tool": r.tool,
                        "decision": decision,
                        "request_id": r.request_id,
                    }),
                });
            }
            let mut s = st.0.lock().expect("hitl lock");
            for (i, r) in &gated {
                let shown = &batch.calls()[*i].call;
                match &resume.decisions[&r.call_id].decision {
                    Decision::Approve => {
                        ctx.policy().grant_approval(&r.call_id, shown, shown);
                        s.admitted.insert(r.call_id.clone(), (r.digest.clone(), None));
                    }
                    Decision::Edit { arguments } => {
                        let mut edited = shown.clone();
                        edited.arguments = arguments.clone();
                        ctx.policy().grant_approval(&r.call_id, shown, &edited);
                        s.admitted
                            .insert(r.call_id.clone(), (r.digest.clone(), Some(arguments.clone())));
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
            drop(s);
            for (i, done) in reused {
                batch.reject_with(i, done.result.clone());
            }
            if !resume.children.is_empty() {
                let routed = ctx.locals().local::<RoutedApprovals>();
                let mut routed = routed.0.lock().expect("routed lock");
                routed.resumes.extend(resume.children);
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
        st.0.lock().expect("hitl lock").pending = Some(requests.clone());
        let data = json!({ "requests": requests });
        ctx.flow_mut().update_state("hitl_pending", data.clone());
        ctx.events().emit_with(EventKind::Custom, || AgentEvent::Custom {
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
        let st = ctx.locals().local::<HitlState>();
        let mut s = st.0.lock().expect("hitl lock");
        match s.admitted.remove(&call.id) {
            Some((shown, edited)) => {
                if call_digest(&call.name, &call.arguments) != shown {
                    return Err(TinyAgentsError::validation(format!(
                        "call `{}` to `{}` changed after the person decided on it (its tool or arguments differ \
                         from the call shown); it was not run",
                        call.id, call.name
                    )));
                }
                if let Some(edited) = edited {
                    call.arguments = edited;
                }
                Ok(())
            }
            None if self.gate(call).is_some() => Err(TinyAgentsError::validation(format!(
                "call `{}` to `{}` needs a person's decision and has none; it was not run",
                call.id, call.name
            ))),
            None => Ok(()),
        }
    }

    #[after_tool]
    fn remember<C>(&self, ctx: &mut RunContext<C>, result: &mut ToolResult) -> Result<()> {
        let st = ctx.locals().local::<HitlState>();
        let mut s = st.0.lock().expect("hitl lock");
        if let Some(digest) = s.batch.get(&result.call_id).cloned() {
            s.completed.push(CompletedCall {
                digest,
                result: result.clone(),
            });
        }
        Ok(())
    }

    #[after_agent]
    fn complete<C>(&self, ctx: &mut RunContext<C>, run: &mut AgentRun) -> Result<()> {
        let children = match ctx.locals().try_local::<RoutedApprovals>() {
            Some(routed) => std::mem::take(&mut routed.0.lock().expect("routed lock").paused),
            None => Vec::new(),
        };
        let st = ctx.locals().local::<HitlState>();
        let mut s = st.0.lock().expect("hitl lock");
        let pending = s.pending.take();
        let completed = std::mem::take(&mut s.completed);
        s.batch.clear();
        if pending.is_some() || !children.is_empty() {
            let mut messages = run.messages.clone();
            let reply = messages.pop().unwrap_or_else(|| Message::assistant(""));
            let interrupt = HitlInterrupt {
                run_id: ctx.run_id().to_string(),
                requests: pending.unwrap_or_default(),
                children,
                completed,
                messages: messages.into_vec(),
                reply,
            };
            drop(s);
            // What was asked, for the record: a durable run keeps it in its checkpoint, the authority on resume.
            let recorded = serde_json::to_value(&interrupt).map_err(|e| {
                TinyAgentsError::validation(format!("the approval interrupt cannot be serialised: {e}"))
            })?;
            ctx.locals().interrupts().record(Interrupt::new(NAME, recorded.clone()));
            ctx.flow_mut().update_state(INTERRUPT_KEY, recorded);
        }
        Ok(())
    }
}
