//! [`RedisStore`]: token buckets, ledgers and checkpoints (so pending
//! approvals) on a Redis server, each operation one Lua script run
//! atomically by the server.

use std::time::Duration;

use async_trait::async_trait;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::Script;

use super::{check_units, sql, LedgerStore, LedgerTotals, Reservation};
use super::{BucketSpec, RateLimitStore};
use crate::graph::{Checkpoint, Checkpointer};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::secrets::{mask_url as redact, redactor};

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

/// A checkpoint put. KEYS[1] the thread's hash (`latest`, and per checkpoint
/// `v:SEQ` format version, `b:SEQ` body, `d:SEQ` SHA-256); ARGV seq,
/// version, body, digest. Moves `latest` forward and stores the record, or
/// does neither. Returns 1 when stored, 0 when the thread has this seq or a
/// later one.
const PUT: &str = r"
local latest = tonumber(redis.call('HGET', KEYS[1], 'latest') or '-1')
local seq = tonumber(ARGV[1])
if seq <= latest then return 0 end
redis.call('HSET', KEYS[1], 'latest', ARGV[1], 'v:' .. ARGV[1], ARGV[2], 'b:' .. ARGV[1], ARGV[3], 'd:' .. ARGV[1], ARGV[4])
return 1
";

/// The latest checkpoint. KEYS[1] the thread's hash. Returns {} when the
/// thread has none, else {seq, version or false, body or false, digest or false}.
const LATEST: &str = r"
local latest = redis.call('HGET', KEYS[1], 'latest')
if not latest then return {} end
local v = redis.call('HMGET', KEYS[1], 'v:' .. latest, 'b:' .. latest, 'd:' .. latest)
return {latest, v[1], v[2], v[3]}
";

/// Deletes all but the newest ARGV[1] checkpoints of KEYS[1]; returns how many went.
const PRUNE: &str = r"
local seqs = {}
for _, f in ipairs(redis.call('HKEYS', KEYS[1])) do
  local s = string.match(f, '^d:(%d+)$')
  if s then table.insert(seqs, tonumber(s)) end
end
table.sort(seqs)
local keep = tonumber(ARGV[1])
local gone = 0
for i = 1, #seqs - keep do
  local s = string.format('%d', seqs[i])
  redis.call('HDEL', KEYS[1], 'v:' .. s, 'b:' .. s, 'd:' .. s)
  gone = gone + 1
end
return gone
";

/// The largest sequence number the Redis store keeps: its scripts compare
/// numbers as Lua doubles, exact up to 2^53.
const MAX_SEQ: u64 = 1 << 53;

/// Rate-limit buckets, ledgers (budgets, counters) and checkpoints on a Redis server,
/// shared by every process connected to it (feature `redis`).
///
/// Each admission, reservation and settlement is **one** round trip: a Lua
/// script the server runs atomically (`EVALSHA`), so no process ever reads
/// a bucket or a budget and writes it back in two steps. Buckets run on the
/// server's clock (`TIME`), one clock for every process. Keys are prefixed
/// `tinyagents:` and expire when unused (a bucket once full again, a
/// ledger after its ttl).
///
/// Checkpoints (and so the approvals a paused run waits for) are one hash
/// per thread, `tinyagents:checkpoints:THREAD`: a `put` moves the thread's
/// latest sequence number forward and stores the checkpoint in one script,
/// or does neither; `latest` checks the record's format version and SHA-256
/// as the SQL stores do. They are as durable as the server is configured
/// to be: run Redis with its append-only file (`appendonly yes`) when
/// checkpoints must survive a restart of the server.
///
/// Reads and writes are bounded: connecting and each command time out after
/// 5 seconds, and a failure is an error, on which the limiter and the
/// budget refuse the call and a checkpoint write fails the run (fail closed).
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
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
pub struct RedisStore {
    #[educe(Debug(ignore))]
    conn: ConnectionManager,
    url: String,
    #[educe(Debug(ignore))]
    bucket: Script,
    #[educe(Debug(ignore))]
    reserve: Script,
    #[educe(Debug(ignore))]
    settle: Script,
    #[educe(Debug(ignore))]
    put: Script,
    #[educe(Debug(ignore))]
    latest: Script,
    #[educe(Debug(ignore))]
    prune: Script,
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
        redactor().add_url(url);
        Self::open(url).await.map_err(|e| redactor().redact_error(e))
    }

    /// [`connect`](Self::connect) before its error passes the redactor.
    async fn open(url: &str) -> Result<Self> {
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
            put: Script::new(PUT),
            latest: Script::new(LATEST),
            prune: Script::new(PRUNE),
        })
    }

    /// Every checkpoint of a thread, oldest first, each checked as
    /// [`latest`](Checkpointer::latest) checks one.
    ///
    /// # Errors
    /// When the server cannot answer, or naming the first damaged checkpoint.
    pub async fn history(&self, thread_id: &str) -> Result<Vec<Checkpoint>> {
        let fields: std::collections::HashMap<String, String> = redis::cmd("HGETALL")
            .arg(thread_key(thread_id))
            .query_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.failed("reading a thread's history", e))?;
        let mut seqs: Vec<i64> = fields
            .keys()
            .filter_map(|f| f.strip_prefix("d:")?.parse().ok())
            .collect();
        seqs.sort_unstable();
        seqs.into_iter()
            .map(|seq| {
                let get = |p: &str| fields.get(&format!("{p}:{seq}")).map(String::as_str);
                let version = get("v").and_then(|v| v.parse().ok()).unwrap_or(0);
                sql::decode(
                    &self.url,
                    thread_id,
                    seq,
                    version,
                    get("b").unwrap_or_default(),
                    get("d").unwrap_or_default(),
                )
            })
            .collect()
    }

    /// Deletes every checkpoint of a thread but the newest `keep` (at least
    /// one is always kept, so the thread goes on); returns how many went.
    ///
    /// # Errors
    /// When the server cannot answer.
    pub async fn prune(&self, thread_id: &str, keep: usize) -> Result<u64> {
        self.prune
            .key(thread_key(thread_id))
            .arg(keep.max(1))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.failed("pruning a thread", e))
    }

    fn failed(&self, what: &str, e: redis::RedisError) -> TinyAgentsError {
        let e = redactor().redact(&e.to_string()).into_owned();
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

/// The hash holding a thread's checkpoints.
fn thread_key(thread_id: &str) -> String {
    format!("tinyagents:checkpoints:{thread_id}")
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

#[async_trait]
impl Checkpointer for RedisStore {
    async fn put(&self, checkpoint: &Checkpoint) -> Result<()> {
        if checkpoint.seq > MAX_SEQ {
            return Err(TinyAgentsError::validation(format!(
                "checkpoint store `{}`: checkpoint {} of thread {:?} has a sequence number above {MAX_SEQ}, the most \
                 the Redis store keeps exactly",
                self.url,
                checkpoint.seq,
                crate::harness::shorten::shorten(&checkpoint.thread_id, 80)
            )));
        }
        let (seq, version, body, digest) = sql::encode(checkpoint)?;
        let stored: i64 = self
            .put
            .key(thread_key(&checkpoint.thread_id))
            .arg(seq)
            .arg(version)
            .arg(body)
            .arg(digest)
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.failed("storing a checkpoint", e))?;
        if stored == 1 {
            Ok(())
        } else {
            Err(sql::exists(&self.url, checkpoint))
        }
    }

    async fn latest(&self, thread_id: &str) -> Result<Option<Checkpoint>> {
        let record: Vec<Option<String>> = self
            .latest
            .key(thread_key(thread_id))
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(|e| self.failed("reading a checkpoint", e))?;
        let [seq, version, body, digest] = match <[Option<String>; 4]>::try_from(record) {
            Ok(fields) => fields,
            Err(empty) if empty.is_empty() => return Ok(None),
            Err(other) => {
                return Err(TinyAgentsError::config(format!(
                    "store `{}` (Redis): reading a checkpoint gave {} values, not 4; the script was replaced: \
                     restart the server or flush its script cache",
                    self.url,
                    other.len()
                )))
            }
        };
        let seq: i64 = seq.as_deref().and_then(|s| s.parse().ok()).ok_or_else(|| {
            TinyAgentsError::config(format!(
                "checkpoint store `{}`: thread {:?} has a `latest` field that is not a sequence number; the key \
                 was written by something else: delete it",
                self.url,
                crate::harness::shorten::shorten(thread_id, 80)
            ))
        })?;
        let (Some(version), Some(body), Some(digest)) = (version, body, digest) else {
            return Err(TinyAgentsError::config(format!(
                "checkpoint store `{}`: thread {:?} was last written at checkpoint {seq}, and that checkpoint is \
                 missing; no older checkpoint is used in its place (a resume from an older one would run finished \
                 steps again): restore it, or set the thread's `latest` back on purpose",
                self.url,
                crate::harness::shorten::shorten(thread_id, 80)
            )));
        };
        let version: i64 = version.parse().unwrap_or(0);
        sql::decode(&self.url, thread_id, seq, version, &body, &digest).map(Some)
    }
}
