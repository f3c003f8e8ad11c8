//! Running one hook command: the input on stdin, the answer from stdout or
//! the exit status, read with bounds; a timeout, an over-long answer or the
//! end of the hook kill its whole process group.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::config::HookCommand;

/// The version of the input and output documents ([`HookInput::schema`]).
pub const SCHEMA: &str = "tinyagents.hook/1";

/// The JSON document a hook command reads on stdin (schema
/// [`SCHEMA`]). Fields that do not apply to the event are left out.
///
/// ```
/// use tinyagents::external_hooks::{HookEvent, HookInput};
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

/// A hook's decision about what it was asked. Exactly these two words
/// (lower case) are understood; anything else (`"deny"`, `"BLOCK"`) makes
/// the whole answer not understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Allow (a tool call, a permission).
    Approve,
    /// Refuse, with the `reason` shown to the model.
    Block,
}

/// The JSON document a hook command may print on stdout (exit status 0),
/// schema [`SCHEMA`]. Every field is optional (`null` counts as absent);
/// an unknown field, a field of the wrong type or an unknown decision makes
/// the whole answer not understood (see [`parse_answer`]).
///
/// ```
/// use tinyagents::external_hooks::{parse_answer, Decision};
///
/// let out = parse_answer(br#"{"decision": "block", "reason": "no rm -rf"}"#).unwrap();
/// assert_eq!(out.decision, Some(Decision::Block));
/// assert!(out.should_continue);
/// assert!(parse_answer(br#"{"decision": "deny"}"#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookOutput {
    /// When present, must be [`SCHEMA`] (`tinyagents.hook/1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// `false` stops the run (with `stop_reason` as its final text).
    #[serde(rename = "continue", default = "yes", deserialize_with = "bool_or_null")]
    pub should_continue: bool,
    /// The final text when `continue` is `false`.
    #[serde(default)]
    pub stop_reason: Option<String>,
    /// Approve or block.
    #[serde(default)]
    pub decision: Option<Decision>,
    /// Why (shown to the model when blocking, shortened to [`SHOWN_MAX`] bytes).
    #[serde(default)]
    pub reason: Option<String>,
    /// New arguments for the tool call (`pre_tool_use`, `permission_request`):
    /// a JSON object. The guards of the stack judge the new arguments.
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

fn bool_or_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(Option::<bool>::deserialize(d)?.unwrap_or(true))
}

impl Default for HookOutput {
    fn default() -> Self {
        Self {
            schema: None,
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

/// Parses what a hook printed on stdout with exit status 0, by the grammar
/// of schema `tinyagents.hook/1`:
///
/// * only white space: no opinion (the default answer);
/// * otherwise valid UTF-8 holding exactly one JSON object (white space
///   around it allowed, nothing else) whose keys are among `schema`,
///   `continue`, `stop_reason`, `decision`, `reason`, `updated_input`,
///   `additional_context`, `system_message`, each once, with these types:
///   `schema` the string `"tinyagents.hook/1"`; `continue` a boolean;
///   `decision` exactly `"approve"` or `"block"`; `updated_input` an object;
///   every other key a string; any of them may be `null` (absent).
///
/// Anything else is an `Err` saying what was wrong: the caller treats the
/// answer as not understood (a policy hook then refuses).
///
/// ```
/// use tinyagents::external_hooks::parse_answer;
///
/// assert!(parse_answer(b"  \n").unwrap().decision.is_none());
/// assert!(parse_answer(br#"{"continue": false, "stop_reason": "done"}"#).is_ok());
/// for bad in [&b"BLOCK"[..], b"\"block\"", br#"{"decision":"block""#, br#"{"decision":"Block"}"#,
///             br#"{"verdict":"block"}"#, br#"[{"decision":"block"}]"#, br#"{"updated_input":"rm -rf /"}"#,
///             br#"{} {}"#, b"{\"reason\":\"\xff\"}", br#"{"schema":"tinyagents.hook/2"}"#] {
///     assert!(parse_answer(bad).is_err(), "{}", String::from_utf8_lossy(bad));
/// }
/// ```
pub fn parse_answer(stdout: &[u8]) -> Result<HookOutput, String> {
    let text = std::str::from_utf8(stdout).map_err(|e| {
        format!(
            "stdout is not valid UTF-8 (at byte {}); the answer must be one JSON object in UTF-8",
            e.valid_up_to()
        )
    })?;
    let text = text.trim();
    if text.is_empty() {
        return Ok(HookOutput::default());
    }
    if !text.starts_with('{') {
        return Err(format!(
            "stdout is not a JSON object (it starts with {:?}); print one object such as \
             {{\"decision\": \"block\", \"reason\": \"…\"}}, or nothing",
            shorten(text, 40)
        ));
    }
    let answer: HookOutput = serde_json::from_str(text).map_err(|e| {
        format!(
            "stdout is not a `{SCHEMA}` answer ({e}); the keys are `schema`, `continue`, `stop_reason`, \
             `decision` (\"approve\" or \"block\"), `reason`, `updated_input`, `additional_context`, `system_message`"
        )
    })?;
    if let Some(schema) = answer.schema.as_deref().filter(|s| *s != SCHEMA) {
        return Err(format!(
            "the answer says `schema` = {:?}, and only {SCHEMA:?} is understood",
            shorten(schema, 80)
        ));
    }
    if let Some(input) = answer.updated_input.as_ref().filter(|v| !v.is_object() && !v.is_null()) {
        return Err(format!(
            "`updated_input` must be a JSON object (the tool's new arguments), not {}",
            shorten(&input.to_string(), 80)
        ));
    }
    Ok(HookOutput {
        updated_input: answer.updated_input.filter(|v| !v.is_null()),
        ..answer
    })
}

/// What running one hook command came to.
#[derive(Debug, Clone, PartialEq)]
pub enum HookRun {
    /// Exit 0 and an answer by [the grammar](parse_answer) (the default answer
    /// when stdout was empty).
    Answered(HookOutput),
    /// Exit 0 but stdout is not an answer by [the grammar](parse_answer):
    /// why, shortened to [`SHOWN_MAX`] bytes.
    NotUnderstood(String),
    /// Exit 2: blocked, with stderr as the reason (shortened to [`SHOWN_MAX`] bytes).
    Blocked(String),
    /// Another exit status, a signal, a command that cannot start, a
    /// timeout, or output over its limit: what happened.
    Failed(String),
}

/// The stdout limit of a hook when its entry gives none: 1 MiB.
pub const DEFAULT_MAX_STDOUT: usize = 1 << 20;
/// The largest stdout limit an entry may set: 16 MiB.
pub const MAX_STDOUT_LIMIT: usize = 16 << 20;
/// The stderr limit of a hook when its entry gives none: 64 KiB.
pub const DEFAULT_MAX_STDERR: usize = 64 << 10;
/// The largest stderr limit an entry may set: 1 MiB.
pub const MAX_STDERR_LIMIT: usize = 1 << 20;
/// The longest text (in bytes) of a hook shown to the model or put in a
/// notice: a refusal's reason, stderr, an unparsed answer. Longer text is cut
/// at a character boundary and marked `… [N bytes cut]`.
pub const SHOWN_MAX: usize = 2048;
/// How long output still buffered in the pipes is read after the hook
/// process exited (a background child that keeps them open is not waited for).
const DRAIN: Duration = Duration::from_millis(250);

/// The variables a hook inherits from the agent's environment, by exact
/// name; plus every `LC_*` variable. Nothing else of the agent's
/// environment reaches a hook (API keys included) unless its entry names it
/// in `pass_env` or sets it in `env`.
pub const ENV_ALLOW: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "TMPDIR", "TZ",
];

/// The environment of `hook` running `input`, built from `parent` (the
/// agent's environment, normally [`std::env::vars_os`]): the variables of
/// [`ENV_ALLOW`] and `LC_*`, those the entry names in `pass_env`, those it
/// sets in `env`, then `TINYAGENTS_HOOK_EVENT`, `TINYAGENTS_HOOK_SCHEMA`,
/// `TINYAGENTS_RUN_ID` and `TINYAGENTS_HOOK_CWD`, which nothing overrides.
///
/// ```
/// use tinyagents::external_hooks::{hook_environment, HookCommand, HookEvent, HookInput};
///
/// let hook = HookCommand::new(HookEvent::PreToolUse, "./check.sh").with_env("MODE", "strict").with_pass_env("CI");
/// let input = HookInput::new(HookEvent::PreToolUse, "run-1", "/work");
/// let parent = [("PATH", "/bin"), ("OPENAI_API_KEY", "sk-secret"), ("CI", "1"), ("LC_ALL", "C")]
///     .map(|(k, v)| (k.into(), v.into()));
/// let env = hook_environment(&hook, &input, parent);
/// let names: Vec<_> = env.iter().map(|(k, _)| k.to_str().unwrap()).collect();
/// assert_eq!(names, ["PATH", "CI", "LC_ALL", "MODE", "TINYAGENTS_HOOK_EVENT", "TINYAGENTS_HOOK_SCHEMA", "TINYAGENTS_RUN_ID", "TINYAGENTS_HOOK_CWD"]);
/// ```
pub fn hook_environment(
    hook: &HookCommand,
    input: &HookInput,
    parent: impl IntoIterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let ours = [
        "TINYAGENTS_HOOK_EVENT",
        "TINYAGENTS_HOOK_SCHEMA",
        "TINYAGENTS_RUN_ID",
        "TINYAGENTS_HOOK_CWD",
    ];
    let mut env: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(k, _)| {
            k.to_str()
                .is_some_and(|k| ENV_ALLOW.contains(&k) || k.starts_with("LC_") || hook.pass_env.iter().any(|p| p == k))
        })
        .filter(|(k, _)| !hook.env.contains_key(k.to_str().unwrap_or_default()))
        .collect();
    env.extend(hook.env.iter().map(|(k, v)| (k.into(), v.into())));
    env.retain(|(k, _)| !ours.iter().any(|o| k == o));
    env.extend([
        ("TINYAGENTS_HOOK_EVENT".into(), input.event.clone().into()),
        ("TINYAGENTS_HOOK_SCHEMA".into(), SCHEMA.into()),
        ("TINYAGENTS_RUN_ID".into(), input.run_id.clone().into()),
        ("TINYAGENTS_HOOK_CWD".into(), input.cwd.clone().into()),
    ]);
    env
}

/// The shell hook commands run with: an absolute path, so no `PATH` entry
/// can stand in for it.
const SHELL: &str = if cfg!(unix) { "/bin/sh" } else { "sh" };

/// Starts one hook command: `/bin/sh -c COMMAND` in `cwd`, with exactly `env`
/// (nothing inherited), stdin/stdout/stderr piped, in a process group of its
/// own. This is the one place hooks create processes, so an OS sandbox
/// runner can take it over.
fn spawn(command: &str, cwd: &Path, env: &[(OsString, OsString)]) -> std::io::Result<tokio::process::Child> {
    let mut cmd = tokio::process::Command::new(SHELL);
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    cmd.spawn()
}

/// Output read up to a limit.
struct Capped {
    buf: Vec<u8>,
    cap: usize,
}

impl Capped {
    fn new(cap: usize) -> Self {
        Self {
            buf: Vec::with_capacity(cap.min(8 << 10)),
            cap,
        }
    }

    /// Keeps `bytes`; `false` when they go over the limit (what fits is kept).
    fn push(&mut self, bytes: &[u8]) -> bool {
        let room = self.cap - self.buf.len();
        self.buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
        bytes.len() <= room
    }
}

/// How a hook process ended: its exit code, or the signal that killed it.
struct Exit {
    code: Option<i32>,
    signal: String,
}

impl From<std::process::ExitStatus> for Exit {
    fn from(status: std::process::ExitStatus) -> Self {
        Self {
            code: status.code(),
            signal: signal_of(&status),
        }
    }
}

/// How the reading of a hook ended.
enum End {
    Exited(Exit),
    TimedOut,
    /// Over the limit of this stream (`stdout`/`stderr`).
    Overflow(&'static str, usize),
    WaitFailed(std::io::Error),
}

/// Runs `hook` with `input` on stdin in `cwd`, and reads its answer.
///
/// The command runs as `/bin/sh -c COMMAND` in a process group of its own, with
/// the environment of [`hook_environment`] (never the agent's whole
/// environment). Reads are bounded: stdout up to the entry's
/// `max_stdout_bytes`, stderr up to `max_stderr_bytes`; more is a
/// [`HookRun::Failed`]. Reading stops when the hook process exits (output
/// still in the pipes is drained for a moment, within the limits), when the
/// timeout passes or when a limit is passed; then the whole process group is
/// killed (`SIGKILL`), so children it left behind die with it.
///
/// It needs a Tokio runtime with IO enabled (`#[tokio::main]` and
/// `Builder::enable_all()` have it); without, the hook is [`HookRun::Failed`].
pub async fn run_hook(hook: &HookCommand, input: &HookInput, cwd: &Path) -> HookRun {
    let payload = match serde_json::to_vec(input) {
        Ok(p) => p,
        Err(e) => return HookRun::Failed(format!("cannot encode the hook input: {e}")),
    };
    let env = hook_environment(hook, input, std::env::vars_os());
    if hook.sandbox != crate::harness::tool::SandboxMode::Off {
        return run_sandboxed(hook, payload, &env, cwd).await;
    }
    // Tokio panics when the runtime has no IO driver: report it as a failed hook instead.
    let spawned = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| spawn(&hook.command, cwd, &env)));
    let mut child = match spawned {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            return HookRun::Failed(format!(
                "cannot start `{}` in `{}`: {e}",
                shorten(&hook.command, 200),
                cwd.display()
            ))
        }
        Err(_) => {
            return HookRun::Failed(format!(
                "cannot start `{}`: hook commands need a Tokio runtime with IO enabled \
                 (`Builder::enable_all()` or `enable_io()`)",
                shorten(&hook.command, 200)
            ))
        }
    };
    let pid = child.id();
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        kill(pid, &mut child).await;
        return HookRun::Failed(format!("`{}`: its output pipes were not opened", hook.command));
    };
    let stdin = child.stdin.take();
    let write = async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input closes the pipe: not an error.
            let _ = stdin.write_all(&payload).await;
            let _ = stdin.shutdown().await;
        }
    };
    tokio::pin!(write);
    let (mut out, mut err) = (Capped::new(hook.max_stdout), Capped::new(hook.max_stderr));
    let (mut out_buf, mut err_buf) = (vec![0u8; 8 << 10], vec![0u8; 4 << 10]);
    let (mut out_open, mut err_open, mut written) = (true, true, false);
    let deadline = tokio::time::sleep(hook.timeout);
    tokio::pin!(deadline);
    let mut end = loop {
        tokio::select! {
            r = stdout.read(&mut out_buf), if out_open => match r {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => if !out.push(&out_buf[..n]) { break End::Overflow("stdout", hook.max_stdout) },
            },
            r = stderr.read(&mut err_buf), if err_open => match r {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => if !err.push(&err_buf[..n]) { break End::Overflow("stderr", hook.max_stderr) },
            },
            () = &mut write, if !written => written = true,
            status = child.wait() => break match status {
                Ok(s) => End::Exited(s.into()),
                Err(e) => End::WaitFailed(e),
            },
            () = &mut deadline => break End::TimedOut,
        }
    };
    if matches!(end, End::Exited(_)) {
        // What the hook wrote before it exited is in the pipes: read it, but
        // do not wait for a background child that keeps them open.
        let drain = tokio::time::sleep(DRAIN);
        tokio::pin!(drain);
        while out_open || err_open {
            tokio::select! {
                biased;
                r = stdout.read(&mut out_buf), if out_open => match r {
                    Ok(0) | Err(_) => out_open = false,
                    Ok(n) => if !out.push(&out_buf[..n]) { end = End::Overflow("stdout", hook.max_stdout); break },
                },
                r = stderr.read(&mut err_buf), if err_open => match r {
                    Ok(0) | Err(_) => err_open = false,
                    Ok(n) => if !err.push(&err_buf[..n]) { end = End::Overflow("stderr", hook.max_stderr); break },
                },
                () = &mut drain => break,
                () = &mut deadline => break,
            }
        }
    }
    // The hook is done (or stopped): whatever it left behind goes with its
    // group, before the pipes close (a closed pipe would let a writer go on).
    kill(pid, &mut child).await;
    drop((stdout, stderr));
    classify(hook, end, &out.buf, &err.buf)
}

/// Runs `hook` in the OS sandbox ([`crate::sandbox`]) with `payload` on
/// stdin: the hook's directory is the writable root, the system directories
/// and the hook script's own directory are readable, there is no network,
/// the environment is exactly `env` (the sandbox sets its own `HOME` and
/// `TMPDIR`), and the timeout and output limits kill the whole tree, a
/// `setsid` grandchild included. A sandbox the machine cannot give (mode
/// `Required`) is a failed hook, which a policy hook turns into a refusal.
#[cfg(all(unix, feature = "commands"))]
async fn run_sandboxed(hook: &HookCommand, payload: Vec<u8>, env: &[(OsString, OsString)], cwd: &Path) -> HookRun {
    use crate::sandbox::{Sandbox, SandboxCommand, SandboxPolicy, Termination};
    let command = shorten(&hook.command, 200);
    if !cwd.is_dir() {
        return HookRun::Failed(format!(
            "cannot start `{command}` in `{}`: it is not an existing directory",
            cwd.display()
        ));
    }
    let mut policy = SandboxPolicy::new(cwd).with_mode(hook.sandbox);
    policy.env_allow.clear();
    policy.limits.wall_time = hook.timeout;
    policy.limits.output_bytes = hook.max_stdout.max(hook.max_stderr);
    if let Some(dir) = script_dir(&hook.command, cwd) {
        policy = policy.with_read_only_path(dir);
    }
    let sandbox = match Sandbox::new(policy) {
        Ok(sandbox) => sandbox,
        Err(e) => return HookRun::Failed(format!("`{command}` cannot run in the sandbox its entry asks for: {e}")),
    };
    let mut cmd = SandboxCommand::new([SHELL, "-c", hook.command.as_str()])
        .with_stdin(payload)
        .with_output_limits(hook.max_stdout, hook.max_stderr);
    for (name, value) in env {
        if let (Some(name), Some(value)) = (name.to_str(), value.to_str())
            && name != "HOME"
            && name != "TMPDIR"
        {
            cmd = cmd.with_env(name, value);
        }
    }
    let out = match sandbox.run(cmd).await {
        Ok(out) => out,
        Err(e) => return HookRun::Failed(format!("`{command}` could not run in the sandbox: {e}")),
    };
    let end = match out.termination {
        Termination::Exited(code) => End::Exited(Exit {
            code: Some(code),
            signal: String::new(),
        }),
        Termination::Signaled(sig) => End::Exited(Exit {
            code: None,
            signal: format!("signal {sig}"),
        }),
        Termination::TimedOut => End::TimedOut,
        Termination::OutputLimit if out.stdout_truncated => End::Overflow("stdout", hook.max_stdout),
        Termination::OutputLimit => End::Overflow("stderr", hook.max_stderr),
        Termination::Cancelled => End::WaitFailed(std::io::Error::other("the sandboxed run was cancelled")),
    };
    classify(hook, end, &out.stdout, &out.stderr)
}

#[cfg(not(unix))]
async fn run_sandboxed(hook: &HookCommand, _: Vec<u8>, _: &[(OsString, OsString)], _: &Path) -> HookRun {
    HookRun::Failed(format!(
        "`{}` asks for the OS sandbox, which exists on Linux only; set `sandbox = \"off\"` to run it unconfined",
        shorten(&hook.command, 200)
    ))
}

/// Without the command runner in the build, a hook that asks for the OS
/// sandbox fails (closed), naming the feature.
#[cfg(all(unix, not(feature = "commands")))]
async fn run_sandboxed(hook: &HookCommand, _: Vec<u8>, _: &[(OsString, OsString)], _: &Path) -> HookRun {
    HookRun::Failed(format!(
        "`{}` asks for the OS sandbox, and this build of tinyagents has no command runner: turn on its \
         `commands` feature, or set `sandbox = \"off\"` to run the hook unconfined",
        shorten(&hook.command, 200)
    ))
}

/// The directory of the script a hook command runs, outside `cwd`: its
/// first word (`/etc/agent/hooks/check.sh`), or the first operand after an
/// interpreter (`sh /etc/agent/hooks/check.sh`). The sandbox lets the hook
/// read (never write) there. Only the script's own directory: another file
/// the command names (`cat /etc/shadow`) widens nothing.
#[cfg(all(unix, feature = "commands"))]
fn script_dir(command: &str, cwd: &Path) -> Option<std::path::PathBuf> {
    const INTERPRETERS: &[&str] = &["sh", "bash", "dash", "zsh", "python", "python3", "perl", "ruby", "node"];
    let mut words = command.split_whitespace().map(|w| w.trim_matches(['\'', '"']));
    let first = words.next()?;
    let name = first.rsplit('/').next().unwrap_or(first);
    let script = if INTERPRETERS.contains(&name) {
        words.find(|w| !w.starts_with('-'))?
    } else {
        first
    };
    if !script.contains('/') {
        return None;
    }
    let root = cwd.canonicalize().ok()?;
    let file = cwd.join(script).canonicalize().ok()?;
    let dir = file.parent().filter(|_| file.is_file())?;
    (!dir.starts_with(&root)).then(|| dir.to_path_buf())
}

/// What the end of a hook's reading means.
fn classify(hook: &HookCommand, end: End, stdout: &[u8], stderr: &[u8]) -> HookRun {
    let command = shorten(&hook.command, 200);
    let stderr_text = || {
        let text = String::from_utf8_lossy(stderr);
        let text = text.trim();
        if text.is_empty() {
            String::new()
        } else {
            format!(": {}", shorten(text, SHOWN_MAX))
        }
    };
    let status = match end {
        End::Exited(status) => status,
        End::TimedOut => {
            return HookRun::Failed(format!(
                "`{command}` timed out after {} ms and was killed with its process group \
                 (raise `timeout_ms` if the hook needs longer)",
                hook.timeout.as_millis()
            ))
        }
        End::Overflow(stream, cap) => {
            return HookRun::Failed(format!(
                "`{command}` wrote more than {cap} bytes to {stream}, the limit (`max_{stream}_bytes`); \
                 it was killed and its answer not read: print a short answer"
            ))
        }
        End::WaitFailed(e) => return HookRun::Failed(format!("`{command}` could not be waited for: {e}")),
    };
    match status.code {
        Some(0) => match parse_answer(stdout) {
            Ok(answer) => HookRun::Answered(answer),
            Err(why) => HookRun::NotUnderstood(shorten(&why, SHOWN_MAX)),
        },
        Some(2) => {
            let reason = String::from_utf8_lossy(stderr);
            let reason = reason.trim();
            HookRun::Blocked(if reason.is_empty() {
                format!("blocked by hook `{command}` (exit status 2)")
            } else {
                shorten(reason, SHOWN_MAX)
            })
        }
        Some(code) => HookRun::Failed(format!(
            "`{command}` exited with status {code}{}{}",
            match code {
                126 => " (the command is not executable)",
                127 => " (the command was not found)",
                _ => "",
            },
            stderr_text()
        )),
        None => HookRun::Failed(format!("`{command}` was killed by {}", status.signal)),
    }
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(sig) => format!("signal {sig}"),
        None => "a signal".to_owned(),
    }
}

#[cfg(not(unix))]
fn signal_of(_: &std::process::ExitStatus) -> String {
    "a signal".to_owned()
}

/// Shortens `text` to at most `max` bytes (at a character boundary), marking the cut.
///
/// ```
/// let long = "x".repeat(5000);
/// let short = tinyagents::external_hooks::shorten(&long, 2048);
/// assert!(short.len() < 2100 && short.ends_with("… [2952 bytes cut]"));
/// assert_eq!(tinyagents::external_hooks::shorten("ok", 2048), "ok");
/// ```
pub fn shorten(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut cut = max;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}… [{} bytes cut]", &text[..cut], text.len() - cut)
}

/// Kills process group `pgid` (the hook and everything it started that
/// stayed in its group) with `SIGKILL`, then reaps the direct child. The
/// `kill` utility does it, so the crate needs neither `unsafe` (`libc::kill`,
/// which the workspace forbids) nor another dependency.
async fn kill(pgid: Option<u32>, child: &mut tokio::process::Child) {
    #[cfg(unix)]
    if let Some(pgid) = pgid {
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
    let _ = child.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
}
