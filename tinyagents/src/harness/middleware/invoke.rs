//! The one mechanism every hook invocation goes through: balanced
//! `MiddlewareStarted`/`MiddlewareCompleted` events (also on error, panic and
//! drop) and panic capture.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use super::run_state::StateSlot;
use super::sync_forms::SyncForms;
use super::{HookKind, Middleware};
use crate::harness::context::{JumpSet, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind, EventSink, HookOutcome};

/// A registered middleware as the dispatch lists hold it: the value, its
/// synchronous forms, its (possibly user-given) name, and what it declared.
pub(crate) struct Slot<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    pub(crate) mw: Arc<dyn Middleware<S, C>>,
    /// The synchronous forms, called through one vtable straight into the
    /// middleware's own code ([`SyncForms`]).
    pub(crate) forms: Box<dyn SyncForms<S, C>>,
    pub(crate) name: Arc<str>,
    pub(crate) jumps: JumpSet,
    pub(crate) sync: bool,
    /// Its run state cell, when it keeps run state.
    pub(crate) state: Option<StateSlot>,
}

impl<S, C> Slot<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// Names this registration's run state cell in `ctx` for the hook about
    /// to be called (nothing for a middleware without run state).
    #[inline(always)]
    pub(crate) fn enter(&self, ctx: &mut RunContext<C>) {
        if let Some(slot) = self.state {
            ctx.set_state_slot(slot);
        }
    }
}

struct Pending {
    sink: Arc<dyn EventSink>,
    run_id: Arc<str>,
    name: Arc<str>,
}

/// Emits `MiddlewareStarted` when opened and exactly one `MiddlewareCompleted`:
/// from [`Bracket::close`], or from `Drop` with [`HookOutcome::Cancelled`] when
/// the hook's future was dropped before it finished. Costs two mask checks
/// when the sink wants neither event.
pub(crate) struct Bracket {
    /// Boxed, so a bracket no one watches is one null word in the hook's
    /// future (a wrap layer's future holds one across its whole pass).
    pending: Option<Box<Pending>>,
    hook: HookKind,
}

impl Bracket {
    #[inline(always)]
    pub(crate) fn open<C>(ctx: &RunContext<C>, name: &Arc<str>, hook: HookKind) -> Self {
        if ctx.events().wants(EventKind::MiddlewareStarted) {
            ctx.events().sink().emit(AgentEvent::MiddlewareStarted {
                run_id: ctx.run_id().clone(),
                middleware: name.clone(),
                hook,
            });
        }
        let pending = ctx.events().wants(EventKind::MiddlewareCompleted).then(|| {
            Box::new(Pending {
                sink: ctx.events().sink().clone(),
                run_id: ctx.run_id().clone(),
                name: name.clone(),
            })
        });
        Self { pending, hook }
    }

    /// Emits `MiddlewareCompleted` with `outcome` (once: the drop then emits
    /// nothing). Takes the bracket by reference: moving it into the call
    /// would copy it on every hook, the hot path of a dispatch.
    #[inline(always)]
    pub(crate) fn close(&mut self, outcome: HookOutcome) {
        if let Some(p) = self.pending.take() {
            p.sink.emit(AgentEvent::MiddlewareCompleted {
                run_id: p.run_id,
                middleware: p.name,
                hook: self.hook,
                outcome,
            });
        }
    }
}

impl Drop for Bracket {
    fn drop(&mut self) {
        if let Some(p) = self.pending.take() {
            p.sink.emit(AgentEvent::MiddlewareCompleted {
                run_id: p.run_id,
                middleware: p.name,
                hook: self.hook,
                outcome: HookOutcome::Cancelled,
            });
        }
    }
}

/// The outcome label of a finished hook.
#[inline]
pub(crate) fn outcome_of<T>(result: &Result<T>, panicked: bool) -> HookOutcome {
    match result {
        Ok(_) => HookOutcome::Ok,
        Err(_) if panicked => HookOutcome::Panicked,
        Err(e) => HookOutcome::Error(e.kind()),
    }
}

/// The classified error for a caught panic.
#[cold]
#[inline(never)]
pub(crate) fn panic_error(name: &str, hook: HookKind, payload: Box<dyn Any + Send>) -> TinyAgentsError {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".to_string());
    TinyAgentsError::MiddlewarePanic {
        middleware: name.to_string(),
        hook: hook.as_str(),
        message,
    }
}

/// Awaits a hook future, turning a panic into a classified error. Returns the
/// result and whether it panicked.
#[inline]
pub(crate) async fn catch<T>(fut: impl Future<Output = Result<T>>, name: &str, hook: HookKind) -> (Result<T>, bool) {
    let mut panicked = false;
    let fut = std::pin::pin!(fut);
    let res = Unpanicking {
        fut,
        name,
        hook,
        panicked: &mut panicked,
    }
    .await;
    (res, panicked)
}

/// A hook's (pinned) future polled inside a panic guard: a panic in any poll
/// becomes the hook's classified error, and sets `panicked`. Every async hook
/// is awaited through one ([`catch`]; the wrap handler, once a layer).
///
/// Unlike `FutureExt::catch_unwind`, each poll's output is written in place
/// rather than moved out through `catch_unwind`'s return, and the panic's
/// path is out of line: that halves what the guard costs a wrap layer
/// (`--bench onion -- --ratios`, the guarded floor against the plain one).
pub(crate) struct Unpanicking<'a, F> {
    pub(crate) fut: F,
    pub(crate) name: &'a str,
    pub(crate) hook: HookKind,
    pub(crate) panicked: &'a mut bool,
}

impl<F, T> Future for Unpanicking<'_, F>
where
    F: Future<Output = Result<T>> + Unpin,
{
    type Output = Result<T>;

    #[inline]
    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<T>> {
        let this = self.get_mut();
        let fut = std::pin::Pin::new(&mut this.fut);
        let mut out = std::task::Poll::Pending;
        match std::panic::catch_unwind(AssertUnwindSafe(|| out = fut.poll(cx))) {
            Ok(()) => out,
            Err(payload) => {
                *this.panicked = true;
                std::task::Poll::Ready(Err(panic_error(this.name, this.hook, payload)))
            }
        }
    }
}

/// Runs a synchronous hook body, turning a panic into a classified error.
#[inline]
pub(crate) fn catch_sync<T>(f: impl FnOnce() -> Result<T>, name: &str, hook: HookKind) -> Result<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => Err(panic_error(name, hook, payload)),
    }
}
