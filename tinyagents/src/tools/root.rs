//! [`WorkspaceRoot`]: the directory the built-in file tools work in, and
//! the one check every path they take passes.

use std::path::{Component, Path, PathBuf};

use crate::harness::error::{Result, TinyAgentsError};

/// The longest path (in bytes, the root included) a file tool takes: the
/// system's `PATH_MAX`, so that every other program can reach what the
/// tools make.
pub const MAX_PATH_BYTES: usize = 4096;

/// A workspace root, canonical: every path a file tool takes resolves
/// inside it or is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceRoot {
    path: PathBuf,
}

impl WorkspaceRoot {
    /// The root at `path`, which must be an existing directory.
    pub fn new(path: impl AsRef<Path>) -> Result<Self> {
        let given = path.as_ref();
        let path = given.canonicalize().map_err(|e| {
            TinyAgentsError::config(format!(
                "the workspace root `{}` cannot be opened ({e}); give an existing directory",
                given.display()
            ))
        })?;
        if !path.is_dir() {
            return Err(TinyAgentsError::config(format!(
                "the workspace root `{}` is not a directory; give the directory the agent works in",
                given.display()
            )));
        }
        Ok(Self { path })
    }

    /// The canonical root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `given` (relative to the root, or absolute inside it) as an absolute
    /// path inside the root. A path that leaves the root (`..`, an absolute
    /// path elsewhere, a symlink pointing out) is a `Validation` error.
    pub fn resolve(&self, given: &str) -> Result<PathBuf> {
        let outside = |why: &str| {
            TinyAgentsError::validation(format!(
                "path `{given}` {why}, outside the workspace `{}`: give a path inside it, relative to it",
                self.path.display()
            ))
        };
        if given.contains('\0') {
            return Err(outside("holds a NUL byte"));
        }
        let mut out = self.path.clone();
        for component in Path::new(given).components() {
            match component {
                Component::Prefix(_) | Component::RootDir => {
                    let absolute = Path::new(given);
                    let rest = absolute.strip_prefix(&self.path).map_err(|_| outside("is absolute"))?;
                    return self.resolve(&rest.to_string_lossy());
                }
                Component::CurDir => {}
                Component::ParentDir => {
                    if out == self.path {
                        return Err(outside("climbs above the root with `..`"));
                    }
                    out.pop();
                }
                Component::Normal(part) => out.push(part),
            }
        }
        if out.as_os_str().len() >= MAX_PATH_BYTES {
            return Err(TinyAgentsError::validation(format!(
                "path `{}…` is {} bytes long inside the workspace, over the {MAX_PATH_BYTES} a path may have \
                 (rule: PATH_MAX, which other programs need to reach the file); give a shorter path",
                given.chars().take(60).collect::<String>(),
                out.as_os_str().len()
            )));
        }
        // the longest existing ancestor, with its symlinks resolved, must stay inside
        let mut probe = out.as_path();
        loop {
            if let Ok(real) = probe.canonicalize() {
                if !real.starts_with(&self.path) {
                    return Err(outside("goes through a symbolic link that points"));
                }
                break;
            }
            match probe.parent() {
                Some(parent) => probe = parent,
                None => break,
            }
        }
        Ok(out)
    }

    /// `given` resolved for reading: [`resolve`](Self::resolve), then its
    /// symbolic links followed (the real path must stay inside the root). The
    /// file is then opened without following a link at its last component, so
    /// a link swapped in after this check is refused, not followed.
    pub fn resolve_existing(&self, given: &str) -> Result<PathBuf> {
        let lexical = self.resolve(given)?;
        match lexical.canonicalize() {
            Ok(real) if real.starts_with(&self.path) => Ok(real),
            Ok(real) => Err(TinyAgentsError::validation(format!(
                "path `{given}` resolves to `{}`, outside the workspace `{}` (rule: symbolic links may not \
                 point out): give a path inside it",
                real.display(),
                self.path.display()
            ))),
            // absent: the caller's open reports it, naming the path
            Err(_) => Ok(lexical),
        }
    }

    /// `given` resolved for writing: [`resolve`](Self::resolve), then
    /// refused when its text is not a plain path ([`path_lexical`]), when any
    /// of its components under the root is a symbolic link (a dangling link
    /// as the target would have the write create its target, wherever it
    /// points), or when it falls under a protected path (configuration that
    /// programs execute: `.git/config`, `.envrc`, `.github/workflows`, …, the
    /// one table of `tinyagents_sandbox::protected`).
    ///
    /// [`path_lexical`]: crate::protected::path_lexical
    pub fn resolve_write(&self, given: &str) -> Result<PathBuf> {
        crate::protected::path_lexical(given).map_err(|why| {
            TinyAgentsError::validation(format!(
                "path `{given}` is refused for writing: {why} (rule: a write names a plain path); give the \
                 path relative to the workspace"
            ))
        })?;
        let path = self.resolve(given)?;
        let rel = path.strip_prefix(&self.path).unwrap_or(&path);
        let mut at = self.path.clone();
        for part in rel.components() {
            at.push(part);
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(TinyAgentsError::validation(format!(
                        "path `{given}` goes through the symbolic link `{}` (rule: writes never follow a \
                         link, which may point out of the workspace or be swapped); write the file at its \
                         real path",
                        self.display(&at)
                    )))
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
        let protected: Vec<String> = crate::protected::PATTERNS.iter().map(|p| (*p).to_owned()).collect();
        if let Some(hit) = crate::protected::protected_hit(&self.path, &path, &protected) {
            return Err(TinyAgentsError::validation(format!(
                "path `{given}` is under the protected path `{hit}`, configuration that programs execute \
                 (rule: protected paths, see docs/security.md); the file tools never write it: make that \
                 change yourself"
            )));
        }
        Ok(path)
    }

    /// `path` relative to the root, for output.
    pub fn display(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.path).unwrap_or(path);
        let shown = rel.to_string_lossy();
        if shown.is_empty() {
            ".".to_owned()
        } else {
            shown.into_owned()
        }
    }
}
