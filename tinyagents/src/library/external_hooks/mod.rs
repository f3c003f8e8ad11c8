//! External command hooks: policy in a script instead of compiled middleware.
//!
//! Middleware is compiled Rust code inside the run; hooks are profile-level
//! external commands that talk JSON on stdin and stdout. Use hooks for local
//! scripts, policy checks and approval automation; use middleware for typed
//! in-process behaviour. One [`ExternalHooksMiddleware`] (`type =
//! "external_hooks"`, a documented built-in) runs every hook command of a
//! configuration.
//!
//! # Configuration
//!
//! ```toml
//! [[hooks]]
//! event = "pre_tool_use"          # when (see the table below)
//! matcher = "^(shell|write_file)$" # a regex over the tool name (tool events only; none: every tool)
//! command = "./hooks/check.sh"     # run with `/bin/sh -c` in the workspace directory
//! timeout_ms = 5000                # default 60000; on timeout the process group is killed
//! env = { POLICY = "strict" }      # variables set for the command
//! pass_env = ["CI"]                # variables of the agent's environment passed on (besides the allow list)
//! fail_closed = true               # default: true for pre_tool_use/permission_request, false otherwise
//! max_stdout_bytes = 1048576       # default 1 MiB, at most 16 MiB; more is a failure
//! max_stderr_bytes = 65536         # default 64 KiB, at most 1 MiB; more is a failure
//! ```
//!
//! # Events and where they fire
//!
//! | event | hook point | input adds | what the answer can do |
//! | --- | --- | --- | --- |
//! | `session_start` | `before_agent` (every run; `depth` tells sub-agents apart) | — | block (the run fails, `Validation`), stop, context, message |
//! | `user_prompt_submit` | the first `before_model` of a run | `prompt` | block (the run fails, `Validation`), stop, context, message |
//! | `permission_request` | `on_tool_batch` (before any `pre_tool_use`) | `tool_*` | block (that call gets an error result), approve, rewrite input (applied in `before_tool`, before `pre_tool_use` hooks and the guards see it), context (appended to the call's result), stop, message |
//! | `pre_tool_use` | `before_tool` | `tool_*` | block (that call gets an error result), approve, rewrite input, context (appended to the call's result), stop, message |
//! | `post_tool_use` | `after_tool` | `tool_*`, `tool_output`, `tool_error` | block (the result becomes an error result with the reason), context (appended to the result), stop, message |
//! | `pre_compact` | the `pre_compact` hook point: a compacting middleware (summarization, context) dispatches it through the stack before it compacts ([`middleware::pre_compact`](crate::harness::middleware::pre_compact)) | `compaction` | block (the context is not compacted), message |
//! | `post_compact` | `before_model` and `after_model`, once per new entry of the run's [`CompressionLog`] (a compaction made during a model call is seen after it) | `compaction` | context, stop, message |
//! | `stop` | `after_agent` | `final_text`, `stop_reason` | message (the run has ended: a block is reported as a `Notice`) |
//!
//! Additional context of `session_start`, `user_prompt_submit` and
//! `post_compact` goes into the volatile tail of the system prompt (segment
//! `external_hooks`) of every later model call of the run.
//!
//! # Input (stdin) — schema `tinyagents.hook/1`
//!
//! One JSON object ([`HookInput`]): `schema`, `event`, `run_id`, `depth`,
//! `cwd`, and, where they apply, `prompt`, `tool_call_id`, `tool_name`,
//! `tool_input`, `tool_output`, `tool_error`, `final_text`, `stop_reason`,
//! `compaction`. Fields that do not apply are absent.
//!
//! # Environment
//!
//! A hook never inherits the agent's whole environment (API keys stay out).
//! It gets the variables of [`ENV_ALLOW`] (`PATH`, `HOME`, `USER`,
//! `LOGNAME`, `SHELL`, `LANG`, `LANGUAGE`, `TERM`, `TMPDIR`, `TZ`) and every
//! `LC_*` that the agent has, the agent's variables its entry names in
//! `pass_env`, the variables its entry sets in `env`, and
//! `TINYAGENTS_HOOK_EVENT`, `TINYAGENTS_HOOK_SCHEMA`, `TINYAGENTS_RUN_ID`,
//! `TINYAGENTS_HOOK_CWD` (see [`hook_environment`]).
//!
//! # Output — schema `tinyagents.hook/1`
//!
//! * exit status 0: stdout is read, by the grammar of [`parse_answer`]:
//!   nothing (white space) means "no opinion"; otherwise exactly one JSON
//!   object in UTF-8 ([`HookOutput`], every key optional, no other key):
//!   `schema` (`"tinyagents.hook/1"`), `continue` (false stops the run, with
//!   `stop_reason` as its final text), `decision` (exactly `"approve"` or
//!   `"block"`) with a `reason`, `updated_input` (new tool arguments, an
//!   object; `pre_tool_use` and `permission_request` only),
//!   `additional_context`, `system_message` (emitted as a `Notice`).
//!   Anything else (`{"decision":"deny"}`, `BLOCK`, a traceback, truncated
//!   JSON, invalid UTF-8, an unknown key, a wrong type) is **not understood**.
//! * exit status 2: blocked, with stderr as the reason.
//! * anything else (another status, a signal, a timeout, a command that
//!   cannot start, output over `max_stdout_bytes`/`max_stderr_bytes`): the
//!   hook **failed**.
//!
//! A hook that failed or is not understood is reported as a `Notice`
//! (`is_error = true`). Then, when its entry has `fail_closed = true`, it
//! blocks. **Policy hooks fail closed by default**: `fail_closed` defaults
//! to `true` on `pre_tool_use` and `permission_request` (the call is refused
//! and never runs) and to `false` on every other event (the hook is
//! ignored: those events fail open unless their entry says `fail_closed = true`).
//! `fail_closed = false` on a policy hook is the explicit opt-out.
//!
//! Reads are bounded: stdout up to `max_stdout_bytes`, stderr up to
//! `max_stderr_bytes`; a hook over its limit is killed and has failed. Every
//! text of a hook shown to the model or put in a notice (a reason, stderr,
//! why an answer is not understood, a `stop_reason`, a `system_message`) is
//! cut at [`SHOWN_MAX`] (2 KiB) with a
//! `… [N bytes cut]` marker. Reading stops when the hook process exits (what
//! is still in the pipes is read for a moment): a background child that
//! keeps stdout open cannot hold the answer back, and the hook's process
//! group is killed when it is done, times out or goes over a limit.
//!
//! # In the OS sandbox
//!
//! Every hook runs in the OS sandbox ([`crate::sandbox`]) unless its entry
//! says `sandbox = "off"`: writes only under its directory, reads there, in
//! the system directories and in the directory of the script its command
//! names, no network, and a process tree that cannot leave its group (a
//! `setsid` grandchild dies at the timeout too). A machine that cannot give
//! the sandbox fails the hook: a policy hook then refuses the call.
//!
//! # Rewrites are judged by the guards
//!
//! The hooks middleware orders itself before every other middleware
//! (`before = ["*"]`), whatever the registration order, in a file or in
//! code: its `permission_request` (batch review) and `pre_tool_use`
//! (`before_tool`) run first, so an `updated_input` is applied before any
//! guard (`shell_fs_guard`, `tool_policy`, allowlists, your own
//! `before_tool` checks) judges the call. A rewrite cannot escape a guard.
//! Only a middleware that names `external_hooks` in a `before`/`after` of
//! its own is ordered otherwise. (Hooks therefore see arguments and prompts
//! before `pii` redacts them.)
//!
//! # Several hooks on one event
//!
//! Every hook whose event (and matcher) applies runs, concurrently; their
//! answers are combined in the order the hooks are listed, so the result is
//! deterministic:
//!
//! 1. **A block wins**: any block (decision, exit 2, a failing
//!    `fail_closed` hook) blocks, whatever the others approved; the reason is
//!    that of the first blocking hook in list order.
//! 2. **The last input rewrite wins**: every hook sees the original input;
//!    of the `updated_input`s, the last in list order is applied (and none
//!    when blocked); the guards then judge it.
//! 3. **Stop**: any `continue = false` stops the run; the first `stop_reason` is used.
//! 4. **Context** from every hook is kept, joined in list order; every
//!    `system_message` and notice is emitted, in list order.
//!
//! ```no_run
//! use std::time::Duration;
//! use tinyagents::external_hooks::{ExternalHooksMiddleware, HookCommand, HookEvent};
//! use tinyagents::prelude::*;
//!
//! let hooks = ExternalHooksMiddleware::new([HookCommand::new(HookEvent::PreToolUse, "./check.sh")
//!     .with_matcher("^shell$")
//!     .unwrap()
//!     .with_timeout(Duration::from_secs(5))]);
//! let stack: MiddlewareStack<()> = MiddlewareStack::new().with(hooks).unwrap();
//! assert_eq!(stack.names(), ["external_hooks"]);
//! ```

mod config;
mod process;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::Value;
use tinyagents_macros::middleware;

pub use config::{ExternalHooksConfig, HookCommand, HookEvent, DEFAULT_TIMEOUT};
pub use process::{
    hook_environment, parse_answer, run_hook, shorten, Decision, HookInput, HookOutput, HookRun, DEFAULT_MAX_STDERR,
    DEFAULT_MAX_STDOUT, ENV_ALLOW, MAX_STDERR_LIMIT, MAX_STDOUT_LIMIT, SCHEMA, SHOWN_MAX,
};

use crate::harness::compression::CompressionLog;
use crate::harness::context::{MiddlewareControl, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind, EventSink};
use crate::harness::message::Role;
use crate::harness::middleware::{MiddlewareDoc, PreparedBatch};
use crate::harness::model::ModelRequest;
use crate::harness::provenance::CompactionPlan;
use crate::harness::run::AgentRun;
use crate::harness::tool::{AsyncCallGuard, GuardedRun, Restriction, ToolCall, ToolResult};
use crate::harness::workspace::WorkspaceDescriptor;

/// The docs of the hooks built-in, for a catalog.
pub const CATALOG: &[&MiddlewareDoc] = &[super::doc_of::<ExternalHooksMiddleware>()];

/// The answers of every hook of one event, combined (see [the rules](self#several-hooks-on-one-event)).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Combined {
    /// The reason of the first block, when any hook blocked.
    pub blocked: Option<String>,
    /// Whether some hook approved (a block still wins).
    pub approved: bool,
    /// The last input rewrite.
    pub updated_input: Option<Value>,
    /// Every additional context, in list order.
    pub additional_context: Vec<String>,
    /// The final text, when some hook said `continue = false`.
    pub stop: Option<String>,
    /// How many hooks ran.
    pub ran: usize,
}

impl Combined {
    /// The additional context joined by blank lines, when there is any.
    pub fn context(&self) -> Option<String> {
        (!self.additional_context.is_empty()).then(|| self.additional_context.join("\n\n"))
    }
}

/// Per-run state of the hooks middleware (a run local).
#[derive(Debug, Default)]
struct RunHooks {
    prompt_submitted: AtomicBool,
    compactions_seen: AtomicUsize,
    context: Mutex<Vec<String>>,
    tool_context: Mutex<HashMap<String, Vec<String>>>,
}

/// Runs external hook commands at the lifecycle points of a run (see [the module docs](self)).
///
/// ```
/// use tinyagents::external_hooks::{ExternalHooksMiddleware, HookCommand, HookEvent};
///
/// let hooks = ExternalHooksMiddleware::new([HookCommand::new(HookEvent::Stop, "true")]);
/// assert_eq!(hooks.commands().len(), 1);
/// assert!(hooks.listens(HookEvent::Stop) && !hooks.listens(HookEvent::PreToolUse));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ExternalHooksMiddleware {
    hooks: Arc<[HookCommand]>,
    cwd: Option<PathBuf>,
    /// The events some hook listens to (bit `1 << HookEvent as u8`): idle hooks return at once.
    listening: u16,
}

impl From<ExternalHooksConfig> for ExternalHooksMiddleware {
    fn from(config: ExternalHooksConfig) -> Self {
        Self::new(config.hooks).with_cwd(config.cwd)
    }
}

impl ExternalHooksMiddleware {
    /// Runs these hook commands (in this order for combining answers).
    pub fn new(hooks: impl IntoIterator<Item = HookCommand>) -> Self {
        let hooks: Arc<[HookCommand]> = hooks.into_iter().collect();
        let listening = hooks.iter().fold(0, |bits, h| bits | event_bit(h.event));
        Self {
            hooks,
            cwd: None,
            listening,
        }
    }

    fn with_cwd(mut self, cwd: Option<PathBuf>) -> Self {
        self.cwd = cwd;
        self
    }

    /// The same middleware running commands in `dir` (default: the run's
    /// workspace root, else the current directory).
    pub fn in_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    /// The hook commands.
    pub fn commands(&self) -> &[HookCommand] {
        &self.hooks
    }

    /// Whether any hook listens to `event`.
    #[inline]
    pub fn listens(&self, event: HookEvent) -> bool {
        self.listening & event_bit(event) != 0
    }

    /// Where hooks run: the configured directory, else the workspace root,
    /// else the agent's own working directory.
    fn cwd_in(&self, workspace: Option<&WorkspaceDescriptor>) -> PathBuf {
        self.cwd
            .clone()
            .or_else(|| workspace.map(|w| w.root.clone()))
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("."))
    }

    /// The input of `event` for the run `run_id` at `depth`.
    fn input_in(
        &self,
        event: HookEvent,
        run_id: &str,
        depth: u32,
        workspace: Option<&WorkspaceDescriptor>,
    ) -> HookInput {
        let mut input = HookInput::new(event, run_id.to_owned(), self.cwd_in(workspace).display().to_string());
        input.depth = depth;
        input
    }

    fn input<C>(&self, ctx: &RunContext<C>, event: HookEvent) -> HookInput {
        self.input_in(event, ctx.run_id(), ctx.depth(), ctx.workspace())
    }

    /// Runs every hook of `event` matching `tool` with `input`, emits their
    /// messages and notices, and combines their answers. Public so code with
    /// no hook point of its own (a compactor) can fire an event.
    pub async fn fire<C>(
        &self,
        ctx: &RunContext<C>,
        event: HookEvent,
        tool: Option<&str>,
        input: &HookInput,
    ) -> Combined {
        let notices = ctx.events().wants(EventKind::Notice).then(|| ctx.events().sink());
        self.fire_into(notices, event, tool, input).await
    }

    /// [`fire`](Self::fire) reporting its notices to `notices` (none: silent).
    async fn fire_into(
        &self,
        notices: Option<&Arc<dyn EventSink>>,
        event: HookEvent,
        tool: Option<&str>,
        input: &HookInput,
    ) -> Combined {
        let hooks: Vec<&HookCommand> = self
            .hooks
            .iter()
            .filter(|h| h.event == event && h.matches(tool))
            .collect();
        let mut combined = Combined::default();
        if hooks.is_empty() {
            return combined;
        }
        let cwd = PathBuf::from(&input.cwd);
        let runs = futures::future::join_all(hooks.iter().map(|h| run_hook(h, input, &cwd))).await;
        combined.ran = runs.len();
        let notice = |message: String, is_error: bool| {
            if let Some(sink) = notices {
                sink.emit(AgentEvent::Notice {
                    source: "external_hooks".into(),
                    message,
                    is_error,
                });
            }
        };
        for (hook, run) in hooks.iter().zip(runs) {
            let command = shorten(&hook.command, 200);
            // An answer by the grammar can still ask what this event cannot do.
            let run = match run {
                HookRun::Answered(out) if out.updated_input.is_some() && !event.is_policy() => HookRun::NotUnderstood(
                    format!("`updated_input` is an answer of `pre_tool_use` and `permission_request` only, not of `{event}`"),
                ),
                other => other,
            };
            match run {
                HookRun::Answered(out) => {
                    if let Some(message) = out.system_message {
                        notice(shorten(&message, SHOWN_MAX), false);
                    }
                    if !out.should_continue && combined.stop.is_none() {
                        combined.stop = Some(shorten(out.stop_reason.as_deref().unwrap_or_default(), SHOWN_MAX));
                    }
                    match out.decision {
                        Some(Decision::Block) if combined.blocked.is_none() => {
                            combined.blocked = Some(match out.reason {
                                Some(reason) => shorten(&reason, SHOWN_MAX),
                                None => format!("blocked by hook `{command}`"),
                            });
                        }
                        Some(Decision::Approve) => combined.approved = true,
                        _ => {}
                    }
                    if out.updated_input.is_some() {
                        combined.updated_input = out.updated_input;
                    }
                    if let Some(c) = out.additional_context.filter(|c| !c.trim().is_empty()) {
                        combined.additional_context.push(c);
                    }
                }
                HookRun::NotUnderstood(why) => {
                    let verdict = if hook.fail_closed {
                        "refused (fail_closed)"
                    } else {
                        "ignored (fail_closed = false)"
                    };
                    notice(
                        format!("{event} hook `{command}` gave an answer that is not understood, {verdict}: {why}"),
                        true,
                    );
                    if hook.fail_closed && combined.blocked.is_none() {
                        combined.blocked = Some(format!(
                            "hook `{command}` gave an answer that is not understood (fail_closed): {why}"
                        ));
                    }
                }
                HookRun::Blocked(reason) => {
                    if combined.blocked.is_none() {
                        combined.blocked = Some(reason);
                    }
                }
                HookRun::Failed(message) => {
                    let verdict = if hook.fail_closed {
                        "refused (fail_closed)"
                    } else {
                        "ignored (fail_closed = false)"
                    };
                    notice(format!("{event} hook failed, {verdict}: {message}"), true);
                    if hook.fail_closed && combined.blocked.is_none() {
                        combined.blocked = Some(format!("hook failed (fail_closed): {message}"));
                    }
                }
            }
        }
        if combined.blocked.is_some() {
            combined.updated_input = None;
        }
        combined
    }

    /// Fires the `pre_compact` commands for a compaction about to happen
    /// (its `pre_compact` hook does, with the plan's details). Returns the
    /// combined answers: when `blocked` is set, the caller should not compact.
    pub async fn pre_compact<C>(&self, ctx: &RunContext<C>, details: Value) -> Combined {
        let mut input = self.input(ctx, HookEvent::PreCompact);
        input.compaction = Some(details);
        self.fire(ctx, HookEvent::PreCompact, None, &input).await
    }

    fn apply_stop<C>(ctx: &mut RunContext<C>, combined: &Combined) {
        if let Some(text) = &combined.stop {
            ctx.flow_mut()
                .request_control(MiddlewareControl::StopWithFinal(text.clone()));
        }
    }

    fn keep_context<C>(ctx: &RunContext<C>, combined: &Combined) {
        if let Some(text) = combined.context() {
            ctx.locals()
                .local::<RunHooks>()
                .context
                .lock()
                .expect("hooks lock")
                .push(text);
        }
    }

    /// Fires `post_compact` for every entry of the run's compression log not yet seen.
    async fn post_compact<C>(&self, ctx: &mut RunContext<C>) {
        if !self.listens(HookEvent::PostCompact) {
            return;
        }
        let Some(log) = ctx.locals().try_local::<CompressionLog>() else {
            return;
        };
        let state = ctx.locals().local::<RunHooks>();
        let seen = state.compactions_seen.load(Ordering::Relaxed);
        let entries = log.since(seen);
        state.compactions_seen.store(seen + entries.len(), Ordering::Relaxed);
        for entry in &entries {
            let mut input = self.input(ctx, HookEvent::PostCompact);
            input.compaction = serde_json::to_value(entry).ok();
            let combined = self.fire(ctx, HookEvent::PostCompact, None, &input).await;
            if let Some(reason) = &combined.blocked {
                ctx.events().emit_with(EventKind::Notice, || AgentEvent::Notice {
                    source: "external_hooks".into(),
                    message: format!("post_compact hook blocked after the fact (ignored): {reason}"),
                    is_error: false,
                });
            }
            Self::keep_context(ctx, &combined);
            Self::apply_stop(ctx, &combined);
        }
    }

    /// Keeps `pre_tool_use`/`permission_request` context for the call's result.
    fn keep_tool_context<C>(ctx: &RunContext<C>, call_id: &str, combined: &Combined) {
        if let Some(context) = combined.context() {
            let state = ctx.locals().local::<RunHooks>();
            state
                .tool_context
                .lock()
                .expect("hooks lock")
                .entry(call_id.to_owned())
                .or_default()
                .push(context);
        }
    }

    async fn tool_event<C>(&self, ctx: &mut RunContext<C>, event: HookEvent, call: &ToolCall) -> Combined {
        let input = self
            .input(ctx, event)
            .with_tool(call.id.clone(), call.name.clone(), call.arguments.clone());
        let combined = self.fire(ctx, event, Some(&call.name), &input).await;
        Self::apply_stop(ctx, &combined);
        combined
    }
}

/// The policy hooks of a run (`permission_request` and `pre_tool_use`),
/// judging the calls of its sub-agents at their last check: a block, a
/// broken hook (fail closed), an answer that stops the run or one that
/// rewrites the call refuses it (a parent's rewrite cannot be applied inside
/// a sub-agent, so the call as it stands was not admitted).
impl AsyncCallGuard for ExternalHooksMiddleware {
    fn check_call<'a>(
        &'a self,
        call: &'a ToolCall,
        run: &'a GuardedRun<'a>,
    ) -> BoxFuture<'a, std::result::Result<(), String>> {
        Box::pin(async move {
            for event in [HookEvent::PermissionRequest, HookEvent::PreToolUse] {
                if !self.listens(event) {
                    continue;
                }
                let input = self.input_in(event, run.run_id, run.depth, run.workspace).with_tool(
                    call.id.clone(),
                    call.name.clone(),
                    call.arguments.clone(),
                );
                // the sub-agent's sink is not this guard's to report to: silent
                let combined = self.fire_into(None, event, Some(&call.name), &input).await;
                if let Some(reason) = combined.blocked {
                    return Err(format!(
                        "tool call `{}` blocked by a `{event}` hook of the parent run: {reason}",
                        call.name
                    ));
                }
                if let Some(reason) = combined.stop {
                    return Err(format!(
                        "a `{event}` hook of the parent run answered `continue: false` about this call ({reason}): \
                         the call was not admitted",
                    ));
                }
                if combined.updated_input.is_some() {
                    return Err(format!(
                        "a `{event}` hook of the parent run rewrites this call to `{}`, and a sub-agent cannot apply \
                         a parent's rewrite: the call as it stands was not admitted",
                        call.name
                    ));
                }
            }
            Ok(())
        })
    }

    fn key(&self) -> usize {
        Arc::as_ptr(&self.hooks).cast::<()>() as usize
    }
}

const fn event_bit(event: HookEvent) -> u16 {
    1 << event as u8
}

/// Runs external commands (`[[hooks]]` entries) at session start, prompt submit, permission request, pre/post tool use, post compaction and stop; they answer JSON on stdout.
#[middleware(
    builtin,
    name = "external_hooks",
    config = ExternalHooksConfig,
    before = ["*"],
    doc(
        mutation = "Tool call arguments (`updated_input` of `pre_tool_use`/`permission_request`); tool results (a `post_tool_use` block turns the result into an error result; additional context is appended to it); the volatile system prompt segment `external_hooks` (additional context of `session_start`, `user_prompt_submit`, `post_compact`); a `StopWithFinal` control request on `continue = false`.",
        events = "`Notice { source: \"external_hooks\" }` for every `system_message` (`is_error = false`), for answers that are not understood and for failed, timed-out or over-limit hooks (`is_error = true`, saying whether the hook refused or was ignored).",
        failure = "Policy hooks fail closed. A blocked tool call (decision `block`, exit status 2) gets an error result; a blocked session start or prompt fails the run with `Validation`. A hook that fails (an exit status other than 0 or 2, a signal, a command that cannot start, a timeout: its process group is killed), writes more than its limit (`max_stdout_bytes`, default 1 MiB; `max_stderr_bytes`, default 64 KiB) or answers outside the `tinyagents.hook/1` grammar (`{\"decision\":\"deny\"}`, `BLOCK`, a traceback, truncated JSON, invalid UTF-8, an unknown key) is reported as a `Notice` (`is_error = true`) and refuses the call on `pre_tool_use` and `permission_request` (default `fail_closed = true`; `fail_closed = false` per entry is the opt-out, letting the call run). On the other events such a hook is ignored (fails open) unless its entry says `fail_closed = true`. Text shown to the model or in a notice is cut at 2 KiB. Hooks get an allow-listed environment (`PATH`, `HOME`, `LANG`, `LC_*`, …, `pass_env`, `env`, `TINYAGENTS_HOOK_*`), never the agent's API keys, and run in the OS sandbox (`sandbox = \"required\"` by default; a machine that cannot give it fails the hook; `sandbox = \"off\"` is the opt-out).",
        streaming = "Does not implement the delta hooks: streaming pays nothing. Hooks run before the model call and around tool calls, never per delta.",
        cache = "Only the volatile tail segment `external_hooks` is written, so the stable prompt prefix is untouched.",
        retries = "Tool hooks run once per call, outside the tool onion, so retried attempts do not re-run them; `user_prompt_submit` fires once per run whatever the model retries. Ordering: `before = [\"*\"]`, so its `on_tool_batch` and `before_tool` run before every other middleware's whatever the registration order: an `updated_input` is judged by every guard of the stack (`shell_fs_guard`, `tool_policy`, allowlists, your own), never applied after them. A middleware that names `external_hooks` in a `before`/`after` of its own keeps its place."
    )
)]
impl ExternalHooksMiddleware {
    #[before_agent]
    async fn session_start<C>(&self, ctx: &mut RunContext<C>) -> Result<()> {
        if self.listens(HookEvent::PreToolUse) || self.listens(HookEvent::PermissionRequest) {
            // the policy hooks hold in every sub-agent this run starts
            ctx.policy_mut()
                .add_restriction("external_hooks", Restriction::AsyncGuard(Arc::new(self.clone())));
        }
        if !self.listens(HookEvent::SessionStart) {
            return Ok(());
        }
        let input = self.input(ctx, HookEvent::SessionStart);
        let combined = self.fire(ctx, HookEvent::SessionStart, None, &input).await;
        if let Some(reason) = combined.blocked {
            return Err(TinyAgentsError::validation(format!(
                "session start blocked by a hook: {reason}"
            )));
        }
        Self::keep_context(ctx, &combined);
        Self::apply_stop(ctx, &combined);
        Ok(())
    }

    /// `pre_compact`: the compacting middleware (summarization, context)
    /// dispatches it through the stack; a blocking hook blocks the plan.
    #[pre_compact]
    async fn pre_compact_hook<C>(&self, ctx: &mut RunContext<C>, plan: &mut CompactionPlan) -> Result<()> {
        if !self.listens(HookEvent::PreCompact) {
            return Ok(());
        }
        if let Some(reason) = self.pre_compact(ctx, plan.details()).await.blocked {
            plan.block(reason);
        }
        Ok(())
    }

    #[before_model]
    async fn before_model<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let fires = self.listens(HookEvent::UserPromptSubmit) || self.listens(HookEvent::PostCompact);
        let state = match ctx.locals().try_local::<RunHooks>() {
            Some(state) => state,
            // nothing to fire and no context kept: nothing to do
            None if !fires => return Ok(()),
            None => ctx.locals().local::<RunHooks>(),
        };
        if self.listens(HookEvent::UserPromptSubmit) && !state.prompt_submitted.swap(true, Ordering::Relaxed) {
            let mut input = self.input(ctx, HookEvent::UserPromptSubmit);
            input.prompt = request
                .messages
                .iter()
                .rev()
                .find(|m| m.role == Role::User)
                .map(|m| m.text().into_owned());
            let combined = self.fire(ctx, HookEvent::UserPromptSubmit, None, &input).await;
            if let Some(reason) = combined.blocked {
                return Err(TinyAgentsError::validation(format!(
                    "prompt blocked by a hook: {reason}"
                )));
            }
            Self::keep_context(ctx, &combined);
            Self::apply_stop(ctx, &combined);
        }
        self.post_compact(ctx).await;
        let context = state.context.lock().expect("hooks lock").join("\n\n");
        if !context.is_empty() {
            request.set_volatile("external_hooks", context);
        }
        Ok(())
    }

    #[on_tool_batch]
    async fn permission_request<C>(&self, ctx: &mut RunContext<C>, batch: &mut PreparedBatch) -> Result<()> {
        if !self.listens(HookEvent::PermissionRequest) {
            return Ok(());
        }
        let calls: Vec<ToolCall> = batch.calls().iter().map(|p| p.call.clone()).collect();
        for (i, call) in calls.iter().enumerate() {
            let combined = self.tool_event(ctx, HookEvent::PermissionRequest, call).await;
            if let Some(reason) = combined.blocked {
                batch.reject(i, format!("permission denied by a hook: {reason}"));
                continue;
            }

            Self::keep_tool_context(ctx, &call.id, &combined);
            if let Some(new_input) = combined.updated_input {
                // The call's effective arguments from now on: the reviews after
                // this one and the scheduler see the file it will really touch.
                batch.set_arguments(i, new_input);
            }
        }
        Ok(())
    }

    #[before_tool]
    async fn pre_tool_use<C>(&self, ctx: &mut RunContext<C>, call: &mut ToolCall) -> Result<()> {
        if !self.listens(HookEvent::PreToolUse) {
            return Ok(());
        }
        let combined = self.tool_event(ctx, HookEvent::PreToolUse, call).await;
        if let Some(reason) = combined.blocked {
            return Err(TinyAgentsError::validation(format!(
                "tool call `{}` blocked by a hook: {reason}",
                call.name
            )));
        }
        if let Some(reason) = &combined.stop {
            // the run stops (`tool_event` asked for it) before this call runs
            return Err(TinyAgentsError::validation(format!(
                "tool call `{}` not run: a hook stopped the run: {reason}",
                call.name
            )));
        }
        Self::keep_tool_context(ctx, &call.id, &combined);
        if let Some(new_input) = combined.updated_input {
            call.arguments = new_input;
        }
        Ok(())
    }

    /// A compaction done in this model call's `before_model` by middleware
    /// that runs after this one (every other: `before = ["*"]`) is seen here.
    #[after_model]
    async fn after_model<C>(&self, ctx: &mut RunContext<C>) -> Result<()> {
        self.post_compact(ctx).await;
        Ok(())
    }

    #[after_tool]
    async fn post_tool_use<C>(&self, ctx: &mut RunContext<C>, result: &mut ToolResult) -> Result<()> {
        let mut extra = ctx
            .locals()
            .try_local::<RunHooks>()
            .and_then(|s| s.tool_context.lock().expect("hooks lock").remove(&result.call_id))
            .unwrap_or_default();
        if self.listens(HookEvent::PostToolUse) {
            let mut input = self.input(ctx, HookEvent::PostToolUse);
            input.tool_call_id = Some(result.call_id.clone());
            input.tool_name = Some(result.name.clone());
            input.tool_output = Some(result.content.clone());
            input.tool_error = Some(result.is_error());
            let combined = self.fire(ctx, HookEvent::PostToolUse, Some(&result.name), &input).await;
            Self::apply_stop(ctx, &combined);
            extra.extend(combined.context());
            if let Some(reason) = combined.blocked {
                let message = format!("{}\n\n[blocked by a hook] {reason}", result.content);
                result.error = Some(reason);
                result.content = message;
            }
        }
        for context in extra {
            result.content.push_str("\n\n");
            result.content.push_str(&context);
        }
        Ok(())
    }

    #[after_agent]
    async fn stop<C>(&self, ctx: &mut RunContext<C>, run: &mut AgentRun) -> Result<()> {
        if !self.listens(HookEvent::Stop) {
            return Ok(());
        }
        let mut input = self.input(ctx, HookEvent::Stop);
        input.final_text = Some(run.final_text());
        input.stop_reason = Some(format!("{:?}", run.stop));
        let combined = self.fire(ctx, HookEvent::Stop, None, &input).await;
        if let Some(reason) = combined.blocked {
            ctx.events().emit_with(EventKind::Notice, || AgentEvent::Notice {
                source: "external_hooks".into(),
                message: format!("stop hook blocked, but the run has ended (ignored): {reason}"),
                is_error: false,
            });
        }
        Ok(())
    }
}
