//! [`SandboxPolicy`]: what a sandboxed command may touch, as data, and
//! whether this machine can confine commands ([`availability`],
//! [`landlock_abi`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

pub use tinyagents_sandbox::protected::{SandboxRule, PROTECTED_PATHS};
pub use tinyagents_sandbox::SandboxMode;

use crate::error::{Result, SandboxError};

/// Resource limits of one sandboxed command.
///
/// ```
/// use std::time::Duration;
/// use tinyagents_commands::SandboxLimits;
///
/// let limits = SandboxLimits { wall_time: Duration::from_secs(5), ..SandboxLimits::default() };
/// assert_eq!(limits.output_bytes, 1 << 20);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxLimits {
    /// Wall-clock time of the whole call; past it the process tree is killed
    /// ([`crate::Termination::TimedOut`]). Default 60 s. Measured on Tokio's clock:
    /// under a paused test clock it passes as soon as the runtime is idle.
    pub wall_time: Duration,
    /// CPU seconds per process (`RLIMIT_CPU`). Default 60.
    pub cpu_seconds: Option<u64>,
    /// Address space per process, in bytes (`RLIMIT_AS`). Default 2 GiB.
    pub memory_bytes: Option<u64>,
    /// The most bytes read from stdout, and from stderr; past it the command
    /// is stopped ([`crate::Termination::OutputLimit`]). Default 1 MiB each.
    pub output_bytes: usize,
    /// The most processes and threads of the tree at once. Default 128.
    /// As root, this needs a writable pids cgroup (the kernel ignores
    /// `RLIMIT_NPROC` for root); without one a required sandbox fails closed.
    pub processes: Option<u64>,
    /// The largest file a process may write, in bytes (`RLIMIT_FSIZE`). Default 1 GiB.
    pub file_size_bytes: Option<u64>,
}

impl Default for SandboxLimits {
    fn default() -> Self {
        Self {
            wall_time: Duration::from_secs(60),
            cpu_seconds: Some(60),
            memory_bytes: Some(2 << 30),
            output_bytes: 1 << 20,
            processes: Some(128),
            file_size_bytes: Some(1 << 30),
        }
    }
}

/// What a sandboxed command may touch: the policy, as data.
///
/// ```
/// use tinyagents_commands::{SandboxMode, SandboxPolicy};
///
/// let policy = SandboxPolicy::new("/work/repo");
/// assert_eq!(policy.mode, SandboxMode::Required);
/// assert!(!policy.network);
/// assert!(policy.env_allow.iter().any(|v| v == "PATH"));
/// assert!(!policy.env_allow.iter().any(|v| v.contains("KEY")));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// Required (default), Preferred, or Off (the explicit opt-out).
    pub mode: SandboxMode,
    /// The workspace root: readable, and writable unless `root_writable` is false.
    pub root: PathBuf,
    /// Whether the command may write under the root (false for read-only workspaces).
    pub root_writable: bool,
    /// Paths the command may read and execute beneath, besides the root.
    pub read_only_paths: Vec<PathBuf>,
    /// Device files the command may read and write (`/dev/null`, …).
    pub device_files: Vec<PathBuf>,
    /// Where the per-call private temporary directory is made (default: the system temp dir).
    pub temp_parent: PathBuf,
    /// Whether the command may open network sockets (default: no).
    pub network: bool,
    /// Whether the command may open `AF_UNIX` sockets (default: no; Landlock
    /// does not govern connecting to an existing socket file such as a
    /// daemon's, so this is a way out when on). `socketpair` always works.
    pub unix_sockets: bool,
    /// Environment variables passed through from this process, by exact name.
    pub env_allow: Vec<String>,
    /// Environment variables set for every command (after the allow list).
    pub env: BTreeMap<String, String>,
    /// Time, CPU, memory, output, process and file-size limits.
    pub limits: SandboxLimits,
    /// Paths that stay read-only inside the writable root, matched at any
    /// depth (`.envrc` is also `sub/.envrc`; `.git/config` is also
    /// `vendor/x/.git/config`), case-insensitively: they cannot be written,
    /// renamed, replaced or removed, and one the command creates is removed
    /// after the run (the run then fails, naming it). Default: the
    /// [`SandboxRule::ReadOnly`] rows of
    /// [`PROTECTED_PATHS`] (`.git/config`, `.git/hooks`,
    /// `.cargo`, CI, hook managers, `.envrc`, …).
    pub protected_paths: Vec<String>,
    /// Directories, matched at any depth like [`SandboxPolicy::protected_paths`],
    /// that stay writable beneath but cannot be renamed, replaced or removed.
    /// Default: the [`SandboxRule::Pinned`] rows (`.git`).
    pub pinned_paths: Vec<String>,
    /// The most entries of the workspace one walk visits: the sandbox walks
    /// the root before each run (to find the protected paths at any depth)
    /// and after it (to find those the command created). A workspace larger
    /// than this is refused before the run, naming this field; a run that
    /// leaves more fails. Default 200,000
    /// ([`tinyagents_sandbox::Protection::DEFAULT_MAX_ENTRIES`]).
    pub protected_walk_limit: usize,
    /// Directories hidden behind an empty read-only `tmpfs`, so that neither
    /// `cat` nor `stat` learns what they hold; the readable and writable
    /// paths beneath one (the root, the call's temporary directory, the
    /// `/etc` files of [`SandboxPolicy::default_read_only_paths`]) stay
    /// visible. Default: [`SandboxPolicy::default_hidden_paths`].
    pub hidden_paths: Vec<PathBuf>,
}

impl SandboxPolicy {
    /// A required sandbox rooted at `root`: the default system paths, no
    /// network, the default environment allow list and limits.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            mode: SandboxMode::Required,
            root: root.into(),
            root_writable: true,
            read_only_paths: Self::default_read_only_paths(false),
            device_files: ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"]
                .iter()
                .map(PathBuf::from)
                .collect(),
            temp_parent: std::env::temp_dir(),
            network: false,
            unix_sockets: false,
            env_allow: [
                "PATH",
                "LANG",
                "LANGUAGE",
                "LC_ALL",
                "LC_CTYPE",
                "LC_MESSAGES",
                "TERM",
                "TZ",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
            env: BTreeMap::new(),
            limits: SandboxLimits::default(),
            protected_paths: protected_rows(SandboxRule::ReadOnly),
            pinned_paths: protected_rows(SandboxRule::Pinned),
            protected_walk_limit: tinyagents_sandbox::Protection::DEFAULT_MAX_ENTRIES,
            hidden_paths: Self::default_hidden_paths(),
        }
    }

    /// The directories hidden by default: the users' homes (`/root`,
    /// `/home`), `/etc` (but the files commands need), the runtime and
    /// state directories (`/run`, `/var`, where `/run/secrets` and
    /// `/var/run/secrets` live), other temporary files (`/tmp`), `/srv`,
    /// `/mnt`, `/media`, `/opt`, `/boot`, and the private keys
    /// (`/etc/ssl/private`, `/etc/pki/tls/private`), should `/etc/ssl` be
    /// made readable.
    ///
    /// ```
    /// let hidden = tinyagents_commands::SandboxPolicy::default_hidden_paths();
    /// assert!(hidden.iter().any(|p| p.as_os_str() == "/root"));
    /// ```
    pub fn default_hidden_paths() -> Vec<PathBuf> {
        [
            "/root",
            "/home",
            "/etc",
            "/etc/ssl/private",
            "/etc/pki/tls/private",
            "/run",
            "/run/secrets",
            "/var",
            "/tmp",
            "/srv",
            "/mnt",
            "/media",
            "/opt",
            "/boot",
        ]
        .iter()
        .map(PathBuf::from)
        .collect()
    }

    /// The protected tree under the canonical `root`.
    pub(crate) fn protection(&self, root: &Path) -> tinyagents_sandbox::Protection {
        tinyagents_sandbox::Protection::new(root)
            .read_only(self.protected_paths.iter().cloned())
            .pinned(self.pinned_paths.iter().cloned())
            .max_entries(self.protected_walk_limit)
    }

    /// The system paths commands need to start and behave: `/usr`, `/bin`,
    /// `/sbin`, `/lib*` (programs, the dynamic loader, shared libraries,
    /// locales, terminfo) and, from `/etc`, only what the loader, name
    /// lookups of users and groups, time zones and git's system config read:
    /// `ld.so.cache`, `ld.so.conf(.d)`, `localtime`, `passwd`, `group`,
    /// `nsswitch.conf`, `gitconfig`, `alternatives`, `magic`, `inputrc`.
    /// `passwd`/`group` hold no secrets (`shadow` is not listed). With
    /// `network`, the resolver files (`resolv.conf`, `hosts`, `host.conf`,
    /// `gai.conf`, `services`, `protocols`) and the CA certificates only —
    /// `/etc/ssl/certs`, `/etc/ssl/cert.pem`, `/etc/ssl/openssl.cnf`,
    /// `/etc/pki/tls/certs`, `/etc/pki/tls/cert.pem`,
    /// `/etc/pki/ca-trust/extracted` — never `/etc/ssl/private`. Paths that
    /// do not exist are skipped when the ruleset is built.
    pub fn default_read_only_paths(network: bool) -> Vec<PathBuf> {
        let mut paths = vec![
            "/usr",
            "/bin",
            "/sbin",
            "/lib",
            "/lib32",
            "/lib64",
            "/libx32",
            "/etc/ld.so.cache",
            "/etc/ld.so.conf",
            "/etc/ld.so.conf.d",
            "/etc/localtime",
            "/etc/passwd",
            "/etc/group",
            "/etc/nsswitch.conf",
            "/etc/gitconfig",
            "/etc/alternatives",
            "/etc/magic",
            "/etc/inputrc",
        ];
        if network {
            paths.extend([
                "/etc/resolv.conf",
                "/etc/hosts",
                "/etc/host.conf",
                "/etc/gai.conf",
                "/etc/services",
                "/etc/protocols",
                "/etc/ssl/certs",
                "/etc/ssl/cert.pem",
                "/etc/ssl/openssl.cnf",
                "/etc/pki/tls/certs",
                "/etc/pki/tls/cert.pem",
                "/etc/pki/ca-trust/extracted",
            ]);
        }
        paths.into_iter().map(PathBuf::from).collect()
    }

    /// The same policy in another mode (`SandboxMode::Off` is the explicit opt-out).
    pub fn with_mode(mut self, mode: SandboxMode) -> Self {
        self.mode = mode;
        self
    }

    /// The same policy with network access allowed or not (adds or removes
    /// the resolver and certificate files of [`SandboxPolicy::default_read_only_paths`]).
    pub fn with_network(mut self, network: bool) -> Self {
        let extra: Vec<PathBuf> = Self::default_read_only_paths(true)
            .into_iter()
            .filter(|p| !Self::default_read_only_paths(false).contains(p))
            .collect();
        self.read_only_paths.retain(|p| !extra.contains(p));
        if network {
            self.read_only_paths.extend(extra);
        }
        self.network = network;
        self
    }

    /// The same policy with `AF_UNIX` sockets allowed or not.
    pub fn with_unix_sockets(mut self, allow: bool) -> Self {
        self.unix_sockets = allow;
        self
    }

    /// The same policy with these limits.
    pub fn with_limits(mut self, limits: SandboxLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The same policy with one more readable path (a toolchain, say).
    pub fn with_read_only_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.read_only_paths.push(path.into());
        self
    }

    /// The same policy passing one more variable through from this process.
    pub fn with_env_allowed(mut self, name: impl Into<String>) -> Self {
        self.env_allow.push(name.into());
        self
    }

    /// The same policy with another bound on the workspace walks
    /// ([`SandboxPolicy::protected_walk_limit`]).
    pub fn with_protected_walk_limit(mut self, entries: usize) -> Self {
        self.protected_walk_limit = entries;
        self
    }

    /// The same policy with the root read-only (or writable).
    pub fn with_root_writable(mut self, writable: bool) -> Self {
        self.root_writable = writable;
        self
    }

    pub(crate) fn check(&self) -> Result<PathBuf> {
        for p in self.protected_paths.iter().chain(&self.pinned_paths) {
            let path = Path::new(p.trim_matches('/'));
            let plain = path.components().all(|c| matches!(c, std::path::Component::Normal(_)));
            if p.trim_matches('/').is_empty() || !plain {
                return Err(SandboxError::config(format!(
                    "sandbox protected path `{p}` must be a path relative to the workspace root without `.` or \
                     `..` (such as `.git/config`)"
                )));
            }
        }
        let root = self.root.canonicalize().map_err(|e| {
            SandboxError::config(format!(
                "sandbox root `{}` must be an existing directory: {e}",
                self.root.display()
            ))
        })?;
        if !root.is_dir() || root == Path::new("/") {
            return Err(SandboxError::config(format!(
                "sandbox root `{}` must be a directory other than `/`",
                root.display()
            )));
        }
        if self.limits.wall_time.is_zero() || self.limits.output_bytes == 0 {
            return Err(SandboxError::config(
                "sandbox limits: wall_time and output_bytes must be greater than zero",
            ));
        }
        Ok(root)
    }
}

/// The patterns of the table's rows enforced with `rule`.
fn protected_rows(rule: SandboxRule) -> Vec<String> {
    PROTECTED_PATHS
        .iter()
        .filter(|r| r.sandbox == rule)
        .map(|r| r.pattern.to_owned())
        .collect()
}

/// Whether this machine can provide the sandbox (Landlock and seccomp), probed
/// once: `Err` names what is missing and how to opt out.
///
/// ```
/// match tinyagents_commands::availability() {
///     Ok(()) => println!("commands run confined"),
///     Err(missing) => println!("no sandbox: {missing}"),
/// }
/// ```
pub fn availability() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| tinyagents_sandbox::availability().check().map_err(|e| e.to_string()))
        .clone()
}

/// The kernel's Landlock ABI version (0: none), probed once. Newer ABIs
/// confine more: v4 TCP rules, v6 signal and abstract-socket scoping.
///
/// ```
/// let abi = tinyagents_commands::landlock_abi();
/// assert!(abi >= 0);
/// ```
pub fn landlock_abi() -> i32 {
    static ABI: OnceLock<i32> = OnceLock::new();
    *ABI.get_or_init(|| tinyagents_sandbox::availability().landlock_abi)
}
