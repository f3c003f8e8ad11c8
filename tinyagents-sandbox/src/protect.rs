//! The protected tree of a confinement ([`Protection`]): one bounded walk
//! of the protected root before the run finds every protected entry at any
//! depth; the child's mount namespace binds each (read-only, or writable but
//! pinned) and pins every directory between the root and it, so none can be
//! written, renamed, replaced or removed. A second walk after the run, once
//! the command's tree is gone, finds what no mount could prevent — a
//! protected name created where none stood, at any depth — and removes it
//! ([`Confinement::restore_protected`](crate::Confinement::restore_protected)).
//!
//! Both walks never follow symlinks, but for a symlink standing at a
//! protected name whose target lies inside the root: the target is bound
//! (what is written through the link is what the name means) and walked as
//! if it stood at the link's name (`.git` -> `repo.git` protects
//! `repo.git/config`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::os::unix::fs::{DirEntryExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::{ProtectedChanges, Protection, SetupError};

/// What stood at a protected path before the run.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Before {
    /// A symlink with this target, and the identity of what it resolved to
    /// inside the root (bound), if anything.
    Symlink {
        target: PathBuf,
        resolved: Option<(u64, u64)>,
    },
    /// A file or directory (bound, so it cannot change identity).
    Bound {
        /// Device of the inode.
        dev: u64,
        /// The inode.
        ino: u64,
    },
}

/// The protected patterns, as lower-cased components.
#[derive(Debug, Default)]
struct Patterns {
    /// `(components, read_only)`.
    rows: Vec<(Vec<String>, bool)>,
}

impl Patterns {
    /// The rule for the entry `name` of the directory whose components
    /// (lower-cased, from the root) are `dir`: `Some(true)` read-only, `Some(false)` pinned, `None` not
    /// protected. A pattern matches the path's last components, at any
    /// depth; read-only wins over pinned.
    fn rule(&self, dir: &[String], name: &std::ffi::OsStr) -> Option<bool> {
        let name = name.to_string_lossy();
        let mut out = None;
        for (parts, read_only) in &self.rows {
            if crate::protected::ends_with_pattern(dir, &name, parts) {
                if *read_only {
                    return Some(true);
                }
                out = Some(false);
            }
        }
        out
    }
}

/// One directory to list: where it is, the components of the path it stands
/// for (a symlink's target stands for the link), whether a read-only
/// protected entry covers it, and whether it was reached through a protected
/// symlink (then no further symlink is followed: a walk cannot loop).
struct Item {
    real: PathBuf,
    rel: Vec<String>,
    covered: bool,
    via_link: bool,
}

/// The protected tree's record, and the binds the child makes.
#[derive(Debug, Default)]
pub(crate) struct Protect {
    root: PathBuf,
    patterns: Patterns,
    max_entries: usize,
    /// Every protected entry found before the run, by real path.
    entries: HashMap<PathBuf, Before>,
    /// `(path, read_only)` to bind onto themselves, parents before children.
    pub(crate) binds: Vec<(PathBuf, bool)>,
}

fn lower(name: &std::ffi::OsStr) -> String {
    name.to_string_lossy().to_ascii_lowercase()
}

fn identity(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

impl Protect {
    /// Walks `spec`'s root (which must be an absolute directory, equal to or
    /// inside one of `writable`) and records its protected entries. Fails
    /// closed: past [`Protection::max_entries`], on a directory it cannot
    /// list, or when a protected regular file has another hard link in the
    /// root (writable through that link).
    pub(crate) fn new(spec: Option<&Protection>, writable: &[PathBuf]) -> Result<Self, SetupError> {
        let Some(spec) = spec else {
            return Ok(Self::default());
        };
        let root = std::fs::canonicalize(&spec.root).map_err(|e| SetupError::Path {
            path: spec.root.clone(),
            detail: format!("the protected root cannot be resolved: {e}"),
        })?;
        if !root.is_dir() || !writable.iter().any(|w| root.starts_with(w)) {
            return Err(SetupError::Path {
                path: spec.root.clone(),
                detail: "the protected root must be an existing directory equal to or inside a writable path"
                    .to_owned(),
            });
        }
        let mut patterns = Patterns::default();
        for (list, read_only) in [(&spec.read_only, true), (&spec.pinned, false)] {
            for p in list {
                match crate::protected::pattern_parts(p) {
                    Some(parts) => patterns.rows.push((parts, read_only)),
                    None => {
                        return Err(SetupError::Path {
                            path: PathBuf::from(p),
                            detail: "a protected pattern must be a relative path without `.` or `..` (such as \
                                     `.git/config`)"
                                .to_owned(),
                        })
                    }
                }
            }
        }
        let mut out = Self {
            root,
            patterns,
            max_entries: spec.max_entries,
            ..Self::default()
        };
        out.record()?;
        Ok(out)
    }

    fn too_many(&self) -> SetupError {
        SetupError::WalkLimit {
            root: self.root.clone(),
            limit: self.max_entries,
        }
    }

    /// The walk before the run.
    fn record(&mut self) -> Result<(), SetupError> {
        let mut binds: BTreeMap<PathBuf, bool> = BTreeMap::new();
        // protected regular files with more than one link, and the inodes of
        // the other regular files of the root (writable)
        let mut linked: Vec<(u64, PathBuf)> = Vec::new();
        let mut others: HashSet<u64> = HashSet::new();
        // protected symlinks (their directories are pinned like a bound entry's)
        let mut links: Vec<PathBuf> = Vec::new();
        let mut seen = 0usize;
        let mut stack = vec![Item {
            real: self.root.clone(),
            rel: Vec::new(),
            covered: false,
            via_link: false,
        }];
        // a directory is walked under its own name and, once more at most,
        // under the name of a protected symlink leading to it
        let mut visited: HashSet<(PathBuf, Vec<String>)> = HashSet::new();
        while let Some(dir) = stack.pop() {
            if !visited.insert((dir.real.clone(), dir.rel.clone())) {
                continue;
            }
            let entries = std::fs::read_dir(&dir.real).map_err(|e| unreadable(&dir.real, &e))?;
            for entry in entries {
                let entry = entry.map_err(|e| unreadable(&dir.real, &e))?;
                seen += 1;
                if seen > self.max_entries {
                    return Err(self.too_many());
                }
                let ft = entry.file_type().map_err(|e| unreadable(&dir.real, &e))?;
                let file_name = entry.file_name();
                let rule = if dir.covered {
                    None
                } else {
                    self.patterns.rule(&dir.rel, &file_name)
                };
                let rel = || {
                    let mut rel = dir.rel.clone();
                    rel.push(lower(&file_name));
                    rel
                };
                let Some(read_only) = rule else {
                    if ft.is_dir() {
                        stack.push(Item {
                            real: entry.path(),
                            rel: rel(),
                            covered: dir.covered,
                            via_link: dir.via_link,
                        });
                    } else if ft.is_file() {
                        if dir.covered {
                            let m = entry.metadata().map_err(|e| unreadable(&entry.path(), &e))?;
                            if m.nlink() > 1 {
                                linked.push((m.ino(), entry.path()));
                            }
                        } else {
                            others.insert(entry.ino());
                        }
                    }
                    continue;
                };
                let path = entry.path();
                let m = std::fs::symlink_metadata(&path).map_err(|e| unreadable(&path, &e))?;
                if m.file_type().is_symlink() {
                    let target = std::fs::read_link(&path).map_err(|e| unreadable(&path, &e))?;
                    let resolved = self.resolve_inside(&path);
                    if let Some((real, rm)) = &resolved {
                        let dir_target = rm.is_dir();
                        bind(&mut binds, real, read_only || !dir_target);
                        if dir_target && !dir.via_link {
                            stack.push(Item {
                                real: real.clone(),
                                rel: rel(),
                                covered: read_only,
                                via_link: true,
                            });
                        } else if rm.is_file() && rm.nlink() > 1 {
                            linked.push((rm.ino(), real.clone()));
                        }
                    }
                    links.push(path.clone());
                    self.entries.insert(
                        path,
                        Before::Symlink {
                            target,
                            resolved: resolved.map(|(_, rm)| identity(&rm)),
                        },
                    );
                    continue;
                }
                let is_dir = m.is_dir();
                bind(&mut binds, &path, read_only || !is_dir);
                if m.is_file() && m.nlink() > 1 {
                    linked.push((m.ino(), path.clone()));
                }
                let (dev, ino) = identity(&m);
                self.entries.insert(path.clone(), Before::Bound { dev, ino });
                if is_dir {
                    stack.push(Item {
                        real: path,
                        rel: rel(),
                        covered: read_only,
                        via_link: dir.via_link,
                    });
                }
            }
        }
        if let Some((_, path)) = linked.iter().find(|(ino, _)| others.contains(ino)) {
            return Err(SetupError::Path {
                path: path.clone(),
                detail: format!(
                    "this protected file has another hard link inside the workspace, through which a sandboxed \
                     command could write it; remove the extra link (`find {} -samefile {}`) or make it a copy",
                    self.root.display(),
                    path.display()
                ),
            });
        }
        // every directory between the root and a bound path or a protected
        // symlink is pinned (bound writable: a mount point cannot be renamed
        // or removed, so neither can the protected entry be moved away with
        // its parent)
        let bound: Vec<PathBuf> = binds.keys().cloned().chain(links).collect();
        for p in bound {
            let mut dir = p.parent();
            while let Some(d) = dir {
                if d == self.root || !d.starts_with(&self.root) {
                    break;
                }
                binds.entry(d.to_path_buf()).or_insert(false);
                dir = d.parent();
            }
        }
        // beneath a read-only bind everything stays read-only (a pinned
        // `.git` symlinked into `.github` is not made writable there)
        let read_only_at = |p: &Path| p.ancestors().skip(1).any(|a| binds.get(a) == Some(&true));
        let mut binds: Vec<(PathBuf, bool)> = binds
            .iter()
            .map(|(p, ro)| (p.clone(), *ro || read_only_at(p)))
            .collect();
        // parents first, so a read-only child is bound over its pinned parent
        binds.sort_by_key(|(p, _)| p.components().count());
        self.binds = binds;
        Ok(())
    }

    /// What the symlink `path` resolves to, when that exists strictly inside the root.
    fn resolve_inside(&self, path: &Path) -> Option<(PathBuf, std::fs::Metadata)> {
        let real = std::fs::canonicalize(path).ok()?;
        if !real.starts_with(&self.root) || real == self.root {
            return None;
        }
        let m = std::fs::symlink_metadata(&real).ok()?;
        Some((real, m))
    }

    /// The walk after the run: undoes every protected entry that was not
    /// there before (or replaced a symlink), at any depth. Call it once no
    /// process of the confined tree runs.
    pub(crate) fn restore(&self) -> ProtectedChanges {
        let mut out = ProtectedChanges::default();
        if self.root.as_os_str().is_empty() {
            return out;
        }
        let mut seen = 0usize;
        let mut stack = vec![Item {
            real: self.root.clone(),
            rel: Vec::new(),
            covered: false,
            via_link: false,
        }];
        let mut visited: HashSet<(PathBuf, Vec<String>)> = HashSet::new();
        while let Some(dir) = stack.pop() {
            if !visited.insert((dir.real.clone(), dir.rel.clone())) {
                continue;
            }
            let entries = match list(&dir.real) {
                Ok(e) => e,
                Err(e) => {
                    out.unchecked.push((dir.real.clone(), format!("cannot be listed: {e}")));
                    continue;
                }
            };
            for entry in entries {
                seen += 1;
                if seen > self.max_entries {
                    out.unchecked.push((
                        self.root.clone(),
                        format!(
                            "holds more than {} entries after the run (Protection::max_entries), so the rest was \
                             not checked",
                            self.max_entries
                        ),
                    ));
                    return out;
                }
                let name = entry.file_name();
                let rule = self.patterns.rule(&dir.rel, &name);
                let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
                let rel = || {
                    let mut rel = dir.rel.clone();
                    rel.push(lower(&name));
                    rel
                };
                let Some(read_only) = rule else {
                    if is_dir {
                        stack.push(Item {
                            real: entry.path(),
                            rel: rel(),
                            covered: false,
                            via_link: dir.via_link,
                        });
                    }
                    continue;
                };
                let path = entry.path();
                let m = match std::fs::symlink_metadata(&path) {
                    Ok(m) => m,
                    // a protected name that cannot be looked at was not checked: the run fails
                    Err(e) => {
                        out.unchecked.push((path, format!("cannot be read: {e}")));
                        continue;
                    }
                };
                let rel = rel();
                match (self.entries.get(&path), m.file_type().is_symlink()) {
                    (Some(Before::Bound { dev, ino }), false) if identity(&m) == (*dev, *ino) => {
                        // unchanged; a pinned directory is writable inside
                        if m.is_dir() && !read_only {
                            stack.push(Item {
                                real: path,
                                rel,
                                covered: false,
                                via_link: dir.via_link,
                            });
                        }
                    }
                    (Some(Before::Symlink { target, resolved }), true)
                        if std::fs::read_link(&path).ok().as_ref() == Some(target) =>
                    {
                        let now = self.resolve_inside(&path);
                        match (&now, resolved) {
                            (Some((real, rm)), Some(before)) if identity(rm) == *before => {
                                if rm.is_dir() && !read_only && !dir.via_link {
                                    stack.push(Item {
                                        real: real.clone(),
                                        rel,
                                        covered: false,
                                        via_link: true,
                                    });
                                }
                            }
                            (None, None) => {}
                            // a dangling link whose target the command made
                            (Some((real, rm)), _) => {
                                undo_path(&mut out, real, rm.is_dir());
                                out.removed.push(path);
                            }
                            (None, Some(_)) => {
                                out.unchecked
                                    .push((path, "no longer resolves to what it did".to_owned()));
                            }
                        }
                    }
                    (before, _) => {
                        // created, or replaced: removed (a replaced symlink is put back)
                        if undo_path(&mut out, &path, m.is_dir()) {
                            if let Some(Before::Symlink { target, .. }) = before {
                                let _ = std::os::unix::fs::symlink(target, &path);
                            }
                            out.removed.push(path);
                        }
                    }
                }
            }
        }
        out
    }
}

/// Adds a bind of `path` (read-only wins when bound twice).
fn bind(binds: &mut BTreeMap<PathBuf, bool>, path: &Path, read_only: bool) {
    let e = binds.entry(path.to_path_buf()).or_insert(read_only);
    *e |= read_only;
}

fn unreadable(path: &Path, e: &std::io::Error) -> SetupError {
    SetupError::Path {
        path: path.to_path_buf(),
        detail: format!(
            "cannot be listed ({e}): the sandbox reads every directory of the workspace to find protected paths at \
             any depth; make it readable, or move it out of the workspace"
        ),
    }
}

/// The entries of `dir`; a directory the command made unreadable (its own,
/// so this process may change its mode) is opened up first.
fn list(dir: &Path) -> std::io::Result<Vec<std::fs::DirEntry>> {
    let read = |d: &Path| -> std::io::Result<Vec<std::fs::DirEntry>> { std::fs::read_dir(d)?.collect() };
    match read(dir) {
        Ok(v) => Ok(v),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            read(dir)
        }
        Err(e) => Err(e),
    }
}

/// Removes `path` (a directory with everything beneath it; never following
/// symlinks), opening up directories the command made unreadable. Records a
/// failure in `out` and returns whether it is gone.
fn undo_path(out: &mut ProtectedChanges, path: &Path, is_dir: bool) -> bool {
    let removed = if is_dir {
        std::fs::remove_dir_all(path).or_else(|_| {
            open_up(path);
            std::fs::remove_dir_all(path)
        })
    } else {
        std::fs::remove_file(path)
    };
    match removed {
        Ok(()) => true,
        Err(e) => {
            out.unchecked
                .push((path.to_path_buf(), format!("could not be removed: {e}")));
            false
        }
    }
}

/// Gives every directory under `dir` (not following symlinks) mode 0700.
fn open_up(dir: &Path) {
    let mut stack = vec![dir.to_path_buf()];
    let mut budget = 1_000_000usize;
    while let Some(d) = stack.pop() {
        let _ = std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700));
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for e in entries.flatten() {
            budget = budget.saturating_sub(1);
            if budget == 0 {
                return;
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(root: &Path) -> Protection {
        Protection::new(root)
            .read_only([".git/config", ".git/hooks", ".cargo", ".envrc"])
            .pinned([".git"])
    }

    #[test]
    fn entries_at_any_depth_are_bound_with_their_parents_pinned_and_created_ones_undone() {
        let base = std::env::temp_dir().join(format!("ta-protect-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join(".git/hooks")).unwrap();
        std::fs::write(base.join(".git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(base.join("vendor/x/.git")).unwrap();
        std::fs::write(base.join("vendor/x/.git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(base.join("src")).unwrap();
        std::os::unix::fs::symlink("elsewhere", base.join(".envrc")).unwrap();
        // a `.git` symlink into the root protects its target as `.git`; a
        // `.git` file (a submodule's `gitdir:`) is read-only
        std::fs::create_dir_all(base.join("repo.git")).unwrap();
        std::fs::write(base.join("repo.git/config"), "[core]\n").unwrap();
        std::fs::create_dir_all(base.join("wt/sm")).unwrap();
        std::os::unix::fs::symlink("../repo.git", base.join("wt/.git")).unwrap();
        std::fs::write(base.join("wt/sm/.git"), "gitdir: ../../repo.git\n").unwrap();
        let base = std::fs::canonicalize(&base).unwrap();
        let w = vec![base.clone()];
        let p = Protect::new(Some(&spec(&base)), &w).unwrap();
        assert_eq!(
            p.binds,
            vec![
                (base.join(".git"), false),
                (base.join("repo.git"), false),
                (base.join("vendor"), false),
                (base.join("wt"), false),
                (base.join(".git/config"), true),
                (base.join(".git/hooks"), true),
                (base.join("repo.git/config"), true),
                (base.join("vendor/x"), false),
                (base.join("wt/sm"), false),
                (base.join("vendor/x/.git"), false),
                (base.join("wt/sm/.git"), true),
                (base.join("vendor/x/.git/config"), true),
            ],
            "existing real entries bound at any depth, their parents pinned, parents first"
        );
        assert!(p.restore().is_empty(), "nothing changed yet");
        std::fs::create_dir_all(base.join("src/a/.cargo")).unwrap();
        std::fs::write(base.join("src/a/.cargo/config.toml"), "x").unwrap();
        std::fs::create_dir_all(base.join("vendor/x/.git/hooks")).unwrap();
        std::fs::remove_file(base.join(".envrc")).unwrap();
        std::fs::write(base.join(".envrc"), "evil").unwrap();
        std::fs::create_dir_all(base.join("SRC2/.GIT")).unwrap();
        std::fs::create_dir_all(base.join("repo.git/hooks")).unwrap();
        let mut undone = p.restore();
        assert!(undone.unchecked.is_empty(), "{undone:?}");
        undone.removed.sort();
        assert_eq!(
            undone.removed,
            vec![
                base.join(".envrc"),
                base.join("SRC2/.GIT"),
                base.join("repo.git/hooks"),
                base.join("src/a/.cargo"),
                base.join("vendor/x/.git/hooks"),
            ]
        );
        assert!(!base.join("src/a/.cargo").exists() && base.join("src/a").is_dir());
        assert_eq!(std::fs::read_link(base.join(".envrc")).unwrap(), Path::new("elsewhere"));
        assert!(Protect::new(Some(&Protection::new("/nonexistent-ta-root")), &w).is_err());
        assert!(Protect::new(Some(&Protection::new(&base).read_only(["../x"])), &w).is_err());
        // the walk is bounded, and says by what
        let err = Protect::new(Some(&spec(&base).max_entries(3)), &w)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("more than 3 entries") && err.contains("max_entries"),
            "{err}"
        );
        // a protected file with another link in the root is refused
        std::fs::hard_link(base.join("vendor/x/.git/config"), base.join("src/cfg")).unwrap();
        let err = Protect::new(Some(&spec(&base)), &w).unwrap_err().to_string();
        assert!(
            err.contains("vendor/x/.git/config") && err.contains("hard link"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&base);
    }
}
