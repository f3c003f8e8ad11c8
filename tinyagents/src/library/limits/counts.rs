//! What the call-limit built-ins share: per-run counts (each
//! registration's typed run state), per-thread counts kept by the
//! instance or in a shared ledger, and the exit behaviours.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::store::{LedgerStore, Reservation};

/// One call-limit registration's counts in one run (its `run_state`).
///
/// A tool call is counted when the batch review admits it (so the calls of
/// a batch are judged together, in the model's order) and confirmed when it
/// starts (`before_tool`). What is still unconfirmed when the next batch is
/// reviewed or the run ends never ran (a later review rejected it, a person
/// was asked first, a jump left the batch, the run failed), and is given back.
#[derive(Debug, Default)]
pub(super) struct RunCounts {
    /// The calls counted in this run.
    pub(super) count: u32,
    /// Calls counted that have not started yet, by id.
    unstarted: Vec<String>,
}

impl RunCounts {
    /// Records the calls `ids` as counted and not started.
    pub(super) fn record(&mut self, ids: Vec<String>) {
        self.unstarted.extend(ids);
    }

    /// Call `id` started: it stays counted.
    pub(super) fn started(&mut self, id: &str) {
        if let Some(i) = self.unstarted.iter().position(|x| x == id) {
            self.unstarted.swap_remove(i);
        }
    }

    /// Takes the calls still not started off the count: how many were given back.
    pub(super) fn take_unstarted(&mut self) -> u32 {
        let n = u32::try_from(std::mem::take(&mut self.unstarted).len()).unwrap_or(u32::MAX);
        self.count = self.count.saturating_sub(n);
        n
    }
}

/// Counts per conversation thread ([`RunConfig::thread_id`](crate::harness::context::RunConfig::thread_id)),
/// across the runs of each thread: in this process, or in a shared
/// [`LedgerStore`] (one counter key per thread, `PREFIX:THREAD`) so every
/// process on the store counts the same calls. Runs without a thread are
/// not counted here.
#[derive(Debug, Default, Clone)]
pub(super) struct ThreadCounts {
    local: Arc<Mutex<HashMap<Arc<str>, u32>>>,
    shared: Option<SharedCounts>,
}

/// A shared ledger holding the thread counts.
#[derive(Clone, educe::Educe)]
#[educe(Debug)]
struct SharedCounts {
    #[educe(Debug(ignore))]
    ledger: Arc<dyn LedgerStore>,
    prefix: String,
    ttl: Duration,
    /// The middleware and its option named in a store error.
    #[educe(Debug(ignore))]
    owner: (&'static str, &'static str),
}

impl ThreadCounts {
    /// The same counts kept in `ledger` under `PREFIX:THREAD`, each key
    /// expiring `ttl` after its thread's last counted call.
    pub(super) fn shared(
        mut self,
        ledger: Arc<dyn LedgerStore>,
        prefix: String,
        ttl: Duration,
        owner: (&'static str, &'static str),
    ) -> Self {
        self.shared = Some(SharedCounts {
            ledger,
            prefix,
            ttl,
            owner,
        });
        self
    }

    /// Whether the counts are kept in a shared ledger.
    pub(super) fn is_shared(&self) -> bool {
        self.shared.is_some()
    }

    /// The in-process count of `thread` (what this process counted; a
    /// shared ledger's total is read with `LedgerStore::totals`).
    pub(super) fn count(&self, thread: &str) -> u32 {
        self.local
            .lock()
            .expect("thread counts lock")
            .get(thread)
            .copied()
            .unwrap_or(0)
    }

    /// Counts one more call of the run's thread if the thread is below
    /// `max`: the check and the count are one step (one lock, or one atomic
    /// ledger reservation), so concurrent calls, in this process or in any
    /// other on the ledger, never pass the limit together. `true` without a
    /// thread (nothing to count) or when admitted; `false` at the limit. A
    /// ledger that cannot answer is a `Middleware` error: the caller refuses
    /// the call.
    pub(super) async fn admit<C>(&self, ctx: &RunContext<C>, max: u32) -> Result<bool> {
        let Some(thread) = ctx.config().session() else {
            return Ok(true);
        };
        self.admit_in(thread, max).await
    }

    /// [`admit`](Self::admit) for session `thread`.
    pub(super) async fn admit_in(&self, thread: &Arc<str>, max: u32) -> Result<bool> {
        let admitted = match &self.shared {
            None => {
                let mut map = self.local.lock().expect("thread counts lock");
                let count = map.entry(thread.clone()).or_insert(0);
                let admitted = *count < max;
                if admitted {
                    *count += 1;
                }
                admitted
            }
            Some(shared) => {
                let key = format!("{}:{thread}", shared.prefix);
                let answer = shared
                    .ledger
                    .reserve(&key, u64::from(max), 1, shared.ttl)
                    .await
                    .map_err(|e| shared.unreachable(&key, &e))?;
                let admitted = matches!(answer, Reservation::Admitted(_));
                if admitted {
                    *self
                        .local
                        .lock()
                        .expect("thread counts lock")
                        .entry(thread.clone())
                        .or_insert(0) += 1;
                }
                admitted
            }
        };
        Ok(admitted)
    }

    /// The identity of these counts (clones share it).
    pub(super) fn key(&self) -> usize {
        Arc::as_ptr(&self.local).cast::<()>() as usize
    }

    /// Gives back `n` calls [`admit`](Self::admit) counted for the run's
    /// thread (calls that will not run after all).
    pub(super) async fn release<C>(&self, ctx: &RunContext<C>, n: u32) -> Result<()> {
        let Some(thread) = ctx.config().session() else {
            return Ok(());
        };
        if n == 0 {
            return Ok(());
        }
        if let Some(count) = self.local.lock().expect("thread counts lock").get_mut(thread) {
            *count = count.saturating_sub(n);
        }
        if let Some(shared) = &self.shared {
            let key = format!("{}:{thread}", shared.prefix);
            shared
                .ledger
                .settle(&key, u64::from(n), 0, shared.ttl)
                .await
                .map_err(|e| shared.unreachable(&key, &e))?;
        }
        Ok(())
    }

    /// Forgets the in-process count of `thread` (a conversation that starts
    /// over; a shared ledger's key expires with its `ttl`).
    pub(super) fn reset(&self, thread: &str) {
        self.local.lock().expect("thread counts lock").remove(thread);
    }
}

impl SharedCounts {
    fn unreachable(&self, key: &str, e: &TinyAgentsError) -> TinyAgentsError {
        let (owner, option) = self.owner;
        TinyAgentsError::middleware(
            owner,
            format!(
                "the shared call counter `{key}` could not answer ({e}); the call was not made: bring the store \
                 back, or remove `{option}`"
            ),
        )
    }
}

crate::config_enum! {
    /// What [`ToolCallLimitMiddleware`](super::ToolCallLimitMiddleware) does when a limit is reached.
    pub enum ExitBehavior {
        /// The blocked calls get an error result and the run goes on.
        Continue = "continue",
        /// Stop the run with a final assistant message naming the limit.
        End = "end",
        /// Fail the run with [`TinyAgentsError::LimitExceeded`](crate::harness::error::TinyAgentsError::LimitExceeded).
        Error = "error",
    }
}

crate::config_enum! {
    /// What [`ModelCallLimitMiddleware`](super::ModelCallLimitMiddleware) does when a limit is reached
    /// (a model call cannot be answered for the model, so there is no `continue`).
    pub enum ModelExitBehavior {
        /// Stop the run with a final assistant message naming the limit.
        End = "end",
        /// Fail the run with [`TinyAgentsError::LimitExceeded`](crate::harness::error::TinyAgentsError::LimitExceeded).
        Error = "error",
    }
}

/// `at most N per run and M per thread`, for messages.
pub(super) fn describe(run_limit: Option<u32>, thread_limit: Option<u32>) -> String {
    match (run_limit, thread_limit) {
        (Some(r), Some(t)) => format!("at most {r} per run and {t} per thread"),
        (Some(r), None) => format!("at most {r} per run"),
        (None, Some(t)) => format!("at most {t} per thread"),
        (None, None) => "unlimited".to_owned(),
    }
}
