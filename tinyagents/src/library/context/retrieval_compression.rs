//! [`RetrievalCompressionMiddleware`]: retrieved documents in the model-visible context
//! squeezed to a token budget, with provenance per document.

use std::borrow::Cow;
use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{json, Value};

use crate::config::ConfigViolation;
use crate::harness::cache;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::message::{AddrMap, Message, MessageId, Role};
use crate::harness::model::ModelRequest;
use crate::harness::provenance::CompressionProvenance;
use crate::harness::tokens::{default_counter, TokenCounter};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`RetrievalCompressionMiddleware`] (`type = "retrieval_compression"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::RetrievalCompressionConfig;
///
/// let c: RetrievalCompressionConfig = from_toml_str("tools = [\"search\"]\nbudget_tokens = 3000").unwrap();
/// assert_eq!(c.min_doc_tokens, 50);
/// assert!(from_toml_str::<RetrievalCompressionConfig>("tools = []").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "retrieval_compression", builds = RetrievalCompressionMiddleware, validate = check_retrieval)]
pub struct RetrievalCompressionConfig {
    /// The tools whose results are retrieved documents.
    pub tools: Vec<String>,
    /// Estimated tokens all retrieved documents of a request may take together.
    #[config(default = 4000, range = 1..)]
    pub budget_tokens: u64,
    /// A document whose share would be smaller than this is omitted (its id stays visible).
    #[config(default = 50)]
    pub min_doc_tokens: u64,
}

fn check_retrieval(c: &RetrievalCompressionConfig) -> std::result::Result<(), ConfigViolation> {
    if c.tools.is_empty() {
        return Err(ConfigViolation::new("tools", "name at least one retrieval tool").with_value(&c.tools));
    }
    if c.min_doc_tokens > c.budget_tokens {
        return Err(ConfigViolation::new(
            "min_doc_tokens",
            format!("must not exceed `budget_tokens` ({})", c.budget_tokens),
        )
        .with_value(c.min_doc_tokens));
    }
    Ok(())
}

impl From<RetrievalCompressionConfig> for RetrievalCompressionMiddleware {
    fn from(c: RetrievalCompressionConfig) -> Self {
        Self {
            config: c,
            counter: default_counter(),
        }
    }
}

/// The text fields a document may carry, in order of preference.
const TEXT_FIELDS: &[&str] = &["text", "content", "page_content"];

/// One document found in a retrieval result.
struct Doc {
    /// Where it is in the parsed result: `None` for a plain-text result.
    slot: Option<usize>,
    id: String,
    field: &'static str,
    tokens: u64,
}

/// One retrieval result as read: its documents, and its JSON (an array of
/// documents, or an object with a `documents` array); `None` for plain text.
struct Found {
    /// The message as it came (kept, so its address is not reused).
    original: Message,
    json: Option<Value>,
    docs: Vec<Doc>,
    /// The last form it was squeezed to.
    squeezed: Option<Squeezed>,
}

/// A retrieval result squeezed to the shares of its documents.
struct Squeezed {
    /// The shares it was squeezed to.
    shares: Vec<u64>,
    message: Message,
    /// The documents cut or omitted.
    changes: Vec<Change>,
}

/// One document cut or omitted: which, and its tokens before and after.
#[derive(Clone, Copy)]
struct Change {
    doc: usize,
    before: u64,
    after: u64,
}

impl Found {
    /// Reads one retrieval result (a result it cannot parse as documents is one
    /// plain-text document named by its tool call id).
    fn read(m: &Message, counter: &dyn TokenCounter) -> Self {
        let text = m.text();
        let mut value: Option<Value> = serde_json::from_str(&text).ok();
        let found = value.as_mut().and_then(docs_of).map(|list| {
            list.iter()
                .enumerate()
                .filter_map(|(slot, d)| {
                    let field = TEXT_FIELDS
                        .iter()
                        .copied()
                        .find(|f| d.get(*f).is_some_and(Value::is_string))?;
                    let id = match d.get("id") {
                        Some(Value::String(s)) => s.clone(),
                        Some(other) => other.to_string(),
                        None => format!("{}#{slot}", m.tool_call_id.as_deref().unwrap_or("?")),
                    };
                    let tokens = counter.count_text(d[field].as_str().unwrap_or_default());
                    Some(Doc {
                        slot: Some(slot),
                        id,
                        field,
                        tokens,
                    })
                })
                .collect::<Vec<_>>()
        });
        let (json, docs) = match (value, found) {
            (Some(v), Some(docs)) => (Some(v), docs),
            _ => (
                None,
                vec![Doc {
                    slot: None,
                    id: m.tool_call_id.clone().unwrap_or_else(|| m.id.to_string()),
                    field: "text",
                    tokens: counter.count_text(&text),
                }],
            ),
        };
        Self {
            original: m.clone(),
            json,
            docs,
            squeezed: None,
        }
    }

    /// The result with each document cut to its share (or omitted below `min_tokens`).
    fn squeeze(&self, shares: &[u64], min_tokens: u64, counter: &dyn TokenCounter) -> Squeezed {
        let mut out = self.original.clone();
        // the JSON, copied at the first document that changes
        let mut json: Option<Value> = None;
        let mut changes = Vec::new();
        for (k, (doc, &share)) in self.docs.iter().zip(shares).enumerate() {
            if share >= doc.tokens {
                continue;
            }
            let omit = share < min_tokens;
            let text: Cow<'_, str> = match (&self.json, doc.slot) {
                (Some(v), Some(slot)) => Cow::Borrowed(
                    docs_of_ref(v)
                        .and_then(|l| l[slot][doc.field].as_str())
                        .unwrap_or_default(),
                ),
                _ => self.original.text(),
            };
            let chars = text.chars().count();
            let keep = if omit {
                0
            } else {
                (chars as u64 * share / doc.tokens.max(1)) as usize
            };
            let cut: String = text.chars().take(keep).collect();
            let new_tokens = match (&self.json, doc.slot) {
                (Some(original), Some(slot)) => {
                    let list = docs_of(json.get_or_insert_with(|| original.clone())).expect("parsed as documents");
                    if omit {
                        let id = list[slot]
                            .get("id")
                            .cloned()
                            .unwrap_or_else(|| Value::from(doc.id.as_str()));
                        list[slot] = json!({"id": id, "omitted": "retrieval budget"});
                        0
                    } else {
                        list[slot][doc.field] = Value::String(format!("{cut}…"));
                        list[slot]["truncated"] = json!({"original_chars": chars});
                        counter.count_text(&cut)
                    }
                }
                _ => {
                    let text = if omit {
                        format!("[document `{}` omitted: retrieval budget; {chars} characters]", doc.id)
                    } else {
                        format!("{cut}… [truncated: {chars} characters]")
                    };
                    let n = counter.count_text(&text);
                    out.set_text(text);
                    n
                }
            };
            changes.push(Change {
                doc: k,
                before: doc.tokens,
                after: new_tokens,
            });
        }
        if let Some(v) = json {
            out.set_text(v.to_string());
        }
        Squeezed {
            shares: shares.to_vec(),
            message: out,
            changes,
        }
    }
}

fn docs_of(value: &mut Value) -> Option<&mut Vec<Value>> {
    match value {
        Value::Array(a) => Some(a),
        Value::Object(o) => o.get_mut("documents").and_then(Value::as_array_mut),
        _ => None,
    }
}

fn docs_of_ref(value: &Value) -> Option<&Vec<Value>> {
    match value {
        Value::Array(a) => Some(a),
        Value::Object(o) => o.get("documents").and_then(Value::as_array),
        _ => None,
    }
}

/// One registration's memory of a run (its run state).
#[derive(Default)]
struct Memo {
    /// Each retrieval result read once (parsed, its documents counted) and
    /// its last squeezed form, by the message's [`Message::addr`]; so a long
    /// history is not parsed again every turn, and a result whose shares did
    /// not change is not rebuilt.
    found: AddrMap<Found>,
    /// The documents already recorded.
    recorded: HashSet<(MessageId, String)>,
}

/// Squeezes retrieved documents (the results of the configured retrieval
/// tools) in the model-visible context to `budget_tokens` in total: each
/// document gets a fair share (max-min: small documents whole, large ones cut
/// to an equal share), a cut document keeps its start and is marked
/// `"truncated": {"original_chars": n}`, and a document whose share would be
/// below `min_doc_tokens` is replaced by `{"id": …, "omitted": "retrieval
/// budget"}`. Results keep their JSON shape (an array of documents, or an
/// object with `documents`; each with `id` and `text`, `content` or
/// `page_content`); a plain-text result counts as one document named by its
/// tool call id. The stored history keeps every document; provenance is
/// recorded per document.
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::{RetrievalCompressionMiddleware, RetrievalCompressionConfig};
/// use tinyagents::prelude::*;
///
/// let squeeze: RetrievalCompressionMiddleware =
///     from_toml_str::<RetrievalCompressionConfig>("tools = [\"search\"]").unwrap().build();
/// let _stack: MiddlewareStack<()> = MiddlewareStack::new().with(squeeze).unwrap();
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct RetrievalCompressionMiddleware {
    config: RetrievalCompressionConfig,
    #[educe(Debug(ignore))]
    counter: Arc<dyn TokenCounter>,
}

impl RetrievalCompressionMiddleware {
    /// The provenance policy version.
    pub const POLICY: &'static str = "retrieval_compression/fair_share/1";

    /// The same middleware measuring with `counter`.
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// Max-min fair shares of `budget` for documents of these sizes.
    fn shares(sizes: &[u64], budget: u64) -> Vec<u64> {
        // smallest first, ties by place: the keys are unique, so an unstable sort of
        // the pairs themselves (no lookup per comparison) gives the one order
        let mut order: Vec<(u64, usize)> = sizes.iter().copied().zip(0..).collect();
        order.sort_unstable();
        let mut shares = vec![0; sizes.len()];
        let mut left = budget;
        for (k, &(size, i)) in order.iter().enumerate() {
            let fair = left / (order.len() - k) as u64;
            shares[i] = size.min(fair);
            left -= shares[i];
        }
        shares
    }
}

/// Squeezes retrieved documents in the model-visible context to a token budget, with provenance per document.
#[middleware(
    builtin,
    name = "retrieval_compression",
    config = RetrievalCompressionConfig,
    run_state = Memo,
    doc(
        mutation = "Rewrites the results of the configured retrieval tools in `request.messages` (a copy; stored history keeps every document): documents cut to a fair share of `budget_tokens` (marked `truncated`) or omitted (an id stub), same JSON shape. The agent attaches the provenance to `AgentRun::compressions` when the run ends.",
        events = "`Compressed` once per cut or omitted document per run, with the tool message id, the document id and tool call id, and the document's tokens before and after.",
        failure = "Cannot fail; a result it cannot parse as documents counts as one plain-text document. Below the budget nothing changes.",
        streaming = "None: it edits the request before the stream starts.",
        cache = "Never touches system segments, tools or leading system messages (stable prefix preserved); shares are deterministic, but a new retrieval result changes the shares of earlier ones, rewriting the conversation from the first cut result on.",
        retries = "Runs in `before_model`, outside the model onion: retries and fallbacks reuse the squeezed request."
    )
)]
impl RetrievalCompressionMiddleware {
    #[before_model]
    fn squeeze<C>(&self, ctx: &mut RunContext<C>, memo: &mut Memo, request: &mut ModelRequest) -> Result<()> {
        let mine = &mut memo.found;
        // The retrieval results, in message order: place and address.
        let mut results: Vec<(usize, usize)> = Vec::new();
        for (i, m) in request.messages.iter().enumerate() {
            if m.role != Role::Tool || !m.name.as_ref().is_some_and(|n| self.config.tools.contains(n)) {
                continue;
            }
            let addr = m.addr();
            mine.entry(addr)
                .or_insert_with(|| Found::read(m, self.counter.as_ref()));
            results.push((i, addr));
        }
        // Results no longer in the request go (checked when they outnumber
        // the request's results twice, so the cost is spread thin).
        if mine.len() > 2 * results.len() + 64 {
            let keep: HashSet<usize> = results.iter().map(|(_, addr)| *addr).collect();
            mine.retain(|addr, _| keep.contains(addr));
        }
        let sizes: Vec<u64> = results
            .iter()
            .flat_map(|(_, addr)| mine[addr].docs.iter().map(|d| d.tokens))
            .collect();
        let total: u64 = sizes.iter().sum();
        if total <= self.config.budget_tokens {
            return Ok(());
        }
        let prefix_before = cache::fingerprint(request);
        let shares = Self::shares(&sizes, self.config.budget_tokens);
        // What changed and was not squeezed so before: (place, document id, tokens before, after).
        let mut fresh: Vec<(usize, String, u64, u64)> = Vec::new();
        let mut at = 0;
        for &(i, addr) in &results {
            let found = mine.get_mut(&addr).expect("read above");
            let its_shares = &shares[at..at + found.docs.len()];
            at += found.docs.len();
            if found.squeezed.as_ref().is_none_or(|s| s.shares != its_shares) {
                let squeezed = found.squeeze(its_shares, self.config.min_doc_tokens, self.counter.as_ref());
                fresh.extend(
                    squeezed
                        .changes
                        .iter()
                        .map(|c| (i, found.docs[c.doc].id.clone(), c.before, c.after)),
                );
                found.squeezed = Some(squeezed);
            }
            let squeezed = found.squeezed.as_ref().expect("squeezed above");
            if !squeezed.changes.is_empty() {
                request.messages[i] = squeezed.message.clone();
            }
        }
        if fresh.is_empty() {
            return Ok(());
        }
        let prefix_after = cache::fingerprint(request);
        let segments: Vec<String> = request.system.iter().map(|s| s.id.clone()).collect();
        for (i, doc_id, original, compressed) in fresh {
            let m = &request.messages[i];
            if !memo.recorded.insert((m.id.clone(), doc_id.clone())) {
                continue;
            }
            let mut p = CompressionProvenance::new("retrieval_compression", Self::POLICY)
                .with_prefix(prefix_before, prefix_after);
            p.source_message_ids.push(m.id.clone());
            p.source_artifact_ids.push(doc_id);
            p.source_artifact_ids.extend(m.tool_call_id.clone());
            p.original_tokens = original;
            p.compressed_tokens = compressed;
            p.prompt_segment_ids = segments.clone();
            crate::harness::compression::record(ctx, p);
        }
        Ok(())
    }
}
