//! [`HookEvent`], [`HookCommand`] (one `[[hooks]]` entry) and
//! [`ExternalHooksConfig`] (`type = "external_hooks"`), parsed with every
//! error reported under its path.

use crate::harness::tool::SandboxMode;
use std::collections::BTreeMap;
use std::time::Duration;

use regex::Regex;
use serde_json::{Map, Value};

use crate::config::{ConfigError, ConfigErrors, MiddlewareConfig};
use crate::harness::middleware::ConfigFieldDoc;

/// When a hook command runs. The names are the `event = "…"` values of a
/// `[[hooks]]` entry and the `event` field of the hook's input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum HookEvent {
    /// A run starts (`before_agent`, every run, sub-agents included: see `depth`).
    SessionStart,
    /// The prompt of a run reaches the model for the first time (the first
    /// `before_model` of the run); the input carries `prompt`.
    UserPromptSubmit,
    /// A tool call is about to run (`before_tool`, after the batch review).
    PreToolUse,
    /// A tool call asks to be allowed (the batch review, `on_tool_batch`,
    /// before any `pre_tool_use`): the matcher says which tools ask.
    PermissionRequest,
    /// A tool call has its result (`after_tool`); the input carries `tool_output`.
    PostToolUse,
    /// A run ends (`after_agent`); the input carries `final_text` and `stop_reason`.
    Stop,
    /// Context is about to be compacted (the `pre_compact` hook point, which
    /// compacting middleware dispatch through the stack); the input carries
    /// `compaction`, and a block keeps the context as it is.
    PreCompact,
    /// Context was compacted: fired from `before_model` for every new entry
    /// of the run's compression log; the input carries `compaction`.
    PostCompact,
}

impl HookEvent {
    /// Every event, in lifecycle order.
    pub const ALL: [HookEvent; 8] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PermissionRequest,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::PreCompact,
        HookEvent::PostCompact,
        HookEvent::Stop,
    ];

    /// Its name in config and in the hook input (`pre_tool_use`).
    pub const fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session_start",
            HookEvent::UserPromptSubmit => "user_prompt_submit",
            HookEvent::PreToolUse => "pre_tool_use",
            HookEvent::PermissionRequest => "permission_request",
            HookEvent::PostToolUse => "post_tool_use",
            HookEvent::Stop => "stop",
            HookEvent::PreCompact => "pre_compact",
            HookEvent::PostCompact => "post_compact",
        }
    }

    /// The event named `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Whether the event is a policy decision about a tool call about to run
    /// (`permission_request`, `pre_tool_use`): its hooks fail closed by
    /// default, and an answer that is not understood refuses the call.
    pub const fn is_policy(self) -> bool {
        matches!(self, HookEvent::PreToolUse | HookEvent::PermissionRequest)
    }

    /// Whether the event concerns one tool call (so the matcher applies).
    pub const fn is_tool_event(self) -> bool {
        matches!(
            self,
            HookEvent::PreToolUse | HookEvent::PermissionRequest | HookEvent::PostToolUse
        )
    }
}

impl std::fmt::Display for HookEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The timeout of a hook command when its entry gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// One external command hook: a `[[hooks]]` entry.
///
/// ```
/// use std::time::Duration;
/// use tinyagents::external_hooks::{HookCommand, HookEvent};
///
/// let hook = HookCommand::new(HookEvent::PreToolUse, "./check.sh")
///     .with_matcher("^(shell|write_file)$")
///     .unwrap()
///     .with_timeout(Duration::from_secs(5))
///     .with_env("MODE", "strict");
/// assert!(hook.matches(Some("shell")));
/// assert!(!hook.matches(Some("read_file")));
/// ```
#[derive(Debug, Clone)]
pub struct HookCommand {
    /// When it runs.
    pub event: HookEvent,
    /// A regex over the tool name, for tool events (none: every tool).
    pub matcher: Option<Regex>,
    /// The command, run with `/bin/sh -c` in the workspace directory.
    pub command: String,
    /// How long it may run before it is killed, with its children.
    pub timeout: Duration,
    /// Environment variables set for the command (on top of the allow list
    /// [`ENV_ALLOW`](super::ENV_ALLOW)).
    pub env: BTreeMap<String, String>,
    /// Names of variables of the agent's environment passed on to the
    /// command, besides the allow list (`pass_env = ["CI"]`).
    pub pass_env: Vec<String>,
    /// Whether a hook that fails (an exit status other than 0 or 2, a
    /// signal, a timeout, a command that cannot start, output over a limit)
    /// or gives an answer that is not understood blocks. Default: `true` for
    /// the policy events ([`HookEvent::is_policy`]: `pre_tool_use`,
    /// `permission_request`), `false` (reported as a `Notice`, ignored) for
    /// the others. `fail_closed = false` on a policy hook is the explicit
    /// opt-out: then a broken policy hook lets the call run.
    pub fail_closed: bool,
    /// The most bytes of stdout read ([`DEFAULT_MAX_STDOUT`](super::DEFAULT_MAX_STDOUT));
    /// more is a failure.
    pub max_stdout: usize,
    /// The most bytes of stderr read ([`DEFAULT_MAX_STDERR`](super::DEFAULT_MAX_STDERR));
    /// more is a failure.
    pub max_stderr: usize,
    /// Whether the command runs in the OS sandbox ([`crate::sandbox`]):
    /// `Required` confines it to the hook's directory (writes), the system
    /// directories and the hook script's own directory (reads), with no
    /// network and a process tree that cannot leave its group (a `setsid`
    /// grandchild dies at the timeout too), and refuses to run it where the
    /// machine cannot confine it (the default: a policy hook then refuses);
    /// `Preferred` confines it where the machine can; `Off`, the explicit
    /// opt-out for machines without Landlock, runs it as a plain child
    /// process. Config key `sandbox = "required" | "preferred" | "off"`.
    pub sandbox: SandboxMode,
}

impl HookCommand {
    /// A hook running `command` on `event`, for every tool, with the default
    /// timeout and output limits, failing closed when `event` is a policy
    /// event ([`HookEvent::is_policy`]).
    ///
    /// ```
    /// use tinyagents::external_hooks::{HookCommand, HookEvent};
    ///
    /// assert!(HookCommand::new(HookEvent::PreToolUse, "./check.sh").fail_closed);
    /// assert!(!HookCommand::new(HookEvent::PreToolUse, "./check.sh").fail_closed(false).fail_closed);
    /// assert!(!HookCommand::new(HookEvent::PostToolUse, "./audit.sh").fail_closed);
    /// ```
    pub fn new(event: HookEvent, command: impl Into<String>) -> Self {
        Self {
            event,
            matcher: None,
            command: command.into(),
            timeout: DEFAULT_TIMEOUT,
            env: BTreeMap::new(),
            pass_env: Vec::new(),
            fail_closed: event.is_policy(),
            max_stdout: super::DEFAULT_MAX_STDOUT,
            max_stderr: super::DEFAULT_MAX_STDERR,
            sandbox: SandboxMode::Required,
        }
    }

    /// The same hook run in the OS sandbox in this mode (see [`HookCommand::sandbox`]).
    ///
    /// ```
    /// use tinyagents::harness::tool::SandboxMode;
    /// use tinyagents::external_hooks::{HookCommand, HookEvent};
    ///
    /// let hook = HookCommand::new(HookEvent::PreToolUse, "./check.sh").with_sandbox(SandboxMode::Required);
    /// assert_eq!(hook.sandbox, SandboxMode::Required);
    /// ```
    pub fn with_sandbox(mut self, mode: SandboxMode) -> Self {
        self.sandbox = mode;
        self
    }

    /// The same hook, only for tools whose name matches `pattern`.
    pub fn with_matcher(mut self, pattern: &str) -> Result<Self, regex::Error> {
        self.matcher = Some(Regex::new(pattern)?);
        Ok(self)
    }

    /// The same hook with this timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The same hook with one more environment variable.
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    /// The same hook, passing the agent's variable `name` on to the command.
    pub fn with_pass_env(mut self, name: impl Into<String>) -> Self {
        self.pass_env.push(name.into());
        self
    }

    /// The same hook, blocking when it fails or is not understood (`true`),
    /// or ignoring it then (`false`: the opt-out for policy events).
    pub fn fail_closed(mut self, fail_closed: bool) -> Self {
        self.fail_closed = fail_closed;
        self
    }

    /// The same hook with these output limits in bytes (stdout, stderr),
    /// clamped to 1..=[`MAX_STDOUT_LIMIT`](super::MAX_STDOUT_LIMIT) and
    /// 1..=[`MAX_STDERR_LIMIT`](super::MAX_STDERR_LIMIT).
    pub fn with_output_limits(mut self, max_stdout: usize, max_stderr: usize) -> Self {
        self.max_stdout = max_stdout.clamp(1, super::MAX_STDOUT_LIMIT);
        self.max_stderr = max_stderr.clamp(1, super::MAX_STDERR_LIMIT);
        self
    }

    /// Whether it applies to a call of `tool` (events without a tool always match).
    pub fn matches(&self, tool: Option<&str>) -> bool {
        match (&self.matcher, tool) {
            (Some(re), Some(tool)) => re.is_match(tool),
            _ => true,
        }
    }
}

/// The keys of a `[[hooks]]` entry.
const HOOK_KEYS: [&str; 10] = [
    "event",
    "matcher",
    "command",
    "timeout_ms",
    "env",
    "pass_env",
    "fail_closed",
    "max_stdout_bytes",
    "max_stderr_bytes",
    "sandbox",
];

/// The options of [`ExternalHooksMiddleware`](super::ExternalHooksMiddleware)
/// (`type = "external_hooks"`): the hook commands and the directory they run in.
///
/// In a file, write top-level `[[hooks]]` entries (each becomes one
/// [`HookCommand`]); the stack gets one `external_hooks` middleware after
/// every `[[middleware]]` entry. A `[[middleware]] type = "external_hooks"`
/// entry with an inline `hooks = [...]` list places it yourself (then do not
/// also write `[[hooks]]`: the name would be taken twice).
///
/// ```
/// use serde_json::json;
/// use tinyagents::external_hooks::ExternalHooksConfig;
///
/// let hooks = json!([
///     { "event": "pre_tool_use", "matcher": "^shell$", "command": "./check.sh", "timeout_ms": 500 },
///     { "event": "pre_tool_usage", "command": "x", "matcher": "(" },
/// ]);
/// let err = ExternalHooksConfig::from_list(&hooks, "hooks").unwrap_err();
/// assert_eq!(err.len(), 2);
/// assert!(err.to_string().contains("`hooks[1].event` = \"pre_tool_usage\""));
/// assert!(err.to_string().contains("did you mean `pre_tool_use`?"));
/// assert!(err.to_string().contains("`hooks[1].matcher` = \"(\": must be a valid regex"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ExternalHooksConfig {
    /// The hook commands, in order (the order answers are combined in).
    pub hooks: Vec<HookCommand>,
    /// The directory commands run in (default: the run's workspace root, else
    /// the process's current directory).
    pub cwd: Option<std::path::PathBuf>,
}

impl ExternalHooksConfig {
    /// Parses a list of `[[hooks]]` entries; `path` (`hooks`) prefixes every error.
    pub fn from_list(list: &Value, path: &str) -> Result<Self, ConfigErrors> {
        let Some(items) = list.as_array() else {
            return Err(ConfigError::new(
                path,
                Some(list.clone()),
                "must be a list of tables: write `[[hooks]]` entries",
            )
            .into());
        };
        let mut errors = ConfigErrors::new();
        let mut hooks = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match parse_hook(item, &format!("{path}[{i}]")) {
                Ok(h) => hooks.push(h),
                Err(e) => errors.extend(e),
            }
        }
        errors.into_result().map(|()| Self { hooks, cwd: None })
    }
}

fn parse_hook(item: &Value, path: &str) -> Result<HookCommand, ConfigErrors> {
    let Some(map) = item.as_object() else {
        return Err(ConfigError::new(path, Some(item.clone()), "must be a table with `event` and `command`").into());
    };
    let mut errors = ConfigErrors::new();
    let at = |key: &str| format!("{path}.{key}");
    unknown_keys(map, path, &HOOK_KEYS, &mut errors);
    let event_names = || HookEvent::ALL.iter().map(|e| e.as_str());
    let event = match map.get("event") {
        Some(Value::String(name)) => match HookEvent::from_name(name) {
            Some(e) => Some(e),
            None => {
                errors.push(ConfigError::new(
                    at("event"),
                    Some(Value::String(name.clone())),
                    format!(
                        "unknown hook event; the events are {}{}",
                        crate::config::suggest::list(event_names()),
                        crate::config::suggest::did_you_mean(name, event_names())
                    ),
                ));
                None
            }
        },
        Some(other) => {
            errors.push(ConfigError::new(
                at("event"),
                Some(other.clone()),
                "must be a string naming an event",
            ));
            None
        }
        None => {
            errors.push(ConfigError::new(
                at("event"),
                None,
                format!(
                    "required key is missing: say when the hook runs, one of {}",
                    crate::config::suggest::list(event_names())
                ),
            ));
            None
        }
    };
    let command = match map.get("command") {
        Some(Value::String(c)) if !c.trim().is_empty() => Some(c.clone()),
        Some(other) => {
            errors.push(ConfigError::new(
                at("command"),
                Some(other.clone()),
                "must be a non-empty shell command",
            ));
            None
        }
        None => {
            errors.push(ConfigError::new(
                at("command"),
                None,
                "required key is missing: the shell command to run",
            ));
            None
        }
    };
    let matcher = match map.get("matcher") {
        None => None,
        Some(Value::String(p)) => match Regex::new(p) {
            Ok(re) => Some(re),
            Err(e) => {
                let why = e.to_string();
                let why = why.lines().last().unwrap_or("invalid").trim();
                errors.push(ConfigError::new(
                    at("matcher"),
                    Some(Value::String(p.clone())),
                    format!("must be a valid regex over the tool name ({why})"),
                ));
                None
            }
        },
        Some(other) => {
            errors.push(ConfigError::new(
                at("matcher"),
                Some(other.clone()),
                "must be a string: a regex over the tool name",
            ));
            None
        }
    };
    if let (Some(event), Some(_)) = (event, map.get("matcher"))
        && !event.is_tool_event()
    {
        errors.push(ConfigError::new(
            at("matcher"),
            map.get("matcher").cloned(),
            format!("`{event}` concerns no tool, so a matcher never applies: remove it"),
        ));
    }
    let timeout = match map.get("timeout_ms") {
        None => DEFAULT_TIMEOUT,
        Some(v) => match v.as_u64() {
            Some(ms) if (1..=3_600_000).contains(&ms) => Duration::from_millis(ms),
            _ => {
                errors.push(ConfigError::new(
                    at("timeout_ms"),
                    Some(v.clone()),
                    "must be in 1..=3600000 (milliseconds)",
                ));
                DEFAULT_TIMEOUT
            }
        },
    };
    let mut env = BTreeMap::new();
    match map.get("env") {
        None => {}
        Some(Value::Object(vars)) => {
            for (k, v) in vars {
                match v {
                    Value::String(s) => {
                        env.insert(k.clone(), s.clone());
                    }
                    other => errors.push(ConfigError::new(
                        format!("{}.{k}", at("env")),
                        Some(other.clone()),
                        "must be a string",
                    )),
                }
            }
        }
        Some(other) => errors.push(ConfigError::new(
            at("env"),
            Some(other.clone()),
            "must be a table of strings: `env = { NAME = \"value\" }`",
        )),
    }
    let mut pass_env = Vec::new();
    match map.get("pass_env") {
        None => {}
        Some(Value::Array(names)) => {
            for (i, name) in names.iter().enumerate() {
                match name.as_str() {
                    Some(n) if is_env_name(n) => pass_env.push(n.to_owned()),
                    _ => errors.push(ConfigError::new(
                        format!("{}[{i}]", at("pass_env")),
                        Some(name.clone()),
                        "must be the name of an environment variable (letters, digits, `_`; not starting with a digit)",
                    )),
                }
            }
        }
        Some(other) => errors.push(ConfigError::new(
            at("pass_env"),
            Some(other.clone()),
            "must be a list of variable names: `pass_env = [\"CI\"]`",
        )),
    }
    let policy = event.is_some_and(HookEvent::is_policy);
    let fail_closed = match map.get("fail_closed") {
        None => policy,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            errors.push(ConfigError::new(
                at("fail_closed"),
                Some(other.clone()),
                "must be `true` or `false`",
            ));
            policy
        }
    };
    let mut limit = |key: &str, default: usize, max: usize| match map.get(key) {
        None => default,
        Some(v) => match v.as_u64().and_then(|n| usize::try_from(n).ok()) {
            Some(n) if (1..=max).contains(&n) => n,
            _ => {
                errors.push(ConfigError::new(
                    at(key),
                    Some(v.clone()),
                    format!("must be a number of bytes in 1..={max}"),
                ));
                default
            }
        },
    };
    let max_stdout = limit("max_stdout_bytes", super::DEFAULT_MAX_STDOUT, super::MAX_STDOUT_LIMIT);
    let max_stderr = limit("max_stderr_bytes", super::DEFAULT_MAX_STDERR, super::MAX_STDERR_LIMIT);
    let sandbox = match map.get("sandbox") {
        None => SandboxMode::Required,
        Some(Value::String(s)) if s == "required" => SandboxMode::Required,
        Some(Value::String(s)) if s == "preferred" => SandboxMode::Preferred,
        Some(Value::String(s)) if s == "off" => SandboxMode::Off,
        Some(other) => {
            errors.push(ConfigError::new(
                at("sandbox"),
                Some(other.clone()),
                "must be \"required\", \"preferred\" or \"off\"",
            ));
            SandboxMode::Off
        }
    };
    errors.into_result()?;
    Ok(HookCommand {
        event: event.expect("checked"),
        matcher,
        command: command.expect("checked"),
        timeout,
        env,
        pass_env,
        fail_closed,
        max_stdout,
        max_stderr,
        sandbox,
    })
}

/// Whether `name` is a portable environment variable name.
fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn unknown_keys(map: &Map<String, Value>, path: &str, keys: &[&str], errors: &mut ConfigErrors) {
    for (k, v) in map.iter().filter(|(k, _)| !keys.contains(&k.as_str())) {
        errors.push(ConfigError::new(
            format!("{path}.{k}"),
            Some(v.clone()),
            format!(
                "unknown key; the valid keys are {}{}",
                crate::config::suggest::list(keys.iter().copied()),
                crate::config::suggest::did_you_mean(k, keys.iter().copied())
            ),
        ));
    }
}

impl MiddlewareConfig for ExternalHooksConfig {
    const TYPE: &'static str = "external_hooks";

    const FIELDS: &'static [ConfigFieldDoc] = &[
        ConfigFieldDoc {
            name: "hooks",
            ty: "Vec<HookCommand>",
            default: "[]",
            choices: &[],
            rules: "each: event, command, matcher (regex), timeout_ms in 1..=3600000, env, pass_env, fail_closed (default: true for pre_tool_use/permission_request), max_stdout_bytes in 1..=16777216 (1048576), max_stderr_bytes in 1..=1048576 (65536)",
            doc:
                "The hook commands, in the order their answers are combined (in a file: top-level `[[hooks]]` entries).",
        },
        ConfigFieldDoc {
            name: "cwd",
            ty: "Option<String>",
            default: "",
            rules: "",
            choices: &[],
            doc: "The directory commands run in (default: the run's workspace root, else the current directory).",
        },
    ];

    fn from_value(value: &Value, path: &str) -> Result<Self, ConfigErrors> {
        let Some(map) = value.as_object() else {
            return Err(ConfigError::new(path, Some(value.clone()), "must be a table of keys (`key = value`)").into());
        };
        let mut errors = ConfigErrors::new();
        let join = |k: &str| crate::config::join(path, k);
        for (k, v) in map {
            match k.as_str() {
                "hooks" | "cwd" | "enabled" => {}
                "type" if v.as_str() == Some(Self::TYPE) => {}
                "type" => errors.push(ConfigError::new(
                    join(k),
                    Some(v.clone()),
                    "this table configures `external_hooks`: write `type = \"external_hooks\"` or remove it",
                )),
                other => errors.push(ConfigError::new(
                    join(other),
                    Some(v.clone()),
                    format!(
                        "unknown key; the valid keys are `hooks`, `cwd`, `type`, `enabled`{}",
                        crate::config::suggest::did_you_mean(other, ["hooks", "cwd"])
                    ),
                )),
            }
        }
        let mut config = match map.get("hooks") {
            None => Self::default(),
            Some(list) => Self::from_list(list, &join("hooks")).unwrap_or_else(|e| {
                errors.extend(e);
                Self::default()
            }),
        };
        match map.get("cwd") {
            None => {}
            Some(Value::String(dir)) => config.cwd = Some(dir.into()),
            Some(other) => errors.push(ConfigError::new(
                join("cwd"),
                Some(other.clone()),
                "must be a directory path",
            )),
        }
        errors.into_result().map(|()| config)
    }

    fn check(&self, path: &str) -> Result<(), ConfigErrors> {
        let mut errors = ConfigErrors::new();
        for (i, h) in self.hooks.iter().enumerate() {
            if h.command.trim().is_empty() {
                errors.push(ConfigError::new(
                    format!("{}[{i}].command", crate::config::join(path, "hooks")),
                    None,
                    "must be a non-empty shell command",
                ));
            }
        }
        errors.into_result()
    }
}

impl crate::config::BuildMiddleware for ExternalHooksConfig {
    type Middleware = super::ExternalHooksMiddleware;

    fn build(self) -> Self::Middleware {
        super::ExternalHooksMiddleware::from(self)
    }
}
