//! [`TinyAgentsError`]: every failure the runtime reports, classified.
//!
//! The class of an error ([`ErrorKind`]) drives behaviour: retry middleware
//! asks [`TinyAgentsError::is_retryable`], the agent loop turns a
//! [`ErrorKind::Validation`] refusal of a tool call into that call's error
//! result, and interrupts and cancellations are never retried or swallowed.

use std::sync::Arc;
use std::time::Duration;

/// The crate-wide result type.
pub type Result<T, E = TinyAgentsError> = std::result::Result<T, E>;

/// Every error the runtime reports.
///
/// `#[non_exhaustive]`: match on [`TinyAgentsError::kind`] when you only need
/// the class.
///
/// ```
/// use tinyagents::harness::error::{ErrorKind, TinyAgentsError};
///
/// let err = TinyAgentsError::model("upstream overloaded", true);
/// assert!(err.is_retryable());
/// assert_eq!(err.kind(), ErrorKind::Model);
/// assert!(!TinyAgentsError::validation("bad call").is_retryable());
/// ```
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TinyAgentsError {
    /// Input was refused by a check (a policy, a schema, a guard).
    #[error("validation failed: {message}")]
    Validation {
        /// What was refused and why.
        message: String,
    },
    /// A configuration is wrong; `path` names the place (`middleware[2].max_continuations`).
    #[error("configuration error{}: {message}", path.as_deref().map(|p| format!(" at `{p}`")).unwrap_or_default())]
    Config {
        /// Where in the configuration, when known.
        path: Option<String>,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The model call failed.
    #[error("model error: {message}")]
    Model {
        /// What the provider or model said.
        message: String,
        /// Whether trying again may succeed.
        retryable: bool,
        /// A provider's hint of when to try again.
        retry_after: Option<Duration>,
        /// The HTTP status of the provider's reply, when it answered with an error status.
        status: Option<u16>,
        /// The underlying error (the HTTP client's, for a transport failure),
        /// returned by [`std::error::Error::source`].
        #[source]
        source: Option<ErrorSource>,
    },
    /// A tool failed.
    #[error("tool `{tool}` failed: {message}")]
    Tool {
        /// The tool's name.
        tool: String,
        /// What went wrong.
        message: String,
    },
    /// Something took longer than it was allowed to.
    #[error("{what} timed out after {after:?}")]
    Timeout {
        /// What timed out (`model call`, `tool call "search"`, `run`).
        what: String,
        /// The limit that was reached.
        after: Duration,
    },
    /// A rate limit refused the call.
    #[error("rate limited: {message}")]
    RateLimited {
        /// Which limit and key.
        message: String,
        /// When the limit will admit again, when known.
        retry_after: Option<Duration>,
        /// The HTTP status (429) when a provider refused the call, `None` for a local limit.
        status: Option<u16>,
        /// The underlying error, when there is one (see [`std::error::Error::source`]).
        #[source]
        source: Option<ErrorSource>,
    },
    /// A configured limit (steps, calls, price) was reached.
    #[error("limit `{limit}` exceeded: {message}")]
    LimitExceeded {
        /// The limit's name (`max_steps`, `model_call_limit`, …).
        limit: String,
        /// What was counted and the bound.
        message: String,
    },
    /// The run paused for outside input (a human approval, a steering pause).
    #[error("interrupted{}: {message}", node.as_deref().map(|n| format!(" at `{n}`")).unwrap_or_default())]
    Interrupted {
        /// The node or point where the run paused.
        node: Option<String>,
        /// Why it paused.
        message: String,
    },
    /// The run was cancelled from outside.
    #[error("cancelled: {reason}")]
    Cancelled {
        /// Who or what cancelled it.
        reason: String,
    },
    /// A middleware hook panicked; the panic was caught and the stack is still usable.
    #[error("middleware `{middleware}` panicked in `{hook}`: {message}")]
    MiddlewarePanic {
        /// The middleware's name.
        middleware: String,
        /// The hook that panicked.
        hook: &'static str,
        /// The panic payload, when it was a string.
        message: String,
    },
    /// A write lost a race to a concurrent one: a checkpoint another writer
    /// stored first (compare-and-set refused), or approval decisions another
    /// resume already spent. The state moved on without this caller: reload
    /// it (`latest`) and decide again from what it holds; retrying the same
    /// write blindly fails the same way (or, for decisions, would run a call
    /// twice if it did not).
    #[error("conflict: {message}")]
    Conflict {
        /// What lost, to what, and what to do.
        message: String,
    },
    /// A middleware failed for a reason of its own.
    #[error("middleware `{middleware}` failed: {message}")]
    Middleware {
        /// The middleware's name.
        middleware: String,
        /// What went wrong.
        message: String,
    },
}

/// The underlying error a [`TinyAgentsError`] keeps (an HTTP client's
/// transport error, an I/O error): shared, so the error stays `Clone`.
///
/// It is transparent: it displays as the error it holds, and its
/// [`source`](std::error::Error::source) is that error's source, so walking
/// the chain from a `TinyAgentsError` reaches every cause. Two are equal when
/// they display the same.
///
/// ```
/// use std::error::Error as _;
/// use tinyagents::harness::error::TinyAgentsError;
///
/// let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset by peer");
/// let err = TinyAgentsError::model("the connection broke off", true).with_source(io);
/// assert_eq!(err.source().unwrap().to_string(), "connection reset by peer");
/// ```
#[derive(Clone)]
pub struct ErrorSource(Arc<dyn std::error::Error + Send + Sync + 'static>);

impl ErrorSource {
    /// Keeps `error`.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }

    /// The error kept, to downcast (`error.get().downcast_ref::<reqwest::Error>()`).
    pub fn get(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl std::fmt::Debug for ErrorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for ErrorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for ErrorSource {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for ErrorSource {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

/// The class of a [`TinyAgentsError`], for matching without the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// See [`TinyAgentsError::Validation`].
    Validation,
    /// See [`TinyAgentsError::Config`].
    Config,
    /// See [`TinyAgentsError::Model`].
    Model,
    /// See [`TinyAgentsError::Tool`].
    Tool,
    /// See [`TinyAgentsError::Timeout`].
    Timeout,
    /// See [`TinyAgentsError::RateLimited`].
    RateLimited,
    /// See [`TinyAgentsError::LimitExceeded`].
    LimitExceeded,
    /// See [`TinyAgentsError::Interrupted`].
    Interrupted,
    /// See [`TinyAgentsError::Cancelled`].
    Cancelled,
    /// See [`TinyAgentsError::MiddlewarePanic`].
    MiddlewarePanic,
    /// See [`TinyAgentsError::Middleware`].
    Middleware,
    /// See [`TinyAgentsError::Conflict`].
    Conflict,
}

impl ErrorKind {
    /// The kind's snake_case label, as used in events.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Validation => "validation",
            Self::Config => "config",
            Self::Model => "model",
            Self::Tool => "tool",
            Self::Timeout => "timeout",
            Self::RateLimited => "rate_limited",
            Self::LimitExceeded => "limit_exceeded",
            Self::Interrupted => "interrupted",
            Self::Cancelled => "cancelled",
            Self::MiddlewarePanic => "middleware_panic",
            Self::Middleware => "middleware",
            Self::Conflict => "conflict",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TinyAgentsError {
    /// A [`TinyAgentsError::Validation`] error.
    pub fn validation(message: impl Into<String>) -> Self {
        Self::Validation {
            message: message.into(),
        }
    }

    /// A [`TinyAgentsError::Config`] error without a path.
    pub fn config(message: impl Into<String>) -> Self {
        Self::Config {
            path: None,
            message: message.into(),
        }
    }

    /// A [`TinyAgentsError::Config`] error at `path`.
    pub fn config_at(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Config {
            path: Some(path.into()),
            message: message.into(),
        }
    }

    /// A [`TinyAgentsError::Model`] error.
    pub fn model(message: impl Into<String>, retryable: bool) -> Self {
        Self::Model {
            message: message.into(),
            retryable,
            retry_after: None,
            status: None,
            source: None,
        }
    }

    /// A [`TinyAgentsError::RateLimited`] error.
    ///
    /// ```
    /// use std::time::Duration;
    /// use tinyagents::harness::error::TinyAgentsError;
    ///
    /// let err = TinyAgentsError::rate_limited("global bucket empty", Some(Duration::from_secs(2)));
    /// assert!(err.is_retryable());
    /// assert_eq!(err.retry_after(), Some(Duration::from_secs(2)));
    /// ```
    pub fn rate_limited(message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        Self::RateLimited {
            message: message.into(),
            retry_after,
            status: None,
            source: None,
        }
    }

    /// The same error keeping `source` as its cause
    /// ([`std::error::Error::source`]). Kept by the classes a transport or
    /// provider failure takes, [`Model`](Self::Model) and
    /// [`RateLimited`](Self::RateLimited); any other class has no place for a
    /// cause and is returned unchanged.
    pub fn with_source(mut self, error: impl std::error::Error + Send + Sync + 'static) -> Self {
        if let Self::Model { source, .. } | Self::RateLimited { source, .. } = &mut self {
            *source = Some(ErrorSource::new(error));
        }
        self
    }

    /// The same error recording the HTTP status the provider answered with
    /// (kept by [`Model`](Self::Model) and [`RateLimited`](Self::RateLimited),
    /// as [`with_source`](Self::with_source)).
    pub fn with_status(mut self, code: u16) -> Self {
        if let Self::Model { status, .. } | Self::RateLimited { status, .. } = &mut self {
            *status = Some(code);
        }
        self
    }

    /// The HTTP status of the provider's error reply, when the error came from one.
    ///
    /// ```
    /// use tinyagents::harness::error::TinyAgentsError;
    ///
    /// let err = TinyAgentsError::model("`openai:gpt-4o` answered HTTP 503", true).with_status(503);
    /// assert_eq!(err.status(), Some(503));
    /// assert_eq!(TinyAgentsError::validation("no").status(), None);
    /// ```
    pub const fn status(&self) -> Option<u16> {
        match self {
            Self::Model { status, .. } | Self::RateLimited { status, .. } => *status,
            _ => None,
        }
    }

    /// A [`TinyAgentsError::Tool`] error.
    pub fn tool(tool: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Tool {
            tool: tool.into(),
            message: message.into(),
        }
    }

    /// A [`TinyAgentsError::Timeout`] error.
    pub fn timeout(what: impl Into<String>, after: Duration) -> Self {
        Self::Timeout {
            what: what.into(),
            after,
        }
    }

    /// A [`TinyAgentsError::LimitExceeded`] error.
    pub fn limit(limit: impl Into<String>, message: impl Into<String>) -> Self {
        Self::LimitExceeded {
            limit: limit.into(),
            message: message.into(),
        }
    }

    /// A [`TinyAgentsError::Interrupted`] error.
    pub fn interrupted(node: Option<String>, message: impl Into<String>) -> Self {
        Self::Interrupted {
            node,
            message: message.into(),
        }
    }

    /// A [`TinyAgentsError::Cancelled`] error.
    pub fn cancelled(reason: impl Into<String>) -> Self {
        Self::Cancelled { reason: reason.into() }
    }

    /// A [`TinyAgentsError::Conflict`] error.
    ///
    /// ```
    /// use tinyagents::harness::error::{ErrorKind, TinyAgentsError};
    ///
    /// let err = TinyAgentsError::conflict("checkpoint 4 of thread \"t\" was stored by another writer first");
    /// assert_eq!(err.kind(), ErrorKind::Conflict);
    /// assert!(!err.is_retryable(), "reload the state, do not retry the same write");
    /// ```
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::Conflict {
            message: message.into(),
        }
    }

    /// A [`TinyAgentsError::Middleware`] error.
    pub fn middleware(middleware: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Middleware {
            middleware: middleware.into(),
            message: message.into(),
        }
    }

    /// The error's class.
    pub const fn kind(&self) -> ErrorKind {
        match self {
            Self::Validation { .. } => ErrorKind::Validation,
            Self::Config { .. } => ErrorKind::Config,
            Self::Model { .. } => ErrorKind::Model,
            Self::Tool { .. } => ErrorKind::Tool,
            Self::Timeout { .. } => ErrorKind::Timeout,
            Self::RateLimited { .. } => ErrorKind::RateLimited,
            Self::LimitExceeded { .. } => ErrorKind::LimitExceeded,
            Self::Interrupted { .. } => ErrorKind::Interrupted,
            Self::Cancelled { .. } => ErrorKind::Cancelled,
            Self::MiddlewarePanic { .. } => ErrorKind::MiddlewarePanic,
            Self::Middleware { .. } => ErrorKind::Middleware,
            Self::Conflict { .. } => ErrorKind::Conflict,
        }
    }

    /// Whether trying the same call again may succeed.
    ///
    /// Retryable: model errors flagged retryable, timeouts and rate limits.
    /// Never retryable: interrupts, cancellations, validation, configuration,
    /// limits, conflicts (reload instead) and panics.
    pub const fn is_retryable(&self) -> bool {
        match self {
            Self::Model { retryable, .. } => *retryable,
            Self::Timeout { .. } | Self::RateLimited { .. } => true,
            _ => false,
        }
    }

    /// Whether this error pauses or stops the run on purpose (an interrupt or a
    /// cancellation): such errors are never retried, swallowed or turned into results.
    pub const fn is_control_flow(&self) -> bool {
        matches!(self, Self::Interrupted { .. } | Self::Cancelled { .. })
    }

    /// The provider's retry-after hint, when one was given.
    pub const fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Model { retry_after, .. } | Self::RateLimited { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
