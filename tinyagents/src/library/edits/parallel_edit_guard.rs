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
use crate::harness::tool::FileAccessMode;

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
}

impl From<ParallelEditGuardConfig> for ParallelEditGuardMiddleware {
    fn from(c: ParallelEditGuardConfig) -> Self {
        Self {
            deny: c.mode == EditGuardMode::Deny,
            multiedit: c.multiedit_tool,
        }
    }
}

/// Its run state: the guidance waiting for the next model request.
#[derive(Default)]
struct EditState {
    guidance: Option<String>,
}

/// The file a path names, for comparison (`./a//b` and `a/b` are one file).
fn file_key(path: &str) -> String {
    let mut parts: Vec<String> = Vec::new();
    let absolute = Path::new(path).has_root();
    for c in Path::new(path).components() {
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
/// Either way every call gets exactly one result. Writes to one file in one
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
}

/// Steers a model that writes one file with several calls of one reply toward one multi-edit call: warns once (all run) or refuses the later writes.
#[middleware(
    builtin,
    name = "parallel_edit_guard",
    after_if_present = ["external_hooks", "human_in_the_loop"],
    config = ParallelEditGuardConfig,
    run_state = EditState,
    doc(
        mutation = "Warn: appends one user guidance message to the next request (after the tool results). Deny: gives each later write to a file an error result naming the file.",
        events = "`Notice { source: \"parallel_edit_guard\", message, is_error: false }` when a batch writes a file more than once.",
        failure = "Cannot fail. Only declared file writes count (reads and shell calls do not). Every call gets exactly one result.",
        streaming = "None: it reviews whole prepared batches.",
        cache = "The guidance message is appended at the end of the conversation, after the cached prefix.",
        retries = "The batch is reviewed once per reply, before any call runs; tool retries happen per call afterwards and are not counted again. Ordered after `external_hooks` and `human_in_the_loop` when they are registered, so it counts the effective arguments their reviews set (a permission hook's updated input, a person's edit); a rewrite made later in `before_tool` is not seen by it, but the scheduler orders writes to one file by the arguments after `before_tool`."
    )
)]
impl ParallelEditGuardMiddleware {
    #[on_tool_batch]
    fn review<C>(&self, ctx: &mut RunContext<C>, edits: &mut EditState, batch: &mut PreparedBatch) -> Result<()> {
        // the files each proceeding call writes, and file → the calls writing it, in model order
        let mut per_call: Vec<(usize, Vec<String>)> = Vec::new();
        let mut writers: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for (i, p) in batch.calls().iter().enumerate() {
            if *p.verdict() != PreparedCallVerdict::Proceed {
                continue;
            }
            let mut files: Vec<String> = p
                .access
                .iter()
                .filter(|a| a.mode == FileAccessMode::Write)
                .map(|a| file_key(&a.path))
                .collect();
            files.sort();
            files.dedup();
            for f in &files {
                writers.entry(f.clone()).or_default().push(i);
            }
            per_call.push((i, files));
        }
        writers.retain(|_, calls| calls.len() > 1);
        if writers.is_empty() {
            return Ok(());
        }
        let files: Vec<&str> = writers.keys().map(String::as_str).collect();
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
            // In model order: a call writing a file an earlier running call writes is refused
            // (and claims nothing, so the files it would have written stay with their first writer).
            let mut claimed = std::collections::BTreeSet::new();
            for (i, files) in per_call {
                match files.iter().find(|f| claimed.contains(*f)) {
                    Some(file) => batch.reject(
                        i,
                        format!(
                            "not run: an earlier call of this reply already writes `{file}`; combine the edits \
                             to `{file}` into one `{}` call",
                            self.multiedit
                        ),
                    ),
                    None => claimed.extend(files),
                }
            }
            return Ok(());
        }
        let guidance = format!(
            "[parallel_edit_guard] Your last reply changed {names} with several tool calls. They ran one after \
             another in your order, but next time combine all edits to one file into a single `{}` call.",
            self.multiedit
        );
        edits.guidance = Some(guidance);
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
