//! The OS confinement under `tinyagents`' command runner (`tinyagents-commands`, re-exported as `tinyagents::sandbox`).
//!
//! This crate does one thing: it turns a [`ConfinementSpec`] (policy as data)
//! into a [`Confinement`] prepared in the parent process, and installs it on a
//! [`std::process::Command`] so that the child confines itself between `fork`
//! and `exec`:
//!
//! * **filesystem** — a Landlock ruleset: read and execute under the
//!   read-only paths, everything (except creating device nodes) under the
//!   writable paths, nothing anywhere else; and, where the machine can make
//!   one, a mount namespace of the child's own where every mount is
//!   read-only but the writable paths, so what Landlock does not govern
//!   (`chmod`, `chown`, `utimes`, extended attributes) stays inside them too;
//! * **protected tree** — configuration other programs execute, at any depth
//!   of the workspace ([`Protection`]): found by a bounded walk before the
//!   run and bound read-only (or pinned) in that namespace; what the command
//!   creates at a protected name is found by a walk after the run and
//!   removed ([`Confinement::restore_protected`]);
//! * **network** — a seccomp filter that makes `socket()` fail with `EPERM`
//!   for every family but `AF_UNIX` (and `io_uring_setup`, which can open
//!   sockets too), plus Landlock's TCP rules where the kernel has them;
//!   `AF_UNIX` sockets too unless allowed (`socketpair()` always works);
//! * **process tree** — `setsid()` and `setpgid()` fail with `EPERM`, so every
//!   descendant stays in the command's process group and one `killpg` reaches
//!   them all; a pids cgroup (or `RLIMIT_NPROC` for a non-root user) bounds the
//!   number of processes;
//! * **resources** — `RLIMIT_CPU`, `RLIMIT_AS`, `RLIMIT_FSIZE`, no core files;
//! * **privileges** — `no_new_privs`, and every capability dropped (bounding,
//!   ambient, effective, permitted, inheritable), so a command started by root
//!   cannot load modules, create device nodes, mount or signal other users.
//!   No new user namespaces (`unshare`, `clone(CLONE_NEWUSER)`; `clone3`
//!   answers `ENOSYS` so the C library falls back to `clone`).
//!
//! Everything that allocates (the ruleset, the BPF program, the cgroup) is
//! done by [`Confinement::prepare`] in the parent: a `fork` of a
//! multi-threaded process may only run async-signal-safe code, so the child
//! runs raw syscalls only (module `sys`, the one module allowed `unsafe`).
//!
//! A requirement the kernel cannot meet is an error naming what is missing
//! ([`SetupError`]); nothing is silently skipped.
//!
//! It also declares what its users share: the table of protected paths
//! ([`protected::PROTECTED_PATHS`], which [`Protection`] is given) and
//! [`SandboxMode`] (whether a command must run confined). The runner that
//! uses this crate is `tinyagents-commands`.
//!
//! ```no_run
//! use tinyagents_sandbox::{Confinement, ConfinementSpec};
//!
//! let spec = ConfinementSpec::new()
//!     .read_only(["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache"])
//!     .writable(["/tmp/work"]);
//! let confinement = Confinement::prepare(&spec)?;
//! let mut cmd = std::process::Command::new("ls");
//! confinement.install(&mut cmd);
//! let status = cmd.status()?;
//! confinement.kill_all(); // whatever the command left behind
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// Whether a command must run confined: what a tool declares it needs, a
/// workspace requires, and a runner enforces.
///
/// ```
/// assert_eq!(tinyagents_sandbox::SandboxMode::default(), tinyagents_sandbox::SandboxMode::Off);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum SandboxMode {
    /// No sandbox.
    #[default]
    Off,
    /// A sandbox is used when available.
    Preferred,
    /// The tool may only run in a sandboxed workspace.
    Required,
}

#[cfg(target_os = "linux")]
mod cgroup;
#[cfg(target_os = "linux")]
mod landlock;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
mod protect;
pub mod protected;
#[cfg(target_os = "linux")]
mod sys;

/// What the child is confined to. Build it with the builder methods.
///
/// ```
/// use tinyagents_sandbox::ConfinementSpec;
///
/// let spec = ConfinementSpec::new().writable(["/w"]).network(false).max_processes(Some(32));
/// assert_eq!(spec.writable_paths.len(), 1);
/// assert!(!spec.allow_network);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfinementSpec {
    /// Paths (directories or files) the command may read and execute beneath.
    /// A path that does not exist is skipped.
    pub read_only_paths: Vec<PathBuf>,
    /// Paths the command may read, write, create and delete beneath (device
    /// nodes excepted). A path that does not exist is an error.
    pub writable_paths: Vec<PathBuf>,
    /// Files (such as `/dev/null`) the command may read and write but not
    /// list or create beside. A path that does not exist is skipped.
    pub device_files: Vec<PathBuf>,
    /// Whether the command may open network sockets.
    pub allow_network: bool,
    /// Whether the command may open `AF_UNIX` sockets (`socket(2)`; pairs
    /// from `socketpair(2)` are always allowed). Off by default: Landlock
    /// does not govern connecting to an existing socket file, so a daemon's
    /// socket (`/var/run/docker.sock`, …) would be a way out.
    pub allow_unix_sockets: bool,
    /// `RLIMIT_CPU`, in seconds of CPU time per process.
    pub cpu_seconds: Option<u64>,
    /// `RLIMIT_AS`, in bytes of address space per process.
    pub memory_bytes: Option<u64>,
    /// `RLIMIT_FSIZE`, the largest file a process may write, in bytes.
    pub file_size_bytes: Option<u64>,
    /// The most processes (and threads) the command's tree may hold at once.
    pub max_processes: Option<u64>,
    /// The protected tree: configuration other programs execute (`.git/config`,
    /// `.cargo`, `.envrc`, …), at any depth of a writable directory
    /// (see [`Protection`]). None by default.
    pub protection: Option<Protection>,
    /// Directories hidden behind an empty read-only `tmpfs` (`/root`, `/home`,
    /// `/etc`, …), so that neither reading nor `stat` learns what is there.
    /// The readable, writable and device paths beneath one stay visible (they
    /// are bound back into the empty directory); a hidden path equal to one
    /// of them is not hidden. A path that does not exist or is a symlink is
    /// skipped.
    ///
    /// These and the protected tree's binds are enforced in the child's mount namespace: only where
    /// [`Confinement::read_only_mounts`] is `true` (a required sandbox
    /// refuses a machine where it is not).
    pub hidden_paths: Vec<PathBuf>,
}

impl Default for ConfinementSpec {
    fn default() -> Self {
        Self::new()
    }
}

impl ConfinementSpec {
    /// Nothing readable, nothing writable, no network, no limits.
    pub fn new() -> Self {
        Self {
            read_only_paths: Vec::new(),
            writable_paths: Vec::new(),
            device_files: Vec::new(),
            allow_network: false,
            allow_unix_sockets: false,
            cpu_seconds: None,
            memory_bytes: None,
            file_size_bytes: None,
            max_processes: None,
            protection: None,
            hidden_paths: Vec::new(),
        }
    }

    /// Adds read-and-execute paths.
    pub fn read_only<I, P>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.read_only_paths.extend(paths.into_iter().map(Into::into));
        self
    }

    /// Adds writable paths.
    pub fn writable<I, P>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.writable_paths.extend(paths.into_iter().map(Into::into));
        self
    }

    /// Adds read-write device files (`/dev/null`, `/dev/urandom`, …).
    pub fn devices<I, P>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.device_files.extend(paths.into_iter().map(Into::into));
        self
    }

    /// Allows or denies network sockets.
    pub fn network(mut self, allow: bool) -> Self {
        self.allow_network = allow;
        self
    }

    /// Allows or denies `AF_UNIX` sockets (see [`ConfinementSpec::allow_unix_sockets`]).
    pub fn unix_sockets(mut self, allow: bool) -> Self {
        self.allow_unix_sockets = allow;
        self
    }

    /// Sets `RLIMIT_CPU` (seconds per process).
    pub fn cpu_seconds(mut self, seconds: Option<u64>) -> Self {
        self.cpu_seconds = seconds;
        self
    }

    /// Sets `RLIMIT_AS` (bytes per process).
    pub fn memory_bytes(mut self, bytes: Option<u64>) -> Self {
        self.memory_bytes = bytes;
        self
    }

    /// Sets `RLIMIT_FSIZE` (bytes per file written).
    pub fn file_size_bytes(mut self, bytes: Option<u64>) -> Self {
        self.file_size_bytes = bytes;
        self
    }

    /// Bounds the process count of the command's tree.
    pub fn max_processes(mut self, max: Option<u64>) -> Self {
        self.max_processes = max;
        self
    }

    /// Sets the protected tree (see [`Protection`]).
    pub fn protect(mut self, protection: Protection) -> Self {
        self.protection = Some(protection);
        self
    }

    /// Adds hidden directories (see [`ConfinementSpec::hidden_paths`]).
    pub fn hidden<I, P>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.hidden_paths.extend(paths.into_iter().map(Into::into));
        self
    }
}

/// Paths that stay as they are inside a writable directory, at any depth:
/// configuration other programs execute. A pattern (`.envrc`, `.git/config`)
/// matches the last components of a path, case-insensitively, wherever it
/// stands under [`Protection::root`] (`sub/.envrc`, `vendor/x/.git/config`).
///
/// Before each run one walk of the root (never following symlinks; at most
/// [`Protection::max_entries`] entries, past which the confinement is
/// refused) finds every protected entry that exists. In the child's mount
/// namespace each is bound onto itself — read-only with everything beneath
/// it, or, for a *pinned* directory (`.git`), writable inside — and every
/// directory between the root and it is bound onto itself too, so none can
/// be written, renamed, replaced or removed (`EROFS`, `EBUSY`; `EXDEV` for a
/// hard link or a rename across one). A symlink at a protected name whose
/// target lies inside the root protects its target the same way. A protected
/// regular file with another hard link in the root (through which it could
/// be written) is refused.
///
/// A name that does not exist cannot carry a mount: after the run a second
/// walk finds every protected entry created (by any means: written, renamed
/// into place, a symlink, a directory holding it) and
/// [`Confinement::restore_protected`] removes it.
///
/// ```
/// use tinyagents_sandbox::Protection;
///
/// let p = Protection::new("/w").read_only([".envrc", ".git/config"]).pinned([".git"]).max_entries(1000);
/// assert_eq!(p.max_entries, 1000);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protection {
    /// The directory whose tree is protected: equal to or inside a writable path.
    pub root: PathBuf,
    /// Patterns kept read-only, with everything beneath them.
    pub read_only: Vec<String>,
    /// Patterns of directories kept writable inside, but not renamable or removable.
    pub pinned: Vec<String>,
    /// The most entries one walk of the root visits before the confinement
    /// is refused (before the run) or the run fails (after it).
    pub max_entries: usize,
}

impl Protection {
    /// The default bound of one walk: [`Protection::max_entries`].
    pub const DEFAULT_MAX_ENTRIES: usize = 200_000;

    /// Nothing protected yet under `root`; the default walk bound.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            read_only: Vec::new(),
            pinned: Vec::new(),
            max_entries: Self::DEFAULT_MAX_ENTRIES,
        }
    }

    /// Adds read-only patterns.
    pub fn read_only<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.read_only.extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Adds pinned patterns.
    pub fn pinned<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.pinned.extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Sets the walk bound.
    pub fn max_entries(mut self, max: usize) -> Self {
        self.max_entries = max;
        self
    }
}

/// What [`Confinement::restore_protected`] found after a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProtectedChanges {
    /// Protected paths the command created (or symlinks it replaced), now removed.
    pub removed: Vec<PathBuf>,
    /// Paths that could not be checked or undone, and why (a directory that
    /// cannot be listed, a removal that failed, a walk past its bound).
    pub unchecked: Vec<(PathBuf, String)>,
}

impl ProtectedChanges {
    /// Whether the command touched no protected path (and everything was checked).
    pub fn is_empty(&self) -> bool {
        self.removed.is_empty() && self.unchecked.is_empty()
    }
}

/// Why a confinement could not be prepared: the rule, what is missing, and the fix.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SetupError {
    /// The kernel has no usable Landlock ABI.
    LandlockUnavailable {
        /// What the probe said.
        detail: String,
    },
    /// The kernel has no seccomp filter support, or the architecture is not supported.
    SeccompUnavailable {
        /// What failed.
        detail: String,
    },
    /// The process limit cannot be enforced on this machine.
    ProcessLimitUnavailable {
        /// What was tried.
        detail: String,
    },
    /// A path of the spec is unusable (a writable path that does not exist…).
    Path {
        /// The path.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The protected tree holds more entries than one walk may visit.
    WalkLimit {
        /// The protected root.
        root: PathBuf,
        /// [`Protection::max_entries`].
        limit: usize,
    },
    /// This operating system has none of the mechanisms (only Linux has).
    UnsupportedOs,
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LandlockUnavailable { detail } => write!(
                f,
                "sandbox required but Landlock ABI v1+ is not available ({detail}): the kernel lacks \
                 CONFIG_SECURITY_LANDLOCK or `landlock` is not in its lsm= list (Linux 5.13+); \
                 to run commands unconfined set SandboxMode::Off explicitly"
            ),
            Self::SeccompUnavailable { detail } => write!(
                f,
                "sandbox required but seccomp filters are not available ({detail}): the kernel lacks \
                 CONFIG_SECCOMP_FILTER or this architecture is not supported; to run commands \
                 unconfined set SandboxMode::Off explicitly"
            ),
            Self::ProcessLimitUnavailable { detail } => write!(
                f,
                "sandbox process limit cannot be enforced ({detail}); run as a non-root user \
                 (RLIMIT_NPROC), give this process a writable cgroup with the pids controller, \
                 or set the process limit to none explicitly"
            ),
            Self::Path { path, detail } => {
                write!(f, "sandbox path `{}` is unusable: {detail}", path.display())
            }
            Self::WalkLimit { root, limit } => write!(
                f,
                "the workspace `{}` holds more than {limit} entries: the sandbox walks it before each run to find \
                 protected paths at any depth (Protection::max_entries) and refuses to run unchecked; raise the \
                 limit (SandboxPolicy::protected_walk_limit), or use a smaller directory as the workspace root",
                root.display()
            ),
            Self::UnsupportedOs => write!(
                f,
                "sandbox required but this operating system has no Landlock/seccomp (Linux only); \
                 to run commands unconfined set SandboxMode::Off explicitly"
            ),
        }
    }
}

impl std::error::Error for SetupError {}

/// How the process-count limit is enforced for one confinement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessLimitMechanism {
    /// No limit was asked for.
    None,
    /// A pids cgroup of its own (holds for root too, and counts only the command's tree).
    Cgroup,
    /// `RLIMIT_NPROC`, set to the user's current task count plus the limit
    /// (the kernel counts every task of the user, and never enforces it for root).
    Rlimit,
}

/// What the kernel offers, probed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Availability {
    /// The Landlock ABI version (0: none).
    pub landlock_abi: i32,
    /// Why Landlock is missing, when it is.
    pub landlock_detail: Option<String>,
    /// Whether seccomp filters can be built for this architecture and kernel.
    pub seccomp: bool,
    /// Whether the effective user is root (`RLIMIT_NPROC` does not hold for root).
    pub root: bool,
}

impl Availability {
    /// `Ok` when Landlock and seccomp are both usable, else the first thing missing.
    pub fn check(&self) -> Result<(), SetupError> {
        if !cfg!(target_os = "linux") {
            return Err(SetupError::UnsupportedOs);
        }
        if self.landlock_abi < 1 {
            return Err(SetupError::LandlockUnavailable {
                detail: self
                    .landlock_detail
                    .clone()
                    .unwrap_or_else(|| "landlock_create_ruleset reported no ABI".to_owned()),
            });
        }
        if !self.seccomp {
            return Err(SetupError::SeccompUnavailable {
                detail: "no seccomp support reported in /proc/self/status".to_owned(),
            });
        }
        Ok(())
    }
}

/// Probes the kernel (Landlock ABI, seccomp); cheap, but cache the answer.
///
/// ```
/// let a = tinyagents_sandbox::availability();
/// if a.check().is_ok() {
///     assert!(a.landlock_abi >= 1);
/// }
/// ```
pub fn availability() -> Availability {
    #[cfg(target_os = "linux")]
    {
        linux::availability()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Availability {
            landlock_abi: 0,
            landlock_detail: Some("not Linux".to_owned()),
            seccomp: false,
            root: false,
        }
    }
}

/// A confinement prepared in the parent, ready to be installed on commands.
///
/// One `Confinement` is meant for one command: its process-limit cgroup
/// counts that command's tree, and [`Confinement::kill_all`] kills it.
pub struct Confinement {
    #[cfg(target_os = "linux")]
    inner: Arc<linux::Prepared>,
    #[cfg(not(target_os = "linux"))]
    inner: Arc<()>,
    pgid: std::sync::Mutex<Option<u32>>,
}

impl fmt::Debug for Confinement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Confinement")
            .field("process_limit", &self.process_limit())
            .field("read_only_mounts", &self.read_only_mounts())
            .finish_non_exhaustive()
    }
}

impl Confinement {
    /// Builds the Landlock ruleset, the seccomp program, the rlimits and the
    /// pids cgroup for `spec`. Fails closed, naming what the kernel lacks.
    pub fn prepare(spec: &ConfinementSpec) -> Result<Self, SetupError> {
        #[cfg(target_os = "linux")]
        {
            Ok(Self {
                inner: Arc::new(linux::Prepared::new(spec)?),
                pgid: std::sync::Mutex::new(None),
            })
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = spec;
            Err(SetupError::UnsupportedOs)
        }
    }

    /// How the process limit is enforced.
    pub fn process_limit(&self) -> ProcessLimitMechanism {
        #[cfg(target_os = "linux")]
        {
            self.inner.process_limit()
        }
        #[cfg(not(target_os = "linux"))]
        {
            ProcessLimitMechanism::None
        }
    }

    /// Whether the child also makes a mount namespace where every mount is
    /// read-only but the writable paths (file modes, owners, times and
    /// extended attributes outside them then cannot change), the protected
    /// paths are bound read-only and the hidden ones covered. `false` on a
    /// machine without `mount_setattr` (Linux 5.12) or mount namespaces (for
    /// a user other than root: unprivileged user namespaces), which run the
    /// command with Landlock and seccomp only.
    pub fn read_only_mounts(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.inner.mounts.is_some()
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    }

    /// Installs the confinement on `cmd`: the child gets a process group of
    /// its own, then confines itself before `exec`. A step that fails in the
    /// child makes the spawn fail (closed), with that step's OS error.
    pub fn install(&self, cmd: &mut std::process::Command) {
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            cmd.process_group(0);
            sys::install(cmd, Arc::clone(&self.inner));
        }
        #[cfg(not(target_os = "linux"))]
        let _ = cmd;
    }

    /// After the command's whole tree is gone: undoes what the mounts could
    /// not prevent — a protected path, at any depth, that did not exist when
    /// the confinement was prepared and exists now, or a symlink standing at
    /// one that was replaced (it is removed, without following symlinks, and
    /// the symlink put back) — by a second walk of the protected root.
    /// Returns what was removed and what could not be checked or removed;
    /// empty when the command touched no protected path. Call it only once
    /// no process of the tree runs ([`Confinement::kill_all`] returned `true`).
    pub fn restore_protected(&self) -> ProtectedChanges {
        #[cfg(target_os = "linux")]
        {
            self.inner.protect.restore()
        }
        #[cfg(not(target_os = "linux"))]
        {
            ProtectedChanges::default()
        }
    }

    /// Records the spawned child's pid (its process group id), for [`Confinement::kill_all`].
    pub fn started(&self, pid: u32) {
        if let Ok(mut g) = self.pgid.lock() {
            *g = Some(pid);
        }
    }

    /// Kills (SIGKILL) the whole tree: the process group of the child, and
    /// every process left in the pids cgroup. Returns `true` when no process
    /// of the tree is known to remain (always `true` without a cgroup, where
    /// only the process group can be reached). Call it again until `true`.
    pub fn kill_all(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            if let Some(pgid) = self.pgid.lock().ok().and_then(|g| *g) {
                sys::kill_group(pgid);
            }
            self.inner.kill_cgroup()
        }
        #[cfg(not(target_os = "linux"))]
        {
            true
        }
    }
}

/// Sends SIGKILL to process group `pgid` (errors such as "no such group" are ignored).
pub fn kill_process_group(pgid: u32) {
    #[cfg(target_os = "linux")]
    sys::kill_group(pgid);
    #[cfg(not(target_os = "linux"))]
    let _ = pgid;
}
