//! Preparing a confinement in the parent: the Landlock ruleset, the seccomp
//! program, the rlimits and the process-limit mechanism. Everything here may
//! allocate; the child (module `sys`) only reads what is built here.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule, TargetArch,
};

use crate::cgroup::Cgroup;
use crate::protect::Protect;
use crate::{sys, Availability, ConfinementSpec, ProcessLimitMechanism, SetupError};

pub(crate) fn availability() -> Availability {
    let (abi, detail) = sys::landlock_abi();
    let seccomp = std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
        .unwrap_or(false)
        && target_arch().is_some();
    Availability {
        landlock_abi: abi,
        landlock_detail: detail,
        seccomp,
        root: sys::is_root(),
    }
}

fn target_arch() -> Option<TargetArch> {
    std::env::consts::ARCH.try_into().ok()
}

/// A resource limit to set in the child: (resource, soft = hard value).
pub(crate) type Rlimit = (libc::__rlimit_resource_t, u64);

/// The mount namespace the child makes for itself before Landlock: every
/// mount read-only except binds of the writable paths, so what Landlock does
/// not govern — `chmod`, `chown`, `utimes`, extended attributes, which need
/// no open file — cannot reach a file outside the writable paths either;
/// the hidden directories covered by an empty `tmpfs` (the allowed paths
/// beneath them bound back in); the protected paths bound read-only.
pub(crate) struct Mounts {
    /// The writable paths, NUL-terminated.
    pub(crate) writable: Vec<CString>,
    /// The hidden directories, shallowest first, each with its holes.
    pub(crate) hidden: Vec<Hidden>,
    /// `(path, read_only)` binds of protected and pinned paths, parents first.
    pub(crate) protected: Vec<(CString, bool)>,
    /// For a user other than root: the user namespace's maps (the user mapped
    /// to itself), which give the child the right to mount in its namespace.
    pub(crate) user: Option<UserMaps>,
}

/// The most allowed paths bound back into one hidden directory (the child
/// keeps their mount descriptors in a fixed array: it may not allocate).
pub(crate) const MAX_HOLES: usize = 64;

/// One hidden directory: the `tmpfs` over it and what is put back.
pub(crate) struct Hidden {
    /// The directory.
    pub(crate) path: CString,
    /// What is put back, in order: the directories to make in the `tmpfs`
    /// first, then the symlinks, files and directories.
    pub(crate) holes: Vec<Hole>,
}

/// One entry made in a hidden directory's `tmpfs`.
pub(crate) enum Hole {
    /// An empty directory (on the way to an allowed path).
    Dir(CString),
    /// A symlink with this target (an allowed path, or one on the way to it, is a symlink).
    Symlink {
        /// Where the symlink is made.
        path: CString,
        /// Its target, as read from the real one.
        target: CString,
    },
    /// The real file or directory at this path bound back (a mount point is made first).
    Bind {
        /// The path (the source, read before the `tmpfs` covers it, and the mount point).
        path: CString,
        /// Whether it is a directory (else a file is made as the mount point).
        dir: bool,
    },
}

/// `uid_map` and `gid_map` of a user namespace mapping the user to itself.
pub(crate) struct UserMaps {
    pub(crate) uid_map: Vec<u8>,
    pub(crate) gid_map: Vec<u8>,
}

fn c_path(p: &Path) -> Result<CString, SetupError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| SetupError::Path {
        path: p.to_path_buf(),
        detail: "a sandbox path may not contain a NUL byte".to_owned(),
    })
}

impl Mounts {
    fn new(spec: &ConfinementSpec, root: bool, protect: &Protect) -> Result<Self, SetupError> {
        let mut writable = Vec::with_capacity(spec.writable_paths.len());
        for p in &spec.writable_paths {
            writable.push(c_path(p)?);
        }
        let mut protected = Vec::with_capacity(protect.binds.len());
        for (p, read_only) in &protect.binds {
            protected.push((c_path(p)?, *read_only));
        }
        let user = (!root).then(|| {
            let (uid, gid) = sys::ids();
            UserMaps {
                uid_map: format!("{uid} {uid} 1\n").into_bytes(),
                gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            }
        });
        Ok(Self {
            writable,
            hidden: plan_hidden(spec)?,
            protected,
            user,
        })
    }
}

/// Which hidden directories get a `tmpfs`, and what goes back into each.
///
/// The allowed paths (readable, writable, device files) are what must stay
/// visible: each, as given and resolved, and the symlinks on the way to it.
/// A hidden directory is skipped when it does not exist, is a symlink, is
/// itself an allowed path, or lies inside another hidden one outside every
/// path bound back there (it is invisible already). Each visible path is put
/// back in the deepest hidden directory holding it.
fn plan_hidden(spec: &ConfinementSpec) -> Result<Vec<Hidden>, SetupError> {
    let allowed: Vec<&PathBuf> = spec
        .read_only_paths
        .iter()
        .chain(&spec.writable_paths)
        .chain(&spec.device_files)
        .filter(|p| p.is_absolute())
        .collect();
    // what must stay visible: each allowed path as given and resolved
    let mut visible: Vec<PathBuf> = Vec::new();
    for a in &allowed {
        if std::fs::symlink_metadata(a).is_err() {
            continue;
        }
        visible.push(lexical(a));
        if let Ok(real) = std::fs::canonicalize(a) {
            visible.push(real);
        }
    }
    visible.sort();
    visible.dedup();
    let mut hidden: Vec<PathBuf> = spec
        .hidden_paths
        .iter()
        .map(|h| lexical(h))
        .filter(|h| h.is_absolute() && h.parent().is_some())
        .filter(|h| std::fs::symlink_metadata(h).is_ok_and(|m| m.is_dir()))
        .filter(|h| !allowed.iter().any(|a| lexical(a) == *h))
        .collect();
    hidden.sort_by_key(|h| h.components().count());
    hidden.dedup();
    let mut active: Vec<PathBuf> = Vec::new();
    for h in hidden {
        let covering = active
            .iter()
            .filter(|a| h.starts_with(a))
            .max_by_key(|a| a.components().count());
        let reachable = match covering {
            None => true,
            // visible again only inside a directory bound back into `a`
            Some(a) => visible
                .iter()
                .any(|v| v.starts_with(a) && v != a && h.starts_with(v) && v.is_dir()),
        };
        if reachable {
            active.push(h);
        }
    }
    let mut out = Vec::new();
    for h in &active {
        let mut holes: Vec<Hole> = Vec::new();
        // directories made, and paths put back whole (a bind or a symlink:
        // nothing is made beneath them, the real tree shows through)
        let (mut dirs, mut whole): (Vec<PathBuf>, Vec<PathBuf>) = (Vec::new(), Vec::new());
        for v in &visible {
            let deepest = active
                .iter()
                .filter(|a| v.starts_with(a) && v != *a)
                .max_by_key(|a| a.components().count());
            if deepest != Some(h) {
                continue;
            }
            let rel = v.strip_prefix(h).unwrap_or(v);
            let mut at = h.clone();
            let parts: Vec<_> = rel.components().collect();
            for (i, part) in parts.iter().enumerate() {
                at.push(part);
                if whole.contains(&at) {
                    break;
                }
                if dirs.contains(&at) {
                    continue;
                }
                let Ok(meta) = std::fs::symlink_metadata(&at) else {
                    break;
                };
                if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&at).map_err(|e| SetupError::Path {
                        path: at.clone(),
                        detail: format!("cannot read the symlink: {e}"),
                    })?;
                    holes.push(Hole::Symlink {
                        path: c_path(&at)?,
                        target: c_path(&target)?,
                    });
                    whole.push(at.clone());
                    break;
                }
                if i + 1 == parts.len() {
                    holes.push(Hole::Bind {
                        path: c_path(&at)?,
                        dir: meta.is_dir(),
                    });
                    whole.push(at.clone());
                } else if meta.is_dir() {
                    holes.push(Hole::Dir(c_path(&at)?));
                    dirs.push(at.clone());
                } else {
                    break;
                }
            }
        }
        if holes.iter().filter(|h| matches!(h, Hole::Bind { .. })).count() > MAX_HOLES {
            return Err(SetupError::Path {
                path: h.clone(),
                detail: format!(
                    "more than {MAX_HOLES} allowed paths lie inside this hidden directory: allow a common parent \
                     instead"
                ),
            });
        }
        // directories first (binds may land inside them), binds outermost first
        holes.sort_by_key(|hole| match hole {
            Hole::Dir(p) => (0, p.as_bytes().len()),
            Hole::Symlink { path, .. } => (1, path.as_bytes().len()),
            Hole::Bind { path, .. } => (2, path.as_bytes().len()),
        });
        out.push(Hidden {
            path: c_path(h)?,
            holes,
        });
    }
    Ok(out)
}

/// `p` with `.` and `..` resolved lexically (the sandbox's paths are absolute).
fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether a child can make the read-only mount namespace on this machine
/// (a kernel with `mount_setattr`, 5.12 or later, and mount namespaces —
/// for a user other than root, unprivileged user namespaces): tried once,
/// by a child that makes one and exits.
pub(crate) fn read_only_mounts_work() -> bool {
    static WORKS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *WORKS.get_or_init(|| {
        let Ok(mounts) = Mounts::new(&ConfinementSpec::new(), sys::is_root(), &Protect::default()) else {
            return false;
        };
        sys::probe_mounts(std::sync::Arc::new(mounts))
    })
}

/// Everything the child needs, built in the parent.
pub(crate) struct Prepared {
    /// The read-only mount namespace, where the machine can make one.
    pub(crate) mounts: Option<Mounts>,
    pub(crate) landlock: OwnedFd,
    /// seccomp programs, installed in order (the kernel runs them all; the strictest answer wins).
    pub(crate) filters: Vec<BpfProgram>,
    pub(crate) rlimits: Vec<Rlimit>,
    pub(crate) cgroup: Option<Cgroup>,
    pub(crate) root: bool,
    pub(crate) cap_last: u32,
    /// The protected and pinned paths, and their state before the run.
    pub(crate) protect: Protect,
}

impl Prepared {
    pub(crate) fn new(spec: &ConfinementSpec) -> Result<Self, SetupError> {
        let avail = availability();
        avail.check()?;
        let landlock = crate::landlock::ruleset(spec, avail.landlock_abi)?;
        let filters = vec![
            seccomp_program(spec.allow_network, spec.allow_unix_sockets)?,
            clone3_program()?,
        ];

        let mut rlimits: Vec<Rlimit> = vec![(libc::RLIMIT_CORE, 0)];
        if let Some(v) = spec.cpu_seconds {
            rlimits.push((libc::RLIMIT_CPU, v));
        }
        if let Some(v) = spec.memory_bytes {
            rlimits.push((libc::RLIMIT_AS, v));
        }
        if let Some(v) = spec.file_size_bytes {
            rlimits.push((libc::RLIMIT_FSIZE, v));
        }
        let mut cgroup = None;
        if let Some(max) = spec.max_processes {
            match Cgroup::create(max) {
                Ok(c) => cgroup = Some(c),
                Err(why) if avail.root => {
                    return Err(SetupError::ProcessLimitUnavailable {
                        detail: format!(
                            "running as root, where the kernel does not enforce RLIMIT_NPROC, and no pids cgroup: {why}"
                        ),
                    })
                }
                Err(_) => rlimits.push((libc::RLIMIT_NPROC, user_tasks().saturating_add(max))),
            }
        }
        let protect = Protect::new(spec.protection.as_ref(), &spec.writable_paths)?;
        let mounts = if read_only_mounts_work() {
            Some(Mounts::new(spec, avail.root, &protect)?)
        } else {
            None
        };
        let cap_last = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(63);
        Ok(Self {
            mounts,
            landlock,
            filters,
            rlimits,
            cgroup,
            root: avail.root,
            cap_last,
            protect,
        })
    }

    pub(crate) fn process_limit(&self) -> ProcessLimitMechanism {
        if self.cgroup.is_some() {
            ProcessLimitMechanism::Cgroup
        } else if self.rlimits.iter().any(|(r, _)| *r == libc::RLIMIT_NPROC) {
            ProcessLimitMechanism::Rlimit
        } else {
            ProcessLimitMechanism::None
        }
    }

    /// Kills every process of the cgroup; `true` when it is empty (or there is none).
    pub(crate) fn kill_cgroup(&self) -> bool {
        self.cgroup.as_ref().is_none_or(Cgroup::kill_all)
    }
}

/// The seccomp program: `setsid`/`setpgid` (leaving the process group),
/// `TIOCSTI` (typing into a terminal), `socket()` for the families not
/// allowed (network ones without network, `AF_UNIX` unless allowed) and,
/// without network, `io_uring_setup` fail with `EPERM`.
fn seccomp_program(allow_network: bool, allow_unix: bool) -> Result<BpfProgram, SetupError> {
    let fail = |e: seccompiler::BackendError| SetupError::SeccompUnavailable { detail: e.to_string() };
    let arch = target_arch().ok_or_else(|| SetupError::SeccompUnavailable {
        detail: format!("architecture `{}` is not supported", std::env::consts::ARCH),
    })?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_setsid, Vec::new());
    rules.insert(libc::SYS_setpgid, Vec::new());
    // `Ioctl` is `c_ulong` on glibc and `c_int` on musl: the cast is needed there.
    #[allow(clippy::unnecessary_cast)]
    let tiocsti =
        SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, libc::TIOCSTI as u64).map_err(fail)?;
    rules.insert(libc::SYS_ioctl, vec![SeccompRule::new(vec![tiocsti]).map_err(fail)?]);
    let family = |op| SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, libc::AF_UNIX as u64);
    match (allow_network, allow_unix) {
        (true, true) => {}
        (true, false) => {
            let unix = family(SeccompCmpOp::Eq).map_err(fail)?;
            rules.insert(libc::SYS_socket, vec![SeccompRule::new(vec![unix]).map_err(fail)?]);
        }
        (false, true) => {
            let not_unix = family(SeccompCmpOp::Ne).map_err(fail)?;
            rules.insert(libc::SYS_socket, vec![SeccompRule::new(vec![not_unix]).map_err(fail)?]);
        }
        (false, false) => {
            rules.insert(libc::SYS_socket, Vec::new());
        }
    }
    if !allow_network {
        rules.insert(libc::SYS_io_uring_setup, Vec::new());
    }
    // No new user namespaces (a large kernel attack surface, and the way to
    // capabilities inside one): `unshare` is refused, `clone` with CLONE_NEWUSER too.
    rules.insert(libc::SYS_unshare, Vec::new());
    // Reaching into other processes of the same user (the agent among them),
    // which Landlock does not govern: their resource limits (`prlimit64` on
    // another pid; pid 0, the caller, is how `setrlimit` works), the kernel
    // keyrings the agent's session shares, and the debugging and
    // introspection interfaces (also a large kernel attack surface).
    let other_pid = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Ne, 0).map_err(fail)?;
    rules.insert(
        libc::SYS_prlimit64,
        vec![SeccompRule::new(vec![other_pid]).map_err(fail)?],
    );
    for nr in [
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
    ] {
        rules.insert(nr, Vec::new());
    }
    // No setuid or setgid file: one the command made (as root, a root-owned
    // copy of a shell in the workspace) would give whoever runs it later,
    // outside the sandbox, the command's user. `chmod` and friends setting
    // either bit are refused, and so is creating a file with either.
    let set_id = |arg: u8| -> Result<Vec<SeccompRule>, SetupError> {
        [libc::S_ISUID, libc::S_ISGID]
            .into_iter()
            .map(|bit| {
                let bit = u64::from(bit);
                SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(bit), bit)
                    .and_then(|c| SeccompRule::new(vec![c]))
                    .map_err(fail)
            })
            .collect()
    };
    let set_uid = |arg: u8| -> Result<Vec<SeccompRule>, SetupError> {
        let bit = u64::from(libc::S_ISUID);
        let c = SeccompCondition::new(arg, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(bit), bit).map_err(fail)?;
        Ok(vec![SeccompRule::new(vec![c]).map_err(fail)?])
    };
    // a file is created by `O_CREAT`, or unnamed by `O_TMPFILE` (which
    // `linkat` can name later): either with a set-id mode is refused
    let created_set_id = |flags: u8, mode: u8| -> Result<Vec<SeccompRule>, SetupError> {
        let mut rules = Vec::new();
        for creates in [libc::O_CREAT as u64, libc::O_TMPFILE as u64] {
            for bit in [libc::S_ISUID, libc::S_ISGID] {
                let bit = u64::from(bit);
                let creating =
                    SeccompCondition::new(flags, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(creates), creates)
                        .map_err(fail)?;
                let with_bit = SeccompCondition::new(mode, SeccompCmpArgLen::Dword, SeccompCmpOp::MaskedEq(bit), bit)
                    .map_err(fail)?;
                rules.push(SeccompRule::new(vec![creating, with_bit]).map_err(fail)?);
            }
        }
        Ok(rules)
    };
    // `chmod` of a directory keeps (and `cp -a` restores) the setgid bit of a
    // group-shared directory, and seccomp cannot tell a directory from a
    // file: only setuid is refused there.
    rules.insert(libc::SYS_fchmod, set_uid(1)?);
    rules.insert(libc::SYS_fchmodat, set_uid(2)?);
    rules.insert(libc::SYS_fchmodat2, set_uid(2)?);
    rules.insert(libc::SYS_mknodat, set_id(2)?);
    rules.insert(libc::SYS_openat, created_set_id(2, 3)?);
    // the older calls, where the architecture still has them
    #[cfg(target_arch = "x86_64")]
    {
        rules.insert(libc::SYS_chmod, set_uid(1)?);
        rules.insert(libc::SYS_creat, set_id(1)?);
        rules.insert(libc::SYS_mknod, set_id(1)?);
        rules.insert(libc::SYS_open, created_set_id(1, 2)?);
    }
    let newuser = libc::CLONE_NEWUSER as u64;
    let userns =
        SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::MaskedEq(newuser), newuser).map_err(fail)?;
    rules.insert(libc::SYS_clone, vec![SeccompRule::new(vec![userns]).map_err(fail)?]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(fail)?;
    let program: BpfProgram = filter.try_into().map_err(fail)?;
    Ok(prepend_x32_guard(program))
}

/// `clone3` passes its flags in memory, where seccomp cannot look: it
/// answers `ENOSYS`, so the C library falls back to `clone`, whose flags the
/// main program checks (and `openat2` likewise, for `openat`). (A separate program, because the main one answers `EPERM`.)
fn clone3_program() -> Result<BpfProgram, SetupError> {
    let fail = |e: seccompiler::BackendError| SetupError::SeccompUnavailable { detail: e.to_string() };
    let arch = target_arch().ok_or_else(|| SetupError::SeccompUnavailable {
        detail: format!("architecture `{}` is not supported", std::env::consts::ARCH),
    })?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_clone3, Vec::new());
    // `openat2` passes its mode in memory too: `ENOSYS`, and the C library's
    // `openat`, whose mode the main program checks, is used instead.
    rules.insert(libc::SYS_openat2, Vec::new());
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(fail)?;
    filter.try_into().map_err(fail)
}

/// On x86_64, x32 system calls carry the same audit arch with bit 30 set in
/// the number, so a rule on `socket` would not see them: refuse them all.
fn prepend_x32_guard(program: BpfProgram) -> BpfProgram {
    if std::env::consts::ARCH != "x86_64" {
        return program;
    }
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    let guard = [
        // A = seccomp_data.nr (offset 0)
        seccompiler::sock_filter {
            code: 0x20,
            jt: 0,
            jf: 0,
            k: 0,
        },
        // if A >= X32_SYSCALL_BIT fall through to the return, else skip it
        seccompiler::sock_filter {
            code: 0x35,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        seccompiler::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        },
    ];
    let mut out = Vec::with_capacity(program.len() + guard.len());
    out.extend_from_slice(&guard);
    out.extend(program);
    out
}

/// The number of tasks (threads included) whose real user is ours: the count
/// `RLIMIT_NPROC` is checked against.
fn user_tasks() -> u64 {
    let uid = sys::real_uid().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut total = 0u64;
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
            continue;
        };
        let mine = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|l| l.split_whitespace().next())
            == Some(uid.as_str());
        if mine {
            total += status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|l| l.trim().parse::<u64>().ok())
                .unwrap_or(1);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_has_tasks_and_every_socket_policy_compiles() {
        assert!(user_tasks() >= 1, "this test's own task counts");
        let mut lengths = Vec::new();
        for (net, unix) in [(false, false), (false, true), (true, false), (true, true)] {
            let program = seccomp_program(net, unix).unwrap();
            if std::env::consts::ARCH == "x86_64" {
                assert_eq!(
                    program[2].k,
                    libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
                    "x32 guard first"
                );
            }
            lengths.push(program.len());
        }
        // Allowing everything leaves fewer rules than refusing something.
        assert!(lengths[3] < lengths[0] && lengths[3] < lengths[1]);
    }

    #[test]
    fn missing_pieces_are_named_with_the_fix() {
        let none = Availability {
            landlock_abi: 0,
            landlock_detail: Some("ENOSYS: the kernel was built without Landlock".to_owned()),
            seccomp: true,
            root: false,
        };
        let msg = none.check().unwrap_err().to_string();
        assert!(msg.contains("Landlock ABI v1+ is not available"), "{msg}");
        assert!(msg.contains("ENOSYS"), "{msg}");
        assert!(
            msg.contains("CONFIG_SECURITY_LANDLOCK") && msg.contains("lsm="),
            "{msg}"
        );
        assert!(msg.contains("SandboxMode::Off"), "{msg}");
        let no_seccomp = Availability {
            landlock_abi: 3,
            seccomp: false,
            ..none
        };
        assert!(no_seccomp
            .check()
            .unwrap_err()
            .to_string()
            .contains("CONFIG_SECCOMP_FILTER"));
        let nproc = SetupError::ProcessLimitUnavailable {
            detail: "running as root".to_owned(),
        }
        .to_string();
        assert!(
            nproc.contains("pids controller") && nproc.contains("process limit to none"),
            "{nproc}"
        );
    }
}
