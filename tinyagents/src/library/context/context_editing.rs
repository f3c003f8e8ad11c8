//! [`ContextEditingMiddleware`]: clears old tool results from the model-visible
//! context once the request grows past a trigger.

use std::collections::HashSet;
use std::sync::Arc;

use crate::harness::cache;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::message::{AddrMap, Message, MessageId, Role};
use crate::harness::model::{ListMark, ModelRequest, SharedList};
use crate::harness::provenance::CompressionProvenance;
use crate::harness::tokens::{default_counter, TokenCounter};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`ContextEditingMiddleware`] (`type = "context_editing"`).
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::ContextEditingConfig;
///
/// let c: ContextEditingConfig =
///     from_toml_str("trigger_tokens = 50000\nkeep = 2\nexclude_tools = [\"memory\"]").unwrap();
/// let _editing = c.build();
/// let err = from_toml_str::<ContextEditingConfig>("placeholder = \"\"").unwrap_err();
/// assert!(err.to_string().contains("placeholder"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "context_editing", builds = ContextEditingMiddleware, validate = check_editing)]
pub struct ContextEditingConfig {
    /// Edit when the request's estimated tokens exceed this.
    #[config(default = 100000, range = 1..)]
    pub trigger_tokens: u64,
    /// The newest tool results always kept.
    #[config(default = 3)]
    pub keep: u32,
    /// Stop clearing once this many estimated tokens were reclaimed (0: clear every candidate).
    #[config(default = 0)]
    pub clear_at_least: u64,
    /// Also replace the arguments of the cleared results' tool calls with `{}`.
    #[config(default = false)]
    pub clear_tool_inputs: bool,
    /// Tools whose results are never cleared.
    #[config(default = Vec::new())]
    pub exclude_tools: Vec<String>,
    /// The text that replaces a cleared result.
    #[config(default = "[cleared]")]
    pub placeholder: String,
}

fn check_editing(c: &ContextEditingConfig) -> std::result::Result<(), crate::config::ConfigViolation> {
    if c.placeholder.trim().is_empty() {
        return Err(crate::config::ConfigViolation::new(
            "placeholder",
            "must not be empty: the model must see that a result was cleared",
        )
        .with_value(&c.placeholder));
    }
    Ok(())
}

impl From<ContextEditingConfig> for ContextEditingMiddleware {
    fn from(c: ContextEditingConfig) -> Self {
        Self {
            config: c,
            counter: default_counter(),
        }
    }
}

/// One registration's edits in one run (its run state): what it cleared,
/// so a long history is not cleared (copied, counted) again every turn, and
/// each result is recorded once.
#[derive(Default)]
struct Edits {
    /// By the original message's [`Message::addr`]: its cleared form.
    by_message: AddrMap<Edit>,
    /// The ids recorded as cleared (in provenance) in this run.
    recorded: HashSet<MessageId>,
    /// What the last request brought, kept for the next (see [`Grown`]).
    last: Grown,
}

/// The last request's messages and what was handed on for them, so a
/// request that is the same history grown by a turn costs what it added:
/// the request arrives as the run's history (one shared list), and what
/// goes on is the list handed on last time, extended in place (this run
/// state is its only other holder once the model call is over).
#[derive(Default)]
struct Grown {
    /// The last request's messages, in order (kept, so their addresses are
    /// not reused while compared).
    seen: Vec<Message>,
    /// The last request's list: when this one is that list appended to,
    /// `seen` is its start without comparing a message.
    mark: ListMark,
    /// The places of the tool results in `seen`.
    tools: Vec<usize>,
    /// The tokens of `seen`'s messages (kept only with a counter that
    /// memoises: [`TokenCounter::memo_key`]).
    tokens: u64,
    /// How many of `tools` (the oldest) were judged while over the trigger.
    done: usize,
    /// What was handed on for `seen` once a result of it was cleared
    /// (`None`: the request went on as it came, and no handle on the
    /// history is kept, so the loop appends to it in place).
    out: Option<SharedList<Message>>,
}

impl Grown {
    /// Takes in `input`: forgets what differs from what was seen (all of it
    /// when an earlier message changed) and appends what is new; returns
    /// the first new place.
    fn take_in(&mut self, input: &SharedList<Message>, counter: Option<&dyn TokenCounter>) -> usize {
        let same = match input.appended_since(&self.mark) {
            Some(n) if n == self.seen.len() => n,
            _ => self
                .seen
                .iter()
                .zip(input.iter())
                .take_while(|(a, b)| a.addr() == b.addr())
                .count(),
        };
        if same < self.seen.len() {
            // an earlier message changed or went: start over from the start
            *self = Self::default();
        }
        let from = self.seen.len();
        for (i, m) in input.iter().enumerate().skip(from) {
            if m.role == Role::Tool {
                self.tools.push(i);
            }
            if let Some(counter) = counter {
                self.tokens += counter.count_message(m);
            }
            self.seen.push(m.clone());
        }
        self.mark = input.mark();
        from
    }
}

/// One tool result's verdict.
struct Edit {
    /// The message as it came (kept, so its address is not reused).
    _original: Message,
    /// Its cleared form and `(tokens before, tokens after)`; `None`: never cleared
    /// (already the placeholder, or an excluded tool's).
    cleared: Option<(Message, u64, u64)>,
}

/// Clears old tool results (oldest first, the newest `keep` and excluded
/// tools spared) from the request once it exceeds `trigger_tokens`, like
/// Anthropic's `clear_tool_uses` strategy, for any model.
///
/// It edits a copy: the run's stored history keeps every result, so nothing is
/// lost and a later call can see it again if the request shrinks. Each newly
/// cleared result is recorded as compression provenance.
///
/// ```
/// use tinyagents::config::{BuildMiddleware, MiddlewareConfig};
/// use tinyagents::middleware::{ContextEditingMiddleware, ContextEditingConfig};
/// use tinyagents::prelude::*;
///
/// let editing: ContextEditingMiddleware = ContextEditingConfig::defaults().unwrap().build();
/// let _stack: MiddlewareStack<()> = MiddlewareStack::new().with(editing).unwrap();
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct ContextEditingMiddleware {
    config: ContextEditingConfig,
    #[educe(Debug(ignore))]
    counter: Arc<dyn TokenCounter>,
}

impl ContextEditingMiddleware {
    /// The provenance policy version.
    pub const POLICY: &'static str = "context_editing/clear_tool_uses/1";

    /// The same editing measuring with `counter`.
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }
}

/// Clears old tool results from the model-visible context past a token trigger.
#[middleware(
    builtin,
    name = "context_editing",
    config = ContextEditingConfig,
    run_state = Edits,
    doc(
        mutation = "Replaces the content of old tool-result messages in `request.messages` (a copy; stored history keeps them) with `placeholder`, and with `clear_tool_inputs` the matching tool calls' arguments with `{}`. Messages keep their ids and order, so tool calls stay paired with their results. The agent attaches the provenance to `AgentRun::compressions` when the run ends.",
        events = "`Compressed` with provenance (the ids of the results cleared for the first time in the run, their tool call ids, tokens before and after) on each call that clears results not cleared before in the run.",
        failure = "Cannot fail; below the trigger, or with nothing clearable, the request goes unchanged.",
        streaming = "None: it edits the request before the stream starts.",
        cache = "Never touches system segments, tools or leading system messages (stable prefix preserved); clearing a result rewrites the conversation from that result on, so `clear_at_least` exists to make each cache break reclaim enough.",
        retries = "Runs in `before_model`, outside the model onion: retries and fallbacks reuse the edited request."
    )
)]
impl ContextEditingMiddleware {
    #[before_model]
    fn edit<C>(&self, ctx: &mut RunContext<C>, mine: &mut Edits, request: &mut ModelRequest) -> Result<()> {
        if self.config.clear_at_least == 0 {
            self.edit_grown(ctx, mine, request);
            Ok(())
        } else {
            mine.last = Grown::default();
            self.edit_each(ctx, mine, request)
        }
    }
}

impl ContextEditingMiddleware {
    /// The cleared form of the tool result `m` and its tokens before and
    /// after (`None`: never cleared), and whether it was judged just now.
    fn verdict<'a>(&self, by_message: &'a mut AddrMap<Edit>, m: &Message) -> (&'a Edit, bool) {
        let c = &self.config;
        let mut first_seen = false;
        let edit = by_message.entry(m.addr()).or_insert_with(|| {
            first_seen = true;
            let cleared = if m.text() == c.placeholder || m.name.as_ref().is_some_and(|n| c.exclude_tools.contains(n)) {
                None
            } else {
                let mut cleared = m.clone();
                let old = self.counter.count_message(&cleared);
                cleared.set_text(c.placeholder.clone());
                let new = self.counter.count_message(&cleared);
                Some((cleared, old, new))
            };
            Edit {
                _original: m.clone(),
                cleared,
            }
        });
        (edit, first_seen)
    }

    /// Every clearable result cleared (`clear_at_least = 0`), in a list kept
    /// from turn to turn: a turn clears only the results that became
    /// clearable and counts only the messages that are new.
    fn edit_grown<C>(&self, ctx: &mut RunContext<C>, mine: &mut Edits, request: &mut ModelRequest) {
        let c = &self.config;
        let memo = self.counter.memo_key().map(|_| &*self.counter);
        let mut last = std::mem::take(&mut mine.last);
        let from = last.take_in(&request.messages, memo);
        let tokens = match memo {
            Some(counter) => counter.count_overhead(request) + last.tokens,
            None => self.counter.count_request(request),
        };
        if tokens <= c.trigger_tokens {
            // under the trigger the request goes as it came
            (last.out, last.done) = (None, 0);
            mine.last = last;
            return;
        }
        let clearable = last.tools.len().saturating_sub(c.keep as usize);
        // what was handed on last time, extended by what is new
        if let Some(out) = &mut last.out {
            out.extend(request.messages[from..].iter().cloned());
        }
        let mut p = CompressionProvenance::new("context_editing", Self::POLICY);
        for &i in &last.tools[last.done.min(clearable)..clearable] {
            if let Some((cleared, _)) = self.cleared(mine, &last.seen[i], &mut p) {
                // the first result cleared copies the request's list, once
                let out = last.out.get_or_insert_with(|| request.messages.clone());
                self.put(out, i, cleared);
            }
        }
        last.done = clearable;
        if let Some(out) = &last.out {
            let before = (!p.source_message_ids.is_empty()).then(|| cache::fingerprint(request));
            request.messages = out.clone();
            if let Some(before) = before {
                record(ctx, p, before, request);
            }
        }
        // Edits of messages no longer in the request go (checked when they
        // outnumber the request's tool results twice, so the cost is spread thin).
        if mine.by_message.len() > 2 * last.tools.len() + 64 {
            let keep: HashSet<usize> = last.tools.iter().map(|&i| last.seen[i].addr()).collect();
            mine.by_message.retain(|addr, _| keep.contains(addr));
        }
        mine.last = last;
    }

    /// Clears results oldest first until `clear_at_least` tokens were
    /// reclaimed: each turn from the start, as what one result reclaims
    /// decides whether the next is cleared.
    fn edit_each<C>(&self, ctx: &mut RunContext<C>, mine: &mut Edits, request: &mut ModelRequest) -> Result<()> {
        let c = &self.config;
        if self.counter.count_request(request) <= c.trigger_tokens {
            return Ok(());
        }
        let tools: Vec<usize> = (0..request.messages.len())
            .filter(|&i| request.messages[i].role == Role::Tool)
            .collect();
        let clearable = tools.len().saturating_sub(c.keep as usize);
        let before = cache::fingerprint(request);
        let mut p = CompressionProvenance::new("context_editing", Self::POLICY);
        let mut reclaimed: u64 = 0;
        for &i in &tools[..clearable] {
            if reclaimed >= c.clear_at_least {
                break;
            }
            let m = request.messages[i].clone();
            if let Some((cleared, reclaims)) = self.cleared(mine, &m, &mut p) {
                self.put(&mut request.messages, i, cleared);
                reclaimed += reclaims;
            }
        }
        if mine.by_message.len() > 2 * tools.len() + 64 {
            let keep: HashSet<usize> = tools.iter().map(|&i| request.messages[i].addr()).collect();
            mine.by_message.retain(|addr, _| keep.contains(addr));
        }
        if !p.source_message_ids.is_empty() {
            record(ctx, p, before, request);
        }
        Ok(())
    }

    /// The cleared form of the tool result `m` and the tokens clearing it
    /// reclaims (`None`: never cleared), named in `p` the first time it is
    /// cleared in the run.
    fn cleared(&self, mine: &mut Edits, m: &Message, p: &mut CompressionProvenance) -> Option<(Message, u64)> {
        let (edit, first_seen) = self.verdict(&mut mine.by_message, m);
        let (cleared, old, new) = edit.cleared.as_ref()?;
        // Provenance names each result once in the run: when it is first
        // cleared (a message seen before was already looked up here).
        if first_seen && mine.recorded.insert(cleared.id.clone()) {
            p.original_tokens += old;
            p.compressed_tokens += new;
            p.source_message_ids.push(cleared.id.clone());
            if let Some(call) = &cleared.tool_call_id {
                p.source_artifact_ids.push(call.clone());
            }
        }
        Some((cleared.clone(), old.saturating_sub(*new)))
    }

    /// Puts the cleared result at place `i` of `list` (with
    /// `clear_tool_inputs`, its call's arguments too).
    fn put(&self, list: &mut [Message], i: usize, cleared: Message) {
        if self.config.clear_tool_inputs
            && let Some(call) = &cleared.tool_call_id
        {
            clear_call_input(&mut list[..i], call);
        }
        list[i] = cleared;
    }
}

/// Records what this call cleared for the first time, with the request's
/// prefix before (`before`) and after.
fn record<C>(
    ctx: &mut RunContext<C>,
    mut p: CompressionProvenance,
    before: cache::PrefixFingerprint,
    request: &ModelRequest,
) {
    p.prompt_segment_ids = request.system.iter().map(|s| s.id.clone()).collect();
    crate::harness::compression::record(ctx, p.with_prefix(before, cache::fingerprint(request)));
}

/// Replaces with `{}` the arguments of the call `call` in the latest
/// assistant message of `before` that asked for it.
fn clear_call_input(before: &mut [Message], call: &str) {
    if let Some(m) = before
        .iter_mut()
        .rev()
        .find(|m| m.role == Role::Assistant && m.tool_calls.iter().any(|t| t.id == call))
    {
        for t in m.tool_calls.iter_mut().filter(|t| t.id == call) {
            t.arguments = serde_json::json!({});
        }
    }
}
