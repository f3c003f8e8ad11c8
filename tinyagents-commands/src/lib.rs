//! The command checker and executor under tinyagents' `shell_fs_guard`
//! built-in and shell tool, usable on its own: no agent runtime, no
//! middleware.
//!
//! * **Judge** a command line against a [`CommandPolicy`] (policy as data:
//!   the workspace root, the programs allowed, read-only, the protected
//!   paths) with [`judge`]: a lexer that follows the quoting `bash` and POSIX
//!   `sh` share and refuses what it does not fully understand, globs expanded
//!   with every match confined, redirections confined, each pipeline stage
//!   checked against its program's argv-level specification. The
//!   [`Verdict`] is the [`ShellPlan`] of what runs, or the classified
//!   [`Refusal`].
//! * **Run** an admitted plan with [`Sandbox::run_plan`]: every stage
//!   spawned directly (no shell reads the line again), confined by the
//!   operating system ([`SandboxPolicy`]: Landlock, seccomp, a mount
//!   namespace with the protected paths read-only, limits), its whole
//!   process tree gone when the call returns.
//! * **Confine** the paths a file tool names: [`confine`], [`confine_from`],
//!   [`confine_named`] (a write judged by every symlink name on its way too),
//!   [`confine_glob`], and [`protected_hit`] against the table of
//!   configuration programs execute ([`PROTECTED_PATHS`]).
//!
//! ```no_run
//! use tinyagents_commands::{judge, CommandPolicy, Sandbox, SandboxPolicy, Verdict};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let root = "/path/to/workspace";
//! let plan = match judge("git status --short | head -5", &CommandPolicy::new(root)) {
//!     Verdict::Admitted(plan) => plan,
//!     Verdict::Refused(why) => return Err(why.into()),
//! };
//! let out = Sandbox::new(SandboxPolicy::new(root))?.run_plan(&plan).await?;
//! println!("{}", out.render());
//! # Ok(()) }
//! ```

mod commands;
mod error;
mod git_state;
mod judge;
mod path_check;
mod plan;
mod runner;
mod sandbox;
mod shell_check;

pub use commands::intrinsic_refusal;
pub use error::{Result, SandboxError};
pub use judge::{
    is_specified, judge, resolve_root, specified_commands, CommandPolicy, Refusal, RefusalKind, Verdict,
    DEFAULT_ALLOW_COMMANDS, DEFAULT_DENY_COMMANDS,
};
pub use path_check::{
    confine, confine_from, confine_glob, confine_named, lexical as path_lexical, protected_hit, NamedPath,
    DEFAULT_PROTECTED_PATHS,
};
pub use plan::{PlanRedirect, PlanStage, RedirectTarget, ShellPlan, GIT_LITERAL_PATHSPECS, GIT_NO_DRIVERS, SAFE_MODES};
pub use runner::{Sandbox, SandboxCommand, SandboxOutput, Termination};
pub use sandbox::{
    availability, landlock_abi, SandboxLimits, SandboxMode, SandboxPolicy, SandboxRule, PROTECTED_PATHS,
};
/// The table of protected paths, declared in the OS confinement crate.
pub use tinyagents_sandbox::protected;
