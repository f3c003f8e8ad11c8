//! [`ShellFsGuardMiddleware`]: confines file tools to the workspace root
//! (every argument key known, patches parsed for their targets, writes to
//! configuration that programs execute refused) and shell tools to
//! argv-level specifications of allowed programs; read-only mode;
//! everything not understood is refused.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tinyagents_macros::{middleware, MiddlewareConfig};

use tinyagents_commands::{
    confine, confine_from, confine_glob, confine_named, intrinsic_refusal, is_specified, judge, resolve_root,
    specified_commands, CommandPolicy, Verdict, DEFAULT_ALLOW_COMMANDS, DEFAULT_DENY_COMMANDS, DEFAULT_PROTECTED_PATHS,
};

use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::middleware::PreparedBatch;
use crate::harness::tool::{FileAccessMode, ToolCall};
use crate::harness::workspace::WorkspaceDescriptor;
use tinyagents_commands::ShellPlan;

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
    "copy_file",
    "rename_file",
    "create_directory",
    "delete_directory",
    "apply_patch",
];
/// The default writing file tools (refused in read-only mode; their paths
/// may not fall under `protected_paths`).
pub const DEFAULT_WRITE_TOOLS: &[&str] = &[
    "write_file",
    "edit",
    "multiedit",
    "delete_file",
    "replace_symbol",
    "create_file",
    "move_file",
    "copy_file",
    "rename_file",
    "create_directory",
    "delete_directory",
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
    "dest",
    "dst",
    "src",
    "old_path",
    "new_path",
    "source_path",
    "target_path",
    "destination_path",
    "target_file",
    "source_file",
    "output",
    "output_path",
    "input_path",
    "notebook_path",
    "folder",
    "base",
    "base_dir",
    "root",
    "cwd",
    "workdir",
    "working_directory",
];
/// The default argument keys of file tools that hold text, numbers or
/// flags, never a path (objects and arrays of objects under them are
/// checked key by key, as `edits: [{ path, old_string, new_string }]`).
pub const DEFAULT_TEXT_KEYS: &[&str] = &[
    "content",
    "contents",
    "text",
    "old_string",
    "new_string",
    "old_str",
    "new_str",
    "old_text",
    "new_text",
    "replace_all",
    "edits",
    "changes",
    "pattern",
    "query",
    "regex",
    "symbol",
    "symbol_name",
    "body",
    "new_body",
    "code",
    "offset",
    "limit",
    "start_line",
    "end_line",
    "line",
    "lines",
    "max_results",
    "max_depth",
    "case_sensitive",
    "ignore_case",
    "recursive",
    "hidden",
    "encoding",
    "overwrite",
    "create_dirs",
    "context",
    "context_lines",
    "description",
    "dry_run",
    "language",
    "type",
];
/// The default argument keys of file tools that hold globs: expanded, and
/// every match confined (`glob`'s `pattern` is one too).
pub const DEFAULT_GLOB_KEYS: &[&str] = &["glob", "globs", "include", "exclude", "ignore", "patterns"];
/// The default argument keys of file tools that hold a patch (`apply_patch`
/// envelopes or unified diffs), parsed for their target paths.
pub const DEFAULT_PATCH_KEYS: &[&str] = &["patch", "diff", "input", "patch_text"];
/// The default argument keys naming the directory a shell command (or a file
/// tool) runs in: relative paths resolve against it.
pub const DEFAULT_CWD_KEYS: &[&str] = &["cwd", "workdir", "working_directory", "dir", "directory"];
/// The default shell tools.
pub const DEFAULT_SHELL_TOOLS: &[&str] = &["shell", "bash", "run_command", "exec", "terminal"];
/// The default harmless extra argument keys of a shell tool call.
pub const DEFAULT_SHELL_EXTRA_KEYS: &[&str] = &["timeout", "timeout_ms", "description"];
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
/// let c: ShellFsGuardConfig = from_toml_str("profile = \"workspace\"").unwrap();
/// assert_eq!(c.profile, "workspace");
/// assert!(from_toml_str::<ShellFsGuardConfig>("profile = \"open\"").unwrap_err().to_string().contains("profile"));
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
    /// Commands a shell tool may run; each must have an argv-level specification in the guard (empty: every specified command except `cargo`).
    #[config(default = strings(DEFAULT_ALLOW_COMMANDS))]
    pub allow_commands: Vec<String>,
    /// Commands always refused.
    #[config(default = strings(DEFAULT_DENY_COMMANDS))]
    pub deny_commands: Vec<String>,
    /// Admit pipelines whose every stage passes (chaining stays refused).
    #[config(default = true)]
    pub allow_pipes: bool,
    /// Other argument keys a shell tool call may carry (besides command, cwd and empty `env` keys); any other key is refused.
    #[config(default = strings(DEFAULT_SHELL_EXTRA_KEYS))]
    pub shell_extra_keys: Vec<String>,
    /// Argument keys naming the directory a command runs in (confined; relative operands resolve against it).
    #[config(default = strings(DEFAULT_CWD_KEYS))]
    pub cwd_keys: Vec<String>,
    /// File-tool argument keys holding text, never a path; a file-tool key in none of the key lists is refused.
    #[config(default = strings(DEFAULT_TEXT_KEYS))]
    pub text_keys: Vec<String>,
    /// File-tool argument keys holding globs (expanded; every match confined).
    #[config(default = strings(DEFAULT_GLOB_KEYS))]
    pub glob_keys: Vec<String>,
    /// File-tool argument keys holding a patch (its target paths are confined like writes).
    #[config(default = strings(DEFAULT_PATCH_KEYS))]
    pub patch_keys: Vec<String>,
    /// The command profile: `default` (what the allow list admits: reading commands and plain file edits, as strict where no sandbox confines the run) or `workspace` (also `git add/commit/checkout -b/switch/stash/restore/rm/mv`, `make`, `sh SCRIPT`, `cargo`, `npm run SCRIPT`, only where the run's workspace requires the OS sandbox, which is then the enforcement).
    #[config(default = "default".to_owned())]
    pub profile: String,
    /// Paths writes may not touch: configuration that programs execute (an entry without `/` matches any path component, case-insensitively; with `/`, that path at any depth, as the sandbox places it, and writes to the directories it would lie in; a write is judged by every symlink name on its way too). Empty: no protection.
    #[config(default = strings(DEFAULT_PROTECTED_PATHS))]
    pub protected_paths: Vec<String>,
}

fn check_guard_config(c: &ShellFsGuardConfig) -> std::result::Result<(), ConfigViolation> {
    if let Some(both) = c.allow_commands.iter().find(|a| c.deny_commands.contains(a)) {
        return Err(ConfigViolation::new(
            "allow_commands",
            "must not list a command that `deny_commands` also lists",
        )
        .with_value(both));
    }
    if let Some(root) = &c.root
        && !Path::new(root).is_absolute()
    {
        return Err(ConfigViolation::new("root", "must be an absolute path").with_value(root));
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
    for command in &c.allow_commands {
        if let Some(why) = intrinsic_refusal(command) {
            return Err(ConfigViolation::new(
                "allow_commands",
                format!("must not list a command the guard always refuses ({why})"),
            )
            .with_value(command));
        }
        if !is_specified(command) {
            return Err(ConfigViolation::new(
                "allow_commands",
                format!(
                    "must list only commands the guard has an argv specification for ({})",
                    specified_commands().join(", ")
                ),
            )
            .with_value(command));
        }
    }
    if !GUARD_PROFILES.contains(&c.profile.as_str()) {
        return Err(
            ConfigViolation::new("profile", format!("must be one of: {}", GUARD_PROFILES.join(", ")))
                .with_value(&c.profile),
        );
    }
    for entry in &c.protected_paths {
        let e = entry.trim_matches('/');
        if e.is_empty() || Path::new(entry).is_absolute() || e.split('/').any(|p| p == ".." || p == ".") {
            return Err(ConfigViolation::new(
                "protected_paths",
                "must hold names or paths relative to the root, without `.` or `..` components",
            )
            .with_value(entry));
        }
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
            allow_pipes: true,
            shell_extra_keys: strings(DEFAULT_SHELL_EXTRA_KEYS),
            cwd_keys: strings(DEFAULT_CWD_KEYS),
            text_keys: strings(DEFAULT_TEXT_KEYS),
            glob_keys: strings(DEFAULT_GLOB_KEYS),
            patch_keys: strings(DEFAULT_PATCH_KEYS),
            protected_paths: strings(DEFAULT_PROTECTED_PATHS),
            profile: "default".to_owned(),
        }
    }
}

/// The guard's command profiles (see [`ShellFsGuardConfig::profile`]).
pub const GUARD_PROFILES: &[&str] = &["default", "workspace"];

impl From<ShellFsGuardConfig> for ShellFsGuardMiddleware {
    fn from(config: ShellFsGuardConfig) -> Self {
        Self { config }
    }
}

/// The privileged shell / file-system guard: the policy layer in front of
/// the tools (the OS sandbox, where the tool runs in one, is the
/// enforcement).
///
/// **File tools** (by name) are judged key by key: every argument key must
/// be known as a path (`path_keys`), a glob (`glob_keys`, expanded with
/// every match confined), a patch (`patch_keys`: `*** Add File:` /
/// `*** Update File:` / `*** Delete File:` / `*** Move to:` envelopes and
/// unified diffs, parsed for their target paths) or text (`text_keys`),
/// or the call is refused. Every path is confined to the workspace root:
/// `..`, absolute paths, symlinks leaving the root (resolved where they
/// stand), dangling symlinks, Windows-style, URL-encoded, `~`, `$` and
/// look-alike characters are refused. Writing tools may not touch
/// `protected_paths` (`.git/`, `.cargo/`, `.github/`, hooks, CI and editor
/// task configuration: files that programs execute).
///
/// **Shell tools** run one command, or a pipeline of them, each checked
/// against the argv-level specification of its program (see
/// `docs/security.md`): options spelled exactly, glued and separate values
/// parsed, path operands and option values confined (resolved from the
/// call's `cwd`), globs expanded with every match confined,
/// symlink-following options admitted only when every symlink they would
/// follow stays in the root, `git` reduced to read-only subcommands, and
/// interpreters, indirection (`env`, `xargs`, `timeout`, ...) and
/// environment dumps refused whatever the lists say. Chaining,
/// substitution, variable expansion, subshells, here-documents and
/// environment assignments are refused; redirections are confined.
///
/// **Read-only mode** refuses writing tools, writing commands, writing
/// options and operands (`sort -o`, `uniq in out`, `file -C`), and output
/// redirections. Calls of a prepared batch are also checked against the
/// file access their tools declare. Anything not understood is refused.
///
/// ```
/// use tinyagents::harness::tool::ToolCall;
/// use tinyagents::middleware::ShellFsGuardMiddleware;
///
/// let root = std::env::temp_dir();
/// let guard = ShellFsGuardMiddleware::new().with_root(&root);
/// let call = |cmd: &str| ToolCall::new("1", "shell", serde_json::json!({ "command": cmd }));
/// assert!(guard.check_call(&call("ls -la"), None).is_ok());
/// assert!(guard.check_call(&call("date +%Y-%m-%d"), None).is_ok());
/// assert!(guard.check_call(&call("ls; rm -rf /"), None).is_err());
/// let err = guard.check_call(&call("git grep -Oevil x"), None).unwrap_err();
/// assert!(err.contains("`git grep` argument `-O`"), "{err}");
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

/// What a file-tool argument key holds.
#[derive(Debug, Clone, Copy, PartialEq)]
enum KeyKind {
    Path,
    Glob,
    Patch,
    Text,
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

    /// The same guard admitting exactly these commands (empty: every specified command except `cargo`).
    /// Commands without a specification, or always refused, are refused at call time.
    pub fn allow_commands<I: IntoIterator<Item = S>, S: Into<String>>(mut self, commands: I) -> Self {
        self.config.allow_commands = commands.into_iter().map(Into::into).collect();
        self
    }

    /// The same guard refusing these commands too.
    pub fn deny_commands<I: IntoIterator<Item = S>, S: Into<String>>(mut self, commands: I) -> Self {
        self.config.deny_commands.extend(commands.into_iter().map(Into::into));
        self
    }

    /// The same guard admitting (or refusing) pipelines whose every stage passes.
    pub fn allow_pipes(mut self, on: bool) -> Self {
        self.config.allow_pipes = on;
        self
    }

    /// The same guard protecting exactly these paths from writes (see
    /// [`ShellFsGuardConfig::protected_paths`]; empty: none).
    pub fn protected_paths<I: IntoIterator<Item = S>, S: Into<String>>(mut self, paths: I) -> Self {
        self.config.protected_paths = paths.into_iter().map(Into::into).collect();
        self
    }

    /// The guard with the `workspace` profile: what a coding agent needs to
    /// work — `git add`, `commit`, `checkout -b`, `switch`, `stash`,
    /// `restore`, `rm`, `mv`; `make`; `sh SCRIPT`; `cargo`; `npm run
    /// SCRIPT` — on top of the default allow list, admitted only where the
    /// run's workspace requires the OS sandbox (elsewhere they are refused,
    /// naming the requirement). These run the project's own code: the
    /// sandbox is the enforcement, the guard the early, explained refusal.
    /// Git runs with hooks, pagers, editors, signing and external drivers
    /// off ([`SAFE_MODES`](crate::sandbox::SAFE_MODES)).
    ///
    /// ```
    /// use tinyagents::harness::tool::{SandboxMode, ToolCall};
    /// use tinyagents::harness::workspace::WorkspaceDescriptor;
    /// use tinyagents::middleware::ShellFsGuardMiddleware;
    ///
    /// let root = std::env::temp_dir();
    /// let guard = ShellFsGuardMiddleware::workspace().with_root(&root);
    /// let call = ToolCall::new("1", "shell", serde_json::json!({ "command": "make -j4 test" }));
    /// let sandboxed = WorkspaceDescriptor::new(&root).with_sandbox(SandboxMode::Required);
    /// assert!(guard.check_call(&call, Some(&sandboxed)).is_ok());
    /// // without a required sandbox, and under the default profile, it is refused
    /// let err = guard.check_call(&call, Some(&WorkspaceDescriptor::new(&root))).unwrap_err();
    /// assert!(err.contains("requires the OS sandbox"), "{err}");
    /// assert!(ShellFsGuardMiddleware::new().with_root(&root).check_call(&call, Some(&sandboxed)).is_err());
    /// ```
    pub fn workspace() -> Self {
        ShellFsGuardConfig {
            profile: "workspace".to_owned(),
            ..ShellFsGuardConfig::default()
        }
        .into()
    }

    /// The names of the programs the guard has an argv-level specification for.
    pub fn specified_commands() -> Vec<&'static str> {
        specified_commands()
    }

    /// The canonical root and whether the run is read-only.
    fn scope(&self, workspace: Option<&WorkspaceDescriptor>) -> std::result::Result<(PathBuf, bool), String> {
        let read_only = self.config.read_only || workspace.is_some_and(|w| w.read_only);
        let root = match (&self.config.root, workspace) {
            (Some(r), _) => PathBuf::from(r),
            (None, Some(w)) => w.root.clone(),
            (None, None) => return Err("the run has no workspace root to confine to".to_owned()),
        };
        let root = resolve_root(&root)?;
        Ok((root, read_only))
    }

    /// The decision on one call: `Err(reason)` when it is refused.
    pub fn check_call(
        &self,
        call: &ToolCall,
        workspace: Option<&WorkspaceDescriptor>,
    ) -> std::result::Result<(), String> {
        self.plan_call(call, workspace).map(drop)
    }

    /// The decision on one call, and for an admitted shell call the plan of
    /// what runs ([`ShellPlan`]: stages of argv with the programs' safe
    /// modes, redirections resolved, the working directory): `Ok(None)` for
    /// an admitted call of another tool, `Err(reason)` when it is refused.
    /// The guard records the plan of each call it admits in the run, where
    /// [`admitted_plan`](crate::sandbox::admitted_plan) finds it.
    ///
    /// ```
    /// use tinyagents::harness::tool::ToolCall;
    /// use tinyagents::middleware::ShellFsGuardMiddleware;
    ///
    /// let root = std::env::temp_dir();
    /// let guard = ShellFsGuardMiddleware::new().with_root(&root);
    /// let call = ToolCall::new("1", "shell", serde_json::json!({ "command": "sed -n 's/[^/]*$//p' x | sort" }));
    /// let plan = guard.plan_call(&call, None).unwrap().unwrap();
    /// assert_eq!(plan.stages().len(), 2);
    /// // sed runs in its sandbox mode whatever the model wrote
    /// assert_eq!(plan.stages()[0].argv(), ["sed", "--sandbox", "-n", "s/[^/]*$//p", "x"]);
    /// ```
    pub fn plan_call(
        &self,
        call: &ToolCall,
        workspace: Option<&WorkspaceDescriptor>,
    ) -> std::result::Result<Option<ShellPlan>, String> {
        let c = &self.config;
        let is_shell = c.shell_tools.contains(&call.name);
        let is_file = c.file_tools.contains(&call.name) || c.write_tools.contains(&call.name);
        if !is_shell && !is_file {
            return Ok(None);
        }
        if is_file {
            let (root, read_only) = self.scope(workspace)?;
            let Some(args) = call.arguments.as_object() else {
                return Err("the arguments are not an object".to_owned());
            };
            let cwd = self.cwd_of(args, &root, false)?;
            return self.check_file_call(call, &root, &cwd, read_only).map(|()| None);
        }
        self.plan_shell(&call.arguments, workspace).map(Some)
    }

    /// The plan of a shell call's arguments (whatever the tool's name).
    pub(crate) fn plan_shell(
        &self,
        arguments: &Value,
        workspace: Option<&WorkspaceDescriptor>,
    ) -> std::result::Result<ShellPlan, String> {
        let c = &self.config;
        let (root, read_only) = self.scope(workspace)?;
        let Some(args) = arguments.as_object() else {
            return Err("the arguments are not an object".to_owned());
        };
        let cwd = self.cwd_of(args, &root, true)?;
        if args
            .get("env")
            .is_some_and(|e| !(e.is_null() || e.as_object().is_some_and(|o| o.is_empty())))
        {
            return Err("environment overrides for a shell command".to_owned());
        }
        if let Some(key) = args.keys().find(|k| {
            !(c.command_keys.contains(k) || c.cwd_keys.contains(k) || c.shell_extra_keys.contains(k) || *k == "env")
        }) {
            return Err(format!(
                "the argument `{key}` of a shell call is not understood (it could carry more of the command); \
                 known: {}, {}, {}",
                c.command_keys.join(", "),
                c.cwd_keys.join(", "),
                c.shell_extra_keys.join(", ")
            ));
        }
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
        let policy = CommandPolicy {
            root,
            cwd: Some(cwd),
            allow: c.allow_commands.clone(),
            deny: c.deny_commands.clone(),
            read_only,
            allow_pipes: c.allow_pipes,
            protected: c.protected_paths.clone(),
            workspace_profile: c.profile == "workspace",
            sandboxed: workspace.is_some_and(|w| w.sandbox == crate::harness::tool::SandboxMode::Required),
        };
        match judge(command, &policy) {
            Verdict::Admitted(plan) => Ok(plan),
            Verdict::Refused(refusal) => Err(refusal.reason),
        }
    }

    /// The directory the call runs in: its one cwd key, confined to the root
    /// (for a shell call, an existing directory), or the root. For a file
    /// tool only `cwd`, `workdir` and `working_directory` (when in
    /// `cwd_keys`) name it: `dir` or `directory` there is the path a tool
    /// works on (`create_directory {directory}`).
    fn cwd_of(
        &self,
        args: &serde_json::Map<String, Value>,
        root: &Path,
        shell: bool,
    ) -> std::result::Result<PathBuf, String> {
        let given: Vec<(&String, &Value)> = args
            .iter()
            .filter(|(k, v)| {
                self.config.cwd_keys.contains(k)
                    && (shell || matches!(k.as_str(), "cwd" | "workdir" | "working_directory"))
                    && !v.is_null()
            })
            .collect();
        match given.as_slice() {
            [] => Ok(root.to_path_buf()),
            [(key, value)] => {
                let Some(raw) = value.as_str() else {
                    return Err(format!("the working directory under `{key}` is not a string"));
                };
                let dir = confine(root, raw).map_err(|e| format!("the working directory `{raw}` is refused: {e}"))?;
                if shell && !dir.is_dir() {
                    return Err(format!("the working directory `{raw}` is not an existing directory"));
                }
                Ok(dir)
            }
            _ => Err("several working-directory arguments: which one applies is not understood".to_owned()),
        }
    }

    /// What the argument `key` of the file tool `tool` holds, if known.
    fn key_kind(&self, tool: &str, key: &str) -> Option<KeyKind> {
        let c = &self.config;
        let has = |list: &[String]| list.iter().any(|k| k == key);
        if tool == "glob" && matches!(key, "pattern" | "patterns") {
            return Some(KeyKind::Glob);
        }
        if has(&c.patch_keys) {
            Some(KeyKind::Patch)
        } else if has(&c.path_keys) || has(&c.cwd_keys) {
            Some(KeyKind::Path)
        } else if has(&c.glob_keys) {
            Some(KeyKind::Glob)
        } else if has(&c.text_keys) {
            Some(KeyKind::Text)
        } else {
            None
        }
    }

    fn check_file_call(
        &self,
        call: &ToolCall,
        root: &Path,
        cwd: &Path,
        read_only: bool,
    ) -> std::result::Result<(), String> {
        let writes = self.config.write_tools.contains(&call.name);
        if read_only && writes {
            return Err(format!("`{}` writes files and the guard is read-only", call.name));
        }
        let mut found = 0;
        self.check_file_args(&call.name, &call.arguments, root, cwd, writes, &mut found)?;
        if found == 0 {
            return Err(format!(
                "no path argument recognised (expected one of: {}, or a glob or patch key)",
                self.config.path_keys.join(", ")
            ));
        }
        Ok(())
    }

    /// Judges every key of a file tool's arguments, at any depth.
    fn check_file_args(
        &self,
        tool: &str,
        value: &Value,
        root: &Path,
        cwd: &Path,
        writes: bool,
        found: &mut usize,
    ) -> std::result::Result<(), String> {
        let Value::Object(map) = value else {
            return match value {
                Value::Array(items) => items
                    .iter()
                    .try_for_each(|v| self.check_file_args(tool, v, root, cwd, writes, found)),
                _ => Ok(()),
            };
        };
        for (k, v) in map {
            let Some(kind) = self.key_kind(tool, k) else {
                return Err(format!(
                    "the argument `{k}` of `{tool}` is not known to hold a path or text, so the guard cannot \
                     check it (fix: add it to `path_keys`, `glob_keys`, `patch_keys` or `text_keys` of the guard)"
                ));
            };
            let strings: Vec<&str> = match v {
                Value::Null => continue,
                Value::String(p) => vec![p.as_str()],
                Value::Array(items) if kind != KeyKind::Text => {
                    let mut out = Vec::new();
                    for item in items {
                        let Some(p) = item.as_str() else {
                            return Err(format!("a non-string value under `{k}`"));
                        };
                        out.push(p);
                    }
                    out
                }
                _ if kind == KeyKind::Text => {
                    self.check_file_args(tool, v, root, cwd, writes, found)?;
                    continue;
                }
                _ => return Err(format!("a value under `{k}` that is not a string")),
            };
            for raw in strings {
                match kind {
                    KeyKind::Text => {}
                    KeyKind::Path => {
                        *found += 1;
                        confine_from(root, cwd, raw).map_err(|e| format!("`{k}`: {e}"))?;
                        if writes {
                            self.not_protected(root, cwd, k, raw)?;
                        }
                    }
                    KeyKind::Glob => {
                        *found += 1;
                        self.check_glob(root, cwd, k, raw, writes)?;
                    }
                    KeyKind::Patch => {
                        let targets = patch_targets(raw).map_err(|e| {
                            format!(
                                "`{k}`: the patch is refused ({e}); the guard judges a patch as the library's \
                                 `apply_patch` applies it, and refuses what that reading does not take"
                            )
                        })?;
                        for target in targets {
                            *found += 1;
                            confine_from(root, cwd, &target)
                                .map_err(|e| format!("`{k}`: the patch targets `{target}`: {e}"))?;
                            self.not_protected(root, cwd, k, &target)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A glob argument: it may not climb with `..`; it is expanded and every match confined.
    fn check_glob(
        &self,
        root: &Path,
        cwd: &Path,
        key: &str,
        raw: &str,
        writes: bool,
    ) -> std::result::Result<(), String> {
        for (m, _) in confine_glob(root, cwd, raw).map_err(|e| format!("`{key}`: {e}"))? {
            if writes {
                self.not_protected(root, cwd, key, &m)?;
            }
        }
        Ok(())
    }

    /// Refuses a write to `raw` (relative to `cwd`) that hits a protected
    /// path where it resolves or at the name of a symlink on its way.
    fn not_protected(&self, root: &Path, cwd: &Path, key: &str, raw: &str) -> std::result::Result<(), String> {
        let named = confine_named(root, cwd, raw).map_err(|e| format!("`{key}`: {e}"))?;
        match named.protected_hit(root, &self.config.protected_paths) {
            Some(hit) => Err(format!(
                "`{key}`: writing `{raw}` touches `{hit}` (or a symlink standing at that name), configuration that \
                 programs execute (protected_paths, matched at any depth); make that change yourself, or remove \
                 `{hit}` from `protected_paths` for this workspace"
            )),
            None => Ok(()),
        }
    }
}

/// The paths a patch writes, as [`crate::patch::Patch::parse`] reads it —
/// the reading the library's `apply_patch` applies — with every name its
/// headers carry (raw and stripped of `a/`/`b/`, for appliers with another
/// strip level). A patch that parse refuses (a context diff, a padded or
/// mixed-case envelope marker, `Index:`, `copy from`, names that disagree,
/// …) is refused here, with its reason.
pub(super) fn patch_targets(patch: &str) -> std::result::Result<Vec<String>, String> {
    crate::patch::Patch::parse(patch)
        .map(|p| p.names())
        .map_err(|e| e.to_string())
}

/// Confines file tools to the workspace root (every argument key known, patches parsed, writes to executed configuration such as `.git/` refused) and shell tools to argv-level specifications of allowed programs, with a read-only mode; anything not understood is refused.
#[middleware(
    builtin,
    name = "shell_fs_guard",
    config = ShellFsGuardConfig,
    doc(
        mutation = "Records itself as a run restriction: every sub-agent run inherits it and the agent loop judges each of the child's calls with it, whatever the child's stack holds. Otherwise it only admits or refuses calls (a refused batch call gets its one error result).",
        events = "None of its own: refusals are `Validation` errors (in a batch, the call's error result) naming the tool and the reason.",
        failure = "Fails closed: no workspace root, an unresolvable root, arguments that are not an object, an unknown argument key of a file tool, a patch without targets, a missing path or command, a program without an argv specification, an option not in it, or any construct the lexer does not understand is refused, with a reason naming the program, the argument and the rule. File-system lookups (symlinks, globs) happen at check time: a link swapped between the check and the run is outside its reach, which is why commands should also run in the OS sandbox (see docs/security.md). Configuration that admitted programs execute (`.git/`, `.cargo/`, CI, hooks: `protected_paths`) cannot be written through the guarded tools; `cargo` is not in the default allow list because building runs workspace code.",
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
        ctx.policy_mut()
            .add_restriction("shell_fs_guard", crate::harness::tool::Restriction::Guard(guard));
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
                    if access.mode == FileAccessMode::Write {
                        self.not_protected(&root, &root, "declared write", &access.path)?;
                    }
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
        let plan = self.plan_call(call, ctx.workspace()).map_err(|reason| {
            TinyAgentsError::validation(format!("shell/filesystem guard refused `{}`: {reason}", call.name))
        })?;
        // What the tool runs is this plan, read back by call id: the model
        // supplies only the command line, never the plan.
        if let Some(plan) = plan {
            ctx.locals()
                .local::<crate::sandbox::AdmittedPlans>()
                .record(&call.id, &call.arguments, plan);
        }
        Ok(())
    }
}

/// The guard's reading of a shell call, for a shell tool's calls no guard admitted.
#[cfg(unix)]
impl crate::sandbox::ShellRules for ShellFsGuardMiddleware {
    fn plan_shell(
        &self,
        arguments: &Value,
        workspace: Option<&WorkspaceDescriptor>,
    ) -> std::result::Result<ShellPlan, String> {
        ShellFsGuardMiddleware::plan_shell(self, arguments, workspace)
    }
}

/// The guard's judgement of whole calls, for the runtime's inherited restrictions.
impl crate::harness::tool::CallGuard for ShellFsGuardMiddleware {
    fn check_call(&self, call: &ToolCall, workspace: Option<&WorkspaceDescriptor>) -> std::result::Result<(), String> {
        ShellFsGuardMiddleware::check_call(self, call, workspace)
    }

    fn plan_call(
        &self,
        call: &ToolCall,
        workspace: Option<&WorkspaceDescriptor>,
    ) -> std::result::Result<Option<ShellPlan>, String> {
        ShellFsGuardMiddleware::plan_call(self, call, workspace)
    }
}

#[cfg(test)]
mod tests {
    use super::patch_targets;

    #[test]
    fn patch_targets_come_from_envelopes_and_diffs() {
        let envelope = "*** Begin Patch\n*** Add File: a.rs\n+x\n*** Update File: b.rs\n*** Move to: c.rs\n*** Delete File: d.rs\n*** End Patch";
        assert_eq!(patch_targets(envelope).unwrap(), ["a.rs", "b.rs", "c.rs", "d.rs"]);
        let diff = "diff --git a/x.rs b/y.rs\nsimilarity index 90%\nrename from x.rs\nrename to y.rs\n--- a/x.rs\t2024-01-01\n+++ b/y.rs\n@@ -1 +1 @@\n-a\n+b\n";
        let t = patch_targets(diff).unwrap();
        for want in ["a/x.rs", "x.rs", "b/y.rs", "y.rs"] {
            assert!(t.iter().any(|p| p == want), "{want} in {t:?}");
        }
        assert!(patch_targets("--- /dev/null\n+++ b/new.rs\n@@ -0,0 +1 @@\n+x\n")
            .unwrap()
            .iter()
            .all(|p| p != "/dev/null"));
        assert!(patch_targets("no patch here").is_err());
    }
}
