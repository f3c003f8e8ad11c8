//! [`judge`]: a command line against a [`CommandPolicy`], admitted with the
//! [`ShellPlan`] of what runs, or refused with the classified reason.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::commands;
use crate::path_check::{confine, DEFAULT_PROTECTED_PATHS};
use crate::plan::ShellPlan;
use crate::shell_check::{plan_tokens, read_line, ShellRules};

/// The default commands a shell tool may run (each has an argv-level
/// specification in the checker). `cargo` is specified but not listed: it
/// runs workspace code (build scripts, tests), so list it only where an OS
/// sandbox confines the run.
pub const DEFAULT_ALLOW_COMMANDS: &[&str] = &[
    "ls", "cat", "head", "tail", "wc", "grep", "rg", "find", "echo", "pwd", "diff", "sort", "uniq", "stat", "file",
    "du", "tree", "git", "mkdir", "touch", "cp", "mv", "date", "basename", "dirname", "realpath", "cut", "tr",
    "printf", "true", "false", "test", "jq", "sed",
];
/// Commands refused by name (kept for configuration compatibility: every
/// interpreter, indirection and environment-printing program is refused
/// whatever the lists say, versioned names included).
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

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// What a command line may do: the policy [`judge`] applies, as data.
///
/// ```
/// use tinyagents_commands::{CommandPolicy, DEFAULT_ALLOW_COMMANDS};
///
/// let policy = CommandPolicy::new("/work/repo").read_only(true);
/// assert!(policy.read_only);
/// assert_eq!(policy.allow.len(), DEFAULT_ALLOW_COMMANDS.len());
/// assert!(policy.allow_pipes);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPolicy {
    /// The workspace root every path is confined to (resolved, symlinks
    /// followed, by [`judge`]; the file-system root is refused).
    pub root: PathBuf,
    /// The directory the command runs in (relative to the root, or absolute
    /// inside it; confined, and it must exist); `None`: the root.
    pub cwd: Option<PathBuf>,
    /// The programs that may run; each must have an argv-level specification
    /// ([`specified_commands`](crate::specified_commands)). Default:
    /// [`DEFAULT_ALLOW_COMMANDS`]. Empty: every specified program but `cargo`.
    pub allow: Vec<String>,
    /// Programs refused by name. Default: [`DEFAULT_DENY_COMMANDS`].
    pub deny: Vec<String>,
    /// Refuse every write: writing programs, options and operands, output
    /// redirections. Default: off.
    pub read_only: bool,
    /// Admit pipelines whose every stage passes (chaining stays refused). Default: on.
    pub allow_pipes: bool,
    /// Paths writes may not touch (an entry without `/` matches any path
    /// component, case-insensitively; with `/`, that path at any depth, as the
    /// sandbox places it).
    /// Default: [`DEFAULT_PROTECTED_PATHS`]. Empty: no protection.
    pub protected: Vec<String>,
    /// The `workspace` profile: also `git add/commit/checkout -b/switch/...`,
    /// `make`, `sh SCRIPT`, `cargo`, `npm run SCRIPT`, admitted only when
    /// [`sandboxed`](Self::sandboxed). Default: off.
    pub workspace_profile: bool,
    /// The command will run under a required OS sandbox (the enforcement the
    /// `workspace` profile needs). Default: off.
    pub sandboxed: bool,
}

impl CommandPolicy {
    /// The default policy confined to `root`: the default allow and deny
    /// lists, pipes admitted, the protected paths refused to writes.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            cwd: None,
            allow: strings(DEFAULT_ALLOW_COMMANDS),
            deny: strings(DEFAULT_DENY_COMMANDS),
            read_only: false,
            allow_pipes: true,
            protected: strings(DEFAULT_PROTECTED_PATHS),
            workspace_profile: false,
            sandboxed: false,
        }
    }

    /// The same policy running commands in `cwd` ([`CommandPolicy::cwd`]).
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The same policy admitting exactly these programs.
    pub fn with_allow<I: IntoIterator<Item = S>, S: Into<String>>(mut self, programs: I) -> Self {
        self.allow = programs.into_iter().map(Into::into).collect();
        self
    }

    /// The same policy, read-only (or not).
    pub fn read_only(mut self, on: bool) -> Self {
        self.read_only = on;
        self
    }

    /// The same policy with the `workspace` profile, for commands that run
    /// under a required OS sandbox (`sandboxed`) or not.
    pub fn workspace_profile(mut self, sandboxed: bool) -> Self {
        self.workspace_profile = true;
        self.sandboxed = sandboxed;
        self
    }
}

/// Which check refused a command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalKind {
    /// The policy cannot confine anything: its root or working directory
    /// does not resolve, or is the file-system root.
    Policy,
    /// The line is not understood: empty, too long, or a construct the
    /// lexer refuses (chaining, substitution, expansion, subshells,
    /// here-documents, quoting `bash` and `sh` read differently).
    Syntax,
    /// A program, option, operand, path or redirection the policy refuses.
    Command,
}

/// Why [`judge`] refused a command line: the check, and the reason naming
/// the program, the argument and the rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Which check refused it.
    pub kind: RefusalKind,
    /// What was refused and why.
    pub reason: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Refusal {}

/// The decision on one command line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Verdict {
    /// Admitted: the plan of what runs, exactly ([`Sandbox::run_plan`](crate::Sandbox::run_plan)).
    Admitted(ShellPlan),
    /// Refused, with the reason.
    Refused(Refusal),
}

impl Verdict {
    /// The plan, or the refusal.
    pub fn into_result(self) -> Result<ShellPlan, Refusal> {
        match self {
            Self::Admitted(plan) => Ok(plan),
            Self::Refused(refusal) => Err(refusal),
        }
    }

    /// Whether the line was admitted.
    pub fn is_admitted(&self) -> bool {
        matches!(self, Self::Admitted(_))
    }
}

/// The canonical form of a workspace root, or `Err(reason)`: it must
/// resolve, and not to the file-system root (which confines nothing).
pub fn resolve_root(root: &Path) -> Result<PathBuf, String> {
    let resolved = std::fs::canonicalize(root)
        .map_err(|_| format!("the workspace root `{}` cannot be resolved", root.display()))?;
    if resolved.parent().is_none() {
        return Err(format!(
            "the workspace root `{}` is the file-system root, which confines nothing: give the run a project \
             directory",
            resolved.display()
        ));
    }
    Ok(resolved)
}

/// Judges the command line `command` against `policy`: the lexer follows
/// the quoting `bash` and POSIX `sh` share and refuses what it does not
/// fully understand; globs are expanded with every match confined;
/// redirections are confined; each pipeline stage is checked against its
/// program's argv-level specification. Admitted, the [`ShellPlan`] holds
/// the argv of each stage (with the program's safe mode,
/// [`SAFE_MODES`](crate::SAFE_MODES)) and its redirections: run it with
/// [`Sandbox::run_plan`](crate::Sandbox::run_plan), never by handing the
/// line to a shell. File-system lookups happen now: run the plan under the
/// OS sandbox, which is the enforcement.
///
/// ```
/// use tinyagents_commands::{judge, CommandPolicy, RefusalKind, Verdict};
///
/// let root = std::env::temp_dir();
/// let policy = CommandPolicy::new(&root);
/// let Verdict::Admitted(plan) = judge("sed -n 1p x | sort", &policy) else { panic!("refused") };
/// assert_eq!(plan.stages()[0].argv(), ["sed", "--sandbox", "-n", "1p", "x"]);
///
/// let Verdict::Refused(why) = judge("ls; rm -rf /", &policy) else { panic!("admitted") };
/// assert_eq!(why.kind, RefusalKind::Syntax);
/// let Verdict::Refused(why) = judge("python3 -c 1", &policy) else { panic!("admitted") };
/// assert_eq!(why.kind, RefusalKind::Command);
/// assert!(why.reason.contains("python3"), "{why}");
/// ```
pub fn judge(command: &str, policy: &CommandPolicy) -> Verdict {
    let refuse = |kind, reason| Verdict::Refused(Refusal { kind, reason });
    let root = match resolve_root(&policy.root) {
        Ok(root) => root,
        Err(reason) => return refuse(RefusalKind::Policy, reason),
    };
    let cwd = match &policy.cwd {
        None => root.clone(),
        Some(dir) => {
            let raw = dir.to_string_lossy();
            // a canonical directory under the canonical root is confined as
            // it stands (what a caller that confined it already passes);
            // anything else is confined here, relative to the root
            let canonical_inside =
                dir.is_absolute() && std::fs::canonicalize(dir).is_ok_and(|c| c == *dir && c.starts_with(&root));
            let checked = if canonical_inside {
                Ok(dir.clone())
            } else {
                confine(&root, &raw)
            };
            match checked {
                Ok(dir) if dir.is_dir() => dir,
                Ok(_) => {
                    return refuse(
                        RefusalKind::Policy,
                        format!("the working directory `{raw}` is not an existing directory"),
                    );
                }
                Err(e) => {
                    return refuse(
                        RefusalKind::Policy,
                        format!("the working directory `{raw}` is refused: {e}"),
                    );
                }
            }
        }
    };
    let tokens = match read_line(command) {
        Ok(tokens) => tokens,
        Err(reason) => return refuse(RefusalKind::Syntax, reason),
    };
    let rules = ShellRules {
        allow: &policy.allow,
        deny: &policy.deny,
        read_only: policy.read_only,
        allow_pipes: policy.allow_pipes,
        root: &root,
        cwd: &cwd,
        protected: &policy.protected,
        workspace: policy.workspace_profile,
        sandboxed: policy.sandboxed,
    };
    match plan_tokens(command, &tokens, &rules) {
        Ok(plan) => Verdict::Admitted(plan),
        Err(reason) => refuse(RefusalKind::Command, reason),
    }
}

/// Whether `program` has an argv-level specification (in the default
/// profile; `make`, `sh` and `npm` have one in the `workspace` profile only).
pub fn is_specified(program: &str) -> bool {
    commands::spec(program).is_some()
}

/// The names of the programs with an argv-level specification.
pub fn specified_commands() -> Vec<&'static str> {
    commands::specified_commands()
}
