//! [`OutputCompressionMiddleware`]: large tool results are replaced, in the
//! model-visible context, by an excerpt plus an artifact reference; the
//! original stays in the run's history and in an [`ArtifactStore`].

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use super::artifacts::ArtifactStore;
use super::summarizer::{summarize_charged, Summarizer};
use crate::config::ConfigViolation;
use crate::harness::cache;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::message::{MessageId, Role};
use crate::harness::model::ModelRequest;
use crate::harness::provenance::CompressionProvenance;
use crate::harness::tokens::{default_counter, TokenCounter};
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
}

fn check_output_compression(c: &OutputCompressionConfig) -> std::result::Result<(), ConfigViolation> {
    if c.head_chars == 0 && c.tail_chars == 0 {
        return Err(ConfigViolation::new(
            "head_chars",
            "`head_chars` and `tail_chars` cannot both be 0: the model must see some of the output",
        )
        .with_value(c.head_chars));
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
        mutation = "Replaces the text of tool-result messages above `max_tokens` in `request.messages` (a copy; stored history keeps the original) with a head/tail excerpt (or, with a summariser, a summary made once per result and run) and the artifact id; stores the original in its `ArtifactStore`; contributes the `read_artifact` tool on that store (unless `without_reader`). The agent attaches the provenance to `AgentRun::compressions` when the run ends.",
        events = "`Compressed` with provenance (the message id, its tool call id and artifact id, tokens before and after) the first time each result is compressed in a run.",
        failure = "The excerpt cannot fail; a summariser's error fails the call with that error. Originals are never lost (history and store). A result that is not larger than its replacement is left alone.",
        streaming = "None: it edits the request before the stream starts.",
        cache = "Never touches system segments, tools or leading system messages (stable prefix preserved); a result is compressed the same way on every call (deterministic excerpt), so the conversation prefix stays cacheable.",
        retries = "Runs in `before_model`, outside the model onion: retries and fallbacks reuse the compressed request."
    )
)]
impl OutputCompressionMiddleware {
    #[before_model]
    async fn compress<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
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
            let m = &mut request.messages[i];
            let tokens = self.counter.count_message(m);
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
                                summarize_charged(ctx, summarizer.as_ref(), std::slice::from_ref(&*m), None).await?;
                            ctx.locals()
                                .local::<Summaries>()
                                .0
                                .lock()
                                .expect("summaries lock")
                                .insert(m.id.clone(), made.text.clone());
                            made.text
                        }
                    };
                    format!(
                        "[output summarised: {} characters, about {tokens} tokens. The full output is artifact `{id}` \
                         (read it with `read_artifact`).]\n{summary}",
                        text.chars().count()
                    )
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
                self.counter.count_message(m),
            ));
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
}
