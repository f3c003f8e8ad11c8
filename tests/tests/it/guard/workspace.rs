//! A scratch workspace root for the guard tests, removed when dropped.

use std::path::{Path, PathBuf};

use tinyagents::harness::workspace::WorkspaceDescriptor;

/// A canonical workspace root, removed with everything in it when dropped.
pub struct Workspace(PathBuf);

impl Workspace {
    /// An empty directory for the test `name` of `group` (any earlier one of
    /// that name removed first): fill it, then [`Workspace::at`] it.
    pub fn fresh_dir(group: &str, name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("tinyagents-{group}-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        root
    }

    /// The workspace rooted at `root` (canonicalised).
    pub fn at(root: PathBuf) -> Self {
        Self(std::fs::canonicalize(root).unwrap())
    }

    pub fn root(&self) -> &Path {
        &self.0
    }

    pub fn descriptor(&self) -> WorkspaceDescriptor {
        WorkspaceDescriptor::new(&self.0)
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
