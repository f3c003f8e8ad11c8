//! Running one hook command: the input on stdin, the answer from stdout or
//! the exit status, a timeout that kills the whole process group.

use std::path::Path;
use std::process::Stdio;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::config::HookCommand;

/// The version of the input and output documents ([`HookInput::schema`]).
pub const SCHEMA: &str = "tinyagents.hook/1";

/// The JSON document a hook command reads on stdin (schema
/// [`SCHEMA`]). Fields that do not apply to the event are left out.
///
/// ```
/// use tinyagents::hooks::{HookEvent, HookInput};
///
/// let input = HookInput::new(HookEvent::PreToolUse, "run-1", "/work")
///     .with_tool("call-1", "shell", serde_json::json!({ "command": "ls" }));
/// let json = serde_json::to_value(&input).unwrap();
/// assert_eq!(json["schema"], "tinyagents.hook/1");
/// assert_eq!(json["event"], "pre_tool_use");
/// assert_eq!(json["tool_input"]["command"], "ls");
/// assert!(json.get("tool_output").is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookInput {
    /// Always [`SCHEMA`] (`tinyagents.hook/1`).
    pub schema: String,
    /// The event's name (`pre_tool_use`).
    pub event: String,
    /// The run's id.
    pub run_id: String,
    /// The run's depth (0 for a top-level run, more for sub-agents).
    pub depth: u32,
    /// The directory the command runs in.
    pub cwd: String,
    /// The prompt (`user_prompt_submit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// The tool call's id (tool events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The tool's name (tool events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The tool call's arguments (tool events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_input: Option<Value>,
    /// The tool's result text (`post_tool_use`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_output: Option<String>,
    /// Whether the tool's result is an error (`post_tool_use`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_error: Option<bool>,
    /// The final text of the run (`stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_text: Option<String>,
    /// Why the run stopped (`stop`), as `Debug` text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// What was compacted (`pre_compact`, `post_compact`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compaction: Option<Value>,
}

impl HookInput {
    /// The input of `event` for run `run_id`, running in `cwd`.
    pub fn new(event: super::HookEvent, run_id: impl Into<String>, cwd: impl Into<String>) -> Self {
        Self {
            schema: SCHEMA.to_owned(),
            event: event.as_str().to_owned(),
            run_id: run_id.into(),
            depth: 0,
            cwd: cwd.into(),
            prompt: None,
            tool_call_id: None,
            tool_name: None,
            tool_input: None,
            tool_output: None,
            tool_error: None,
            final_text: None,
            stop_reason: None,
            compaction: None,
        }
    }

    /// The same input about a tool call.
    pub fn with_tool(mut self, call_id: impl Into<String>, name: impl Into<String>, input: Value) -> Self {
        self.tool_call_id = Some(call_id.into());
        self.tool_name = Some(name.into());
        self.tool_input = Some(input);
        self
    }
}

/// A hook's decision about what it was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Allow (a tool call, a permission).
    Approve,
    /// Refuse, with the `reason` shown to the model.
    Block,
}

/// The JSON document a hook command may print on stdout (exit status 0).
/// Every field is optional; unknown fields are ignored (forward compatible).
///
/// ```
/// use tinyagents::hooks::{Decision, HookOutput};
///
/// let out: HookOutput = serde_json::from_str(r#"{"decision": "block", "reason": "no rm -rf"}"#).unwrap();
/// assert_eq!(out.decision, Some(Decision::Block));
/// assert!(out.should_continue);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookOutput {
    /// `false` stops the run (with `stop_reason` as its final text).
    #[serde(rename = "continue", default = "yes")]
    pub should_continue: bool,
    /// The final text when `continue` is `false`.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// Approve or block.
    #[serde(default)]
    pub decision: Option<Decision>,
    /// Why (shown to the model when blocking).
    #[serde(default)]
    pub reason: Option<String>,
    /// New arguments for the tool call (`pre_tool_use`, `permission_request`).
    #[serde(default)]
    pub updated_input: Option<Value>,
    /// Text added to the model's context (see the module docs for where).
    #[serde(default)]
    pub additional_context: Option<String>,
    /// A message for the user, emitted as a `Notice` event.
    #[serde(default)]
    pub system_message: Option<String>,
}

fn yes() -> bool {
    true
}

impl Default for HookOutput {
    fn default() -> Self {
        Self {
            should_continue: true,
            stop_reason: None,
            decision: None,
            reason: None,
            updated_input: None,
            additional_context: None,
            system_message: None,
        }
    }
}

/// What running one hook command came to.
#[derive(Debug, Clone, PartialEq)]
pub enum HookRun {
    /// Exit 0: its answer (the default answer when stdout was empty).
    Answered(HookOutput),
    /// Exit 0 but stdout was not a JSON answer: the text, reported as a `Notice`.
    NotJson(String),
    /// Exit 2: blocked, with stderr as the reason.
    Blocked(String),
    /// Another exit status, a signal, a spawn failure or a timeout.
    Failed(String),
}

/// Runs `hook` with `input` on stdin in `cwd`, and reads its answer.
///
/// The command runs as `sh -c COMMAND` in a process group of its own. When
/// the timeout passes, the whole group is killed (`SIGKILL`), so the
/// children it started die with it, and the run is [`HookRun::Failed`].
///
/// It needs a Tokio runtime with IO enabled (`#[tokio::main]` and
/// `Builder::enable_all()` have it); without, the hook is [`HookRun::Failed`].
pub async fn run_hook(hook: &HookCommand, input: &HookInput, cwd: &Path) -> HookRun {
    let payload = match serde_json::to_vec(input) {
        Ok(p) => p,
        Err(e) => return HookRun::Failed(format!("cannot encode the hook input: {e}")),
    };
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(&hook.command)
        .current_dir(cwd)
        .envs(&hook.env)
        .env("TINYAGENTS_HOOK_EVENT", &input.event)
        .env("TINYAGENTS_RUN_ID", &input.run_id)
        .env("TINYAGENTS_HOOK_SCHEMA", SCHEMA)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    // Tokio panics when the runtime has no IO driver: report it as a failed hook instead.
    let spawned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| command.spawn()));
    let mut child = match spawned {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return HookRun::Failed(format!("cannot start `{}`: {e}", hook.command)),
        Err(_) => {
            return HookRun::Failed(format!(
                "cannot start `{}`: hook commands need a Tokio runtime with IO enabled \
                 (`Builder::enable_all()` or `enable_io()`)",
                hook.command
            ))
        }
    };
    let pid = child.id();
    let stdin = child.stdin.take();
    let write = async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input closes the pipe: not an error.
            let _ = stdin.write_all(&payload).await;
            let _ = stdin.shutdown().await;
        }
    };
    let run = async move { tokio::join!(write, child.wait_with_output()).1 };
    let output = match tokio::time::timeout(hook.timeout, run).await {
        Ok(Ok(output)) => output,
        Ok(Err(e)) => return HookRun::Failed(format!("`{}` failed: {e}", hook.command)),
        Err(_) => {
            // The direct child was killed when `run` was dropped (kill_on_drop);
            // its children are killed with the group.
            if let Some(pid) = pid {
                kill_group(pid).await;
            }
            return HookRun::Failed(format!(
                "`{}` timed out after {} ms and was killed",
                hook.command,
                hook.timeout.as_millis()
            ));
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => {
            let text = stdout.trim();
            if text.is_empty() {
                return HookRun::Answered(HookOutput::default());
            }
            match serde_json::from_str::<HookOutput>(text) {
                Ok(answer) => HookRun::Answered(answer),
                Err(_) => HookRun::NotJson(text.to_owned()),
            }
        }
        Some(2) => {
            let reason = stderr.trim();
            HookRun::Blocked(if reason.is_empty() {
                format!("blocked by hook `{}`", hook.command)
            } else {
                reason.to_owned()
            })
        }
        Some(code) => HookRun::Failed(format!(
            "`{}` exited with status {code}{}",
            hook.command,
            if stderr.trim().is_empty() {
                String::new()
            } else {
                format!(": {}", stderr.trim())
            }
        )),
        None => HookRun::Failed(format!("`{}` was killed by a signal", hook.command)),
    }
}

/// Kills process group `pgid` with `SIGKILL`. The `kill` utility does it, so
/// the crate needs neither `unsafe` (`libc::kill`, which the workspace
/// forbids) nor another dependency.
async fn kill_group(pgid: u32) {
    #[cfg(unix)]
    {
        let _ = tokio::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
    }
    #[cfg(not(unix))]
    let _ = pgid;
}
