//! [`RateLimiterMiddleware`]: token buckets keyed globally, per model or per
//! tool, behind the store's [`RateLimitStore`] trait ([`InMemoryRateLimitStore`] by default).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{ConfigErrors, MiddlewareConfig};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::middleware::{MiddlewareModelOutcome, MiddlewareToolOutcome, ModelHandler, ToolHandler};
use crate::harness::model::ModelRequest;
use crate::harness::tool::ToolCall;
use crate::store::{BucketSpec, InMemoryRateLimitStore, RateLimitStore};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`RateLimiterMiddleware`] (`type = "rate_limiter"`).
///
/// ```
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::RateLimiterConfig;
///
/// let config: RateLimiterConfig = from_toml_str("rate_per_second = 10.0\nburst = 10\nkey = \"model\"").unwrap();
/// let _limiter = config.build();
/// let err = from_toml_str::<RateLimiterConfig>("rate_per_second = -1.0").unwrap_err();
/// assert!(err.to_string().contains("`rate_per_second` = -1.0"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "rate_limiter", builds = RateLimiterMiddleware)]
pub struct RateLimiterConfig {
    /// Calls admitted per second, on average.
    #[config(default = 1.0, range = 0.001..=1000000.0, finite)]
    pub rate_per_second: f64,
    /// Calls admitted at once after a quiet spell (the bucket's capacity).
    #[config(default = 1, range = 1..=1000000)]
    pub burst: u32,
    /// What shares a bucket: `global` (every model and tool call), `model` (model calls, one bucket per model), `tool` (tool calls, one bucket per tool).
    #[config(default = "global")]
    pub key: RateKey,
    /// `wait` for a token, or `reject` the call with a `RateLimited` error when none is free.
    #[config(default = "wait")]
    pub mode: RateLimitMode,
    /// In `wait` mode, the longest wait before the call is refused instead, in milliseconds (unset: no limit).
    pub max_wait_ms: Option<u64>,
}

impl From<RateLimiterConfig> for RateLimiterMiddleware {
    fn from(c: RateLimiterConfig) -> Self {
        let key = c.key;
        let max_wait = if c.mode == RateLimitMode::Reject {
            Some(Duration::ZERO)
        } else {
            c.max_wait_ms.map(Duration::from_millis)
        };
        Self {
            spec: BucketSpec {
                rate_per_second: c.rate_per_second,
                burst: c.burst,
            },
            key,
            max_wait,
            store: Arc::new(InMemoryRateLimitStore::default()),
        }
    }
}

/// With an agent file's `[store]`: the buckets live on the store's server
/// when it keeps them (Redis), so every worker draws from the same bucket;
/// a store that keeps none (PostgreSQL, SQLite) leaves them in this process,
/// with a warning (and `tinyagents check` says so).
impl crate::config::BuildShared for RateLimiterConfig {
    fn build_shared(self, stores: &crate::store::SharedStores) -> crate::Result<RateLimiterMiddleware> {
        let limiter = RateLimiterMiddleware::from(self);
        Ok(match stores.rate_limits() {
            Ok(buckets) => limiter.with_store(buckets),
            Err(e) => {
                tracing::warn!(target: "tinyagents::config", "rate_limiter: its buckets stay in this process: {e}");
                limiter
            }
        })
    }
}

crate::config_enum! {
    /// What shares a bucket (`key = "…"`).
    pub enum RateKey {
        /// One bucket for every model and tool call.
        Global = "global",
        /// Model calls only, one bucket per model (`model:NAME`).
        PerModel = "model",
        /// Tool calls only, one bucket per tool (`tool:NAME`).
        PerTool = "tool",
    }
}

crate::config_enum! {
    /// What [`RateLimiterMiddleware`] does when no token is free (`mode = "…"`).
    pub enum RateLimitMode {
        /// Wait for the reserved slot (up to `max_wait_ms`, when set).
        Wait = "wait",
        /// Refuse the call with a `RateLimited` error.
        Reject = "reject",
    }
}

/// Admits model and/or tool calls through a token bucket shared by every run
/// the middleware serves: keyed globally, per model or per tool; in `wait`
/// mode a call waits for its reserved slot (on tokio's clock), in `reject`
/// mode (or past `max_wait`) it fails with [`TinyAgentsError::RateLimited`]
/// carrying a `retry_after`.
///
/// ```
/// use std::time::Duration;
/// use tinyagents::middleware::{RateKey, RateLimiterMiddleware};
///
/// let limiter = RateLimiterMiddleware::new(10.0, 10).keyed(RateKey::PerModel).reject();
/// # let _ = limiter;
/// ```
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub struct RateLimiterMiddleware {
    spec: BucketSpec,
    key: RateKey,
    max_wait: Option<Duration>,
    #[educe(Debug(ignore))]
    store: Arc<dyn RateLimitStore>,
}

impl RateLimiterMiddleware {
    /// A global bucket of `burst` tokens refilled at `rate_per_second`, in
    /// `wait` mode, with an in-memory store.
    ///
    /// # Panics
    /// If `rate_per_second` is not a positive finite number or `burst` is 0
    /// (use [`try_from_config`](Self::try_from_config) to get an error instead).
    pub fn new(rate_per_second: f64, burst: u32) -> Self {
        assert!(
            rate_per_second.is_finite() && rate_per_second > 0.0,
            "rate_per_second must be a positive finite number, got {rate_per_second}"
        );
        assert!(burst >= 1, "burst must be at least 1");
        Self {
            spec: BucketSpec { rate_per_second, burst },
            key: RateKey::Global,
            max_wait: None,
            store: Arc::new(InMemoryRateLimitStore::default()),
        }
    }

    /// A limiter from a config built in code, checked first.
    pub fn try_from_config(config: RateLimiterConfig) -> std::result::Result<Self, ConfigErrors> {
        config.check("")?;
        Ok(config.into())
    }

    /// The same limiter with another keying.
    pub fn keyed(mut self, key: RateKey) -> Self {
        self.key = key;
        self
    }

    /// The same limiter refusing a call when no token is free now.
    pub fn reject(mut self) -> Self {
        self.max_wait = Some(Duration::ZERO);
        self
    }

    /// The same limiter waiting at most `max_wait`, then refusing.
    pub fn max_wait(mut self, max_wait: Duration) -> Self {
        self.max_wait = Some(max_wait);
        self
    }

    /// The same limiter keeping its buckets in `store` (share a store between limiters or processes).
    pub fn with_store(mut self, store: Arc<dyn RateLimitStore>) -> Self {
        self.store = store;
        self
    }

    /// Takes a token for `key`: waits for it, or fails with `RateLimited`.
    async fn admit<C>(&self, ctx: &RunContext<C>, key: String) -> Result<()> {
        let reserved = self
            .store
            .reserve(&key, self.spec, Instant::now(), self.max_wait)
            .await
            .map_err(|e| {
                TinyAgentsError::middleware(
                    "rate_limiter",
                    format!("the rate-limit store could not admit a call on bucket `{key}`, so it was refused: {e}"),
                )
            })?;
        match reserved {
            Ok(wait) if wait.is_zero() => Ok(()),
            Ok(wait) => {
                let token = ctx.flow().cancellation().clone();
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = token.cancelled() => {
                        return Err(TinyAgentsError::cancelled("the run was cancelled while waiting for a rate limit"));
                    }
                }
                ctx.events()
                    .emit_with(EventKind::RateLimited, || AgentEvent::RateLimited {
                        run_id: ctx.run_id().clone(),
                        key,
                        waited: wait,
                        rejected: false,
                    });
                Ok(())
            }
            Err(retry_after) => {
                ctx.events()
                    .emit_with(EventKind::RateLimited, || AgentEvent::RateLimited {
                        run_id: ctx.run_id().clone(),
                        key: key.clone(),
                        waited: Duration::ZERO,
                        rejected: true,
                    });
                Err(TinyAgentsError::rate_limited(
                    format!(
                        "bucket `{key}` ({} per second, burst {}) has no token free; the next is free in {retry_after:?}",
                        self.spec.rate_per_second, self.spec.burst
                    ),
                    Some(retry_after),
                ))
            }
        }
    }
}

/// Admits model and tool calls through a token bucket keyed globally, per model or per tool; waits for a token or refuses with `RateLimited`.
#[middleware(
    builtin,
    name = "rate_limiter",
    config = RateLimiterConfig,
    doc(
        mutation = "None: it only delays or refuses calls.",
        events = "`RateLimited { key, waited, rejected: false }` after a call waited for its token; `RateLimited { key, waited: 0, rejected: true }` when it refused one.",
        failure = "Fails clearly: a refused call fails with `TinyAgentsError::RateLimited { retry_after }` (retryable), before the call is made. A run cancelled while waiting fails with `Cancelled`.",
        streaming = "Admission happens before the call starts; a streaming call is not throttled once admitted.",
        cache = "None: the request is not touched.",
        retries = "A wrap layer: inside `model_retry`/`model_fallback` every attempt takes a token (fallback calls use the fallback model's bucket with `key = \"model\"`); a `RateLimited` refusal is retryable and its `retry_after` sets the retry's wait (up to the retry's cap)."
    )
)]
impl RateLimiterMiddleware {
    #[wrap_model]
    async fn limit_model<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<MiddlewareModelOutcome> {
        let key = match self.key {
            RateKey::Global => Some("global".to_owned()),
            RateKey::PerModel => Some(format!(
                "model:{}",
                request
                    .route
                    .as_ref()
                    .map(|r| r.0.id())
                    .or(request.model.as_deref())
                    .unwrap_or("default")
            )),
            RateKey::PerTool => None,
        };
        if let Some(key) = key {
            self.admit(ctx, key).await?;
        }
        next.run(ctx, state, request).await
    }

    #[wrap_tool]
    async fn limit_tool<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        call: ToolCall,
        next: ToolHandler<'_, S, C>,
    ) -> Result<MiddlewareToolOutcome> {
        let key = match self.key {
            RateKey::Global => Some("global".to_owned()),
            RateKey::PerTool => Some(format!("tool:{}", call.name)),
            RateKey::PerModel => None,
        };
        if let Some(key) = key {
            self.admit(ctx, key).await?;
        }
        next.run(ctx, state, call).await
    }
}
