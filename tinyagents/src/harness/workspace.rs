//! [`WorkspaceDescriptor`]: the directory a run works in and how it is isolated.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::harness::tool::SandboxMode;

/// The workspace a run works in: its root directory and its sandbox.
///
/// ```
/// use tinyagents::harness::tool::SandboxMode;
/// use tinyagents::harness::workspace::WorkspaceDescriptor;
///
/// let ws = WorkspaceDescriptor::new("/work").with_sandbox(SandboxMode::Required);
/// assert_eq!(ws.sandbox, SandboxMode::Required);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceDescriptor {
    /// The workspace root.
    pub root: PathBuf,
    /// How the workspace is isolated.
    pub sandbox: SandboxMode,
    /// Whether tools may only read.
    pub read_only: bool,
}

impl WorkspaceDescriptor {
    /// A workspace rooted at `root`, not sandboxed, writable.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            sandbox: SandboxMode::Off,
            read_only: false,
        }
    }

    /// The same workspace with a sandbox mode.
    pub fn with_sandbox(mut self, sandbox: SandboxMode) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The same workspace, read-only.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }
}
