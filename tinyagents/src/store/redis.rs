//! [`RedisStore`]: token buckets and ledgers on a Redis server, each
//! operation one Lua script run atomically by the server.

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;

use super::url::redact;
use super::{check_units, LedgerStore, LedgerTotals, Reservation};
use crate::harness::error::{Result, TinyAgentsError};
use crate::middleware::{BucketSpec, RateLimitStore};

/// GCRA (the exact form of a token bucket) on the server's clock: one
/// theoretical arrival time per key, in microseconds. KEYS[1] the bucket;
/// ARGV interval_us, tolerance_us, max_wait_us (-1: none).
/// Returns {admitted (1/0), wait_us}.
const BUCKET: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local max_wait = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allowed = tat - tolerance
if allowed < now then allowed = now end
local wait = allowed - now
if max_wait >= 0 and wait > max_wait then return {0, wait} end
local next_tat = tat + interval
redis.call('SET', KEYS[1], string.format('%.0f', next_tat), 'PX', math.floor((next_tat - now) / 1000) + 1000)
return {1, wait}
";

/// A ledger reservation. KEYS[1] the ledger (a hash: spent, held);
/// ARGV cap, amount, ttl_ms. Returns {admitted (1/0), spent, held}.
const RESERVE: &str = r"
local spent = tonumber(redis.call('HGET', KEYS[1], 'spent') or '0')
local held = tonumber(redis.call('HGET', KEYS[1], 'held') or '0')
local cap = tonumber(ARGV[1])
local amount = tonumber(ARGV[2])
local used = spent + held
if used >= cap or used + amount > cap then return {0, spent, held} end
held = redis.call('HINCRBY', KEYS[1], 'held', amount)
redis.call('HSETNX', KEYS[1], 'spent', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, spent, held}
";

/// A ledger settlement. KEYS[1] the ledger; ARGV reserved, actual, ttl_ms.
/// Returns {spent, held}.
const SETTLE: &str = r"
local held = redis.call('HINCRBY', KEYS[1], 'held', 0 - tonumber(ARGV[1]))
if held < 0 then
  redis.call('HSET', KEYS[1], 'held', 0)
  held = 0
end
local spent = redis.call('HINCRBY', KEYS[1], 'spent', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {spent, held}
";

/// Rate-limit buckets and ledgers (budgets, counters) on a Redis server,
/// shared by every process connected to it (feature `redis`).
///
/// Each admission, reservation and settlement is **one** round trip: a Lua
/// script the server runs atomically (`EVALSHA`), so no process ever reads
/// a bucket or a budget and writes it back in two steps. Buckets run on the
/// server's clock (`TIME`), one clock for every process. Keys are prefixed
/// `tinyagents:` and expire when unused (a bucket once full again, a
/// ledger after its ttl).
///
/// Reads and writes are bounded: connecting and each command time out after
/// 5 seconds, and a failure is an error, on which the limiter and the
/// budget refuse the call (fail closed).
///
/// ```no_run
/// use std::sync::Arc;
/// use tinyagents::middleware::RateLimiterMiddleware;
/// use tinyagents::store::RedisStore;
///
/// # async fn demo() -> tinyagents::Result<()> {
/// let redis = Arc::new(RedisStore::connect("redis://127.0.0.1:6379").await?);
/// let limiter = RateLimiterMiddleware::new(10.0, 10).with_store(redis);
/// # let _ = limiter; Ok(()) }
/// ```
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    url: String,
    bucket: Script,
    reserve: Script,
    settle: Script,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

const TIMEOUT: Duration = Duration::from_secs(5);

impl RedisStore {
    /// Connects to the server at `url` (`redis://HOST[:PORT][/DB]`, or
    /// `rediss://` with TLS where the redis crate supports it) and checks it answers.
    ///
    /// # Errors
    /// A `Config` error naming the URL (password hidden) and the feature
    /// when the URL is malformed or the server cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        let shown = redact(url);
        let unreachable = |e: redis::RedisError| {
            TinyAgentsError::config(format!(
                "store url `{shown}` (feature `redis`): cannot reach the Redis server: {e}; start it, or fix the url"
            ))
        };
        let client = redis::Client::open(url).map_err(|e| {
            TinyAgentsError::config(format!("store url `{shown}` (feature `redis`) is not a Redis url: {e}"))
        })?;
        let config = ConnectionManagerConfig::new()
            .set_number_of_retries(1)
            .set_connection_timeout(TIMEOUT)
            .set_response_timeout(TIMEOUT);
        let mut conn = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(unreachable)?;
        let _: String = redis::cmd("PING").query_async(&mut conn).await.map_err(unreachable)?;
        Ok(Self {
            conn,
            url: shown,
            bucket: Script::new(BUCKET),
            reserve: Script::new(RESERVE),
            settle: Script::new(SETTLE),
        })
    }

    fn failed(&self, what: &str, e: redis::RedisError) -> TinyAgentsError {
        TinyAgentsError::config(format!("store `{}` (Redis): {what} failed: {e}", self.url))
    }

    fn totals(&self, key: &str, spent: i64, held: i64) -> Result<LedgerTotals> {
        let check = |name: &str, n: i64| {
            u64::try_from(n).map_err(|_| {
                TinyAgentsError::config(format!(
                    "store `{}` (Redis): ledger `{key}` holds {name} = {n}, not a count; the key was written by \
                     something else: delete it",
                    self.url
                ))
            })
        };
        Ok(LedgerTotals {
            spent: check("spent", spent)?,
            held: check("held", held)?,
        })
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros())
        .unwrap_or(u64::MAX)
        .min(super::MAX_LEDGER_UNITS)
}

fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis())
        .unwrap_or(u64::MAX)
        .clamp(1, super::MAX_LEDGER_UNITS)
}

#[async_trait]
impl RateLimitStore for RedisStore {
    async fn reserve(
        &self,
        key: &str,
        spec: BucketSpec,
        _now: tokio::time::Instant,
        max_wait: Option<Duration>,
    ) -> Result<std::result::Result<Duration, Duration>> {
        let interval = spec.interval();
        let tolerance = interval * spec.burst.saturating_sub(1);
        let max_wait = max_wait.map_or(-1, |w| micros(w) as i64);
        let mut conn = self.conn.clone();
        let (admitted, wait): (i64, i64) = self
            .bucket
            .key(format!("tinyagents:bucket:{key}"))
            .arg(micros(interval).max(1))
            .arg(micros(tolerance))
            .arg(max_wait)
            .invoke_async(&mut conn)
            .await
            .map_err(|e| self.failed("a rate-limit admission", e))?;
        let wait = Duration::from_micros(u64::try_from(wait).map_err(|_| {
            TinyAgentsError::config(format!(
                "store `{}` (Redis): bucket `{key}` answered a negative wait ({wait} µs)",
                self.url
            ))
        })?);
        Ok(if admitted == 1 { Ok(wait) } else { Err(wait) })
    }
}

#[async_trait]
impl LedgerStore for RedisStore {
    async fn reserve(&self, key: &str, cap: u64, amount: u64, ttl: Duration) -> Result<Reservation> {
        check_units(key, &[("cap", cap), ("amount", amount)])?;
        let mut conn = self.conn.clone();
        let (admitted, spent, held): (i64, i64, i64) = self
            .reserve
            .key(format!("tinyagents:ledger:{key}"))
            .arg(cap)
            .arg(amount)
            .arg(ttl_ms(ttl))
            .invoke_async(&mut conn)
            .await
            .map_err(|e| self.failed("a ledger reservation", e))?;
        let totals = self.totals(key, spent, held)?;
        Ok(if admitted == 1 {
            Reservation::Admitted(totals)
        } else {
            Reservation::Refused(totals)
        })
    }

    async fn settle(&self, key: &str, reserved: u64, actual: u64, ttl: Duration) -> Result<LedgerTotals> {
        check_units(key, &[("reserved", reserved), ("actual", actual)])?;
        let mut conn = self.conn.clone();
        let (spent, held): (i64, i64) = self
            .settle
            .key(format!("tinyagents:ledger:{key}"))
            .arg(reserved)
            .arg(actual)
            .arg(ttl_ms(ttl))
            .invoke_async(&mut conn)
            .await
            .map_err(|e| self.failed("a ledger settlement", e))?;
        self.totals(key, spent, held)
    }

    async fn totals(&self, key: &str) -> Result<LedgerTotals> {
        let mut conn = self.conn.clone();
        let (spent, held): (Option<i64>, Option<i64>) = redis::cmd("HMGET")
            .arg(format!("tinyagents:ledger:{key}"))
            .arg("spent")
            .arg("held")
            .query_async(&mut conn)
            .await
            .map_err(|e| self.failed("a ledger read", e))?;
        self.totals(key, spent.unwrap_or(0), held.unwrap_or(0))
    }
}
