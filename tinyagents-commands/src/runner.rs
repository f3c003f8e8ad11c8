//! [`Sandbox::run`]: one command, confined, bounded, and its whole process
//! tree gone when the call returns.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use tinyagents_sandbox::{Confinement, ConfinementSpec, ProtectedChanges};

use crate::error::{Result, SandboxError};
use crate::git_state::GitState;
use crate::plan::{PlanRedirect, RedirectTarget, ShellPlan};
use crate::sandbox::{SandboxMode, SandboxPolicy};

/// One command to run: its argv, working directory, stdin and extra environment.
///
/// ```
/// use std::time::Duration;
/// use tinyagents_commands::SandboxCommand;
///
/// let cmd = SandboxCommand::shell("ls | wc -l")
///     .with_cwd("src")
///     .with_stdin(b"input".to_vec())
///     .with_env("MODE", "check")
///     .with_timeout(Duration::from_secs(5));
/// assert_eq!(cmd.argv, ["/bin/sh", "-c", "ls | wc -l"]);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxCommand {
    /// The program and its arguments (the program is looked up in `PATH`).
    pub argv: Vec<String>,
    /// The working directory: relative paths are under the workspace root;
    /// it must resolve inside the root. Default: the root.
    pub cwd: Option<PathBuf>,
    /// Bytes written to stdin, which is then closed (default: no stdin, `/dev/null`).
    pub stdin: Option<Vec<u8>>,
    /// Extra environment variables of this command (after the policy's;
    /// `HOME` and `TMPDIR` are always the sandbox's).
    pub env: BTreeMap<String, String>,
    /// A shorter wall time than the policy's (never longer).
    pub timeout: Option<Duration>,
    /// Smaller output caps than the policy's, for stdout and stderr (never larger).
    pub output_limits: Option<(usize, usize)>,
}

impl SandboxCommand {
    /// A command from its argv.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// A command line run by `/bin/sh -c`.
    pub fn shell(line: impl Into<String>) -> Self {
        Self::new(["/bin/sh".to_owned(), "-c".to_owned(), line.into()])
    }

    /// The same command in `cwd`.
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    /// The same command with these bytes on stdin.
    pub fn with_stdin(mut self, stdin: Vec<u8>) -> Self {
        self.stdin = Some(stdin);
        self
    }

    /// The same command with one more environment variable.
    pub fn with_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }

    /// The same command with a shorter wall time.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The same command with smaller caps on stdout and stderr (a hook
    /// answer needs less than a build log).
    pub fn with_output_limits(mut self, stdout: usize, stderr: usize) -> Self {
        self.output_limits = Some((stdout, stderr));
        self
    }
}

/// How a sandboxed command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Termination {
    /// It exited with this status.
    Exited(i32),
    /// It was killed by this signal (`RLIMIT_CPU` ends in SIGKILL/SIGXCPU, for one).
    Signaled(i32),
    /// The wall time passed; the tree was killed.
    TimedOut,
    /// stdout or stderr passed the output cap; the tree was killed.
    OutputLimit,
    /// The run was cancelled; the tree was killed.
    Cancelled,
}

/// What a sandboxed command came to: how it ended and its bounded output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxOutput {
    /// How it ended.
    pub termination: Termination,
    /// stdout, at most `stdout_cap` bytes.
    pub stdout: Vec<u8>,
    /// stderr, at most `stderr_cap` bytes.
    pub stderr: Vec<u8>,
    /// Whether stdout passed the cap (the rest was not read).
    pub stdout_truncated: bool,
    /// Whether stderr passed the cap (the rest was not read).
    pub stderr_truncated: bool,
    /// Whether the OS confinement was applied (false only in modes `Off` and
    /// `Preferred` on a machine without it).
    pub confined: bool,
    /// The stdout cap in force, in bytes.
    pub stdout_cap: usize,
    /// The stderr cap in force, in bytes.
    pub stderr_cap: usize,
    /// The wall time in force.
    pub wall_time: Duration,
}

impl SandboxOutput {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.termination == Termination::Exited(0)
    }

    /// The exit status, when it exited.
    pub fn exit_code(&self) -> Option<i32> {
        match self.termination {
            Termination::Exited(c) => Some(c),
            _ => None,
        }
    }

    /// stdout as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// A line saying how the command ended.
    pub fn status_line(&self) -> String {
        match self.termination {
            Termination::Exited(c) => format!("exit status {c}"),
            Termination::Signaled(s) => format!("killed by signal {s}"),
            Termination::TimedOut => format!(
                "timed out after {} ms: the sandbox wall-time limit killed the whole process tree",
                self.wall_time.as_millis()
            ),
            Termination::OutputLimit => {
                let (stream, cap) = if self.stdout_truncated {
                    ("stdout", self.stdout_cap)
                } else {
                    ("stderr", self.stderr_cap)
                };
                format!("stopped: {stream} passed the sandbox cap of {cap} bytes, and the process tree was killed")
            }
            Termination::Cancelled => "cancelled: the run was cancelled and the process tree was killed".to_owned(),
        }
    }

    /// The text a model sees: the status, stdout and stderr, each stream
    /// followed by a truncation marker when it was cut.
    pub fn render(&self) -> String {
        let mut out = self.status_line();
        out.push('\n');
        for (name, bytes, cut, cap) in [
            ("stdout", &self.stdout, self.stdout_truncated, self.stdout_cap),
            ("stderr", &self.stderr, self.stderr_truncated, self.stderr_cap),
        ] {
            if bytes.is_empty() && !cut {
                continue;
            }
            let _ = writeln!(out, "--- {name} ---");
            out.push_str(&String::from_utf8_lossy(bytes));
            if !bytes.ends_with(b"\n") && !bytes.is_empty() {
                out.push('\n');
            }
            if cut {
                let _ = writeln!(out, "[{name} truncated: more than {cap} bytes; the rest was not read]");
            }
        }
        out
    }
}

/// Runs commands under one [`SandboxPolicy`].
#[derive(Debug, Clone)]
pub struct Sandbox {
    policy: SandboxPolicy,
    root: PathBuf,
}

static CALLS: AtomicU64 = AtomicU64::new(0);

/// The `PATH` of a command when neither it, the policy nor the allow list gives one.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

fn tool_error(message: String) -> SandboxError {
    SandboxError::failed(message)
}

/// Why a required sandbox refuses a machine that cannot make the read-only
/// mount namespace (without it, file modes, times and attributes outside the
/// workspace could change), and the fix.
const NO_READ_ONLY_MOUNTS: &str = "sandbox required, but this machine cannot give the command a mount namespace \
    where everything outside the workspace is read-only (it needs `mount_setattr`, Linux 5.12 or later, and mount \
    namespaces: as root, CAP_SYS_ADMIN; as another user, unprivileged user namespaces, which some distributions \
    restrict, e.g. Ubuntu's `kernel.apparmor_restrict_unprivileged_userns`). Without it a command could change the \
    modes, times and attributes of files outside the workspace. Fix: allow user namespaces, or opt out with \
    `sandbox = \"preferred\"` (confined without that layer) for this workspace";

/// The refusal of a run that created or replaced protected paths (undone),
/// or after which they could not all be checked.
fn protected_created(program: &str, root: &Path, changes: &ProtectedChanges) -> String {
    let name = |p: &PathBuf| format!("`{}`", p.strip_prefix(root).unwrap_or(p).display());
    let mut parts = Vec::new();
    if !changes.removed.is_empty() {
        let names: Vec<String> = changes.removed.iter().map(name).collect();
        parts.push(format!(
            "`{program}` created or replaced {} in the workspace: protected paths (configuration other programs \
             execute; SandboxPolicy::protected_paths, at any depth) may not be made by a sandboxed command, so the \
             sandbox removed them; make such a change yourself, outside the agent",
            names.join(", ")
        ));
    }
    if !changes.unchecked.is_empty() {
        let names: Vec<String> = changes
            .unchecked
            .iter()
            .map(|(p, why)| format!("{} {why}", name(p)))
            .collect();
        parts.push(format!(
            "after `{program}` the sandbox could not check or undo every protected path: {}; the call fails: look \
             for protected names there before running git, cargo or direnv in this workspace",
            names.join("; ")
        ));
    }
    parts.join(". ")
}

impl Sandbox {
    /// A sandbox for `policy`. With [`SandboxMode::Required`] (the default),
    /// a machine that cannot confine commands is refused here, with an error
    /// naming what is missing (Landlock, seccomp, a process limit that holds,
    /// the read-only mount namespace).
    pub fn new(policy: SandboxPolicy) -> Result<Self> {
        let root = policy.check()?;
        let sandbox = Self { policy, root };
        if sandbox.policy.mode == SandboxMode::Required {
            crate::sandbox::availability().map_err(SandboxError::config)?;
            // A trial confinement: the process limit and the paths must hold too.
            let trial = Confinement::prepare(&sandbox.spec(&sandbox.root.clone()))
                .map_err(|e| SandboxError::config(e.to_string()))?;
            if !trial.read_only_mounts() {
                return Err(SandboxError::config(NO_READ_ONLY_MOUNTS));
            }
        }
        Ok(sandbox)
    }

    /// The policy.
    pub fn policy(&self) -> &SandboxPolicy {
        &self.policy
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The same sandbox with the root read-only (for read-only workspaces).
    pub fn read_only(mut self) -> Self {
        self.policy.root_writable = false;
        self
    }

    fn spec(&self, temp: &Path) -> ConfinementSpec {
        let p = &self.policy;
        let mut spec = ConfinementSpec::new()
            .read_only(p.read_only_paths.iter().cloned())
            .devices(p.device_files.iter().cloned())
            .writable([temp.to_path_buf()])
            .network(p.network)
            .unix_sockets(p.unix_sockets)
            .cpu_seconds(p.limits.cpu_seconds)
            .memory_bytes(p.limits.memory_bytes)
            .file_size_bytes(p.limits.file_size_bytes)
            .max_processes(p.limits.processes);
        spec = if p.root_writable {
            spec.writable([self.root.clone()]).protect(p.protection(&self.root))
        } else {
            spec.read_only([self.root.clone()])
        };
        spec.hidden(p.hidden_paths.iter().cloned())
    }

    /// The working directory of `cmd`, which must resolve inside the root.
    fn cwd(&self, cmd: &SandboxCommand) -> Result<PathBuf> {
        let Some(cwd) = &cmd.cwd else {
            return Ok(self.root.clone());
        };
        let joined = self.root.join(cwd);
        let real = joined.canonicalize().map_err(|e| {
            SandboxError::refused(format!(
                "sandbox: working directory `{}` cannot be used: {e}",
                cwd.display()
            ))
        })?;
        if !real.starts_with(&self.root) || !real.is_dir() {
            return Err(SandboxError::refused(format!(
                "sandbox: working directory `{}` resolves to `{}`, which is not a directory inside the workspace root `{}`; use a directory under the root",
                cwd.display(),
                real.display(),
                self.root.display()
            )));
        }
        Ok(real)
    }

    /// Runs `cmd` and returns its bounded output; see the module docs for
    /// what is enforced. Errors: an empty argv or a cwd outside the root
    /// (`Validation`), a required sandbox the machine cannot give, a command
    /// that cannot start (`Tool`). A failing command is not an error: its
    /// status is in the output.
    pub async fn run(&self, cmd: SandboxCommand) -> Result<SandboxOutput> {
        self.run_cancellable(cmd, &CancellationToken::new()).await
    }

    /// [`Sandbox::run`], also killing the tree when `cancel` fires.
    pub async fn run_cancellable(&self, cmd: SandboxCommand, cancel: &CancellationToken) -> Result<SandboxOutput> {
        if cmd.argv.first().is_none_or(|p| p.is_empty()) {
            return Err(SandboxError::refused(
                "sandbox: the command's argv is empty; give a program to run",
            ));
        }
        let cwd = self.cwd(&cmd)?;
        let run = Execution {
            stages: vec![(cmd.argv.clone(), &[][..])],
            cwd,
            env: &cmd.env,
            stdin: cmd.stdin,
            timeout: cmd.timeout,
            output_limits: cmd.output_limits,
            system_programs: false,
        };
        self.execute(run, cancel).await
    }

    /// Runs a checked command line ([`ShellPlan`], made by the shell guard):
    /// each stage spawned directly in the sandbox with OS pipes between them,
    /// each redirection file opened here (it must be the very file the guard
    /// judged, a regular file inside the root: a path swapped for a symlink,
    /// a FIFO or a device since the check is refused), no `/bin/sh`. The
    /// status is the last stage's, as in sh; stderr is every stage's.
    /// Errors as [`Sandbox::run`], and `Validation` for a plan whose
    /// working directory or files are outside this sandbox's root.
    pub async fn run_plan(&self, plan: &ShellPlan) -> Result<SandboxOutput> {
        self.run_plan_cancellable(plan, &CancellationToken::new()).await
    }

    /// [`Sandbox::run_plan`], also killing the tree when `cancel` fires.
    pub async fn run_plan_cancellable(&self, plan: &ShellPlan, cancel: &CancellationToken) -> Result<SandboxOutput> {
        if plan.stages.is_empty() {
            return Err(SandboxError::refused("sandbox: the plan has no stage to run"));
        }
        let cwd = self.cwd(&SandboxCommand::default().with_cwd(&plan.cwd))?;
        let run = Execution {
            stages: plan
                .stages
                .iter()
                .map(|s| (s.argv.clone(), s.redirects.as_slice()))
                .collect(),
            cwd,
            env: &plan.env,
            stdin: None,
            timeout: None,
            output_limits: None,
            system_programs: true,
        };
        self.execute(run, cancel).await
    }

    /// The `PATH` a command sees: its own, else the policy's, else this
    /// process's (when `PATH` is in the allow list), else the default.
    fn search_path(&self, env: &BTreeMap<String, String>) -> std::ffi::OsString {
        if let Some(p) = env.get("PATH").or_else(|| self.policy.env.get("PATH")) {
            return p.into();
        }
        if self.policy.env_allow.iter().any(|n| n == "PATH")
            && let Some(p) = std::env::var_os("PATH")
        {
            return p;
        }
        DEFAULT_PATH.into()
    }

    /// The program file a plan stage runs: the first executable `name` in a
    /// `PATH` directory outside the workspace. Relative directories
    /// (`node_modules/.bin`, an empty entry) and directories or files inside
    /// the root are skipped: a program the command could have written there
    /// is not the program the guard judged.
    fn system_program(&self, name: &str, path: &std::ffi::OsStr, line: &str) -> Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        for dir in std::env::split_paths(path) {
            if !dir.is_absolute() {
                continue;
            }
            let Ok(file) = dir.join(name).canonicalize() else {
                continue;
            };
            if file.starts_with(&self.root) {
                continue;
            }
            if file
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            {
                return Ok(file);
            }
        }
        Err(SandboxError::refused(format!(
            "sandbox: the program `{name}` of `{line}` is not in a PATH directory outside the workspace (PATH is \
             `{}`; relative directories and those inside the workspace root `{}` are skipped, since a program \
             there is not the one the guard checked): install it in a system directory",
            path.to_string_lossy(),
            self.root.display()
        )))
    }

    /// Opens the file of a redirection, as the plan resolved it.
    fn open_redirect(&self, line: &str, target: &RedirectTarget, fd: u32, fds: &[OwnedFd]) -> Result<OwnedFd> {
        use std::os::unix::fs::OpenOptionsExt;
        let refuse = |path: &Path, why: String| {
            SandboxError::refused(format!(
                "sandbox: the redirection to `{}` of `{line}` is refused: {why}",
                path.display()
            ))
        };
        let (path, mut options) = match target {
            RedirectTarget::Dup(m) => {
                let Some(src) = fds.get(*m as usize) else {
                    return Err(SandboxError::refused(format!(
                        "sandbox: `{line}` duplicates descriptor {m}, which the runner does not know (0, 1, 2)"
                    )));
                };
                return src
                    .try_clone()
                    .map_err(|e| tool_error(format!("cannot duplicate descriptor {m}: {e}")));
            }
            RedirectTarget::Null => {
                let f = std::fs::OpenOptions::new()
                    .read(fd == 0)
                    .write(fd != 0)
                    .open("/dev/null")
                    .map_err(|e| tool_error(format!("cannot open /dev/null: {e}")))?;
                return Ok(f.into());
            }
            RedirectTarget::Read(p) => {
                let mut o = std::fs::OpenOptions::new();
                o.read(true);
                (p, o)
            }
            RedirectTarget::Write(p) | RedirectTarget::Append(p) => {
                if !self.policy.root_writable {
                    return Err(refuse(
                        p,
                        "the workspace is read-only (fix: drop the redirection, the output comes back anyway)"
                            .to_owned(),
                    ));
                }
                let mut o = std::fs::OpenOptions::new();
                o.write(true).create(true).mode(0o644);
                if matches!(target, RedirectTarget::Append(_)) {
                    o.append(true);
                }
                (p, o)
            }
        };
        if !path.starts_with(&self.root) {
            return Err(refuse(
                path,
                format!("it is outside the workspace root `{}`", self.root.display()),
            ));
        }
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(refuse(path, "it names no file".to_owned()));
        };
        // The directory first, checked to be the one the guard judged (a
        // directory on the way swapped for a symlink since the check is
        // caught here, before anything is created), then the file in it,
        // through that open directory.
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(parent)
            .map_err(|e| refuse(path, format!("its directory cannot be opened: {e}")))?;
        let fd_path = |fd: i32| PathBuf::from(format!("/proc/self/fd/{fd}"));
        let real_dir = std::fs::read_link(fd_path(dir.as_raw_fd()))
            .map_err(|e| refuse(path, format!("its directory cannot be identified (/proc/self/fd): {e}")))?;
        if real_dir != parent {
            return Err(refuse(
                path,
                format!(
                    "its directory resolves to `{}` now, not the directory the guard checked (a path changed since)",
                    real_dir.display()
                ),
            ));
        }
        // No symlink at the end, no blocking open of a FIFO, no controlling terminal.
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY);
        let file = options
            .open(fd_path(dir.as_raw_fd()).join(name))
            .map_err(|e| refuse(path, format!("it cannot be opened: {e}")))?;
        let meta = file
            .metadata()
            .map_err(|e| refuse(path, format!("it cannot be examined: {e}")))?;
        if !meta.is_file() {
            return Err(refuse(path, "it is not a regular file".to_owned()));
        }
        // What was opened must be the file the guard judged.
        let real = std::fs::read_link(fd_path(file.as_raw_fd())).map_err(|e| {
            refuse(
                path,
                format!("the opened file cannot be identified (/proc/self/fd): {e}"),
            )
        })?;
        if real != *path {
            return Err(refuse(
                path,
                format!(
                    "it resolves to `{}` now, not the file the guard checked (a path changed since)",
                    real.display()
                ),
            ));
        }
        if matches!(target, RedirectTarget::Write(_)) {
            file.set_len(0)
                .map_err(|e| refuse(path, format!("it cannot be truncated: {e}")))?;
        }
        Ok(file.into())
    }

    /// Spawns the stages of `run` confined, pipes between them, and collects
    /// the bounded output of the last stage and the stderr of all.
    async fn execute(&self, run: Execution<'_>, cancel: &CancellationToken) -> Result<SandboxOutput> {
        let program = run.stages[0].0[0].clone();
        let shown = run
            .stages
            .iter()
            .map(|(argv, _)| argv[0].as_str())
            .collect::<Vec<_>>()
            .join(" | ");
        let temp = TempDir::create(&self.policy.temp_parent)?;
        let confinement = match self.policy.mode {
            SandboxMode::Off => None,
            SandboxMode::Required => {
                let confinement = Confinement::prepare(&self.spec(temp.path()))
                    .map_err(|e| tool_error(format!("cannot run `{program}`: {e}")))?;
                if !confinement.read_only_mounts() {
                    return Err(tool_error(format!("cannot run `{program}`: {NO_READ_ONLY_MOUNTS}")));
                }
                Some(confinement)
            }
            SandboxMode::Preferred => Confinement::prepare(&self.spec(temp.path())).ok(),
        };
        // The index and refs of the root repository, which the run may not
        // change where a protected path is concerned (checked after it).
        let git_before = match &confinement {
            Some(_) if self.policy.root_writable => {
                let patterns: Vec<String> = (self.policy.protected_paths.iter())
                    .chain(&self.policy.pinned_paths)
                    .cloned()
                    .collect();
                GitState::take(&self.root, &patterns).map_err(|e| {
                    tool_error(format!(
                        "cannot run `{program}`: the sandbox records the repository's index and refs before a run \
                         (to undo a staged or committed protected path), and cannot: {e}"
                    ))
                })?
            }
            _ => None,
        };
        let pipe = || std::io::pipe().map_err(|e| tool_error(format!("cannot make a pipe: {e}")));
        let null = || -> Result<OwnedFd> {
            std::fs::File::open("/dev/null")
                .map(Into::into)
                .map_err(|e| tool_error(format!("cannot open /dev/null: {e}")))
        };
        let (out_r, out_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (mut prev, in_w): (Option<OwnedFd>, _) = match run.stdin.is_some() {
            true => {
                let (r, w) = pipe()?;
                (Some(r.into()), Some(w))
            }
            false => (None, None),
        };
        let mut children: Vec<tokio::process::Child> = Vec::new();
        let mut pids: Vec<u32> = Vec::new();
        let kill_pids = |pids: &[u32]| {
            for &pid in pids {
                tinyagents_sandbox::kill_process_group(pid);
            }
            if let Some(c) = &confinement {
                c.kill_all();
            }
        };
        let line = run
            .stages
            .iter()
            .map(|(a, _)| a.join(" "))
            .collect::<Vec<_>>()
            .join(" | ");
        let count = run.stages.len();
        for (i, (argv, redirects)) in run.stages.iter().enumerate() {
            let spawned: Result<tokio::process::Child> = (|| {
                let stdin = match prev.take() {
                    Some(fd) => fd,
                    None => null()?,
                };
                let (next, stdout): (Option<OwnedFd>, OwnedFd) = if i + 1 == count {
                    let w = out_w
                        .try_clone()
                        .map_err(|e| tool_error(format!("cannot clone a pipe: {e}")))?;
                    (None, w.into())
                } else {
                    let (r, w) = pipe()?;
                    (Some(r.into()), w.into())
                };
                prev = next;
                let stderr: OwnedFd = err_w
                    .try_clone()
                    .map_err(|e| tool_error(format!("cannot clone a pipe: {e}")))?
                    .into();
                let mut fds = vec![stdin, stdout, stderr];
                for r in redirects.iter() {
                    let fd = self.open_redirect(&line, &r.target, r.fd, &fds)?;
                    fds[r.fd as usize] = fd;
                }
                let stderr = fds.pop().expect("three descriptors");
                let stdout = fds.pop().expect("three descriptors");
                let stdin = fds.pop().expect("three descriptors");
                let path = self.search_path(run.env);
                let mut std_cmd = if run.system_programs {
                    use std::os::unix::process::CommandExt;
                    let mut c = std::process::Command::new(self.system_program(&argv[0], &path, &line)?);
                    c.arg0(&argv[0]);
                    c
                } else {
                    std::process::Command::new(&argv[0])
                };
                std_cmd.args(&argv[1..]).current_dir(&run.cwd).env_clear();
                for name in &self.policy.env_allow {
                    if let Some(value) = std::env::var_os(name) {
                        std_cmd.env(name, value);
                    }
                }
                std_cmd.envs(&self.policy.env).envs(run.env).env("PATH", &path);
                std_cmd
                    .env("HOME", temp.home())
                    .env("TMPDIR", temp.tmp())
                    .stdin(Stdio::from(stdin))
                    .stdout(Stdio::from(stdout))
                    .stderr(Stdio::from(stderr));
                match &confinement {
                    Some(c) => c.install(&mut std_cmd),
                    None => {
                        use std::os::unix::process::CommandExt;
                        std_cmd.process_group(0);
                    }
                }
                let mut command = tokio::process::Command::from(std_cmd);
                command.kill_on_drop(true);
                // Tokio panics when the runtime has no IO driver: report it instead.
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| command.spawn())) {
                    Ok(Ok(c)) => Ok(c),
                    Ok(Err(e)) => Err(tool_error(format!(
                        "cannot start `{}`{}: {e}",
                        argv[0],
                        if confinement.is_some() { " in the sandbox" } else { "" }
                    ))),
                    Err(_) => Err(tool_error(
                        "sandboxed commands need a Tokio runtime with IO enabled (`Builder::enable_all()`)".to_owned(),
                    )),
                }
            })();
            match spawned {
                Ok(child) => {
                    let pid = child.id().unwrap_or(0);
                    if pids.is_empty()
                        && let Some(c) = &confinement
                    {
                        c.started(pid);
                    }
                    pids.push(pid);
                    children.push(child);
                }
                Err(e) => {
                    // The stages already started die with the call.
                    kill_pids(&pids);
                    for c in &mut children {
                        let _ = c.wait().await;
                    }
                    return Err(e);
                }
            }
        }
        // The runner's copies of the write ends: the readers see the end of
        // output when the last stage holding one exits.
        drop((out_w, err_w, prev));
        // Each process group first, in one atomic signal each (nothing in the
        // tree can leave its group: setsid/setpgid are refused), then the
        // cgroup sweep for anything else.
        let kill = || kill_pids(&pids);
        // If this future is dropped mid-run (a timeout around the tool), the
        // tree is killed while the children are still unreaped.
        let guard = TreeGuard(&kill);

        let as_pipe = |fd: OwnedFd| {
            tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
                .map_err(|e| tool_error(format!("cannot read the output of `{shown}`: {e}")))
        };
        let mut stdout = Some(as_pipe(out_r.into())?);
        let mut stderr = Some(as_pipe(err_r.into())?);
        let stdin = match in_w {
            Some(w) => Some(
                tokio::net::unix::pipe::Sender::from_owned_fd(w.into())
                    .map_err(|e| tool_error(format!("cannot write the input of `{shown}`: {e}")))?,
            ),
            None => None,
        };

        let cap = self.policy.limits.output_bytes;
        let (out_cap, err_cap) = run.output_limits.map_or((cap, cap), |(o, e)| (o.min(cap), e.min(cap)));
        let wall = run
            .timeout
            .map_or(self.policy.limits.wall_time, |t| t.min(self.policy.limits.wall_time));
        let overflow = CancellationToken::new();
        let (mut out_buf, mut err_buf) = (Vec::new(), Vec::new());
        let (mut out_cut, mut err_cut) = (false, false);
        let input = run.stdin;

        let outcome = {
            let write = async move {
                if let (Some(mut pipe), Some(bytes)) = (stdin, input) {
                    // A command that does not read its input closes the pipe: not an error.
                    let _ = pipe.write_all(&bytes).await;
                    let _ = pipe.shutdown().await;
                }
            };
            let read_out = read_capped(&mut stdout, out_cap, &mut out_buf, &mut out_cut, &overflow);
            let read_err = read_capped(&mut stderr, err_cap, &mut err_buf, &mut err_cut, &overflow);
            let wait = async {
                let mut statuses = tokio::select! {
                    s = futures::future::join_all(children.iter_mut().map(|c| c.wait())) => s,
                    _ = overflow.cancelled() => {
                        kill();
                        futures::future::join_all(children.iter_mut().map(|c| c.wait())).await
                    }
                };
                // What the command left in the background dies with it.
                kill();
                statuses.pop().expect("at least one stage")
            };
            let work = async { tokio::join!(wait, read_out, read_err, write).0 };
            tokio::select! {
                status = work => Ok(status),
                _ = tokio::time::sleep(wall) => Err(Termination::TimedOut),
                _ = cancel.cancelled() => Err(Termination::Cancelled),
            }
        };
        // Kill before the child handles are dropped (their pids, the group
        // ids, are not reused while unreaped), then until the cgroup is empty.
        kill();
        std::mem::forget(guard);
        drop((stdout, stderr));
        drop(children);
        if let Some(c) = &confinement {
            for _ in 0..2000 {
                if c.kill_all() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let confined = confinement.is_some();
        // What the mounts could not prevent (a protected path created where
        // none stood) is undone now that the tree is gone, and refused.
        let undone = confinement
            .as_ref()
            .map(Confinement::restore_protected)
            .unwrap_or_default();
        drop(confinement);
        let git_undone = git_before.as_ref().and_then(|g| g.check_and_restore(temp.path()).err());
        if !undone.is_empty() {
            let mut err = protected_created(&program, &self.root, &undone);
            if let Some(git) = git_undone {
                err = format!("{err}. `{program}`: {git}");
            }
            return Err(tool_error(err));
        }
        if let Some(git) = git_undone {
            return Err(tool_error(format!("`{program}`: {git}")));
        }
        drop(temp);
        let termination = match outcome {
            Err(t) => t,
            Ok(_) if out_cut || err_cut => Termination::OutputLimit,
            Ok(Ok(status)) => {
                use std::os::unix::process::ExitStatusExt;
                match (status.code(), status.signal()) {
                    (Some(c), _) => Termination::Exited(c),
                    (None, Some(s)) => Termination::Signaled(s),
                    (None, None) => Termination::Signaled(0),
                }
            }
            Ok(Err(e)) => return Err(tool_error(format!("waiting for `{shown}` failed: {e}"))),
        };
        Ok(SandboxOutput {
            termination,
            stdout: out_buf,
            stderr: err_buf,
            stdout_truncated: out_cut,
            stderr_truncated: err_cut,
            confined,
            stdout_cap: out_cap,
            stderr_cap: err_cap,
            wall_time: wall,
        })
    }
}

/// What one run executes: the stages (argv and redirections), where, with
/// what environment and input, and its bounds.
struct Execution<'a> {
    stages: Vec<(Vec<String>, &'a [PlanRedirect])>,
    cwd: PathBuf,
    env: &'a BTreeMap<String, String>,
    stdin: Option<Vec<u8>>,
    timeout: Option<Duration>,
    output_limits: Option<(usize, usize)>,
    /// Whether each program is looked up only in `PATH` directories outside
    /// the workspace (a checked plan), not as `execvp` would.
    system_programs: bool,
}

/// Reads `pipe` into `buf`, at most `cap` bytes; one byte more sets `cut`
/// and fires `overflow` (the caller then kills the tree). Never reads more
/// than `cap + 8 KiB` in all.
async fn read_capped<R: AsyncRead + Unpin>(
    pipe: &mut Option<R>,
    cap: usize,
    buf: &mut Vec<u8>,
    cut: &mut bool,
    overflow: &CancellationToken,
) {
    // The pipe stays open (it is the caller's) until the tree is killed: a
    // pipe closed at the cap would let the writer die of SIGPIPE and the
    // script go on to its next line before the kill.
    let Some(pipe) = pipe.as_mut() else { return };
    let mut chunk = [0u8; 8192];
    loop {
        let n = tokio::select! {
            r = pipe.read(&mut chunk) => match r {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            _ = overflow.cancelled() => return,
        };
        let room = cap - buf.len();
        if n > room {
            buf.extend_from_slice(&chunk[..room]);
            *cut = true;
            overflow.cancel();
            return;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Kills the tree when dropped (forgotten on the normal path).
struct TreeGuard<'a>(&'a (dyn Fn() + Sync));

impl Drop for TreeGuard<'_> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// The per-call private directory (`home/` and `tmp/` inside), mode 0700,
/// removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn create(parent: &Path) -> Result<Self> {
        let n = CALLS.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = parent.join(format!("tinyagents-sandbox-{}-{n}-{nanos:08x}", std::process::id()));
        let mut builder = std::fs::DirBuilder::new();
        builder.mode(0o700);
        builder.create(&dir).map_err(|e| {
            tool_error(format!(
                "cannot create the sandbox's private temp dir `{}`: {e}; set SandboxPolicy::temp_parent to a writable directory",
                dir.display()
            ))
        })?;
        let this = Self(dir);
        for sub in ["home", "tmp"] {
            builder
                .create(this.0.join(sub))
                .map_err(|e| tool_error(format!("cannot create `{}`: {e}", this.0.join(sub).display())))?;
        }
        Ok(this)
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn home(&self) -> PathBuf {
        self.0.join("home")
    }

    fn tmp(&self) -> PathBuf {
        self.0.join("tmp")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
