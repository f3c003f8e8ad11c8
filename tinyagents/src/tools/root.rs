//! [`WorkspaceRoot`]: the directory the built-in file tools work in, and
//! the one check every path they take passes.

use std::path::{Component, Path, PathBuf};

use crate::harness::error::{Result, TinyAgentsError};

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
