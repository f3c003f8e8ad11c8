//! [`SandboxError`]: why a command could not run. Its three kinds render as
//! tinyagents' configuration, validation and tool errors do, and convert to
//! them there.

/// Why the runner did not run a command, or the run failed.
///
/// ```
/// use tinyagents_commands::SandboxError;
///
/// let err = SandboxError::refused("sandbox: the plan has no stage to run");
/// assert_eq!(err.to_string(), "validation failed: sandbox: the plan has no stage to run");
/// assert_eq!(err.message(), "sandbox: the plan has no stage to run");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The policy is wrong, or this machine cannot give the sandbox it
    /// requires (the message names what is missing and the fix).
    #[error("configuration error: {0}")]
    Config(String),
    /// The command or plan was refused before anything ran (a working
    /// directory outside the root, a redirection that cannot be opened, …).
    #[error("validation failed: {0}")]
    Refused(String),
    /// The run failed: a process could not start, or the command broke a
    /// rule only the run could see (it created a protected path).
    #[error("tool `sandbox` failed: {0}")]
    Failed(String),
}

impl SandboxError {
    /// A [`SandboxError::Config`].
    pub fn config(message: impl Into<String>) -> Self {
        Self::Config(message.into())
    }

    /// A [`SandboxError::Refused`].
    pub fn refused(message: impl Into<String>) -> Self {
        Self::Refused(message.into())
    }

    /// A [`SandboxError::Failed`].
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// What went wrong, without the kind's prefix.
    pub fn message(&self) -> &str {
        match self {
            Self::Config(m) | Self::Refused(m) | Self::Failed(m) => m,
        }
    }
}

/// The runner's result.
pub type Result<T, E = SandboxError> = std::result::Result<T, E>;
