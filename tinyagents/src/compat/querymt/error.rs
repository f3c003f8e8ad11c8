//! [`MiddlewareError`]: QueryMT's five error kinds, and how each becomes a
//! classified [`TinyAgentsError`] in a native stack.

use crate::harness::error::{ErrorKind, TinyAgentsError};

/// The result of a driver's hook: `Result<()>`, or `Result<T, E>` for another error.
pub type Result<T, E = MiddlewareError> = std::result::Result<T, E>;

/// Why a driver refused or failed, in QueryMT's categories.
///
/// Returning one from a hook blocks the step, exactly as the native error it
/// becomes (see [`into_native`](Self::into_native)) does in a native
/// middleware: a refusal of a tool call (`ValidationError`,
/// `PermissionDenied`) becomes that call's error result for the model (the
/// tool does not run), anything else ends the run with the classified error.
///
/// ```
/// use tinyagents::compat::querymt::middleware::MiddlewareError;
/// use tinyagents::harness::error::ErrorKind;
///
/// let err = MiddlewareError::permission_denied("shell");
/// assert_eq!(err.to_string(), "permission denied: shell");
/// assert_eq!(err.clone().into_native("guard").kind(), ErrorKind::Validation);
/// assert_eq!(MiddlewareError::rate_limit_exceeded("rate_limit").into_native("rate_limit").kind(), ErrorKind::RateLimited);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MiddlewareError {
    /// The driver itself failed (a bug, a broken dependency). Native: [`TinyAgentsError::Middleware`].
    #[error("internal error: {0}")]
    InternalError(String),
    /// The value is refused by a check. Native: [`TinyAgentsError::Validation`].
    #[error("validation error: {0}")]
    ValidationError(String),
    /// The action is not permitted. Native: [`TinyAgentsError::Validation`]
    /// (a tool call refused this way is answered with an error result and never runs).
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// A rate limit refused the step. Native: [`TinyAgentsError::RateLimited`].
    #[error("rate limit exceeded: {0}")]
    RateLimitExceeded(String),
    /// The driver's configuration is wrong. Native: [`TinyAgentsError::Config`].
    #[error("configuration error: {0}")]
    ConfigError(String),
}

impl MiddlewareError {
    /// An [`InternalError`](Self::InternalError).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::InternalError(message.into())
    }

    /// A [`ValidationError`](Self::ValidationError).
    pub fn validation(message: impl Into<String>) -> Self {
        Self::ValidationError(message.into())
    }

    /// A [`PermissionDenied`](Self::PermissionDenied), naming what was denied.
    pub fn permission_denied(what: impl Into<String>) -> Self {
        Self::PermissionDenied(what.into())
    }

    /// A [`RateLimitExceeded`](Self::RateLimitExceeded), naming the limit.
    pub fn rate_limit_exceeded(limit: impl Into<String>) -> Self {
        Self::RateLimitExceeded(limit.into())
    }

    /// A [`ConfigError`](Self::ConfigError).
    pub fn config(message: impl Into<String>) -> Self {
        Self::ConfigError(message.into())
    }

    /// The kind's name, as QueryMT spells it (`PermissionDenied`).
    pub const fn kind_name(&self) -> &'static str {
        match self {
            Self::InternalError(_) => "InternalError",
            Self::ValidationError(_) => "ValidationError",
            Self::PermissionDenied(_) => "PermissionDenied",
            Self::RateLimitExceeded(_) => "RateLimitExceeded",
            Self::ConfigError(_) => "ConfigError",
        }
    }

    /// The message the error carries.
    pub fn message(&self) -> &str {
        match self {
            Self::InternalError(m)
            | Self::ValidationError(m)
            | Self::PermissionDenied(m)
            | Self::RateLimitExceeded(m)
            | Self::ConfigError(m) => m,
        }
    }

    /// The native error this becomes when the driver named `driver` returns
    /// it; the message names the driver and the kind.
    pub fn into_native(self, driver: &str) -> TinyAgentsError {
        let message = format!("middleware `{driver}`: {self}");
        match self {
            Self::InternalError(m) => TinyAgentsError::middleware(driver, format!("internal error: {m}")),
            Self::ValidationError(_) | Self::PermissionDenied(_) => TinyAgentsError::validation(message),
            Self::RateLimitExceeded(_) => TinyAgentsError::rate_limited(message, None),
            Self::ConfigError(_) => TinyAgentsError::config_at(format!("middleware `{driver}`"), format!("{self}")),
        }
    }
}

/// A native error seen by QueryMT code (a failed `build().await?` in a fn
/// returning this module's [`Result`]): classified by its kind.
impl From<TinyAgentsError> for MiddlewareError {
    fn from(error: TinyAgentsError) -> Self {
        let message = error.to_string();
        match error.kind() {
            ErrorKind::Validation => Self::ValidationError(message),
            ErrorKind::Config => Self::ConfigError(message),
            ErrorKind::RateLimited => Self::RateLimitExceeded(message),
            _ => Self::InternalError(message),
        }
    }
}

/// Any other error (`anyhow::anyhow!(…)` in a factory): an internal error
/// with the whole chain of causes.
impl From<anyhow::Error> for MiddlewareError {
    fn from(error: anyhow::Error) -> Self {
        Self::InternalError(format!("{error:#}"))
    }
}
