//! The sandboxed command runner: every command the library runs for a tool
//! (the [`ShellTool`]) runs confined by the operating system. The runner and
//! the command checker are the engine crate `tinyagents-commands`
//! (re-exported here), usable without the agent runtime; this module adds
//! the shell tool and the plans the guard admits for a run's calls
//! ([`admitted_plan`]). Needs the `commands` feature (on by default).
//!
//! The guards (`shell_fs_guard`, `tool_policy`, …) are the policy and the
//! early, explained refusal; this module is the enforcement. A command runs
//! under a [`SandboxPolicy`] (policy as data):
//!
//! * **filesystem** (Landlock): it may write only under the workspace root
//!   and a private temporary directory made for the call (`HOME` and
//!   `TMPDIR` point inside it, and it is deleted afterwards); it may read and
//!   execute under the root and a small set of system paths
//!   ([`SandboxPolicy::default_read_only_paths`]); nothing else — not
//!   `$HOME`, not the rest of `/etc`, not `/proc`;
//! * **protected paths** (the command's mount namespace): the configuration
//!   other programs execute ([`crate::protected`]: `.git/config`,
//!   `.git/hooks`, `.cargo`, CI, hook managers, `.envrc`, …) stays
//!   read-only at any depth of the workspace (`sub/.envrc`,
//!   `vendor/x/.git/config`), and cannot be renamed, replaced or removed;
//!   one the command creates is removed after the run, which then fails
//!   naming it ([`SandboxPolicy::protected_paths`]);
//! * **hidden paths**: `/root`, `/home`, `/etc`, `/run`, `/var`, `/tmp`, …
//!   are covered by an empty `tmpfs` (the allowed paths beneath them put
//!   back), so not even `stat` learns what they hold
//!   ([`SandboxPolicy::hidden_paths`]);
//! * **network**: no sockets unless the policy allows them (seccomp): network
//!   families with [`SandboxPolicy::network`], `AF_UNIX` with
//!   [`SandboxPolicy::unix_sockets`] (`socketpair` always works);
//! * **environment**: built from an allow list ([`SandboxPolicy::env_allow`],
//!   by default `PATH`, `LANG`, `LC_*`, `TERM`, `TZ`): the agent's API keys
//!   never reach the command;
//! * **limits** ([`SandboxLimits`]): wall time that kills the whole process
//!   tree (`setsid`/`setpgid` are refused, so no descendant leaves the
//!   process group; a pids cgroup catches the rest), CPU seconds and address
//!   space per process, file size, stdout/stderr read up to a cap (the
//!   command is stopped past it, and the output says so), process count;
//! * **privileges**: `no_new_privs` and every capability dropped, also when
//!   the agent runs as root.
//!
//! When the direct child exits, whatever it left running in the background
//! is killed too: a call's processes never outlive the call.
//!
//! # Modes and the opt-out
//!
//! [`SandboxPolicy::mode`] is [`SandboxMode::Required`] by default: if the
//! kernel cannot provide the sandbox (no Landlock, no seccomp, a process limit
//! that cannot hold), [`Sandbox::new`] and every run fail with an error that
//! names what is missing — never a silent unconfined run.
//! [`SandboxMode::Preferred`] confines when it can and otherwise runs with
//! only the environment, working-directory, time and output bounds
//! ([`SandboxOutput::confined`] says which). [`SandboxMode::Off`] is the
//! explicit, documented opt-out for machines without Landlock: same bounds,
//! no OS confinement. See `docs/security.md`.
//!
//! ```no_run
//! use tinyagents::sandbox::{Sandbox, SandboxCommand, SandboxPolicy};
//!
//! # async fn demo() -> tinyagents::Result<()> {
//! let sandbox = Sandbox::new(SandboxPolicy::new("/path/to/workspace"))?;
//! let out = sandbox.run(SandboxCommand::new(["git", "status", "--short"])).await?;
//! assert!(out.success());
//! println!("{}", out.render());
//! # Ok(()) }
//! ```

mod admitted;
mod shell;

pub use admitted::admitted_plan;
pub(crate) use admitted::{judged_otherwise, AdmittedPlans};
pub use shell::{ShellRules, ShellTool};
pub use tinyagents_commands::{
    availability, landlock_abi, PlanRedirect, PlanStage, RedirectTarget, Sandbox, SandboxCommand, SandboxError,
    SandboxLimits, SandboxMode, SandboxOutput, SandboxPolicy, ShellPlan, Termination, GIT_LITERAL_PATHSPECS,
    GIT_NO_DRIVERS, SAFE_MODES,
};

use crate::TinyAgentsError;

/// The runner's errors are the crate's: a configuration error, a refused
/// command (validation), a failed run (the `sandbox` tool's), with the same
/// message.
impl From<SandboxError> for TinyAgentsError {
    fn from(err: SandboxError) -> Self {
        match err {
            SandboxError::Config(message) => TinyAgentsError::config(message),
            SandboxError::Refused(message) => TinyAgentsError::validation(message),
            SandboxError::Failed(message) => TinyAgentsError::tool("sandbox", message),
            other => TinyAgentsError::tool("sandbox", other.message()),
        }
    }
}
