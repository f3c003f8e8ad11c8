//! Per-tool metadata that policy middleware enforces: [`ToolPolicy`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

bitflags::bitflags! {
    /// The side effects a tool declares. Policy middleware can deny a mask of them.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
    pub struct SideEffects: u16 {
        /// Reads files or data.
        const READ = 1;
        /// Writes files or data.
        const WRITE = 1 << 1;
        /// Talks to the network.
        const NETWORK = 1 << 2;
        /// Runs processes.
        const EXECUTE = 1 << 3;
        /// Destroys data (deletes, drops, overwrites without undo).
        const DESTRUCTIVE = 1 << 4;
        /// Moves money.
        const PAYMENT = 1 << 5;
        /// Sends messages to people (mail, chat).
        const EXTERNAL_COMMUNICATION = 1 << 6;
    }
}

/// Whether a tool needs a sandboxed workspace (declared once, in the OS
/// confinement crate, where the runner enforces it).
pub use tinyagents_sandbox::SandboxMode;

/// How a tool runs.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolRuntime {
    /// The sandbox the tool needs.
    pub sandbox: SandboxMode,
    /// The largest result the tool may return, in bytes.
    pub max_result_bytes: Option<usize>,
    /// How long one call may take.
    pub timeout: Option<Duration>,
}

/// What a tool may access and who must agree.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolAccess {
    /// A person must approve each call.
    pub approval_required: bool,
    /// The tool only reads.
    pub read_only: bool,
}

/// The policy metadata of one tool, as declared by the tool.
///
/// An unclassified policy (the default) says nothing about the tool; strict
/// policy middleware refuses unclassified tools.
///
/// ```
/// use tinyagents::harness::tool::{SandboxMode, SideEffects, ToolPolicy, ToolRuntime};
///
/// let policy = ToolPolicy::classified()
///     .with_side_effects(SideEffects::EXECUTE)
///     .with_runtime(ToolRuntime { sandbox: SandboxMode::Required, ..ToolRuntime::default() });
/// assert!(policy.classified);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ToolPolicy {
    /// Whether the tool's side effects were declared at all.
    pub classified: bool,
    /// The declared side effects.
    pub side_effects: SideEffects,
    /// Whether the tool is safe to run in the background (no person watching).
    pub background_safe: bool,
    /// Access and approval.
    pub access: ToolAccess,
    /// Runtime needs and limits.
    pub runtime: ToolRuntime,
}

impl ToolPolicy {
    /// A classified policy with no side effects (a pure function).
    pub fn classified() -> Self {
        Self {
            classified: true,
            ..Self::default()
        }
    }

    /// The same policy with these side effects.
    pub fn with_side_effects(mut self, effects: SideEffects) -> Self {
        self.side_effects = effects;
        self
    }

    /// The same policy with this runtime.
    pub fn with_runtime(mut self, runtime: ToolRuntime) -> Self {
        self.runtime = runtime;
        self
    }

    /// The same policy with this access.
    pub fn with_access(mut self, access: ToolAccess) -> Self {
        self.access = access;
        self
    }

    /// The same policy marked background-safe.
    pub fn background_safe(mut self, safe: bool) -> Self {
        self.background_safe = safe;
        self
    }
}
