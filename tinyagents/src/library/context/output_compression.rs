//! [`OutputCompressionMiddleware`]: large tool results are replaced, in the
//! model-visible context, by an excerpt plus an artifact reference; the
//! original stays in the run's history and in an [`ArtifactStore`]; or, with
//! `at_tool`, compressed at the tool boundary, in history, with its record
//! restored when a durable run resumes.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::artifacts::ArtifactStore;
use super::summarizer::{summarize_charged, Summarizer};
use crate::config::ConfigViolation;
use crate::harness::cache;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::message::{Message, MessageId, Role};
use crate::harness::model::ModelRequest;
use crate::harness::provenance::CompressionProvenance;
use crate::harness::tokens::{default_counter, TokenCounter};
use crate::harness::tool::{ToolCall, ToolResult};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`OutputCompressionMiddleware`] (`type = "output_compression"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::OutputCompressionConfig;
///
/// let c: OutputCompressionConfig = from_toml_str("max_tokens = 500\nkeep_last = 1").unwrap();
/// assert_eq!(c.head_chars, 1200);
/// let err = from_toml_str::<OutputCompressionConfig>("head_chars = 0\ntail_chars = 0").unwrap_err();
/// assert!(err.to_string().contains("head_chars"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "output_compression", builds = OutputCompressionMiddleware, validate = check_output_compression)]
pub struct OutputCompressionConfig {
    /// Tool results above this many estimated tokens are compressed.
    #[config(default = 2000, range = 1..)]
    pub max_tokens: u64,
    /// Characters kept from the start of a compressed result.
    #[config(default = 1200)]
    pub head_chars: u32,
    /// Characters kept from the end of a compressed result.
    #[config(default = 400)]
    pub tail_chars: u32,
    /// The newest tool results never compressed.
    #[config(default = 0)]
    pub keep_last: u32,
    /// Compress at the tool boundary instead: in `after_tool`, so a large
    /// result enters the run's history (and every checkpoint) already
    /// compressed, its original only in the store; and in `before_tool`,
    /// large arguments (the tool still gets them whole) are stored and
    /// replaced by a stand-in in the model-visible context. The record of what was
    /// compressed is explicit run state (`output_compression`), restored in
    /// `before_agent` when a durable run resumes: a result is never
    /// compressed twice and the provenance stays whole. The originals are
    /// only in the (in-memory) store: a run resumed in another process keeps
    /// the excerpts and stand-ins but cannot read the originals back.
    #[config(default = false)]
    pub at_tool: bool,
}

fn check_output_compression(c: &OutputCompressionConfig) -> std::result::Result<(), ConfigViolation> {
    if c.head_chars == 0 && c.tail_chars == 0 {
        return Err(ConfigViolation::new(
            "head_chars",
            "`head_chars` and `tail_chars` cannot both be 0: the model must see some of the output",
        )
        .with_value(c.head_chars));
    }
    if c.at_tool && c.keep_last > 0 {
        return Err(ConfigViolation::new(
            "keep_last",
            "`keep_last` does not apply with `at_tool = true`: a result compressed at its tool boundary is \
             always the newest; remove `keep_last` or set `at_tool = false`",
        )
        .with_value(c.keep_last));
    }
    Ok(())
}

impl From<OutputCompressionConfig> for OutputCompressionMiddleware {
    fn from(c: OutputCompressionConfig) -> Self {
        Self {
            reader: true,
            config: c,
            store: ArtifactStore::new(),
            counter: default_counter(),
            summarizer: None,
        }
    }
}

/// Per-run: the results already recorded as compressed.
#[derive(Debug, Default)]
struct Recorded(Mutex<HashSet<MessageId>>);

/// Per-run: the summaries made so far, by message id (a summariser is called once per result).
#[derive(Debug, Default)]
struct Summaries(Mutex<HashMap<MessageId, String>>);

/// What was compressed at the tool boundary in a run (and the runs it
/// resumes): the artifact id of each compressed call, and the provenance
/// recorded for it. Kept as explicit run state under
/// [`OutputCompressionMiddleware::STATE_KEY`].
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolBoundary {
    /// The artifact id of each compressed result, by tool call id.
    calls: BTreeMap<String, String>,
    /// The artifact id and the stand-in of each call's compressed
    /// arguments, by tool call id.
    arguments: BTreeMap<String, (String, Value)>,
    /// The provenance recorded for them, in order.
    provenance: Vec<CompressionProvenance>,
}

/// Per-run: the [`ToolBoundary`] record (restored in `before_agent`).
#[derive(Debug, Default)]
struct Boundary(Mutex<ToolBoundary>);

/// Replaces large tool results in the model-visible context (a copy of the
/// request) with their first `head_chars` and last `tail_chars` characters and
/// a reference to the full text, kept in an [`ArtifactStore`] under
/// `artifact://<run id>/<message id>`; with
/// [`with_summarizer`](Self::with_summarizer), with a summary instead of the
/// excerpt. The run's stored history keeps the original too. It contributes
/// a [`ReadArtifactTool`](super::ReadArtifactTool) on its store (registered
/// with the stack, offered by the agent), so the model can page through an
/// original; [`without_reader`](Self::without_reader) leaves it out.
///
/// With `at_tool = true` it compresses at the tool boundary instead
/// (`after_tool`): a large result enters the run's history already
/// compressed; a call's large arguments (`before_tool`; the tool gets them
/// whole) are stored and replaced by a stand-in in later requests; and what it compressed is explicit run state
/// ([`STATE_KEY`](Self::STATE_KEY)) that `before_agent` restores when a
/// durable run resumes, so nothing is compressed twice and the provenance
/// stays whole.
///
/// ```
/// use tinyagents::config::{BuildMiddleware, MiddlewareConfig};
/// use tinyagents::middleware::{ArtifactStore, OutputCompressionMiddleware, OutputCompressionConfig};
/// use tinyagents::prelude::*;
///
/// let compress = OutputCompressionConfig::defaults().unwrap().build().with_store(ArtifactStore::new());
/// let agent: Agent<()> = Agent::new(ScriptedModel::new([]))
///     .with_stack(MiddlewareStack::new().with(compress).unwrap());
/// assert_eq!(agent.tools().names().collect::<Vec<_>>(), ["read_artifact"]);
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct OutputCompressionMiddleware {
    #[educe(Debug(ignore))]
    reader: bool,
    config: OutputCompressionConfig,
    #[educe(Debug(ignore))]
    store: Arc<ArtifactStore>,
    #[educe(Debug(ignore))]
    counter: Arc<dyn TokenCounter>,
    #[educe(Debug(ignore))]
    summarizer: Option<Arc<dyn Summarizer>>,
}

impl OutputCompressionMiddleware {
    /// The provenance policy version of the head/tail excerpt (with a
    /// summariser: `output_compression/summary/1+<summariser id>`).
    pub const POLICY: &'static str = "output_compression/head_tail/1";

    /// The provenance policy version of the head/tail excerpt made at the
    /// tool boundary (`at_tool`; with a summariser:
    /// `output_compression/tool/summary/1+<summariser id>`).
    pub const TOOL_POLICY: &'static str = "output_compression/tool/head_tail/1";

    /// The provenance policy version of large tool arguments compressed at
    /// the tool boundary (`at_tool`): recorded in `before_tool`, replaced by
    /// a stand-in in the model-visible context from the next request on.
    pub const TOOL_ARGUMENTS_POLICY: &'static str = "output_compression/tool/arguments/1";

    /// The explicit run state key of what was compressed at the tool
    /// boundary (`at_tool`): a durable run keeps it in its checkpoints and
    /// `before_agent` restores it on resume.
    pub const STATE_KEY: &'static str = "output_compression";

    /// The same middleware keeping originals in `store` (shared with a reader tool).
    pub fn with_store(mut self, store: Arc<ArtifactStore>) -> Self {
        self.store = store;
        self
    }

    /// The same middleware measuring with `counter`.
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// The same middleware summarising each large result with `summarizer`
    /// (once per result and run, its usage added to the run) instead of
    /// keeping a head/tail excerpt.
    pub fn with_summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> Self {
        self.summarizer = Some(summarizer);
        self
    }

    /// The same middleware without its `read_artifact` tool (give the model
    /// your own reader of [`store`](Self::store), or none).
    pub fn without_reader(mut self) -> Self {
        self.reader = false;
        self
    }

    /// The tools it contributes: the reader of its store.
    fn reader_tools(&self) -> Vec<Arc<dyn crate::harness::tool::Tool>> {
        if self.reader {
            vec![Arc::new(super::artifacts::ReadArtifactTool::new(self.store.clone()))]
        } else {
            Vec::new()
        }
    }

    /// The store of originals.
    pub fn store(&self) -> &Arc<ArtifactStore> {
        &self.store
    }

    /// Records `p` (event and run log) and the change `f` makes to the
    /// run's tool-boundary record, and writes the record as run state.
    fn remember<C>(
        ctx: &mut RunContext<C>,
        mut p: CompressionProvenance,
        f: impl FnOnce(&mut ToolBoundary),
    ) -> Result<()> {
        p.step = ctx.counters().steps; // as `record` sets it
        crate::harness::compression::record(ctx, p.clone());
        let boundary = ctx.locals().local::<Boundary>();
        let state = {
            let mut b = boundary.0.lock().expect("boundary lock");
            f(&mut b);
            b.provenance.push(p);
            serde_json::to_value(&*b).map_err(|e| {
                TinyAgentsError::validation(format!("`output_compression` could not record its state: {e}"))
            })?
        };
        ctx.flow_mut().update_state(Self::STATE_KEY, state);
        Ok(())
    }

    /// Replaces, in the request (a copy), the arguments of the calls whose
    /// large arguments `before_tool` compressed with their stand-ins.
    fn stand_in_arguments<C>(&self, ctx: &RunContext<C>, request: &mut ModelRequest) {
        let boundary = ctx.locals().local::<Boundary>();
        let b = boundary.0.lock().expect("boundary lock");
        if b.arguments.is_empty() {
            return;
        }
        for i in 0..request.messages.len() {
            // the list and the message are copied only when one of its
            // calls' arguments was compressed
            if request.messages[i]
                .tool_calls
                .iter()
                .any(|t| b.arguments.contains_key(&t.id))
            {
                for call in request.messages[i].tool_calls.iter_mut() {
                    if let Some((_, stand_in)) = b.arguments.get(&call.id) {
                        call.arguments = stand_in.clone();
                    }
                }
            }
        }
    }

    fn excerpt(&self, text: &str, id: &str, tokens: u64) -> String {
        let total = text.chars().count();
        let head: String = text.chars().take(self.config.head_chars as usize).collect();
        let tail_start = total
            .saturating_sub(self.config.tail_chars as usize)
            .max(head.chars().count());
        let tail: String = text.chars().skip(tail_start).collect();
        let omitted = total - head.chars().count() - tail.chars().count();
        format!(
            "[output compressed: {total} characters, about {tokens} tokens; {omitted} characters omitted below. \
             The full output is artifact `{id}` (read it with `read_artifact`).]\n{head}\n[… {omitted} characters \
             omitted …]\n{tail}"
        )
    }
}

/// Replaces large tool results in the model-visible context with an excerpt and an artifact reference.
#[middleware(
    builtin,
    name = "output_compression",
    config = OutputCompressionConfig,
    tools = Self::reader_tools,
    doc(
        mutation = "Replaces the text of tool-result messages above `max_tokens` in `request.messages` (a copy; stored history keeps the original) with a head/tail excerpt (or, with a summariser, a summary made once per result and run) and the artifact id; stores the original in its `ArtifactStore`; contributes the `read_artifact` tool on that store (unless `without_reader`). With `at_tool = true` it compresses in `after_tool` instead: the result enters history (and every checkpoint) compressed, keyed by its tool call id; in `before_tool` a call's arguments above `max_tokens` are stored (`artifact://<run id>/<call id>/arguments`; the tool runs with them whole) and, in `request.messages` (a copy), replaced by a `compressed_arguments` stand-in naming the artifact; and what it compressed is recorded with `update_state` under `output_compression`; `before_agent` restores that record when a durable run resumes (a call run again keeps its artifact and is not recorded twice; the earlier provenance goes on the resumed run's record). The agent attaches the provenance to `AgentRun::compressions` when the run ends.",
        events = "`Compressed` with provenance (the message id, its tool call id and artifact id, tokens before and after) the first time each result is compressed in a run; with `at_tool`, the tool call id and artifact id, tokens before and after, policy `output_compression/tool/…` (results) or `output_compression/tool/arguments/1` (arguments), once per call across a durable run's segments (restored ones emit nothing).",
        failure = "The excerpt cannot fail; a summariser's error fails the call with that error. Originals are never lost (history and store). A result that is not larger than its replacement is left alone. A restored `output_compression` state that is not a valid record fails `before_agent` with a `Validation` error (resume from an intact checkpoint).",
        streaming = "None: it edits the request before the stream starts (with `at_tool`, the final tool result before it enters history).",
        cache = "Never touches system segments, tools or leading system messages (stable prefix preserved); a result is compressed the same way on every call (deterministic excerpt), so the conversation prefix stays cacheable.",
        retries = "Runs in `before_model`, outside the model onion: retries and fallbacks reuse the compressed request. With `at_tool`, runs in `after_tool`, on the call's final result (after `wrap_tool` retries)."
    )
)]
impl OutputCompressionMiddleware {
    #[before_model]
    async fn compress<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        if self.config.at_tool {
            // Results were compressed at their tool boundary, in history;
            // large arguments (recorded in `before_tool`) are replaced here.
            self.stand_in_arguments(ctx, request);
            return Ok(());
        }
        let tool_positions: Vec<usize> = request
            .messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::Tool)
            .map(|(i, _)| i)
            .collect();
        let eligible = tool_positions.len().saturating_sub(self.config.keep_last as usize);
        let before = cache::fingerprint(request);
        let mut records = Vec::new();
        for &i in &tool_positions[..eligible] {
            // read first: the list (often the run's shared history) is
            // copied only when a result is replaced
            let mut m = request.messages[i].clone();
            let tokens = self.counter.count_message(&m);
            if tokens <= self.config.max_tokens {
                continue;
            }
            let text = m.text().into_owned();
            let id = ArtifactStore::id_for(ctx.run_id(), m.id.as_str());
            let excerpt = match &self.summarizer {
                None => self.excerpt(&text, &id, tokens),
                Some(summarizer) => {
                    let cached = ctx
                        .locals()
                        .local::<Summaries>()
                        .0
                        .lock()
                        .expect("summaries lock")
                        .get(&m.id)
                        .cloned();
                    let summary = match cached {
                        Some(summary) => summary,
                        None => {
                            let made =
                                summarize_charged(ctx, summarizer.as_ref(), std::slice::from_ref(&m), None).await?;
                            ctx.locals()
                                .local::<Summaries>()
                                .0
                                .lock()
                                .expect("summaries lock")
                                .insert(m.id.clone(), made.text.clone());
                            made.text
                        }
                    };
                    summarized(&text, tokens, &id, &summary)
                }
            };
            if excerpt.len() >= text.len() {
                continue;
            }
            self.store.put(&id, &text);
            m.set_text(excerpt);
            records.push((
                m.id.clone(),
                m.tool_call_id.clone(),
                id,
                tokens,
                self.counter.count_message(&m),
            ));
            request.messages[i] = m;
        }
        if records.is_empty() {
            return Ok(());
        }
        let after = cache::fingerprint(request);
        let segments: Vec<String> = request.system.iter().map(|s| s.id.clone()).collect();
        let recorded = ctx.locals().local::<Recorded>();
        for (message, call, artifact, original, compressed) in records {
            if !recorded.0.lock().expect("recorded lock").insert(message.clone()) {
                continue;
            }
            let policy = match &self.summarizer {
                None => Self::POLICY.to_owned(),
                Some(summarizer) => format!("output_compression/summary/1+{}", summarizer.id()),
            };
            let mut p = CompressionProvenance::new("output_compression", policy).with_prefix(before, after);
            p.source_message_ids.push(message);
            p.source_artifact_ids.extend(call);
            p.source_artifact_ids.push(artifact);
            p.original_tokens = original;
            p.compressed_tokens = compressed;
            p.prompt_segment_ids = segments.clone();
            crate::harness::compression::record(ctx, p);
        }
        Ok(())
    }

    #[before_agent]
    fn restore<C>(&self, ctx: &mut RunContext<C>) -> Result<()> {
        // The last value of the state key: restored from a checkpoint when a durable run resumes.
        let Some(saved) = ctx
            .flow()
            .state_updates()
            .iter()
            .rev()
            .find(|u| u.key == Self::STATE_KEY)
            .map(|u| u.value.clone())
        else {
            return Ok(());
        };
        let saved: ToolBoundary = serde_json::from_value(saved).map_err(|e| {
            TinyAgentsError::validation(format!(
                "the run state `{}` (what `output_compression` compressed at the tool \
                 boundary, kept in the checkpoint) is not a valid record: {e}; resume from an intact checkpoint",
                Self::STATE_KEY
            ))
        })?;
        // The earlier segments' provenance goes on this run's record too, without new events.
        crate::harness::compression::restore(ctx, saved.provenance.clone());
        *ctx.locals().local::<Boundary>().0.lock().expect("boundary lock") = saved;
        Ok(())
    }

    #[after_tool]
    async fn compress_result<C>(&self, ctx: &mut RunContext<C>, result: &mut ToolResult) -> Result<()> {
        if !self.config.at_tool {
            return Ok(());
        }
        let tokens = self.counter.count_text(&result.content);
        if tokens <= self.config.max_tokens {
            return Ok(());
        }
        let boundary = ctx.locals().local::<Boundary>();
        let known = boundary
            .0
            .lock()
            .expect("boundary lock")
            .calls
            .get(&result.call_id)
            .cloned();
        // A call compressed before (a resumed run running it again) keeps its artifact id and provenance.
        let id = known
            .clone()
            .unwrap_or_else(|| ArtifactStore::id_for(ctx.run_id(), &result.call_id));
        let text = std::mem::take(&mut result.content);
        let replacement = match &self.summarizer {
            None => self.excerpt(&text, &id, tokens),
            Some(summarizer) => {
                let message = Message::tool(result.call_id.clone(), result.name.clone(), text.clone());
                let made = summarize_charged(ctx, summarizer.as_ref(), std::slice::from_ref(&message), None).await?;
                summarized(&text, tokens, &id, &made.text)
            }
        };
        if replacement.len() >= text.len() {
            result.content = text;
            return Ok(());
        }
        self.store.put(&id, &text);
        result.content = replacement;
        if known.is_some() {
            return Ok(());
        }
        let policy = match &self.summarizer {
            None => Self::TOOL_POLICY.to_owned(),
            Some(summarizer) => format!("output_compression/tool/summary/1+{}", summarizer.id()),
        };
        let mut p = CompressionProvenance::new("output_compression", policy);
        p.source_artifact_ids.push(result.call_id.clone());
        p.source_artifact_ids.push(id.clone());
        p.original_tokens = tokens;
        p.compressed_tokens = self.counter.count_text(&result.content);
        let call_id = result.call_id.clone();
        Self::remember(ctx, p, |b| {
            b.calls.insert(call_id, id);
        })
    }

    #[before_tool]
    fn compress_arguments<C>(&self, ctx: &mut RunContext<C>, call: &mut ToolCall) -> Result<()> {
        // The tool runs with its arguments whole; the model-visible copy of
        // large ones is replaced by a stand-in from the next request on.
        if !self.config.at_tool {
            return Ok(());
        }
        let text = call.arguments.to_string();
        let tokens = self.counter.count_text(&text);
        if tokens <= self.config.max_tokens {
            return Ok(());
        }
        let boundary = ctx.locals().local::<Boundary>();
        if boundary
            .0
            .lock()
            .expect("boundary lock")
            .arguments
            .contains_key(&call.id)
        {
            return Ok(()); // compressed before (a resumed run running it again)
        }
        let id = format!("{}/arguments", ArtifactStore::id_for(ctx.run_id(), &call.id));
        let stand_in = json!({
            "compressed_arguments": format!(
                "{} characters, about {tokens} tokens; the full arguments are artifact `{id}` (read them with \
                 `read_artifact`)",
                text.chars().count()
            )
        });
        let compressed = self.counter.count_text(&stand_in.to_string());
        if compressed >= tokens {
            return Ok(());
        }
        self.store.put(&id, &text);
        let mut p = CompressionProvenance::new("output_compression", Self::TOOL_ARGUMENTS_POLICY);
        p.source_artifact_ids.push(call.id.clone());
        p.source_artifact_ids.push(id.clone());
        p.original_tokens = tokens;
        p.compressed_tokens = compressed;
        let call_id = call.id.clone();
        Self::remember(ctx, p, |b| {
            b.arguments.insert(call_id, (id, stand_in));
        })
    }
}

/// The text standing for `text` (about `tokens` tokens, kept as artifact `id`): its summary.
fn summarized(text: &str, tokens: u64, id: &str, summary: &str) -> String {
    format!(
        "[output summarised: {} characters, about {tokens} tokens. The full output is artifact `{id}` \
         (read it with `read_artifact`).]\n{summary}",
        text.chars().count()
    )
}
