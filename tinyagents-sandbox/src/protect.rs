//! The protected and pinned paths of a confinement: which of them the
//! child's mount namespace binds (those that exist, as real files or
//! directories inside a writable path), and the record taken before the run
//! that [`Confinement::restore_protected`](crate::Confinement::restore_protected)
//! compares with afterwards, to undo what no mount could prevent: creating a
//! protected path that did not exist, or replacing one that was a symlink.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::SetupError;

/// What stood at a protected path before the run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Before {
    /// Nothing.
    Absent,
    /// A symlink to this target (the link itself lives in a writable directory).
    Symlink(PathBuf),
    /// A file or directory, bound in the child (so it cannot change identity).
    Bound {
        /// Device of the inode.
        dev: u64,
        /// The inode.
        ino: u64,
    },
    /// A file or directory reached through a symlink to outside the writable
    /// paths (not bound: already outside them, so read-only); a change is
    /// reported, never removed.
    Elsewhere {
        /// Device of the inode.
        dev: u64,
        /// The inode.
        ino: u64,
    },
}

/// One protected or pinned path and its state before the run.
#[derive(Debug)]
struct Entry {
    path: PathBuf,
    before: Before,
}

/// The paths to bind in the child, and the record to compare after the run.
#[derive(Debug, Default)]
pub(crate) struct Protect {
    entries: Vec<Entry>,
    /// `(path, read_only)` to bind onto themselves, parents before children.
    pub(crate) binds: Vec<(PathBuf, bool)>,
}

impl Protect {
    /// Records `protected` (read-only) and `pinned` (writable, not removable)
    /// paths; each must be absolute and inside one of `writable`.
    pub(crate) fn new(protected: &[PathBuf], pinned: &[PathBuf], writable: &[PathBuf]) -> Result<Self, SetupError> {
        let mut out = Self::default();
        let all = pinned
            .iter()
            .map(|p| (p, false))
            .chain(protected.iter().map(|p| (p, true)));
        for (path, read_only) in all {
            let inside = path.is_absolute()
                && !path.components().any(|c| matches!(c, std::path::Component::ParentDir))
                && writable.iter().any(|w| path.starts_with(w) && path != w);
            if !inside {
                return Err(SetupError::Path {
                    path: path.clone(),
                    detail: "a protected or pinned path must be an absolute path strictly inside a writable path, \
                             without `..`"
                        .to_owned(),
                });
            }
            let before = match std::fs::symlink_metadata(path) {
                Err(_) => Before::Absent,
                Ok(m) if m.file_type().is_symlink() => Before::Symlink(std::fs::read_link(path).unwrap_or_default()),
                Ok(m) => {
                    // The mount goes on the path's real location (a symlink on
                    // the way, `.git` -> `repo.git`, is resolved), and only
                    // when that is inside a writable path.
                    let real = std::fs::canonicalize(path).ok().filter(|r| {
                        writable
                            .iter()
                            .any(|w| r.starts_with(w) && r != w && real_parents(r, writable))
                    });
                    match real {
                        Some(real) => {
                            out.binds.push((real, read_only));
                            Before::Bound {
                                dev: m.dev(),
                                ino: m.ino(),
                            }
                        }
                        None => Before::Elsewhere {
                            dev: m.dev(),
                            ino: m.ino(),
                        },
                    }
                }
            };
            out.entries.push(Entry {
                path: path.clone(),
                before,
            });
        }
        // parents first, so a read-only child is bound over its pinned parent
        out.binds.sort_by_key(|(p, _)| p.components().count());
        Ok(out)
    }

    /// Undoes every change the mounts could not prevent; returns the paths undone.
    pub(crate) fn restore(&self) -> Vec<PathBuf> {
        let mut undone = Vec::new();
        for e in &self.entries {
            let now = std::fs::symlink_metadata(&e.path).ok();
            let changed = match (&e.before, &now) {
                (_, None) => false,
                (Before::Absent, Some(_)) => true,
                (Before::Symlink(target), Some(m)) => {
                    !m.file_type().is_symlink() || std::fs::read_link(&e.path).ok().as_ref() != Some(target)
                }
                (Before::Bound { dev, ino } | Before::Elsewhere { dev, ino }, Some(m)) => {
                    m.dev() != *dev || m.ino() != *ino
                }
            };
            if !changed {
                continue;
            }
            if matches!(e.before, Before::Elsewhere { .. }) {
                undone.push(e.path.clone());
                continue;
            }
            let removed = match &now {
                Some(m) if m.is_dir() => std::fs::remove_dir_all(&e.path),
                _ => std::fs::remove_file(&e.path),
            };
            if removed.is_ok() {
                if let Before::Symlink(target) = &e.before {
                    let _ = std::os::unix::fs::symlink(target, &e.path);
                }
            }
            undone.push(e.path.clone());
        }
        undone
    }
}

/// Whether every directory between the writable path holding `path` and
/// `path` itself is a real directory (not a symlink).
fn real_parents(path: &Path, writable: &[PathBuf]) -> bool {
    let Some(base) = writable
        .iter()
        .filter(|w| path.starts_with(w))
        .max_by_key(|w| w.as_os_str().len())
    else {
        return false;
    };
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == base.as_path() {
            return true;
        }
        match std::fs::symlink_metadata(d) {
            Ok(m) if m.is_dir() => {}
            _ => return false,
        }
        dir = d.parent();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_and_replaced_paths_are_undone_and_bound_ones_recorded() {
        let base = std::env::temp_dir().join(format!("ta-protect-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join(".git/hooks")).unwrap();
        std::fs::write(base.join(".git/config"), "[core]\n").unwrap();
        std::os::unix::fs::symlink("elsewhere", base.join(".envrc")).unwrap();
        let w = vec![base.clone()];
        let p = Protect::new(
            &[base.join(".git/config"), base.join(".cargo"), base.join(".envrc")],
            &[base.join(".git")],
            &w,
        )
        .unwrap();
        assert_eq!(
            p.binds,
            vec![(base.join(".git"), false), (base.join(".git/config"), true)],
            "only existing real paths are bound, parents first"
        );
        assert!(p.restore().is_empty(), "nothing changed yet");
        std::fs::create_dir_all(base.join(".cargo")).unwrap();
        std::fs::write(base.join(".cargo/config.toml"), "x").unwrap();
        std::fs::remove_file(base.join(".envrc")).unwrap();
        std::fs::write(base.join(".envrc"), "evil").unwrap();
        let undone = p.restore();
        assert_eq!(undone, vec![base.join(".cargo"), base.join(".envrc")]);
        assert!(!base.join(".cargo").exists());
        assert_eq!(std::fs::read_link(base.join(".envrc")).unwrap(), Path::new("elsewhere"));
        assert!(Protect::new(&[PathBuf::from("/elsewhere/x")], &[], &w).is_err());
        assert!(Protect::new(&[base.join("../x")], &[], &w).is_err());
        let _ = std::fs::remove_dir_all(&base);
    }
}
