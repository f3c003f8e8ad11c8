//! Rate-limit buckets: the [`RateLimitStore`] trait the `rate_limiter`
//! built-in takes its tokens from, the bucket's shape ([`BucketSpec`]), and
//! the in-memory store ([`InMemoryRateLimitStore`]); `RedisStore` (feature
//! `redis`) shares buckets between processes.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::harness::error::Result;

/// The shape of a token bucket: it holds at most `burst` tokens and refills at
/// `rate_per_second`; each call takes one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BucketSpec {
    /// Tokens added per second.
    pub rate_per_second: f64,
    /// The bucket's capacity: how many calls may go at once after a quiet spell.
    pub burst: u32,
}

impl BucketSpec {
    /// The time one token takes to refill.
    pub fn interval(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.rate_per_second)
    }
}

/// Where bucket state lives. The in-memory default serves one process; a
/// shared store (`RedisStore` in [`crate::store`], feature `redis`)
/// serves every process that connects to it.
///
/// `reserve` takes one token of bucket `key` and says how long the caller
/// must wait before using it (zero: at once). When that wait would be
/// longer than `max_wait`, it reserves nothing and returns `Ok(Err(wait))`.
/// Reservations are exact under contention: each caller gets its own slot,
/// so N concurrent callers are admitted exactly as fast as the bucket allows.
/// `now` is the caller's clock (tokio's, so a paused test clock drives the
/// in-memory store); a shared store keeps one clock for every process (the
/// server's) and ignores it. A store that cannot answer (a server down)
/// returns the outer `Err`, and the call is refused: a limiter fails closed.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use tinyagents::middleware::RateLimiterMiddleware;
/// use tinyagents::store::{BucketSpec, InMemoryRateLimitStore, RateLimitStore};
///
/// /// Prefixes every key with a tenant, over the in-memory store.
/// struct Tenant(&'static str, InMemoryRateLimitStore);
///
/// #[async_trait::async_trait]
/// impl RateLimitStore for Tenant {
///     async fn reserve(
///         &self,
///         key: &str,
///         spec: BucketSpec,
///         now: tokio::time::Instant,
///         max_wait: Option<Duration>,
///     ) -> tinyagents::Result<Result<Duration, Duration>> {
///         Ok(self.1.reserve_now(&format!("{}/{key}", self.0), spec, now, max_wait))
///     }
/// }
///
/// let limiter = RateLimiterMiddleware::new(5.0, 5).with_store(Arc::new(Tenant("acme", Default::default())));
/// # let _ = limiter;
/// ```
#[async_trait::async_trait]
pub trait RateLimitStore: Send + Sync {
    /// Reserves one token; see the trait docs.
    ///
    /// # Errors
    /// When the store cannot answer; the limiter then refuses the call.
    async fn reserve(
        &self,
        key: &str,
        spec: BucketSpec,
        now: Instant,
        max_wait: Option<Duration>,
    ) -> Result<std::result::Result<Duration, Duration>>;
}

/// The in-memory [`RateLimitStore`]: one "theoretical arrival time" per key
/// (GCRA, the exact form of a token bucket), behind a mutex.
///
/// ```
/// use std::time::Duration;
/// use tinyagents::store::{BucketSpec, InMemoryRateLimitStore};
///
/// let store = InMemoryRateLimitStore::default();
/// let spec = BucketSpec { rate_per_second: 10.0, burst: 2 };
/// let now = tokio::time::Instant::now();
/// assert_eq!(store.reserve_now("k", spec, now, None), Ok(Duration::ZERO));
/// assert_eq!(store.reserve_now("k", spec, now, None), Ok(Duration::ZERO));
/// assert_eq!(store.reserve_now("k", spec, now, None), Ok(Duration::from_millis(100)));
/// assert_eq!(store.reserve_now("k", spec, now, Some(Duration::ZERO)), Err(Duration::from_millis(200)));
/// ```
#[derive(Debug, Default)]
pub struct InMemoryRateLimitStore {
    arrivals: Mutex<HashMap<String, Instant>>,
}

impl InMemoryRateLimitStore {
    /// Reserves one token at once (the in-memory store never waits on I/O);
    /// the same answer as [`RateLimitStore::reserve`].
    pub fn reserve_now(
        &self,
        key: &str,
        spec: BucketSpec,
        now: Instant,
        max_wait: Option<Duration>,
    ) -> std::result::Result<Duration, Duration> {
        let interval = spec.interval();
        let tolerance = interval * spec.burst.saturating_sub(1);
        let mut arrivals = self.arrivals.lock().expect("rate limit store lock");
        let tat = arrivals.get(key).copied().map_or(now, |t| t.max(now));
        let allowed_at = tat.checked_sub(tolerance).unwrap_or(now).max(now);
        let wait = allowed_at - now;
        if max_wait.is_some_and(|max| wait > max) {
            return Err(wait);
        }
        arrivals.insert(key.to_owned(), tat + interval);
        Ok(wait)
    }
}

#[async_trait::async_trait]
impl RateLimitStore for InMemoryRateLimitStore {
    async fn reserve(
        &self,
        key: &str,
        spec: BucketSpec,
        now: Instant,
        max_wait: Option<Duration>,
    ) -> Result<std::result::Result<Duration, Duration>> {
        Ok(self.reserve_now(key, spec, now, max_wait))
    }
}
