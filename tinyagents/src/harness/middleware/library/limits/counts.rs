//! What the call-limit built-ins share: per-run counts kept in the run
//! context (one slot per middleware instance), per-thread counts kept by the
//! instance, and the exit behaviours.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::harness::context::RunContext;

/// A fresh key for one middleware instance's per-run counts.
pub(super) fn instance_key() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Per-run counts of every call-limit instance, by instance key.
#[derive(Default)]
pub(super) struct RunCounts(Mutex<HashMap<u64, u32>>);

impl RunCounts {
    /// This run's count for instance `key`.
    pub(super) fn get<C>(ctx: &RunContext<C>, key: u64) -> u32 {
        let counts = ctx.local::<RunCounts>();
        let map = counts.0.lock().expect("run counts lock");
        map.get(&key).copied().unwrap_or(0)
    }

    /// Adds `n` to this run's count for instance `key`.
    pub(super) fn add<C>(ctx: &RunContext<C>, key: u64, n: u32) {
        let counts = ctx.local::<RunCounts>();
        *counts.0.lock().expect("run counts lock").entry(key).or_insert(0) += n;
    }
}

/// Counts per conversation thread ([`RunConfig::thread_id`](crate::harness::context::RunConfig::thread_id)),
/// across the runs of each thread. Runs without a thread are not counted here.
#[derive(Debug, Default, Clone)]
pub(super) struct ThreadCounts(Arc<Mutex<HashMap<Arc<str>, u32>>>);

impl ThreadCounts {
    /// The count of the run's thread (0 without a thread).
    pub(super) fn get<C>(&self, ctx: &RunContext<C>) -> u32 {
        ctx.config().thread_id.as_deref().map_or(0, |t| self.count(t))
    }

    /// The count of `thread`.
    pub(super) fn count(&self, thread: &str) -> u32 {
        self.0
            .lock()
            .expect("thread counts lock")
            .get(thread)
            .copied()
            .unwrap_or(0)
    }

    /// Adds `n` to the count of the run's thread.
    pub(super) fn add<C>(&self, ctx: &RunContext<C>, n: u32) {
        if let Some(thread) = &ctx.config().thread_id {
            *self
                .0
                .lock()
                .expect("thread counts lock")
                .entry(thread.clone())
                .or_insert(0) += n;
        }
    }

    /// Counts one more for `thread` if its count is below `max` (check and
    /// count under one lock, so concurrent calls never pass the limit
    /// together); `false` when the thread is at its limit.
    pub(super) fn admit(&self, thread: &Arc<str>, max: u32) -> bool {
        let mut map = self.0.lock().expect("thread counts lock");
        let count = map.entry(thread.clone()).or_insert(0);
        if *count >= max {
            return false;
        }
        *count += 1;
        true
    }

    /// Forgets the count of `thread` (a conversation that starts over).
    pub(super) fn reset(&self, thread: &str) {
        self.0.lock().expect("thread counts lock").remove(thread);
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
