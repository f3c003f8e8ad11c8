//! [`DedupCheckMiddleware`]: before a write runs, compares the code it
//! writes with the workspace's files by normalised-line shingles and asks
//! the model, in one review message, to reuse the similar code it names.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use tinyagents_macros::{middleware, MiddlewareConfig};

use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::message::Message;
use crate::harness::middleware::{PreparedBatch, PreparedCallVerdict, RunState};
use crate::harness::model::ModelRequest;
use crate::harness::tool::{FileAccessMode, ToolCall, ToolResult};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// Options of [`DedupCheckMiddleware`] (`type = "dedup_check"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::DedupCheckConfig;
///
/// let c: DedupCheckConfig = from_toml_str("threshold = 0.85\nmin_lines = 10").unwrap();
/// assert_eq!(c.min_lines, 10);
/// let err = from_toml_str::<DedupCheckConfig>("threshold = 1.5").unwrap_err();
/// assert_eq!(err.errors()[0].path, "threshold");
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "dedup_check", builds = DedupCheckMiddleware, validate = check_dedup_config)]
pub struct DedupCheckConfig {
    /// Similarity (the share of the written code's shingles found in a file) at which a place is reported.
    #[config(default = 0.85, range = 0.0..=1.0, finite)]
    pub threshold: f64,
    /// Written code shorter than this many non-blank lines is not checked.
    #[config(default = 10, range = 1..=100000)]
    pub min_lines: usize,
    /// Lines per shingle.
    #[config(default = 3, range = 1..=50)]
    pub shingle_lines: usize,
    /// File extensions compared (without the dot).
    #[config(default = strings(&["rs", "py", "js", "ts", "tsx", "jsx", "go", "java", "kt", "c", "h", "cc", "cpp", "hpp", "cs", "rb", "swift", "php", "scala"]))]
    pub extensions: Vec<String>,
    /// Argument keys holding written content.
    #[config(default = strings(&["content", "new_string", "new_text", "code", "text"]))]
    pub content_keys: Vec<String>,
    /// The most files read per check.
    #[config(default = 2000, range = 1..=1000000)]
    pub max_files: usize,
    /// Files larger than this many bytes are skipped.
    #[config(default = 262144, range = 1..=1073741824)]
    pub max_file_bytes: u64,
}

fn check_dedup_config(c: &DedupCheckConfig) -> std::result::Result<(), ConfigViolation> {
    if c.shingle_lines > c.min_lines {
        return Err(ConfigViolation::new("shingle_lines", "must not exceed `min_lines`").with_value(c.shingle_lines));
    }
    if c.content_keys.is_empty() {
        return Err(ConfigViolation::new("content_keys", "must name at least one key").with_value(&c.content_keys));
    }
    Ok(())
}

impl From<DedupCheckConfig> for DedupCheckMiddleware {
    fn from(config: DedupCheckConfig) -> Self {
        Self { config }
    }
}

/// One normalised line: trimmed, inner whitespace collapsed; blank lines and
/// lines of bare punctuation (`}`, `});`) carry no signal and are dropped.
fn normalise(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let n = l.split_whitespace().collect::<Vec<_>>().join(" ");
            let signal = n.chars().any(char::is_alphanumeric);
            signal.then_some((i + 1, n))
        })
        .collect()
}

/// The shingles (k consecutive normalised lines) of `lines`, with the
/// original line span each covers.
fn shingles(lines: &[(usize, String)], k: usize) -> Vec<(u64, usize, usize)> {
    lines
        .windows(k)
        .map(|w| {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for (_, l) in w {
                for b in l.bytes().chain(std::iter::once(b'\n')) {
                    h ^= u64::from(b);
                    h = h.wrapping_mul(0x0100_0000_01b3);
                }
            }
            (h, w[0].0, w[k - 1].0)
        })
        .collect()
}

/// A place similar to written code.
#[derive(Debug, Clone, PartialEq)]
pub struct SimilarPlace {
    /// The file, relative to the root.
    pub path: String,
    /// The first and last line of the similar region.
    pub lines: (usize, usize),
    /// The share of the written code's shingles found there.
    pub similarity: f64,
    /// The file the written code went to.
    pub written_to: String,
}

/// Its run state: the writes of the turn.
#[derive(Default)]
struct DedupState {
    /// call id → the path each write of the call goes to.
    pending: HashMap<String, String>,
    /// call id → the similar places found before the call wrote.
    warned: HashMap<String, Vec<SimilarPlace>>,
    /// The similar places of the turn's confirmed writes.
    found: Vec<SimilarPlace>,
}

/// Duplicate-code review (`dedup_check`).
///
/// Watches the batch's declared writes; before each write runs (in its
/// `before_tool`, with the call's effective content arguments), compares
/// content of at least `min_lines` lines with the workspace's source files
/// as they are before the write (other than the one written) by shingles of
/// normalised lines, and warns at once with a notice naming every place at
/// or above `threshold`. Before the next model request it adds one review
/// message naming the places of the writes that succeeded.
///
/// ```
/// use tinyagents::middleware::DedupCheckMiddleware;
///
/// let places = DedupCheckMiddleware::default().similar_places(
///     std::path::Path::new("/nonexistent"),
///     "src/new.rs",
///     "fn a() {}",
/// );
/// assert!(places.is_empty()); // too short to check, and nothing to compare with
/// ```
#[derive(Debug, Clone)]
pub struct DedupCheckMiddleware {
    config: DedupCheckConfig,
}

impl Default for DedupCheckMiddleware {
    fn default() -> Self {
        <DedupCheckConfig as crate::config::MiddlewareConfig>::defaults()
            .expect("every dedup option has a default")
            .into()
    }
}

impl DedupCheckMiddleware {
    /// The check with a threshold and a minimum size (other options default).
    pub fn new(threshold: f64, min_lines: usize) -> Self {
        let mut m = Self::default();
        m.config.threshold = threshold;
        m.config.min_lines = min_lines.max(m.config.shingle_lines);
        m
    }

    /// The places under `root` similar to `content` written to `written_to` (relative to `root`).
    pub fn similar_places(&self, root: &Path, written_to: &str, content: &str) -> Vec<SimilarPlace> {
        let c = &self.config;
        if content.lines().filter(|l| !l.trim().is_empty()).count() < c.min_lines {
            return Vec::new();
        }
        let lines = normalise(content);
        let written: HashSet<u64> = shingles(&lines, c.shingle_lines).into_iter().map(|s| s.0).collect();
        if written.is_empty() {
            return Vec::new();
        }
        let target = root.join(written_to);
        let target = std::fs::canonicalize(&target).unwrap_or(target);
        let mut files = Vec::new();
        collect_files(root, &c.extensions, c.max_files, &mut files);
        let mut places = Vec::new();
        for file in files {
            if std::fs::canonicalize(&file).is_ok_and(|f| f == target) {
                continue;
            }
            let Ok(meta) = std::fs::metadata(&file) else { continue };
            if meta.len() > c.max_file_bytes {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let found: Vec<(u64, usize, usize)> = shingles(&normalise(&text), c.shingle_lines)
                .into_iter()
                .filter(|(h, _, _)| written.contains(h))
                .collect();
            let hits: HashSet<u64> = found.iter().map(|f| f.0).collect();
            #[allow(clippy::cast_precision_loss)]
            let similarity = hits.len() as f64 / written.len() as f64;
            if similarity >= c.threshold && !found.is_empty() {
                let first = found.iter().map(|f| f.1).min().unwrap_or(1);
                let last = found.iter().map(|f| f.2).max().unwrap_or(first);
                places.push(SimilarPlace {
                    path: file
                        .strip_prefix(root)
                        .unwrap_or(&file)
                        .to_string_lossy()
                        .replace('\\', "/"),
                    lines: (first, last),
                    similarity,
                    written_to: written_to.to_owned(),
                });
            }
        }
        places.sort_by(|a, b| b.similarity.total_cmp(&a.similarity).then(a.path.cmp(&b.path)));
        places
    }

    /// The content arguments of a call, at any depth.
    fn contents(&self, value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    match v {
                        Value::String(s) if self.config.content_keys.contains(k) => out.push(s.clone()),
                        _ => self.contents(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| self.contents(v, out)),
            _ => {}
        }
    }
}

/// Source files under `dir`, skipping hidden directories and build outputs, at most `max`.
fn collect_files(dir: &Path, extensions: &[String], max: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.filter_map(std::result::Result::ok).collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        if out.len() >= max {
            return;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if !name.starts_with('.') && !matches!(name.as_str(), "target" | "node_modules" | "dist" | "build") {
                collect_files(&entry.path(), extensions, max, out);
            }
        } else if kind.is_file()
            && Path::new(&name)
                .extension()
                .is_some_and(|e| extensions.iter().any(|x| e == x.as_str()))
        {
            out.push(entry.path());
        }
    }
}

/// Before each write runs, compares its code with the workspace's files (normalised-line shingles, `threshold`, `min_lines`) and warns with a notice; adds one review message naming the similar places of the writes that succeeded.
#[middleware(
    builtin,
    name = "dedup_check",
    run_state = DedupState,
    after_if_present = ["external_hooks", "human_in_the_loop"],
    config = DedupCheckConfig,
    doc(
        mutation = "Appends one user review message to the next request after a turn whose writes resemble existing code; nothing else.",
        events = "`Notice { source: \"dedup_check\", message, is_error: false }` naming the similar places, emitted in the write's `before_tool`, before the write runs.",
        failure = "Cannot fail: unreadable, oversized or non-UTF-8 files are skipped, and without a workspace it does nothing. Advisory only: it never blocks a write.",
        streaming = "None.",
        cache = "The review message is appended at the end of the conversation, after the cached prefix.",
        retries = "Writes are checked once per call before it runs, with its effective content arguments, and confirmed by a successful result, so a retried call is counted once. Ordered after `external_hooks` and `human_in_the_loop` when they are registered, so it records the effective arguments their reviews set (a permission hook's updated input, a person's edit)."
    )
)]
impl DedupCheckMiddleware {
    #[on_tool_batch]
    fn watch(&self, s: &mut DedupState, batch: &mut PreparedBatch) -> Result<()> {
        for p in batch.calls() {
            if *p.verdict() != PreparedCallVerdict::Proceed {
                continue;
            }
            if let Some(path) = p.access.iter().find(|a| a.mode == FileAccessMode::Write) {
                s.pending.insert(p.call.id.clone(), path.path.clone());
            }
        }
        Ok(())
    }

    /// Before the write: compares the call's effective content with the
    /// workspace as it is now, and warns at once.
    #[before_tool]
    async fn check<C>(&self, ctx: &mut RunContext<C>, s: &mut DedupState, call: &mut ToolCall) -> Result<()> {
        let Some(path) = s.pending.get(&call.id).cloned() else {
            return Ok(());
        };
        let Some(root) = ctx.workspace().map(|w| w.root.clone()) else {
            return Ok(());
        };
        let mut contents = Vec::new();
        self.contents(&call.arguments, &mut contents);
        if contents.is_empty() {
            return Ok(());
        }
        let me = self.clone();
        let places = tokio::task::spawn_blocking(move || {
            let mut all: BTreeMap<String, SimilarPlace> = BTreeMap::new();
            for content in contents {
                for p in me.similar_places(&root, &path, &content) {
                    all.entry(p.path.clone()).or_insert(p);
                }
            }
            all.into_values().collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        if places.is_empty() {
            return Ok(());
        }
        let list = describe(&places);
        ctx.events().emit_with(EventKind::Notice, || AgentEvent::Notice {
            source: "dedup_check".into(),
            message: format!("before writing `{}`: {}", call.name, list.join("; ")),
            is_error: false,
        });
        s.warned.insert(call.id.clone(), places);
        Ok(())
    }

    #[after_tool]
    fn confirm(&self, state: &RunState<DedupState>, result: &mut ToolResult) -> Result<()> {
        let mut s = state.lock()?;
        s.pending.remove(&result.call_id);
        if let Some(places) = s.warned.remove(&result.call_id)
            && !result.is_error()
        {
            s.found.extend(places);
        }
        Ok(())
    }

    #[before_model]
    fn review(&self, s: &mut DedupState, request: &mut ModelRequest) -> Result<()> {
        s.pending.clear();
        s.warned.clear();
        let mut all: BTreeMap<(String, String), SimilarPlace> = BTreeMap::new();
        for p in std::mem::take(&mut s.found) {
            all.entry((p.written_to.clone(), p.path.clone())).or_insert(p);
        }
        let places: Vec<SimilarPlace> = all.into_values().collect();
        if places.is_empty() {
            return Ok(());
        }
        let list = describe(&places);
        let text = format!(
            "[dedup_check] The code you just wrote resembles existing code:\n{}\nReview it: reuse or extract the \
             existing code instead of duplicating it, unless the duplication is deliberate.",
            list.join("\n")
        );
        request.messages.push(Message::user(text));
        Ok(())
    }
}

/// One line per similar place.
fn describe(places: &[SimilarPlace]) -> Vec<String> {
    places
        .iter()
        .map(|p| {
            format!(
                "- `{}` lines {}-{} ({:.0}% similar to what you wrote to `{}`)",
                p.path,
                p.lines.0,
                p.lines.1,
                p.similarity * 100.0,
                p.written_to
            )
        })
        .collect()
}
