//! [`PromptCacheGuardMiddleware`]: records a [`CacheLayoutEvent`] whenever the
//! cacheable prompt prefix changes between the model calls of a run, naming
//! the middleware that changed it.

use std::sync::{Arc, Mutex};

use crate::harness::cache::{
    fingerprint, CacheLayoutEvent, CacheLayoutTracking, PrefixEdit, PrefixFingerprint, PromptCacheLayout,
};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::middleware::hook::BeforeModel;
use crate::harness::middleware::{observe_hook, HookObserver};
use crate::harness::model::ModelRequest;
use tinyagents_macros::{middleware, MiddlewareConfig};

crate::config_enum! {
    /// What [`PromptCacheGuardMiddleware`] does when the stable prefix changes (`on_change = "…"`).
    pub enum OnPrefixChange {
        /// Emit `CacheLayoutChanged` and go on.
        Record = "record",
        /// Also fail the call with a `Validation` error naming who changed the prefix.
        Error = "error",
    }
}

/// Options of [`PromptCacheGuardMiddleware`] (`type = "prompt_cache_guard"`).
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::{OnPrefixChange, PromptCacheGuardConfig};
///
/// let c: PromptCacheGuardConfig = from_toml_str("on_change = \"error\"").unwrap();
/// assert_eq!(c.on_change, OnPrefixChange::Error);
/// assert!(from_toml_str::<PromptCacheGuardConfig>("on_change = \"ignore\"").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "prompt_cache_guard", builds = PromptCacheGuardMiddleware)]
pub struct PromptCacheGuardConfig {
    /// `record` (emit the event and go on) or `error` (also fail the call with a
    /// `Validation` error naming who changed the prefix).
    #[config(default = "record")]
    pub on_change: OnPrefixChange,
}

impl From<PromptCacheGuardConfig> for PromptCacheGuardMiddleware {
    fn from(c: PromptCacheGuardConfig) -> Self {
        Self {
            fail_on_change: c.on_change == OnPrefixChange::Error,
        }
    }
}

/// Watches the run's `before_model` hooks for the guard: fingerprints the
/// stable prefix before the first hook and after each, and records every hook
/// that changed it in the run's [`CacheLayoutTracking`].
struct PrefixWatch {
    tracking: Arc<CacheLayoutTracking>,
    last: Mutex<Option<PrefixFingerprint>>,
}

impl HookObserver<ModelRequest> for PrefixWatch {
    fn begin(&self, request: &ModelRequest) {
        let base = fingerprint(request);
        self.tracking.begin(base);
        *self.last.lock().expect("prefix watch lock") = Some(base);
    }

    fn after(&self, middleware: &Arc<str>, request: &ModelRequest) {
        let after = fingerprint(request);
        let mut last = self.last.lock().expect("prefix watch lock");
        if let Some(before) = last.replace(after).filter(|before| *before != after) {
            self.tracking.record(PrefixEdit {
                middleware: middleware.clone(),
                before,
                after,
            });
        }
    }
}

/// What the guard remembers of a run's previous call.
#[derive(Debug, Clone)]
struct Previous {
    layout: PromptCacheLayout,
    base: PrefixFingerprint,
    edits: Vec<PrefixEdit>,
}

/// Per-run: the previous call, and every event recorded.
#[derive(Debug, Default)]
pub struct CacheLayoutLog {
    previous: Mutex<Option<Previous>>,
    events: Mutex<Vec<CacheLayoutEvent>>,
}

impl CacheLayoutLog {
    /// The layout changes recorded in the run so far.
    pub fn events(&self) -> Vec<CacheLayoutEvent> {
        self.events.lock().expect("cache layout log lock").clone()
    }
}

/// Watches the stable prefix (stable system segments, tool schemas, leading
/// system messages) across the model calls of a run. When its fingerprint
/// differs from the previous call's, it records a [`CacheLayoutEvent`] naming
/// who changed it.
///
/// Attribution: in `before_agent` it turns on per-run layout tracking, so the
/// stack fingerprints the request around every `before_model` hook and
/// records each hook that changed the prefix. A middleware is named when its
/// edit differs from its edit on the previous call (a middleware that adds
/// the same stable text every call is not blamed); `agent` is named when the
/// request the loop built had already changed (its system prompt or tools);
/// `unattributed` when the change happened outside `before_model` hooks.
/// Middleware that edits only the volatile tail never appears.
///
/// ```
/// use tinyagents::middleware::PromptCacheGuardMiddleware;
/// use tinyagents::prelude::*;
///
/// let stack: MiddlewareStack<()> = MiddlewareStack::new().with(PromptCacheGuardMiddleware::new()).unwrap();
/// assert!(stack.names().contains(&"prompt_cache_guard"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptCacheGuardMiddleware {
    fail_on_change: bool,
}

impl PromptCacheGuardMiddleware {
    /// A guard that records changes.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same guard, also failing the call when the prefix changes.
    pub fn fail_on_change(mut self, fail: bool) -> Self {
        self.fail_on_change = fail;
        self
    }
}

/// Who changed the prefix between the previous call and this one.
///
/// Fingerprints cover the whole prefix, so a change upstream changes every
/// later hook's input and output: a hook is blamed when it edited the prefix
/// on one call and not the other, or edited the same input into a different
/// output. `agent` when the loop's own request differed; `unattributed` when
/// the final prefix differs from what the `before_model` hooks left.
fn blame(
    prev: &Previous,
    base: PrefixFingerprint,
    edits: &[PrefixEdit],
    tracked_final: PrefixFingerprint,
    now: PrefixFingerprint,
) -> Vec<String> {
    let mut by = Vec::new();
    if prev.base != base {
        by.push("agent".to_owned());
    }
    let find = |list: &[PrefixEdit], name: &str| {
        list.iter()
            .find(|e| &*e.middleware == name)
            .map(|e| (e.before, e.after))
    };
    let mut names: Vec<&str> = edits.iter().map(|e| &*e.middleware).collect();
    for e in &prev.edits {
        if !names.contains(&&*e.middleware) {
            names.push(&e.middleware);
        }
    }
    for name in names {
        let changed = match (find(edits, name), find(&prev.edits, name)) {
            (Some(now), Some(then)) => now.0 == then.0 && now.1 != then.1,
            _ => true,
        };
        if changed {
            by.push(name.to_owned());
        }
    }
    if tracked_final != now || by.is_empty() {
        by.push("unattributed".to_owned());
    }
    by
}

/// Records a `CacheLayoutChanged` event whenever the cacheable prefix changes between calls, naming who changed it.
#[middleware(
    builtin,
    name = "prompt_cache_guard",
    config = PromptCacheGuardConfig,
    doc(
        mutation = "None: it only reads the request. It observes the run's `before_model` hooks (a hook observer installed in `before_agent`), fingerprinting the stable prefix around each to learn which middleware changed it.",
        events = "`CacheLayoutChanged { event: CacheLayoutEvent { step, before, after, changed_by, changed_parts } }` on each call whose stable-prefix fingerprint differs from the previous call's; events are also kept in the run's `CacheLayoutLog`.",
        failure = "Records and goes on by default; with `on_change = \"error\"` a prefix change fails the call with a `Validation` error naming who changed it (fail closed for strict cache budgets).",
        streaming = "None: it checks the request in `before_model_stream`, after every `before_model` hook, before the stream starts.",
        cache = "This is the observer of the provider prompt/KV-cache layout: every change to stable segments, tool schemas or leading system messages between calls is reported with the middleware responsible; volatile-tail edits never are.",
        retries = "Checks once per turn, outside the model onion: retries and fallbacks of one turn send the same prefix and are not compared with each other."
    )
)]
impl PromptCacheGuardMiddleware {
    #[before_agent]
    fn track<C>(&self, ctx: &mut RunContext<C>) -> Result<()> {
        // (`local_with` holds the run locals while it builds: the tracking is fetched first.)
        let tracking = ctx.locals().local::<CacheLayoutTracking>();
        let watch = ctx.locals().local_with(|| PrefixWatch {
            tracking,
            last: Mutex::new(None),
        });
        observe_hook::<BeforeModel, C>(ctx, watch);
        Ok(())
    }

    #[before_model_stream]
    fn check<C>(&self, ctx: &mut RunContext<C>, request: &mut ModelRequest) -> Result<()> {
        let layout = PromptCacheLayout::of(request);
        let (base, edits) = ctx.locals().local::<CacheLayoutTracking>().take();
        let tracked_final = edits.last().map(|e| e.after).or(base).unwrap_or(layout.fingerprint);
        let base = base.unwrap_or(layout.fingerprint);
        let log: Arc<CacheLayoutLog> = ctx.locals().local::<CacheLayoutLog>();
        let previous = log.previous.lock().expect("cache layout log lock").replace(Previous {
            layout: layout.clone(),
            base,
            edits: edits.clone(),
        });
        let Some(prev) = previous else {
            return Ok(());
        };
        if prev.layout.fingerprint == layout.fingerprint {
            return Ok(());
        }
        let event = CacheLayoutEvent {
            step: ctx.counters().steps,
            before: prev.layout.fingerprint,
            after: layout.fingerprint,
            changed_by: blame(&prev, base, &edits, tracked_final, fingerprint(request)),
            changed_parts: prev.layout.diff(&layout),
        };
        log.events.lock().expect("cache layout log lock").push(event.clone());
        let error = self.fail_on_change.then(|| {
            TinyAgentsError::validation(format!(
                "the cacheable prompt prefix changed at step {} ({} -> {}), by {}; parts: {}",
                event.step,
                event.before,
                event.after,
                event.changed_by.join(", "),
                event.changed_parts.join(", ")
            ))
        });
        ctx.events()
            .emit_with(EventKind::CacheLayoutChanged, || AgentEvent::CacheLayoutChanged {
                run_id: ctx.run_id().clone(),
                event: Box::new(event),
            });
        match error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}
