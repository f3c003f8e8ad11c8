//! [`RetrievalCompressionMiddleware`]: retrieved documents in the model-visible context
//! squeezed to a token budget, with provenance per document.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::config::ConfigViolation;
use crate::harness::cache;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::message::{MessageId, Role};
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
    message: usize,
    /// Where it is in the parsed result: `None` for a plain-text result.
    slot: Option<usize>,
    id: String,
    field: &'static str,
    text: String,
    tokens: u64,
}

/// A parsed retrieval result: its JSON (an array of documents, or an object
/// with a `documents` array), or plain text.
enum Parsed {
    Json(Value),
    Text,
}

fn docs_of(value: &mut Value) -> Option<&mut Vec<Value>> {
    match value {
        Value::Array(a) => Some(a),
        Value::Object(o) => o.get_mut("documents").and_then(Value::as_array_mut),
        _ => None,
    }
}

/// Per-run: the documents already recorded.
#[derive(Debug, Default)]
struct Recorded(Mutex<HashSet<(MessageId, String)>>);

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
        let mut order: Vec<usize> = (0..sizes.len()).collect();
        order.sort_by_key(|&i| (sizes[i], i));
        let mut shares = vec![0; sizes.len()];
        let mut left = budget;
        for (k, &i) in order.iter().enumerate() {
            let fair = left / (order.len() - k) as u64;
            shares[i] = sizes[i].min(fair);
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
    fn squeeze<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let mut parsed: Vec<(usize, Parsed)> = Vec::new();
        let mut docs: Vec<Doc> = Vec::new();
        for (i, m) in request.messages.iter().enumerate() {
            if m.role != Role::Tool || !m.name.as_ref().is_some_and(|n| self.config.tools.contains(n)) {
                continue;
            }
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
                        let body = d[field].as_str().unwrap_or_default().to_owned();
                        let id = match d.get("id") {
                            Some(Value::String(s)) => s.clone(),
                            Some(other) => other.to_string(),
                            None => format!("{}#{slot}", m.tool_call_id.as_deref().unwrap_or("?")),
                        };
                        Some((slot, id, field, body))
                    })
                    .collect::<Vec<_>>()
            });
            match (value, found) {
                (Some(v), Some(found)) => {
                    for (slot, id, field, body) in found {
                        let tokens = self.counter.count_text(&body);
                        docs.push(Doc {
                            message: i,
                            slot: Some(slot),
                            id,
                            field,
                            text: body,
                            tokens,
                        });
                    }
                    parsed.push((i, Parsed::Json(v)));
                }
                _ => {
                    let tokens = self.counter.count_text(&text);
                    let id = m.tool_call_id.clone().unwrap_or_else(|| m.id.to_string());
                    docs.push(Doc {
                        message: i,
                        slot: None,
                        id,
                        field: "text",
                        text: text.into_owned(),
                        tokens,
                    });
                    parsed.push((i, Parsed::Text));
                }
            }
        }
        let total: u64 = docs.iter().map(|d| d.tokens).sum();
        if total <= self.config.budget_tokens {
            return Ok(());
        }
        let prefix_before = cache::fingerprint(request);
        let sizes: Vec<u64> = docs.iter().map(|d| d.tokens).collect();
        let shares = Self::shares(&sizes, self.config.budget_tokens);
        let mut changes = Vec::new();
        let mut changed = vec![false; parsed.len()];
        for (doc, share) in docs.iter().zip(shares) {
            if share >= doc.tokens {
                continue;
            }
            let omit = share < self.config.min_doc_tokens;
            let chars = doc.text.chars().count();
            let keep = if omit {
                0
            } else {
                (chars as u64 * share / doc.tokens.max(1)) as usize
            };
            let cut: String = doc.text.chars().take(keep).collect();
            // `parsed` is in message order: a binary search, not a scan per document.
            let Ok(at) = parsed.binary_search_by_key(&doc.message, |(i, _)| *i) else {
                continue;
            };
            changed[at] = true;
            let p = &mut parsed[at].1;
            let new_tokens = match (p, doc.slot) {
                (Parsed::Json(v), Some(slot)) => {
                    let list = docs_of(v).expect("parsed as documents");
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
                        self.counter.count_text(&cut)
                    }
                }
                _ => {
                    let text = if omit {
                        format!("[document `{}` omitted: retrieval budget; {chars} characters]", doc.id)
                    } else {
                        format!("{cut}… [truncated: {chars} characters]")
                    };
                    let n = self.counter.count_text(&text);
                    request.messages[doc.message].set_text(text);
                    n
                }
            };
            changes.push((doc.message, doc.id.clone(), doc.tokens, new_tokens));
        }
        for ((i, p), changed) in parsed.iter().zip(changed) {
            if let (Parsed::Json(v), true) = (p, changed) {
                request.messages[*i].set_text(v.to_string());
            }
        }
        let prefix_after = cache::fingerprint(request);
        let segments: Vec<String> = request.system.iter().map(|s| s.id.clone()).collect();
        let recorded = ctx.local::<Recorded>();
        for (i, doc_id, original, compressed) in changes {
            let m = &request.messages[i];
            if !recorded
                .0
                .lock()
                .expect("recorded lock")
                .insert((m.id.clone(), doc_id.clone()))
            {
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
