//! The Landlock ruleset as data: which rights each kernel ABI knows, which
//! the sandbox hands out under which paths, and the ruleset built from them.
//!
//! The kernel interface is three system calls and two structures (see
//! `Documentation/userspace-api/landlock.rst` in the kernel tree); the calls
//! themselves are in module `sys`, the one module allowed `unsafe`. Written
//! here rather than taken from the `landlock` crate because that crate's
//! flag type pulls a second major of `syn` into every user's build, and what
//! the sandbox needs of it is this page.
//!
//! Compatibility is best effort above the v1 floor that
//! [`Availability::check`](crate::Availability::check) requires: a right the
//! running kernel does not know is neither handled nor granted, so a newer
//! right is enforced where the kernel has it and absent (as on any older
//! machine) where it does not.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::{sys, ConfinementSpec, SetupError};

/// Filesystem rights (`LANDLOCK_ACCESS_FS_*`).
pub(crate) mod fs {
    /// Execute a file.
    pub(crate) const EXECUTE: u64 = 1 << 0;
    /// Open a file for writing.
    pub(crate) const WRITE_FILE: u64 = 1 << 1;
    /// Open a file for reading.
    pub(crate) const READ_FILE: u64 = 1 << 2;
    /// List a directory.
    pub(crate) const READ_DIR: u64 = 1 << 3;
    /// Remove an empty directory or rename one.
    pub(crate) const REMOVE_DIR: u64 = 1 << 4;
    /// Unlink or rename a file.
    pub(crate) const REMOVE_FILE: u64 = 1 << 5;
    /// Create a character device.
    pub(crate) const MAKE_CHAR: u64 = 1 << 6;
    /// Create a directory.
    pub(crate) const MAKE_DIR: u64 = 1 << 7;
    /// Create a regular file.
    pub(crate) const MAKE_REG: u64 = 1 << 8;
    /// Create a UNIX socket.
    pub(crate) const MAKE_SOCK: u64 = 1 << 9;
    /// Create a named pipe.
    pub(crate) const MAKE_FIFO: u64 = 1 << 10;
    /// Create a block device.
    pub(crate) const MAKE_BLOCK: u64 = 1 << 11;
    /// Create a symbolic link.
    pub(crate) const MAKE_SYM: u64 = 1 << 12;
    /// Link or rename a file into another directory (ABI 2).
    pub(crate) const REFER: u64 = 1 << 13;
    /// Truncate a file (ABI 3).
    pub(crate) const TRUNCATE: u64 = 1 << 14;
    /// `ioctl` on a device file (ABI 5).
    pub(crate) const IOCTL_DEV: u64 = 1 << 15;

    /// The rights that apply to a file rather than a directory: a rule on a
    /// file may carry only these (the kernel refuses the others).
    pub(crate) const ON_A_FILE: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
    /// Reading and executing: what a read-only path grants.
    pub(crate) const READ: u64 = EXECUTE | READ_FILE | READ_DIR;
    /// Everything that changes the tree.
    pub(crate) const WRITE: u64 = WRITE_FILE
        | REMOVE_DIR
        | REMOVE_FILE
        | MAKE_CHAR
        | MAKE_DIR
        | MAKE_REG
        | MAKE_SOCK
        | MAKE_FIFO
        | MAKE_BLOCK
        | MAKE_SYM
        | REFER
        | TRUNCATE
        | IOCTL_DEV;
}

/// Network rights (`LANDLOCK_ACCESS_NET_*`, ABI 4).
pub(crate) mod net {
    /// Bind a TCP socket to a port.
    pub(crate) const BIND_TCP: u64 = 1 << 0;
    /// Connect a TCP socket to a port.
    pub(crate) const CONNECT_TCP: u64 = 1 << 1;
}

/// IPC scopes (`LANDLOCK_SCOPE_*`, ABI 6): what the domain may not reach
/// outside itself.
pub(crate) mod scope {
    /// Connect to an abstract UNIX socket created outside the domain.
    pub(crate) const ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
    /// Send a signal to a process outside the domain.
    pub(crate) const SIGNAL: u64 = 1 << 1;
}

/// What one ABI version of the kernel knows; later versions know all an
/// earlier one does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Known {
    /// Filesystem rights.
    pub(crate) fs: u64,
    /// Network rights.
    pub(crate) net: u64,
    /// Scopes.
    pub(crate) scoped: u64,
    /// The size of `struct landlock_ruleset_attr` this version reads.
    pub(crate) attr_size: usize,
}

impl Known {
    /// The rights of ABI `abi`; a version newer than this table gets the
    /// newest row (later versions added logging flags, no rights).
    pub(crate) fn at(abi: i32) -> Self {
        let fs_v1 = (fs::MAKE_SYM << 1) - 1;
        let row = |fs: u64, net: u64, scoped: u64, attr_size: usize| Self {
            fs,
            net,
            scoped,
            attr_size,
        };
        match abi {
            i32::MIN..=0 => row(0, 0, 0, 0),
            1 => row(fs_v1, 0, 0, 8),
            2 => row(fs_v1 | fs::REFER, 0, 0, 8),
            3 => row(fs_v1 | fs::REFER | fs::TRUNCATE, 0, 0, 8),
            4 => row(
                fs_v1 | fs::REFER | fs::TRUNCATE,
                net::BIND_TCP | net::CONNECT_TCP,
                0,
                16,
            ),
            5 => row(
                fs_v1 | fs::REFER | fs::TRUNCATE | fs::IOCTL_DEV,
                net::BIND_TCP | net::CONNECT_TCP,
                0,
                16,
            ),
            _ => row(
                fs_v1 | fs::REFER | fs::TRUNCATE | fs::IOCTL_DEV,
                net::BIND_TCP | net::CONNECT_TCP,
                scope::ABSTRACT_UNIX_SOCKET | scope::SIGNAL,
                24,
            ),
        }
    }
}

/// `struct landlock_ruleset_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RulesetAttr {
    /// Filesystem rights the ruleset handles (denies unless a rule grants).
    pub(crate) handled_access_fs: u64,
    /// Network rights the ruleset handles.
    pub(crate) handled_access_net: u64,
    /// Scopes the domain is closed to.
    pub(crate) scoped: u64,
}

/// The rights handled and granted, for a spec on a kernel of ABI `abi`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Grants {
    /// What the ruleset handles.
    pub(crate) attr: RulesetAttr,
    /// The bytes of `attr` the kernel reads.
    pub(crate) attr_size: usize,
    /// Under read-only paths.
    pub(crate) read: u64,
    /// Under device files.
    pub(crate) device: u64,
    /// Under writable paths.
    pub(crate) write: u64,
}

impl Grants {
    /// Everything is handled; read-only paths may read and execute,
    /// writable ones everything but creating devices, device files read and
    /// write (no `ioctl`); TCP is handled (so denied) unless the spec allows
    /// the network; signals and abstract sockets stay inside the domain.
    pub(crate) fn new(allow_network: bool, abi: i32) -> Self {
        let known = Known::at(abi);
        let all = (fs::READ | fs::WRITE) & known.fs;
        Self {
            attr: RulesetAttr {
                handled_access_fs: all,
                handled_access_net: if allow_network { 0 } else { known.net },
                scoped: known.scoped,
            },
            attr_size: known.attr_size,
            read: fs::READ & all,
            device: (fs::READ_FILE | fs::WRITE_FILE | fs::TRUNCATE) & all,
            write: all & !(fs::MAKE_CHAR | fs::MAKE_BLOCK),
        }
    }
}

/// Builds the ruleset for `spec` on a kernel of ABI `abi` (≥ 1).
///
/// A read-only path or device file that cannot be opened gets no rule (it
/// grants nothing, so the command sees less); a writable path must be an
/// existing directory.
pub(crate) fn ruleset(spec: &ConfinementSpec, abi: i32) -> Result<OwnedFd, SetupError> {
    for p in &spec.writable_paths {
        if !p.is_dir() {
            return Err(SetupError::Path {
                path: p.clone(),
                detail: "a writable sandbox path must be an existing directory".to_owned(),
            });
        }
    }
    let grants = Grants::new(spec.allow_network, abi);
    let unavailable = |what: &str, e: std::io::Error| SetupError::LandlockUnavailable {
        detail: format!("{what}: {e}"),
    };
    let ruleset = sys::landlock_create_ruleset(&grants.attr, grants.attr_size)
        .map_err(|e| unavailable("landlock_create_ruleset", e))?;
    let groups = [
        (&spec.read_only_paths, grants.read),
        (&spec.device_files, grants.device),
        (&spec.writable_paths, grants.write),
    ];
    for (paths, access) in groups {
        for path in paths {
            let Some(beneath) = open_path(path) else { continue };
            let is_dir = beneath.metadata().map(|m| m.is_dir()).unwrap_or(true);
            let access = if is_dir { access } else { access & fs::ON_A_FILE };
            if access == 0 {
                continue;
            }
            sys::landlock_add_path_rule(ruleset.as_fd(), access, beneath.as_fd()).map_err(|e| SetupError::Path {
                path: path.clone(),
                detail: format!("Landlock refused a rule for it: {e}"),
            })?;
        }
    }
    Ok(ruleset)
}

/// `path` opened as a location only (`O_PATH`), or `None` when it cannot be.
fn open_path(path: &Path) -> Option<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
        .open(path)
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_abi_knows_what_it_added_and_all_before() {
        assert_eq!(Known::at(0).fs, 0);
        assert_eq!(Known::at(1).fs, 0x1fff, "13 rights in v1");
        assert_eq!(Known::at(2).fs & fs::REFER, fs::REFER);
        assert_eq!(Known::at(2).fs & fs::TRUNCATE, 0);
        assert_eq!(Known::at(3).fs & fs::TRUNCATE, fs::TRUNCATE);
        assert_eq!(Known::at(4).net, 0b11);
        assert_eq!(Known::at(4).fs & fs::IOCTL_DEV, 0);
        assert_eq!(Known::at(5).fs & fs::IOCTL_DEV, fs::IOCTL_DEV);
        assert_eq!(Known::at(5).scoped, 0);
        assert_eq!(Known::at(6).scoped, 0b11);
        assert_eq!(Known::at(99), Known::at(6));
        for abi in 1..7 {
            let (a, b) = (Known::at(abi), Known::at(abi + 1));
            assert_eq!(a.fs & b.fs, a.fs, "v{} keeps v{abi}'s rights", abi + 1);
            assert!(a.attr_size <= b.attr_size);
        }
        assert_eq!(std::mem::size_of::<RulesetAttr>(), Known::at(6).attr_size);
    }

    #[test]
    fn grants_never_exceed_what_is_handled_or_known() {
        for abi in 1..=7 {
            for net in [false, true] {
                let g = Grants::new(net, abi);
                let handled = g.attr.handled_access_fs;
                assert_eq!(handled & !Known::at(abi).fs, 0);
                for granted in [g.read, g.device, g.write] {
                    assert_eq!(granted & !handled, 0, "abi {abi}");
                }
                assert_eq!(g.write & (fs::MAKE_CHAR | fs::MAKE_BLOCK), 0);
                assert_eq!(g.read & fs::WRITE, 0, "read-only paths cannot write");
                assert_eq!(g.device & fs::IOCTL_DEV, 0);
                assert_eq!(g.attr.handled_access_net == 0, net || abi < 4);
            }
        }
    }

    #[test]
    fn a_ruleset_is_created_where_the_kernel_has_landlock() {
        let (abi, _) = sys::landlock_abi();
        if abi < 1 {
            return; // The availability check names the missing piece; covered in linux.rs.
        }
        let dir = std::env::temp_dir();
        let spec = ConfinementSpec {
            read_only_paths: vec!["/usr".into(), "/does-not-exist".into(), "/etc/hostname".into()],
            writable_paths: vec![dir],
            ..ConfinementSpec::default()
        };
        assert!(ruleset(&spec, abi).is_ok());
        let bad = ConfinementSpec {
            writable_paths: vec!["/does-not-exist".into()],
            ..ConfinementSpec::default()
        };
        assert!(matches!(ruleset(&bad, abi), Err(SetupError::Path { .. })));
    }
}
