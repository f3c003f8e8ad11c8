//! Raw system calls: the child's confinement between `fork` and `exec`, and
//! the few parent-side calls (`kill`, the Landlock ABI probe and ruleset,
//! uids).
//!
//! Why `unsafe` is allowed here (and nowhere else in the workspace):
//! `CommandExt::pre_exec` is an `unsafe fn` because its closure runs in the
//! forked child of a possibly multi-threaded process, where only
//! async-signal-safe code may run; and the confinement itself (Landlock
//! `restrict_self`, the seccomp filter, `setrlimit`, `capset`, `prctl`) has no
//! safe wrapper that avoids allocating. The closure below therefore does not
//! allocate, lock or log: it reads data prepared by the parent (`Prepared`)
//! and makes raw syscalls, returning the OS error of the first that fails.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::sync::Arc;

use crate::landlock::RulesetAttr;
use crate::linux::{Hidden, Hole, Mounts, Prepared, MAX_HOLES};

fn check(rc: libc::c_long) -> io::Result<()> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Installs the confinement as a `pre_exec` hook of `cmd`.
pub(crate) fn install(cmd: &mut std::process::Command, prepared: Arc<Prepared>) {
    // SAFETY: `confine` is async-signal-safe: it only makes raw syscalls on
    // data the parent built before forking (no allocation, no locks).
    unsafe {
        cmd.pre_exec(move || confine(&prepared));
    }
}

/// The child's side, in order: join the pids cgroup, set rlimits, mark
/// inherited descriptors close-on-exec, `no_new_privs`, Landlock, drop every
/// capability, then the seccomp filter (last: it could refuse what follows).
fn confine(p: &Prepared) -> io::Result<()> {
    // SAFETY (whole function): every pointer passed is to a live local or to
    // `p`, which outlives the call; the syscalls do not retain them.
    unsafe {
        if let Some(cg) = &p.cgroup {
            let zero = b"0";
            let n = libc::write(cg.procs.as_raw_fd(), zero.as_ptr().cast(), zero.len());
            if n != 1 {
                return Err(if n < 0 {
                    io::Error::last_os_error()
                } else {
                    io::Error::from_raw_os_error(libc::EIO)
                });
            }
        }
        for &(resource, value) in &p.rlimits {
            let limit = libc::rlimit {
                rlim_cur: value as libc::rlim_t,
                rlim_max: value as libc::rlim_t,
            };
            check(libc::setrlimit(resource, &limit) as libc::c_long)?;
        }
        // Descriptors the parent leaked without O_CLOEXEC must not reach the
        // command. Old kernels (< 5.11) lack the flag: their std-opened
        // descriptors are close-on-exec already.
        let _ = libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, libc::CLOSE_RANGE_CLOEXEC);
        // Before Landlock, which forbids mounting, and before the capabilities go.
        if let Some(m) = &p.mounts {
            read_only_mounts(m)?;
        }
        check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long)?;
        check(libc::syscall(
            libc::SYS_landlock_restrict_self,
            p.landlock.as_raw_fd(),
            0u32,
        ))?;
        // Capabilities: ambient (ignore EINVAL on kernels without them),
        // the bounding set (root only: it needs CAP_SETPCAP), then the sets.
        let _ = libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
        if p.root {
            for cap in 0..=p.cap_last {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) < 0
                    && io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
                {
                    return Err(io::Error::last_os_error());
                }
            }
        }
        let header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData::default(); 2];
        check(libc::syscall(
            libc::SYS_capset,
            &header as *const CapHeader,
            data.as_ptr(),
        ))?;
        for bpf in &p.filters {
            let program = libc::sock_fprog {
                len: bpf.len() as libc::c_ushort,
                // Same layout: both are the kernel's `struct sock_filter`.
                filter: bpf.as_ptr() as *mut libc::sock_filter,
            };
            check(libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &program as *const libc::sock_fprog,
            ))?;
        }
    }
    Ok(())
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// Makes the mount at `path` read-only or writable (`mount_setattr(2)`),
/// with every mount beneath it when `recursive`.
///
/// # Safety
/// Async-signal-safe: one raw syscall on a NUL-terminated path and a local.
unsafe fn set_read_only(path: &std::ffi::CStr, read_only: bool, recursive: bool) -> io::Result<()> {
    unsafe {
        let attr = MountAttr {
            attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
            attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
            propagation: 0,
            userns_fd: 0,
        };
        check(libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            if recursive { AT_RECURSIVE } else { 0 },
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ))
    }
}

/// Binds `path` onto itself, with the mounts beneath it (a mount point of its own).
///
/// # Safety
/// Async-signal-safe: one raw syscall on a NUL-terminated path.
unsafe fn bind_onto_itself(path: &std::ffi::CStr) -> io::Result<()> {
    unsafe {
        check(libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        ) as libc::c_long)
    }
}

/// Writes `data` to the file `path` (a `/proc/self` control file).
///
/// # Safety
/// Async-signal-safe: raw syscalls on a NUL-terminated path and a borrowed buffer.
unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> io::Result<()> {
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = io::Error::last_os_error();
        libc::close(fd);
        if n < 0 {
            return Err(err);
        }
        if n as usize != data.len() {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(())
    }
}

/// A mount namespace of the child's own (with a user namespace mapping the
/// user to itself, for a user other than root) where every mount is
/// read-only except a bind of each writable path.
///
/// # Safety
/// Async-signal-safe: raw syscalls on data prepared by the parent.
unsafe fn read_only_mounts(m: &Mounts) -> io::Result<()> {
    unsafe {
        match &m.user {
            Some(maps) => {
                check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as libc::c_long)?;
                write_file(c"/proc/self/setgroups", b"deny")?;
                write_file(c"/proc/self/uid_map", &maps.uid_map)?;
                write_file(c"/proc/self/gid_map", &maps.gid_map)?;
            }
            None => check(libc::unshare(libc::CLONE_NEWNS) as libc::c_long)?,
        }
        // nothing done here reaches the parent's namespace
        check(libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) as libc::c_long)?;
        for h in &m.hidden {
            hide(h)?;
        }
        for path in &m.writable {
            bind_onto_itself(path)?;
        }
        set_read_only(c"/", true, true)?;
        for path in &m.writable {
            set_read_only(path, false, false)?;
        }
        // Protected paths inside the writable ones: each bound onto itself (a
        // mount point cannot be renamed, replaced or removed), read-only with
        // everything beneath it, or (pinned) writable.
        for (path, read_only) in &m.protected {
            bind_onto_itself(path)?;
            set_read_only(path, *read_only, *read_only)?;
        }
        // The working directory was entered before the binds, through the mount
        // beneath them (now read-only): enter it again by its path, which now
        // resolves through the binds. A stack buffer: nothing is allocated.
        let mut cwd = [0u8; libc::PATH_MAX as usize];
        if libc::getcwd(cwd.as_mut_ptr().cast(), cwd.len()).is_null() {
            return Err(io::Error::last_os_error());
        }
        check(libc::chdir(cwd.as_ptr().cast()) as libc::c_long)?;
        Ok(())
    }
}

const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

/// Covers the hidden directory `h` with an empty `tmpfs`, puts its holes
/// back (each allowed path's real tree, cloned before it is covered, moved
/// onto a mount point made in the `tmpfs`), then makes the `tmpfs` read-only.
///
/// # Safety
/// Async-signal-safe: raw syscalls on data prepared by the parent, and a
/// fixed array of descriptors on the stack.
unsafe fn hide(h: &Hidden) -> io::Result<()> {
    unsafe {
        let mut trees = [-1 as libc::c_int; MAX_HOLES];
        let mut n = 0;
        let result = (|| {
            for hole in &h.holes {
                if let Hole::Bind { path, .. } = hole {
                    if n == MAX_HOLES {
                        return Err(io::Error::from_raw_os_error(libc::E2BIG));
                    }
                    let fd = libc::syscall(
                        libc::SYS_open_tree,
                        libc::AT_FDCWD,
                        path.as_ptr(),
                        OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
                    );
                    check(fd)?;
                    trees[n] = fd as libc::c_int;
                    n += 1;
                }
            }
            check(libc::mount(
                c"tmpfs".as_ptr(),
                h.path.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"mode=0755,size=1m".as_ptr().cast(),
            ) as libc::c_long)?;
            let mut next = 0;
            for hole in &h.holes {
                match hole {
                    Hole::Dir(path) => check(libc::mkdir(path.as_ptr(), 0o755) as libc::c_long)?,
                    Hole::Symlink { path, target } => {
                        check(libc::symlink(target.as_ptr(), path.as_ptr()) as libc::c_long)?
                    }
                    Hole::Bind { path, dir } => {
                        if *dir {
                            check(libc::mkdir(path.as_ptr(), 0o755) as libc::c_long)?;
                        } else {
                            let fd = libc::open(
                                path.as_ptr(),
                                libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                                0o644,
                            );
                            check(fd as libc::c_long)?;
                            libc::close(fd);
                        }
                        check(libc::syscall(
                            libc::SYS_move_mount,
                            trees[next],
                            c"".as_ptr(),
                            libc::AT_FDCWD,
                            path.as_ptr(),
                            MOVE_MOUNT_F_EMPTY_PATH,
                        ))?;
                        next += 1;
                    }
                }
            }
            set_read_only(&h.path, true, false)
        })();
        for fd in &trees[..n] {
            libc::close(*fd);
        }
        result
    }
}

/// Whether a child can make the read-only mount namespace of `mounts`: one
/// `/bin/sh -c :` run in it.
pub(crate) fn probe_mounts(mounts: Arc<Mounts>) -> bool {
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.args(["-c", ":"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    // SAFETY: `read_only_mounts` is async-signal-safe (raw syscalls on data
    // the parent built before forking).
    unsafe {
        cmd.pre_exec(move || read_only_mounts(&mounts));
    }
    cmd.status().is_ok_and(|s| s.success())
}

/// The effective user and group ids (what a new user namespace maps).
pub(crate) fn ids() -> (u32, u32) {
    // SAFETY: geteuid(2) and getegid(2) cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// SIGKILL to process group `pgid`.
pub(crate) fn kill_group(pgid: u32) {
    if let Ok(pgid) = libc::pid_t::try_from(pgid)
        && pgid > 1
    {
        // SAFETY: kill(2) takes plain integers.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// SIGKILL to process `pid`.
pub(crate) fn kill_pid(pid: i32) {
    if pid > 1 {
        // SAFETY: kill(2) takes plain integers.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// The Landlock ABI version, or 0 and why not.
pub(crate) fn landlock_abi() -> (i32, Option<String>) {
    const LANDLOCK_CREATE_RULESET_VERSION: u32 = 1;
    // SAFETY: a NULL attribute with size 0 and the VERSION flag only queries.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if rc >= 1 {
        return (i32::try_from(rc).unwrap_or(i32::MAX), None);
    }
    let err = io::Error::last_os_error();
    let why = match err.raw_os_error() {
        Some(libc::ENOSYS) => "ENOSYS: the kernel was built without Landlock".to_owned(),
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP: Landlock is built in but disabled at boot".to_owned(),
        _ => format!("landlock_create_ruleset failed: {err}"),
    };
    (0, Some(why))
}

/// `landlock_create_ruleset(2)`: a new ruleset handling what `attr` says;
/// `size` is how many bytes of `attr` the running kernel reads.
pub(crate) fn landlock_create_ruleset(attr: &RulesetAttr, size: usize) -> io::Result<OwnedFd> {
    let size = size.min(std::mem::size_of::<RulesetAttr>());
    // SAFETY: `attr` is a live `repr(C)` struct of at least `size` bytes; the
    // kernel copies it and keeps no pointer.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            attr as *const RulesetAttr,
            size,
            0u32,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let fd = RawFd::try_from(rc).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // SAFETY: the kernel just returned this descriptor to us; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `struct landlock_path_beneath_attr` (packed, as the kernel declares it).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `landlock_add_rule(2)` with a `LANDLOCK_RULE_PATH_BENEATH` rule: `access`
/// under the file or directory `beneath` (opened with `O_PATH`).
pub(crate) fn landlock_add_path_rule(ruleset: BorrowedFd<'_>, access: u64, beneath: BorrowedFd<'_>) -> io::Result<()> {
    const LANDLOCK_RULE_PATH_BENEATH: u32 = 1;
    let attr = PathBeneathAttr {
        allowed_access: access,
        parent_fd: beneath.as_raw_fd(),
    };
    // SAFETY: both descriptors are borrowed for the call; `attr` is a live
    // local the kernel copies.
    check(unsafe {
        libc::syscall(
            libc::SYS_landlock_add_rule,
            ruleset.as_raw_fd(),
            LANDLOCK_RULE_PATH_BENEATH,
            &attr as *const PathBeneathAttr,
            0u32,
        )
    })
}

/// Whether the effective user is root.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid(2) cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The real user id.
pub(crate) fn real_uid() -> u32 {
    // SAFETY: getuid(2) cannot fail.
    unsafe { libc::getuid() }
}
