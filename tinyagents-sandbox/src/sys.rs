//! Raw system calls: the child's confinement between `fork` and `exec`, and
//! the few parent-side calls (`kill`, the Landlock ABI probe, uids).
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
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::sync::Arc;

use crate::linux::Prepared;

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
    if let Ok(pgid) = libc::pid_t::try_from(pgid) {
        if pgid > 1 {
            // SAFETY: kill(2) takes plain integers.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
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
