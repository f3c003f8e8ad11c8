//! [`ShellFsGuardMiddleware`]: confines file tools to the workspace root and
//! shell tools to an allow/deny policy of plain commands; read-only mode;
//! everything not understood is refused.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tinyagents_macros::{middleware, MiddlewareConfig};

use super::path_check::confine;
use super::shell_check::{check_command, ShellRules};
use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::middleware::PreparedBatch;
use crate::harness::tool::{FileAccessMode, ToolCall};
use crate::harness::workspace::WorkspaceDescriptor;

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// The default file tools.
pub const DEFAULT_FILE_TOOLS: &[&str] = &[
    "read_file",
    "read_tool",
    "ls",
    "glob",
    "search_text",
    "get_symbol",
    "write_file",
    "edit",
    "multiedit",
    "delete_file",
    "replace_symbol",
    "create_file",
    "move_file",
    "apply_patch",
];
/// The default writing file tools (refused in read-only mode).
pub const DEFAULT_WRITE_TOOLS: &[&str] = &[
    "write_file",
    "edit",
    "multiedit",
    "delete_file",
    "replace_symbol",
    "create_file",
    "move_file",
    "apply_patch",
];
/// The default argument keys holding paths.
pub const DEFAULT_PATH_KEYS: &[&str] = &[
    "path",
    "paths",
    "file",
    "file_path",
    "filename",
    "files",
    "dir",
    "directory",
    "target",
    "source",
    "destination",
    "from",
    "to",
    "cwd",
    "workdir",
];
/// The default shell tools.
pub const DEFAULT_SHELL_TOOLS: &[&str] = &["shell", "bash", "run_command", "exec", "terminal"];
/// The default harmless extra argument keys of a shell tool call.
pub const DEFAULT_SHELL_EXTRA_KEYS: &[&str] = &["timeout", "timeout_ms", "description"];
/// The default commands a shell tool may run.
pub const DEFAULT_ALLOW_COMMANDS: &[&str] = &[
    "ls", "cat", "head", "tail", "wc", "grep", "rg", "find", "echo", "pwd", "diff", "sort", "uniq", "stat", "file",
    "du", "tree", "git", "cargo", "mkdir", "touch", "cp", "mv", "date", "basename", "dirname", "realpath", "cut", "tr",
    "printf", "true", "false", "test", "jq",
];
/// The commands always refused (interpreters, privilege, network, indirection).
pub const DEFAULT_DENY_COMMANDS: &[&str] = &[
    "sudo",
    "su",
    "doas",
    "eval",
    "exec",
    "source",
    ".",
    "command",
    "builtin",
    "env",
    "export",
    "unset",
    "alias",
    "xargs",
    "nohup",
    "timeout",
    "nice",
    "setsid",
    "sh",
    "bash",
    "zsh",
    "dash",
    "ksh",
    "fish",
    "csh",
    "tcsh",
    "python",
    "python3",
    "perl",
    "ruby",
    "node",
    "php",
    "lua",
    "awk",
    "curl",
    "wget",
    "nc",
    "ncat",
    "netcat",
    "telnet",
    "ssh",
    "scp",
    "sftp",
    "rsync",
    "ftp",
    "dd",
    "mkfs",
    "mount",
    "umount",
    "chmod",
    "chown",
    "chgrp",
    "chroot",
    "kill",
    "pkill",
    "killall",
    "shutdown",
    "reboot",
    "crontab",
    "at",
    "systemctl",
    "socat",
    "rm",
];

/// Options of [`ShellFsGuardMiddleware`] (`type = "shell_fs_guard"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::ShellFsGuardConfig;
///
/// let c: ShellFsGuardConfig = from_toml_str("root = \"/work\"\nread_only = true").unwrap();
/// assert!(c.read_only);
/// let err = from_toml_str::<ShellFsGuardConfig>("allow_commands = [\"ls\", \"sudo\"]").unwrap_err();
/// assert!(err.to_string().contains("allow_commands"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "shell_fs_guard", builds = ShellFsGuardMiddleware, validate = check_guard_config)]
pub struct ShellFsGuardConfig {
    /// The root to confine to (absolute); by default the run's workspace root. With neither, file and shell tools are refused.
    pub root: Option<String>,
    /// Refuse every write (also on when the run's workspace is read-only).
    #[config(default = false)]
    pub read_only: bool,
    /// Tools whose path arguments are confined to the root.
    #[config(default = strings(DEFAULT_FILE_TOOLS))]
    pub file_tools: Vec<String>,
    /// File tools that write (refused in read-only mode).
    #[config(default = strings(DEFAULT_WRITE_TOOLS))]
    pub write_tools: Vec<String>,
    /// Argument keys holding paths, at any depth of the arguments.
    #[config(default = strings(DEFAULT_PATH_KEYS))]
    pub path_keys: Vec<String>,
    /// Tools that run a shell command line.
    #[config(default = strings(DEFAULT_SHELL_TOOLS))]
    pub shell_tools: Vec<String>,
    /// Argument keys holding the command line.
    #[config(default = strings(&["command", "cmd"]))]
    pub command_keys: Vec<String>,
    /// Commands a shell tool may run (empty: any command not denied).
    #[config(default = strings(DEFAULT_ALLOW_COMMANDS))]
    pub allow_commands: Vec<String>,
    /// Commands always refused.
    #[config(default = strings(DEFAULT_DENY_COMMANDS))]
    pub deny_commands: Vec<String>,
    /// Admit pipelines whose every stage passes (chaining stays refused).
    #[config(default = false)]
    pub allow_pipes: bool,
    /// Other argument keys a shell tool call may carry (besides command, path and empty `env` keys); any other key is refused.
    #[config(default = strings(DEFAULT_SHELL_EXTRA_KEYS))]
    pub shell_extra_keys: Vec<String>,
}

fn check_guard_config(c: &ShellFsGuardConfig) -> std::result::Result<(), ConfigViolation> {
    if let Some(both) = c.allow_commands.iter().find(|a| c.deny_commands.contains(a)) {
        return Err(ConfigViolation::new(
            "allow_commands",
            "must not list a command that `deny_commands` also lists",
        )
        .with_value(both));
    }
    if let Some(root) = &c.root {
        if !Path::new(root).is_absolute() {
            return Err(ConfigViolation::new("root", "must be an absolute path").with_value(root));
        }
    }
    if c.command_keys.is_empty() {
        return Err(ConfigViolation::new("command_keys", "must name at least one key").with_value(&c.command_keys));
    }
    if c.path_keys.is_empty() {
        return Err(ConfigViolation::new("path_keys", "must name at least one key").with_value(&c.path_keys));
    }
    if let Some(both) = c.file_tools.iter().find(|t| c.shell_tools.contains(t)) {
        return Err(
            ConfigViolation::new("shell_tools", "must not list a tool that `file_tools` also lists").with_value(both),
        );
    }
    Ok(())
}

impl Default for ShellFsGuardConfig {
    fn default() -> Self {
        Self {
            root: None,
            read_only: false,
            file_tools: strings(DEFAULT_FILE_TOOLS),
            write_tools: strings(DEFAULT_WRITE_TOOLS),
            path_keys: strings(DEFAULT_PATH_KEYS),
            shell_tools: strings(DEFAULT_SHELL_TOOLS),
            command_keys: strings(&["command", "cmd"]),
            allow_commands: strings(DEFAULT_ALLOW_COMMANDS),
            deny_commands: strings(DEFAULT_DENY_COMMANDS),
            allow_pipes: false,
            shell_extra_keys: strings(DEFAULT_SHELL_EXTRA_KEYS),
        }
    }
}

impl From<ShellFsGuardConfig> for ShellFsGuardMiddleware {
    fn from(config: ShellFsGuardConfig) -> Self {
        Self { config }
    }
}

/// The privileged shell / file-system guard.
///
/// File tools (by name) have every path argument confined to the workspace
/// root: `..`, absolute paths, symlinks leaving the root (resolved where they
/// stand), dangling symlinks, Windows-style, URL-encoded, `~`, `$` and
/// look-alike characters are refused. Shell tools may run one plain command
/// (or, with `allow_pipes`, a pipeline) from the allow list and not on the
/// deny list; chaining, substitution, expansion, subshells, escapes,
/// environment assignments, commands given by path and redirections leaving
/// the root are refused; every operand is confined like a path. Read-only
/// mode refuses writing tools, writing commands, output options and output
/// redirections. Calls of a prepared batch are also checked against the file
/// access their tools declare. Anything not understood is refused.
///
/// ```
/// use tinyagents::harness::tool::ToolCall;
/// use tinyagents::middleware::ShellFsGuardMiddleware;
///
/// let root = std::env::temp_dir();
/// let guard = ShellFsGuardMiddleware::new().with_root(&root);
/// let call = |cmd: &str| ToolCall::new("1", "shell", serde_json::json!({ "command": cmd }));
/// assert!(guard.check_call(&call("ls -la"), None).is_ok());
/// assert!(guard.check_call(&call("ls; rm -rf /"), None).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct ShellFsGuardMiddleware {
    config: ShellFsGuardConfig,
}

impl Default for ShellFsGuardMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl ShellFsGuardMiddleware {
    /// The guard with the default tool lists and command policy, confined to the run's workspace root.
    pub fn new() -> Self {
        ShellFsGuardConfig::default().into()
    }

    /// The same guard confined to `root` whatever the run's workspace.
    pub fn with_root(mut self, root: impl AsRef<Path>) -> Self {
        self.config.root = Some(root.as_ref().to_string_lossy().into_owned());
        self
    }

    /// The same guard, read-only (or not).
    pub fn read_only(mut self, on: bool) -> Self {
        self.config.read_only = on;
        self
    }

    /// The same guard admitting exactly these commands (empty: any not denied).
    pub fn allow_commands<I: IntoIterator<Item = S>, S: Into<String>>(mut self, commands: I) -> Self {
        self.config.allow_commands = commands.into_iter().map(Into::into).collect();
        self
    }

    /// The same guard refusing these commands too.
    pub fn deny_commands<I: IntoIterator<Item = S>, S: Into<String>>(mut self, commands: I) -> Self {
        self.config.deny_commands.extend(commands.into_iter().map(Into::into));
        self
    }

    /// The same guard admitting pipelines whose every stage passes.
    pub fn allow_pipes(mut self, on: bool) -> Self {
        self.config.allow_pipes = on;
        self
    }

    /// The canonical root and whether the run is read-only.
    fn scope(&self, workspace: Option<&WorkspaceDescriptor>) -> std::result::Result<(PathBuf, bool), String> {
        let read_only = self.config.read_only || workspace.is_some_and(|w| w.read_only);
        let root = match (&self.config.root, workspace) {
            (Some(r), _) => PathBuf::from(r),
            (None, Some(w)) => w.root.clone(),
            (None, None) => return Err("the run has no workspace root to confine to".to_owned()),
        };
        let root = std::fs::canonicalize(&root)
            .map_err(|_| format!("the workspace root `{}` cannot be resolved", root.display()))?;
        Ok((root, read_only))
    }

    /// The decision on one call: `Err(reason)` when it is refused.
    pub fn check_call(
        &self,
        call: &ToolCall,
        workspace: Option<&WorkspaceDescriptor>,
    ) -> std::result::Result<(), String> {
        let c = &self.config;
        let is_shell = c.shell_tools.contains(&call.name);
        let is_file = c.file_tools.contains(&call.name) || c.write_tools.contains(&call.name);
        if !is_shell && !is_file {
            return Ok(());
        }
        let (root, read_only) = self.scope(workspace)?;
        let Some(args) = call.arguments.as_object() else {
            return Err("the arguments are not an object".to_owned());
        };
        if is_file {
            if read_only && c.write_tools.contains(&call.name) {
                return Err(format!("`{}` writes files and the guard is read-only", call.name));
            }
            let mut found = 0;
            self.check_paths(&call.arguments, &root, &mut found)?;
            if found == 0 {
                return Err(format!(
                    "no path argument recognised (expected one of: {})",
                    c.path_keys.join(", ")
                ));
            }
            return Ok(());
        }
        if args
            .get("env")
            .is_some_and(|e| !(e.is_null() || e.as_object().is_some_and(|o| o.is_empty())))
        {
            return Err("environment overrides for a shell command".to_owned());
        }
        if let Some(key) = args.keys().find(|k| {
            !(c.command_keys.contains(k) || c.path_keys.contains(k) || c.shell_extra_keys.contains(k) || *k == "env")
        }) {
            return Err(format!(
                "the argument `{key}` of a shell call is not understood (it could carry more of the command)"
            ));
        }
        let mut found = 0;
        self.check_paths(&call.arguments, &root, &mut found)?;
        let commands: Vec<&Value> = c.command_keys.iter().filter_map(|k| args.get(k)).collect();
        let command = match commands.as_slice() {
            [one] => *one,
            [] => {
                return Err(format!(
                    "no command argument (expected one of: {})",
                    c.command_keys.join(", ")
                ))
            }
            _ => return Err("several command arguments: which one runs is not understood".to_owned()),
        };
        let Some(command) = command.as_str() else {
            return Err("the command is not a string".to_owned());
        };
        let rules = ShellRules {
            allow: &c.allow_commands,
            deny: &c.deny_commands,
            read_only,
            allow_pipes: c.allow_pipes,
            root: &root,
        };
        check_command(command, &rules)
    }

    /// Confines every value under a path key, at any depth.
    fn check_paths(&self, value: &Value, root: &Path, found: &mut usize) -> std::result::Result<(), String> {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    if self.config.path_keys.contains(k) {
                        match v {
                            Value::String(p) => {
                                *found += 1;
                                confine(root, p)?;
                            }
                            Value::Array(items) => {
                                for item in items {
                                    let Some(p) = item.as_str() else {
                                        return Err(format!("a non-string path under `{k}`"));
                                    };
                                    *found += 1;
                                    confine(root, p)?;
                                }
                            }
                            Value::Null => {}
                            _ => return Err(format!("a path under `{k}` that is not a string")),
                        }
                    } else {
                        self.check_paths(v, root, found)?;
                    }
                }
                Ok(())
            }
            Value::Array(items) => items.iter().try_for_each(|v| self.check_paths(v, root, found)),
            _ => Ok(()),
        }
    }
}

/// Confines file tools to the workspace root and shell tools to plain allowed commands (no chaining, substitution or escapes), with a read-only mode; anything not understood is refused.
#[middleware(
    builtin,
    name = "shell_fs_guard",
    config = ShellFsGuardConfig,
    doc(
        mutation = "Records itself as a run restriction: every sub-agent run inherits it and the agent loop judges each of the child's calls with it, whatever the child's stack holds. Otherwise it only admits or refuses calls (a refused batch call gets its one error result).",
        events = "None of its own: refusals are `Validation` errors (in a batch, the call's error result) naming the tool and the reason.",
        failure = "Fails closed: no workspace root, an unresolvable root, arguments that are not an object, a missing path or command, or any construct the lexer does not understand is refused. File-system lookups resolve symlinks at check time; a link swapped after the check is outside its reach. Admitted commands still run with the workspace's own configuration: `git` (repository config such as `core.fsmonitor`) and `cargo` (build scripts) can run code from the workspace, so drop them from `allow_commands` or sandbox the run for untrusted workspaces.",
        streaming = "None: it judges whole tool calls, before they run.",
        cache = "None: it does not touch the request.",
        retries = "Checks each call once in `before_tool`, outside the tool onion, and each batch once; register it after middleware that rewrites arguments so it judges the effective ones."
    )
)]
impl ShellFsGuardMiddleware {
    #[before_agent]
    fn record<C>(&self, ctx: &mut RunContext<C>) -> Result<()> {
        // Every sub-agent run inherits the guard: the agent loop judges each of its calls with it.
        let guard: std::sync::Arc<dyn crate::harness::tool::CallGuard> = std::sync::Arc::new(self.clone());
        ctx.add_restriction("shell_fs_guard", crate::harness::tool::Restriction::Guard(guard));
        Ok(())
    }

    #[on_tool_batch]
    fn review<C>(&self, ctx: &mut RunContext<C>, batch: &mut PreparedBatch) -> Result<()> {
        let mut refusals = Vec::new();
        for (i, prepared) in batch.calls().iter().enumerate() {
            let verdict = self.check_call(&prepared.call, ctx.workspace()).and_then(|()| {
                if prepared.access.is_empty() {
                    return Ok(());
                }
                let (root, read_only) = self.scope(ctx.workspace())?;
                for access in &prepared.access {
                    if read_only && access.mode == FileAccessMode::Write {
                        return Err(format!("it writes `{}` and the guard is read-only", access.path));
                    }
                    confine(&root, &access.path)?;
                }
                Ok(())
            });
            if let Err(reason) = verdict {
                refusals.push((
                    i,
                    format!("shell/filesystem guard refused `{}`: {reason}", prepared.call.name),
                ));
            }
        }
        for (i, message) in refusals {
            batch.reject(i, message);
        }
        Ok(())
    }

    #[before_tool]
    fn admit<C>(&self, ctx: &mut RunContext<C>, call: &mut ToolCall) -> Result<()> {
        self.check_call(call, ctx.workspace()).map_err(|reason| {
            TinyAgentsError::validation(format!("shell/filesystem guard refused `{}`: {reason}", call.name))
        })
    }
}
