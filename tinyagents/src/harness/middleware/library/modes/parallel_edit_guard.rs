//! [`ParallelEditGuard`]: reviews each prepared batch for several writes to
//! one file, steers the model toward one multi-edit call per file (warn) or
//! refuses the later writes (deny), and keeps same-file writes in the
//! model's order when a batch runs concurrently.

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path};
use std::sync::{Arc, Mutex};

use tinyagents_macros::{middleware, MiddlewareConfig};
use tokio::sync::Notify;

use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::message::Message;
use crate::harness::middleware::{MiddlewareToolOutcome, PreparedBatch, PreparedCallVerdict, ToolHandler};
use crate::harness::model::ModelRequest;
use crate::harness::tool::{FileAccessMode, ToolCall, ToolResult};

/// Options of [`ParallelEditGuard`] (`type = "parallel_edit_guard"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::ParallelEditGuardConfig;
///
/// let c: ParallelEditGuardConfig = from_toml_str("mode = \"deny\"").unwrap();
/// assert_eq!(c.mode, "deny");
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "parallel_edit_guard", builds = ParallelEditGuard)]
pub struct ParallelEditGuardConfig {
    /// `warn`: every call runs and the model is told once; `deny`: only the first write per file runs.
    #[config(default = "warn", one_of = ["warn", "deny"])]
    pub mode: String,
    /// The tool the guidance recommends for several edits to one file.
    #[config(default = "multiedit".to_owned())]
    pub multiedit_tool: String,
}

impl From<ParallelEditGuardConfig> for ParallelEditGuard {
    fn from(c: ParallelEditGuardConfig) -> Self {
        Self {
            deny: c.mode == "deny",
            multiedit: c.multiedit_tool,
        }
    }
}

/// Per-run state: the pending guidance and the same-file write order.
#[derive(Default)]
struct EditState {
    inner: Mutex<EditInner>,
    notify: Notify,
}

#[derive(Default)]
struct EditInner {
    guidance: Option<String>,
    /// file → the sequence number of the write allowed to run next.
    next: HashMap<String, usize>,
    /// call id → its (file, sequence number) tickets.
    tickets: HashMap<String, Vec<(String, usize)>>,
    /// Set when a hook failed and the batch may never finish in order: release every waiter.
    released: bool,
}

impl EditInner {
    fn ready(&self, call_id: &str) -> bool {
        self.released
            || self
                .tickets
                .get(call_id)
                .is_none_or(|ts| ts.iter().all(|(f, seq)| self.next.get(f).copied().unwrap_or(0) >= *seq))
    }

    fn advance(&mut self, call_id: &str) -> bool {
        let Some(tickets) = self.tickets.remove(call_id) else {
            return false;
        };
        for (file, seq) in tickets {
            let n = self.next.entry(file).or_default();
            *n = (*n).max(seq + 1);
        }
        true
    }
}

/// Advances a call's tickets when its wrap ends, however it ends.
struct Turn {
    state: Arc<EditState>,
    call_id: String,
}

impl Drop for Turn {
    fn drop(&mut self) {
        let advanced = self
            .state
            .inner
            .lock()
            .map(|mut s| s.advance(&self.call_id))
            .unwrap_or(false);
        if advanced {
            self.state.notify.notify_waiters();
        }
    }
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

/// Several writes to one file in one model reply (seed 002 `ParallelEditGuard`).
///
/// Reviews each prepared batch through the declared file access of each
/// call's effective arguments ([`Tool::file_access`](crate::harness::tool::Tool::file_access)),
/// counting only writes. In `warn` mode every call runs and, before the next
/// model request, one guidance message naming the files and recommending the
/// multi-edit tool is added after the tool results (sent once). In `deny`
/// mode the first write per file runs and every later write to that file
/// gets an error result naming the file; calls to other files still run.
/// Either way every call gets exactly one result, and when a batch runs
/// concurrently, writes to one file still run one after another in the
/// model's order.
///
/// ```
/// use tinyagents::middleware::ParallelEditGuard;
///
/// let guard = ParallelEditGuard::deny();
/// # let _ = guard;
/// ```
#[derive(Debug, Clone)]
pub struct ParallelEditGuard {
    deny: bool,
    multiedit: String,
}

impl Default for ParallelEditGuard {
    fn default() -> Self {
        Self::warn()
    }
}

impl ParallelEditGuard {
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

/// Steers a model that writes one file with several calls of one reply toward one multi-edit call: warns once (all run, in order) or refuses the later writes.
#[middleware(
    builtin,
    name = "parallel_edit_guard",
    config = ParallelEditGuardConfig,
    doc(
        mutation = "Warn: appends one user guidance message to the next request (after the tool results). Deny: gives each later write to a file an error result naming the file.",
        events = "`Notice { source: \"parallel_edit_guard\", message, is_error: false }` when a batch writes a file more than once.",
        failure = "Cannot fail. Only declared file writes count (reads and shell calls do not). Every call gets exactly one result. If a hook fails mid-batch, waiting same-file writes are released rather than left hanging.",
        streaming = "None: it reviews whole prepared batches.",
        cache = "The guidance message is appended at the end of the conversation, after the cached prefix.",
        retries = "The batch is reviewed once per reply; a retried tool call keeps its turn in the per-file order (the order is kept in `wrap_tool`, around retries registered inside it)."
    )
)]
impl ParallelEditGuard {
    #[on_tool_batch]
    fn review<C>(&self, ctx: &mut RunContext<C>, batch: &mut PreparedBatch) -> Result<()> {
        {
            // the previous batch is over: its tickets (all used, or released on an error) go
            let edit = ctx.local::<EditState>();
            let mut s = edit.inner.lock().expect("edit guard lock");
            s.tickets.clear();
            s.released = false;
        }
        // file → indices of the proceeding calls that write it, in model order
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
            for f in files {
                writers.entry(f).or_default().push(i);
            }
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
        ctx.emit_with(EventKind::Notice, || AgentEvent::Notice {
            source: "parallel_edit_guard".into(),
            message: notice.clone(),
            is_error: false,
        });
        if self.deny {
            let mut rejected = std::collections::BTreeSet::new();
            for (file, calls) in &writers {
                for &i in &calls[1..] {
                    if rejected.insert(i) {
                        batch.reject(
                            i,
                            format!(
                                "not run: an earlier call of this reply already writes `{file}`; combine the edits \
                                 to `{file}` into one `{}` call",
                                self.multiedit
                            ),
                        );
                    }
                }
            }
            return Ok(());
        }
        let state = ctx.local::<EditState>();
        let mut s = state.inner.lock().expect("edit guard lock");
        s.guidance = Some(format!(
            "[parallel_edit_guard] Your last reply changed {names} with several tool calls. They ran one after \
             another in your order, but next time combine all edits to one file into a single `{}` call.",
            self.multiedit
        ));
        for (file, calls) in writers {
            // earlier batches are finished: this file's order starts afresh
            s.next.insert(file.clone(), 0);
            for (seq, i) in calls.into_iter().enumerate() {
                let id = batch.calls()[i].call.id.clone();
                s.tickets.entry(id).or_default().push((file.clone(), seq));
            }
        }
        Ok(())
    }

    #[wrap_tool]
    async fn in_order<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        call: ToolCall,
        next: ToolHandler<'_, S, C>,
    ) -> Result<MiddlewareToolOutcome> {
        let edit = ctx.local::<EditState>();
        let has_ticket = edit
            .inner
            .lock()
            .expect("edit guard lock")
            .tickets
            .contains_key(&call.id);
        if !has_ticket {
            return next.run(ctx, state, call).await;
        }
        loop {
            let notified = edit.notify.notified();
            if edit.inner.lock().expect("edit guard lock").ready(&call.id) {
                break;
            }
            notified.await;
        }
        let _turn = Turn {
            state: edit.clone(),
            call_id: call.id.clone(),
        };
        next.run(ctx, state, call).await
    }

    #[after_tool]
    fn done<C>(&self, ctx: &mut RunContext<C>, result: &mut ToolResult) -> Result<()> {
        // A call refused before its wrap still hands the turn on.
        let edit = ctx.local::<EditState>();
        let advanced = edit.inner.lock().expect("edit guard lock").advance(&result.call_id);
        if advanced {
            edit.notify.notify_waiters();
        }
        Ok(())
    }

    #[on_error]
    fn release<C>(&self, ctx: &mut RunContext<C>, _error: &TinyAgentsError) -> Result<()> {
        let edit = ctx.local::<EditState>();
        let mut s = edit.inner.lock().expect("edit guard lock");
        if !s.tickets.is_empty() {
            s.released = true;
            drop(s);
            edit.notify.notify_waiters();
        }
        Ok(())
    }

    #[before_model]
    fn guide<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let edit = ctx.local::<EditState>();
        let guidance = edit.inner.lock().expect("edit guard lock").guidance.take();
        if let Some(text) = guidance {
            request.messages.push(Message::user(text));
        }
        Ok(())
    }
}
