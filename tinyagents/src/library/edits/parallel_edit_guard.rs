//! [`ParallelEditGuardMiddleware`]: reviews each prepared batch for several writes to
//! one file, steers the model toward one multi-edit call per file (warn) or
//! refuses the later writes (deny).

use std::collections::BTreeMap;
use std::path::{Component, Path};

use tinyagents_macros::{middleware, MiddlewareConfig};

use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::message::Message;
use crate::harness::middleware::{PreparedBatch, PreparedCallVerdict};
use crate::harness::model::ModelRequest;
use crate::harness::tool::{FileAccess, FileAccessMode};

crate::config_enum! {
    /// What [`ParallelEditGuardMiddleware`] does with several writes to one file in one response (`mode = "…"`).
    pub enum EditGuardMode {
        /// Every call runs; the model is told once to use one multi-edit call per file.
        Warn = "warn",
        /// Only the first writing call per file runs; later ones get an error result naming the file.
        Deny = "deny",
    }
}

/// Options of [`ParallelEditGuardMiddleware`] (`type = "parallel_edit_guard"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::{EditGuardMode, ParallelEditGuardConfig};
///
/// let c: ParallelEditGuardConfig = from_toml_str("mode = \"deny\"").unwrap();
/// assert_eq!(c.mode, EditGuardMode::Deny);
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "parallel_edit_guard", builds = ParallelEditGuardMiddleware)]
pub struct ParallelEditGuardConfig {
    /// `warn`: every call runs and the model is told once; `deny`: only the first write per file runs.
    #[config(default = "warn")]
    pub mode: EditGuardMode,
    /// The tool the guidance recommends for several edits to one file.
    #[config(default = "multiedit".to_owned())]
    pub multiedit_tool: String,
    /// Stateful or clarification tools (a mode switch, a question to the
    /// user): each call of one ends an execution segment, and writes in
    /// different segments are not compared (the barrier orders them).
    #[config(default = Vec::new())]
    pub barrier_tools: Vec<String>,
}

impl From<ParallelEditGuardConfig> for ParallelEditGuardMiddleware {
    fn from(c: ParallelEditGuardConfig) -> Self {
        Self {
            deny: c.mode == EditGuardMode::Deny,
            multiedit: c.multiedit_tool,
            barriers: c.barrier_tools,
        }
    }
}

/// Its run state: the guidance waiting for the next model request.
#[derive(Default)]
struct EditState {
    guidance: Option<String>,
    /// The files flagged in this batch (warn mode), for the guidance.
    flagged: Vec<String>,
}

/// The file a path names, for comparison (`./a//b` and `a/b` are one file;
/// inside the workspace root, `/root/a` and `a` are one file).
fn file_key(path: &str, root: Option<&Path>) -> String {
    let relative = root
        .filter(|r| r.has_root())
        .and_then(|r| Path::new(path).strip_prefix(r).ok())
        .map(Path::to_path_buf);
    let path = relative.as_deref().unwrap_or(Path::new(path));
    let mut parts: Vec<String> = Vec::new();
    let absolute = path.has_root();
    for c in path.components() {
        match c {
            Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            Component::ParentDir => {
                if parts.last().is_some_and(|l| l != "..") {
                    parts.pop();
                } else {
                    parts.push("..".to_owned());
                }
            }
            _ => {}
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Several writes to one file in one model reply (`parallel_edit_guard`).
///
/// Reviews each prepared batch through the declared file access of each
/// call's effective arguments ([`Tool::file_access`](crate::harness::tool::Tool::file_access)),
/// counting only writes. In `warn` mode every call runs and, before the next
/// model request, one guidance message naming the files and recommending the
/// multi-edit tool is added after the tool results (sent once). In `deny`
/// mode the first write per file runs and every later write to that file
/// gets an error result naming the file; calls to other files still run.
/// Either way every call gets exactly one result.
///
/// It judges effective arguments: it reviews the prepared calls
/// (`on_prepared_tool_calls`), after every `before_tool` hook of the stack
/// (wherever it is registered relative to this guard) and with each call
/// under its tool's name (an alias resolved), through the file access
/// declared for each call's final arguments — the access the scheduler
/// plans from. Paths are normalised (`./a//b` is `a/b`; inside the run's
/// workspace root, `/root/a` is `a`), so two calls that only look disjoint
/// in the model's arguments but are redirected onto one file by a hook are
/// flagged (warn) or the later one refused (deny). The review runs
/// once per execution segment: a call of a barrier tool
/// ([`with_barrier_tools`](Self::with_barrier_tools), config
/// `barrier_tools`: a stateful or clarification tool) ends one, and writes on
/// either side of it are not compared. Writes to one file in one
/// batch run one after another in the model's order whether or not this
/// guard is active: the agent loop's scheduler keeps that order (the guard
/// only changes what the model is told).
///
/// ```
/// use tinyagents::middleware::ParallelEditGuardMiddleware;
///
/// let guard = ParallelEditGuardMiddleware::deny();
/// # let _ = guard;
/// ```
#[derive(Debug, Clone)]
pub struct ParallelEditGuardMiddleware {
    deny: bool,
    multiedit: String,
    barriers: Vec<String>,
}

impl Default for ParallelEditGuardMiddleware {
    fn default() -> Self {
        Self::warn()
    }
}

impl ParallelEditGuardMiddleware {
    /// Warn mode (the default): every call runs; the model is told once.
    pub fn warn() -> Self {
        Self {
            deny: false,
            multiedit: "multiedit".to_owned(),
            barriers: Vec::new(),
        }
    }

    /// Deny mode: only the first write per file runs.
    pub fn deny() -> Self {
        Self {
            deny: true,
            ..Self::warn()
        }
    }

    /// The same guard recommending `tool` for several edits to one file.
    pub fn with_multiedit_tool(mut self, tool: impl Into<String>) -> Self {
        self.multiedit = tool.into();
        self
    }

    /// The same guard treating each call of these tools (stateful or
    /// clarification tools) as a barrier ending an execution segment:
    /// writes on either side of one are not compared.
    pub fn with_barrier_tools<I, T>(mut self, tools: I) -> Self
    where
        I: IntoIterator<Item = T>,
        T: Into<String>,
    {
        self.barriers = tools.into_iter().map(Into::into).collect();
        self
    }

    /// The written files of a declared access, as comparison keys.
    fn written(&self, access: &[FileAccess], root: Option<&Path>) -> Vec<String> {
        let mut files: Vec<String> = access
            .iter()
            .filter(|a| a.mode == FileAccessMode::Write)
            .map(|a| file_key(&a.path, root))
            .collect();
        files.sort();
        files.dedup();
        files
    }

    /// Publishes the notice and (warn mode) sets the guidance for `files`.
    fn flag<C>(&self, ctx: &mut RunContext<C>, edits: &mut EditState, files: Vec<String>) {
        let names = files.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", ");
        let notice = format!(
            "one reply wrote {names} with several calls; combine the edits to each file into one `{}` call",
            self.multiedit
        );
        ctx.events().emit_with(EventKind::Notice, || AgentEvent::Notice {
            source: "parallel_edit_guard".into(),
            message: notice.clone(),
            is_error: false,
        });
        if self.deny {
            return;
        }
        edits.flagged.extend(files);
        let names = edits
            .flagged
            .iter()
            .map(|f| format!("`{f}`"))
            .collect::<Vec<_>>()
            .join(", ");
        edits.guidance = Some(format!(
            "[parallel_edit_guard] Your last reply changed {names} with several tool calls. They ran one after \
             another in your order, but next time combine all edits to one file into a single `{}` call.",
            self.multiedit
        ));
    }
}

/// The refusal of a later write to `file`.
fn refusal(file: &str, multiedit: &str) -> String {
    format!(
        "not run: an earlier call of this reply already writes `{file}`; combine the edits to `{file}` into one \
         `{multiedit}` call"
    )
}

/// Steers a model that writes one file with several calls of one reply toward one multi-edit call: warns once (all run) or refuses the later writes.
#[middleware(
    builtin,
    name = "parallel_edit_guard",
    config = ParallelEditGuardConfig,
    run_state = EditState,
    doc(
        mutation = "Warn: appends one user guidance message to the next request (after the tool results). Deny: gives each later write to a file an error result naming the file.",
        events = "`Notice { source: \"parallel_edit_guard\", message, is_error: false }` when a batch writes a file more than once.",
        failure = "Never fails the run (a refused call gets its error result). Only declared file writes count (reads and shell calls do not). Every call gets exactly one result.",
        streaming = "None: it reviews whole prepared batches.",
        cache = "The guidance message is appended at the end of the conversation, after the cached prefix.",
        retries = "The prepared batch is reviewed once per reply, after every `before_tool` and before any call runs; tool retries happen per call afterwards and are not counted again. It sees the arguments every earlier hook left, wherever that hook is registered (a permission hook's updated input, a person's edit, any `before_tool` rewrite), and the file access it judges is the access the scheduler orders by."
    )
)]
impl ParallelEditGuardMiddleware {
    #[on_prepared_tool_calls]
    fn review<C>(&self, ctx: &mut RunContext<C>, edits: &mut EditState, batch: &mut PreparedBatch) -> Result<()> {
        let root = ctx.workspace().map(|w| w.root.clone());
        let root = root.as_deref();
        edits.flagged.clear();
        // the files each proceeding call writes, with its execution segment, in model order
        let mut segment = 0;
        let mut per_call: Vec<(usize, usize, Vec<String>)> = Vec::new();
        for (i, p) in batch.calls().iter().enumerate() {
            if self.barriers.contains(&p.call.name) {
                segment += 1;
                continue;
            }
            if *p.verdict() != PreparedCallVerdict::Proceed {
                continue;
            }
            per_call.push((i, segment, self.written(&p.access, root)));
        }
        // (segment, file) → the calls writing it
        let mut writers: BTreeMap<(usize, &str), usize> = BTreeMap::new();
        for (_, seg, files) in &per_call {
            for f in files {
                *writers.entry((*seg, f.as_str())).or_default() += 1;
            }
        }
        let mut flagged: Vec<String> = writers
            .iter()
            .filter(|(_, n)| **n > 1)
            .map(|((_, f), _)| (*f).to_owned())
            .collect();
        flagged.sort();
        flagged.dedup();
        // In deny mode, in model order per segment: a call writing a file an earlier running call
        // writes is refused (and claims nothing, so the files stay with their first writer).
        let mut claimed: std::collections::BTreeSet<(usize, String)> = std::collections::BTreeSet::new();
        if self.deny {
            for (i, seg, files) in per_call {
                if let Some(file) = files.iter().find(|f| claimed.contains(&(seg, (*f).clone()))) {
                    batch.reject(i, refusal(file, &self.multiedit));
                    continue;
                }
                claimed.extend(files.into_iter().map(|f| (seg, f)));
            }
        }
        if !flagged.is_empty() {
            self.flag(ctx, edits, flagged);
        }
        Ok(())
    }

    #[before_model]
    fn guide(&self, edits: &mut EditState, request: &mut ModelRequest) -> Result<()> {
        if let Some(text) = edits.guidance.take() {
            request.messages.push(Message::user(text));
        }
        Ok(())
    }
}
