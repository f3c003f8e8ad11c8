//! [`ContextEditingMiddleware`]: clears old tool results from the model-visible
//! context once the request grows past a trigger.

use std::collections::HashSet;
use std::sync::Arc;

use crate::harness::cache;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::message::{AddrMap, Message, MessageId, Role};
use crate::harness::model::ModelRequest;
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
    /// The last request's clearable tool results, in order: place, the
    /// original's address (kept alive by its edit) and what replaced it. A
    /// request whose first tool results are the same messages at the same
    /// places (a history that grew by a turn) has them by place, without a
    /// lookup per message.
    last: Vec<(usize, usize, Option<Message>)>,
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
        let c = &self.config;
        if self.counter.count_request(request) <= c.trigger_tokens {
            return Ok(());
        }
        let tool_positions: Vec<usize> = request
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::Tool)
            .map(|(i, _)| i)
            .collect();
        let clearable = tool_positions.len().saturating_sub(c.keep as usize);
        let before = cache::fingerprint(request);
        let mut p = CompressionProvenance::new("context_editing", Self::POLICY);
        let mut reclaimed: u64 = 0;
        let mut cleared_any = false;
        let mut cleared_calls = HashSet::new();
        let last = std::mem::take(&mut mine.last);
        // The first clearable results, unchanged since the last request: as
        // they were then (their provenance is recorded; `clear_at_least`
        // stops by what each clears, so it goes the long way).
        let mut known = 0;
        if c.clear_at_least == 0 {
            while known < last.len()
                && known < clearable
                && tool_positions[known] == last[known].0
                && request.messages[last[known].0].addr() == last[known].1
            {
                known += 1;
            }
        }
        let mut now = last;
        now.truncate(known);
        for (i, _, cleared) in &now {
            if let Some(cleared) = cleared {
                let m = &mut request.messages[*i];
                *m = cleared.clone();
                cleared_any = true;
                if c.clear_tool_inputs
                    && let Some(call) = &m.tool_call_id
                {
                    cleared_calls.insert(call.clone());
                }
            }
        }
        for &i in &tool_positions[known..clearable] {
            if c.clear_at_least > 0 && reclaimed >= c.clear_at_least {
                break;
            }
            let m = &mut request.messages[i];
            let addr = m.addr();
            let mut first_seen = false;
            let edit = match mine.by_message.get_mut(&addr) {
                Some(edit) => edit,
                None => {
                    let original = m.clone();
                    let cleared =
                        if m.text() == c.placeholder || m.name.as_ref().is_some_and(|n| c.exclude_tools.contains(n)) {
                            None
                        } else {
                            let mut cleared = m.clone();
                            let old = self.counter.count_message(&cleared);
                            cleared.set_text(c.placeholder.clone());
                            let new = self.counter.count_message(&cleared);
                            Some((cleared, old, new))
                        };
                    first_seen = true;
                    mine.by_message.entry(addr).or_insert(Edit {
                        _original: original,
                        cleared,
                    })
                }
            };
            now.push((i, addr, edit.cleared.as_ref().map(|(m, _, _)| m.clone())));
            let Some((cleared, old, new)) = &edit.cleared else {
                continue;
            };
            *m = cleared.clone();
            cleared_any = true;
            reclaimed += old.saturating_sub(*new);
            if c.clear_tool_inputs
                && let Some(call) = &m.tool_call_id
            {
                cleared_calls.insert(call.clone());
            }
            // Provenance names each result once in the run: when it is first
            // cleared (a message seen before was already looked up here).
            if first_seen && mine.recorded.insert(m.id.clone()) {
                p.original_tokens += old;
                p.compressed_tokens += new;
                p.source_message_ids.push(m.id.clone());
                if let Some(call) = &m.tool_call_id {
                    p.source_artifact_ids.push(call.clone());
                }
            }
        }
        // Edits of messages no longer in the request go (checked when they
        // outnumber the request's messages twice, so the cost is spread thin).
        if mine.by_message.len() > 2 * now.len() + 64 {
            let keep: HashSet<usize> = now.iter().map(|(_, addr, _)| *addr).collect();
            mine.by_message.retain(|addr, _| keep.contains(addr));
        }
        mine.last = now;
        if !cleared_any {
            return Ok(());
        }
        if c.clear_tool_inputs {
            for m in request.messages.iter_mut() {
                // copied only when one of its calls' results was cleared
                if m.tool_calls.iter().any(|t| cleared_calls.contains(&t.id)) {
                    for call in m.tool_calls.iter_mut().filter(|t| cleared_calls.contains(&t.id)) {
                        call.arguments = serde_json::json!({});
                    }
                }
            }
        }
        if !p.source_message_ids.is_empty() {
            p.prompt_segment_ids = request.system.iter().map(|s| s.id.clone()).collect();
            crate::harness::compression::record(ctx, p.with_prefix(before, cache::fingerprint(request)));
        }
        Ok(())
    }
}
