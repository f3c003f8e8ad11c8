//! Opening a directory of the workspace beneath its root, one component at
//! a time, never following a symbolic link: what closes the window between
//! checking a path and using it (a directory of the path swapped for a link
//! out after the check is refused, not followed).
//!
//! On Linux each directory is opened with `O_DIRECTORY | O_NOFOLLOW` through
//! the one before it (`/proc/self/fd/N/name`, which the kernel resolves from
//! the open directory, as `openat` does), and the file is then named through
//! the last one. Where `/proc` is not mounted, and on other systems, the
//! checked path is used as it is (the window stays open there).

use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};

/// A directory opened beneath the root (kept open while its entries are
/// used) and the path naming it through its descriptor.
#[derive(Debug)]
pub(super) struct Beneath {
    _dir: Option<File>,
    path: PathBuf,
}

impl Beneath {
    /// The directory `dir` (a path under `root`), opened from `root` one
    /// component at a time without following a link; `create` makes the
    /// missing ones. A component that is a link (or not a directory) is an
    /// error (`ELOOP` / `ENOTDIR`).
    pub(super) fn open(root: &Path, dir: &Path, create: bool) -> io::Result<Self> {
        let rel = dir.strip_prefix(root).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}` is not under the workspace `{}`", dir.display(), root.display()),
            )
        })?;
        if !anchored() {
            if create {
                std::fs::create_dir_all(dir)?;
            }
            return Ok(Self {
                _dir: None,
                path: dir.to_path_buf(),
            });
        }
        open_anchored(root, rel, dir, create)
    }

    /// The directory that holds `path` (a path under `root`), opened as
    /// [`open`](Self::open) does, and `path`'s last component.
    pub(super) fn parent_of(root: &Path, path: &Path, create: bool) -> io::Result<(Self, PathBuf)> {
        match (path.parent(), path.file_name()) {
            (Some(parent), Some(name)) if path != root => {
                let dir = Self::open(root, parent, create)?;
                let entry = dir.path.join(name);
                Ok((dir, entry))
            }
            // the root itself: opened as it is
            _ => Ok((
                Self {
                    _dir: None,
                    path: path.to_path_buf(),
                },
                path.to_path_buf(),
            )),
        }
    }

    /// The path naming the directory (through its descriptor where anchored).
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(target_os = "linux")]
fn open_anchored(root: &Path, rel: &Path, dir: &Path, create: bool) -> io::Result<Beneath> {
    let mut current = open_dir(root)?;
    for part in rel.components() {
        let Component::Normal(name) = part else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}` is not a plain path under the workspace", dir.display()),
            ));
        };
        let next = through(&current).join(name);
        let opened = match open_dir(&next) {
            Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                match std::fs::create_dir(&next) {
                    Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
                    _ => {}
                }
                open_dir(&next)?
            }
            other => other?,
        };
        current = opened;
    }
    let path = through(&current);
    Ok(Beneath {
        _dir: Some(current),
        path,
    })
}

#[cfg(not(target_os = "linux"))]
fn open_anchored(_root: &Path, _rel: &Path, dir: &Path, create: bool) -> io::Result<Beneath> {
    if create {
        std::fs::create_dir_all(dir)?;
    }
    Ok(Beneath {
        _dir: None,
        path: dir.to_path_buf(),
    })
}

#[cfg(target_os = "linux")]
fn anchored() -> bool {
    static PROC: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *PROC.get_or_init(|| Path::new("/proc/self/fd").is_dir())
}

#[cfg(not(target_os = "linux"))]
fn anchored() -> bool {
    false
}

#[cfg(target_os = "linux")]
fn open_dir(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(target_os = "linux")]
fn through(dir: &File) -> PathBuf {
    use std::os::fd::AsRawFd;
    PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()))
}

#[cfg(not(target_os = "linux"))]
fn anchored() -> bool {
    false
}
