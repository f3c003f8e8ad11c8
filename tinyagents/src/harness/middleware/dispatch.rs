//! The stack's dispatch, derived from the hook table: one `run_*` method per
//! lifecycle hook, each calling the hook's trait method (or its synchronous
//! form) through the one generic pass in the stack.

use futures::future::BoxFuture;

use super::hook::{self, Hook};
use super::invoke::{catch, catch_sync, outcome_of, panic_error, Bracket, Slot};
use super::observe::observers_of;
use super::sync_forms::FormCall;
use super::{HookKind, HookValue, Middleware, MiddlewareStack, PreparedBatch};
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::model::{ModelDelta, ModelRequest, ModelResponse};
use crate::harness::provenance::CompactionPlan;
use crate::harness::run::AgentRun;
use crate::harness::steering::{SteeringCommand, SteeringOutcome};
use crate::harness::tool::{ToolCall, ToolDelta, ToolResult};

/// How the stack calls one lifecycle hook on a middleware: its async method
/// and its synchronous form.
pub(crate) trait HookCall: Hook + FormCall {
    /// The async hook method.
    fn call<'a, S, C>(
        m: &'a dyn Middleware<S, C>,
        ctx: &'a mut RunContext<C>,
        state: &'a S,
        value: &'a mut Self::Value,
    ) -> BoxFuture<'a, Result<()>>
    where
        S: Send + Sync + 'static,
        C: Send + Sync + 'static;

    /// The synchronous form (`on_sync`, or the typed delta method), called
    /// statically when `M` is a concrete type.
    fn call_sync<S, C, M>(m: &M, ctx: &mut RunContext<C>, state: &S, value: &mut Self::Value) -> Result<()>
    where
        S: Send + Sync + 'static,
        C: Send + Sync + 'static,
        M: Middleware<S, C> + ?Sized;
}

macro_rules! impl_call {
    ($kind:ident $method:ident () ) => {
        impl_call!(@impl $kind, |m, ctx, state, _value| m.$method(ctx, state), |m, ctx, state, _value| {
            m.on_sync(ctx, state, HookValue::$kind)
        });
    };
    ($kind:ident $method:ident ($arg:ident : $value:ty) [$sync:ident $sync_flag:ident]) => {
        impl_call!(@impl $kind, |m, ctx, state, value| m.$method(ctx, state, value), |m, ctx, state, value| {
            m.$sync(ctx, state, value)
        });
    };
    ($kind:ident $method:ident ($arg:ident : $value:ty)) => {
        impl_call!(@impl $kind, |m, ctx, state, value| m.$method(ctx, state, value), |m, ctx, state, value| {
            m.on_sync(ctx, state, HookValue::$kind(value))
        });
    };
    (@impl $kind:ident, |$m:ident, $ctx:ident, $state:ident, $value:ident| $call:expr,
        |$sm:ident, $sctx:ident, $sstate:ident, $svalue:ident| $sync:block) => {
        impl HookCall for hook::$kind {
            #[inline]
            fn call<'a, S, C>(
                $m: &'a dyn Middleware<S, C>,
                $ctx: &'a mut RunContext<C>,
                $state: &'a S,
                $value: &'a mut Self::Value,
            ) -> BoxFuture<'a, Result<()>>
            where
                S: Send + Sync + 'static,
                C: Send + Sync + 'static,
            {
                $call
            }

            #[inline(always)]
            fn call_sync<S, C, M>(
                $sm: &M,
                $sctx: &mut RunContext<C>,
                $sstate: &S,
                $svalue: &mut Self::Value,
            ) -> Result<()>
            where
                S: Send + Sync + 'static,
                C: Send + Sync + 'static,
                M: Middleware<S, C> + ?Sized,
            {
                $sync
            }
        }
    };
}

macro_rules! run_method {
    (forward $kind:ident $method:ident $run:ident ()) => {
        #[doc = concat!("Runs `", stringify!($method), "` hooks in registration order.")]
        ///
        /// When every implementor is synchronous (what the DSL gives a plain
        /// fn) they run right here and the returned future is already
        /// complete; otherwise it runs them when awaited.
        #[inline]
        pub fn $run<'a>(&'a self, ctx: &'a mut RunContext<C>, state: &'a S) -> HookDispatch<'a> {
            // A hook without a value passes `&mut ()`: a leaked box of a
            // zero-sized value, which allocates nothing.
            self.run_lifecycle::<hook::$kind>(false, ctx, state, Box::leak(Box::new(())))
        }
    };
    (forward $kind:ident $method:ident $run:ident ($arg:ident : $value:ty)) => {
        #[doc = concat!("Runs `", stringify!($method), "` hooks in registration order.")]
        ///
        /// When every implementor is synchronous (what the DSL gives a plain
        /// fn) they run right here and the returned future is already
        /// complete; otherwise it runs them when awaited.
        #[inline]
        pub fn $run<'a>(&'a self, ctx: &'a mut RunContext<C>, state: &'a S, $arg: &'a mut $value) -> HookDispatch<'a> {
            self.run_lifecycle::<hook::$kind>(false, ctx, state, $arg)
        }
    };
    (reverse $kind:ident $method:ident $run:ident ($arg:ident : $value:ty)) => {
        #[doc = concat!("Runs `", stringify!($method), "` hooks in reverse registration order.")]
        ///
        /// When every implementor is synchronous (what the DSL gives a plain
        /// fn) they run right here and the returned future is already
        /// complete; otherwise it runs them when awaited.
        #[inline]
        pub fn $run<'a>(&'a self, ctx: &'a mut RunContext<C>, state: &'a S, $arg: &'a mut $value) -> HookDispatch<'a> {
            self.run_lifecycle::<hook::$kind>(true, ctx, state, $arg)
        }
    };
    (delta $kind:ident $method:ident $run:ident ($arg:ident : $value:ty)) => {
        #[doc = concat!("Runs `", stringify!($method), "` hooks in registration order, stopping at the")]
        /// first that suppresses the delta (recorded as
        /// [`AgentEvent::DeltaSuppressed`]). No bracketing events.
        ///
        /// When every delta hook is synchronous (what the DSL gives a plain
        /// fn) they run right here, and the returned future is already
        /// complete: no boxed future, no allocation per delta. Otherwise the
        /// returned future runs them when awaited.
        #[inline]
        pub fn $run<'a>(&'a self, ctx: &'a mut RunContext<C>, state: &'a S, $arg: &'a mut $value) -> HookDispatch<'a> {
            self.run_delta::<hook::$kind>(ctx, state, $arg)
        }
    };
}

macro_rules! define_dispatch {
    (lifecycle { $($(#[$doc:meta])* $kind:ident $method:ident $run:ident $flag:ident $order:ident ($($arg:ident : $value:ty)?) $([$sync:ident $sync_flag:ident])?;)* }
     error { $(#[$edoc:meta])* $ekind:ident $emethod:ident $erun:ident $eflag:ident ($earg:ident : $evalue:ty); }
     wraps { $($(#[$wdoc:meta])* $wkind:ident $wmethod:ident $wflag:ident;)* }) => {
        $( impl_call!($kind $method ($($arg : $value)?) $([$sync $sync_flag])?); )*

        impl<S, C> MiddlewareStack<S, C>
        where
            S: Send + Sync + 'static,
            C: Send + Sync + 'static,
        {
            $( run_method!($order $kind $method $run ($($arg : $value)?)); )*

            #[doc = concat!("Runs every `", stringify!($emethod), "` hook, in registration order, with `",
                stringify!($earg), "`.")]
            /// Their own errors and panics are ignored: they never replace it.
            pub async fn $erun(&self, ctx: &mut RunContext<C>, state: &S, $earg: &$evalue) {
                self.error_pass(ctx, state, $earg).await
            }
        }
    };
}

crate::harness::hooks::hook_table!(define_dispatch);

/// The one pass every ordered lifecycle hook goes through, and `on_error`.
impl<S, C> MiddlewareStack<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// One hook of a watched pass: bracketed by its events, its panic
    /// caught, its jump checked.
    #[inline]
    async fn call_slot<H: HookCall>(
        slot: &Slot<S, C>,
        ctx: &mut RunContext<C>,
        state: &S,
        value: &mut H::Value,
    ) -> Result<()> {
        if slot.sync {
            return Self::call_slot_sync::<H>(slot, ctx, state, value);
        }
        let mut bracket = Bracket::open(ctx, &slot.name, H::KIND);
        slot.enter(ctx);
        let (res, panicked) = catch(H::call(&*slot.mw, ctx, state, value), &slot.name, H::KIND).await;
        let res = ctx.checked_jump(&slot.name, slot.jumps, res);
        bracket.close(outcome_of(&res, panicked));
        res
    }

    /// [`call_slot`](Self::call_slot) for a hook that takes its synchronous
    /// form: no future, and its result checked where it was written.
    #[inline(always)]
    fn call_slot_sync<H: HookCall>(
        slot: &Slot<S, C>,
        ctx: &mut RunContext<C>,
        state: &S,
        value: &mut H::Value,
    ) -> Result<()> {
        let mut bracket = Bracket::open(ctx, &slot.name, H::KIND);
        slot.enter(ctx);
        let mut res = catch_sync(|| H::call_form(&*slot.forms, ctx, state, value), &slot.name, H::KIND);
        let panicked = matches!(&res, Err(TinyAgentsError::MiddlewarePanic { .. }));
        ctx.check_jump_in_place(&slot.name, slot.jumps, &mut res);
        bracket.close(outcome_of(&res, panicked));
        res
    }

    /// One pass of a lifecycle hook over its implementors (in reverse for
    /// `after_*`), watched by the observers the run installed on it; the
    /// first error stops the pass and is shown to every `on_error`.
    async fn dispatch<H: HookCall>(
        &self,
        reverse: bool,
        ctx: &mut RunContext<C>,
        state: &S,
        value: &mut H::Value,
    ) -> Result<()> {
        let list = self.list(H::KIND);
        if list.is_empty() {
            return Ok(());
        }
        let observers = observers_of::<H, C>(ctx);
        for o in observers.iter().flatten() {
            o.begin(value);
        }
        let mut res = Ok(());
        for i in 0..list.len() {
            let slot = &list[if reverse { list.len() - 1 - i } else { i }];
            res = Self::call_slot::<H>(slot, ctx, state, value).await;
            for o in observers.iter().flatten() {
                o.after(&slot.name, value);
            }
            if res.is_err() {
                break;
            }
        }
        if let Err(e) = &res {
            self.run_on_error(ctx, state, e).await;
        }
        res
    }

    /// Every `on_error` hook, in registration order; their own errors and panics are swallowed.
    async fn error_pass(&self, ctx: &mut RunContext<C>, state: &S, error: &TinyAgentsError) {
        for slot in self.list(HookKind::OnError) {
            let mut bracket = Bracket::open(ctx, &slot.name, HookKind::OnError);
            slot.enter(ctx);
            let (res, panicked) = if slot.sync {
                let res = catch_sync(
                    || slot.mw.on_sync(ctx, state, HookValue::OnError(error)),
                    &slot.name,
                    HookKind::OnError,
                );
                let panicked = matches!(&res, Err(TinyAgentsError::MiddlewarePanic { .. }));
                (res, panicked)
            } else {
                catch(slot.mw.on_error(ctx, state, error), &slot.name, HookKind::OnError).await
            };
            // An undeclared jump is refused here too (its error, like the hook's own, is swallowed).
            let res = ctx.checked_jump(&slot.name, slot.jumps, res);
            bracket.close(outcome_of(&res, panicked));
        }
    }
}

/// The stack a run is driven by (a run local the agent installs), for
/// middleware that dispatch a hook point of their own making (`pre_compact`).
struct RunStack<S, C>(std::sync::Arc<MiddlewareStack<S, C>>)
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static;

impl<S, C> MiddlewareStack<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// Makes this stack the one `ctx`'s run is driven by, so that middleware
    /// can dispatch a hook through it ([`of_run`](Self::of_run)); the agent
    /// does this when a run begins. The first stack installed stays. A stack
    /// with no `pre_compact` hook (the one hook dispatched this way) has
    /// nothing to dispatch, and is not installed (a run stays free of it).
    pub fn drive(self: &std::sync::Arc<Self>, ctx: &RunContext<C>) {
        if self.has(HookKind::PreCompact) {
            ctx.locals().local_with(|| RunStack(self.clone()));
        }
    }

    /// The stack `ctx`'s run is driven by, when one was installed with [`drive`](Self::drive).
    pub fn of_run(ctx: &RunContext<C>) -> Option<std::sync::Arc<Self>> {
        ctx.locals().try_local::<RunStack<S, C>>().map(|run| run.0.clone())
    }
}

/// A delta a hook can suppress.
pub(crate) trait Suppressible {
    fn is_suppressed(&self) -> bool;
}

impl Suppressible for ModelDelta {
    fn is_suppressed(&self) -> bool {
        ModelDelta::is_suppressed(self)
    }
}

impl Suppressible for ToolDelta {
    fn is_suppressed(&self) -> bool {
        ToolDelta::is_suppressed(self)
    }
}

/// The future of one hook dispatch ([`MiddlewareStack::run_before_model`],
/// [`MiddlewareStack::run_on_model_delta`], …): already complete when the
/// hook has no implementor or every implementor was synchronous (16 bytes,
/// nothing to poll); otherwise a boxed pass that runs when awaited.
#[must_use = "a hook dispatch does nothing more unless awaited (its synchronous hooks already ran)"]
pub struct HookDispatch<'a>(Option<BoxFuture<'a, Result<()>>>);

impl<'a> HookDispatch<'a> {
    /// A dispatch that already completed with `Ok(())`.
    #[inline]
    fn done() -> Self {
        Self(None)
    }

    fn later(fut: BoxFuture<'a, Result<()>>) -> Self {
        Self(Some(fut))
    }
}

impl std::future::Future for HookDispatch<'_> {
    type Output = Result<()>;

    #[inline]
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<()>> {
        match &mut self.0 {
            None => std::task::Poll::Ready(Ok(())),
            Some(fut) => fut.as_mut().poll(cx),
        }
    }
}

impl<S, C> MiddlewareStack<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// A lifecycle hook with a value: nothing to do, the synchronous pass
    /// right now, or the async pass when awaited.
    #[inline]
    fn run_lifecycle<'a, H: HookCall>(
        &'a self,
        reverse: bool,
        ctx: &'a mut RunContext<C>,
        state: &'a S,
        value: &'a mut H::Value,
    ) -> HookDispatch<'a> {
        let list = self.list(H::KIND);
        if list.is_empty() {
            return HookDispatch::done();
        }
        if !self.all_sync(H::KIND) {
            return self.pass_later::<H>(reverse, ctx, state, value);
        }
        let mut res = Ok(());
        if Self::watched(ctx) {
            Self::pass_watched::<H>(list, reverse, ctx, state, value, &mut res);
        } else {
            Self::pass_quiet::<H>(list, reverse, ctx, state, value, &mut res);
        }
        self.settled(ctx, state, res)
    }

    /// Whether anything watches a synchronous pass: an observer the run
    /// installed (on any hook: one load when there is none), or a sink that
    /// wants the bracketing events.
    #[inline(always)]
    fn watched(ctx: &RunContext<C>) -> bool {
        ctx.run_locals().observed()
            || ctx.events().wants(EventKind::MiddlewareStarted)
            || ctx.events().wants(EventKind::MiddlewareCompleted)
    }

    /// The dispatch of a synchronous pass that ended with `res`: done, or the
    /// failure every `on_error` sees when it is awaited. Inlined, so the
    /// common case only tests `res` where the pass wrote it.
    #[inline(always)]
    fn settled<'a>(&'a self, ctx: &'a mut RunContext<C>, state: &'a S, res: Result<()>) -> HookDispatch<'a> {
        match res {
            Ok(()) => HookDispatch::done(),
            Err(e) => self.failed(ctx, state, e),
        }
    }

    /// Some implementor is async: the whole pass runs when the dispatch is awaited.
    #[inline(never)]
    fn pass_later<'a, H: HookCall>(
        &'a self,
        reverse: bool,
        ctx: &'a mut RunContext<C>,
        state: &'a S,
        value: &'a mut H::Value,
    ) -> HookDispatch<'a> {
        HookDispatch::later(Box::pin(self.dispatch::<H>(reverse, ctx, state, value)))
    }

    /// Every implementor takes the synchronous form and something
    /// [watches](Self::watched) the pass: it runs here, with the same
    /// brackets, jump checks and observers as the async pass, and no future
    /// per hook. A failure is written to `out` (which starts `Ok`).
    #[inline(never)]
    fn pass_watched<H: HookCall>(
        list: &[Slot<S, C>],
        reverse: bool,
        ctx: &mut RunContext<C>,
        state: &S,
        value: &mut H::Value,
        out: &mut Result<()>,
    ) {
        let observers = observers_of::<H, C>(ctx);
        for o in observers.iter().flatten() {
            o.begin(value);
        }
        let n = list.len();
        for i in 0..n {
            let slot = &list[if reverse { n - 1 - i } else { i }];
            let res = Self::call_slot_sync::<H>(slot, ctx, state, value);
            for o in observers.iter().flatten() {
                o.after(&slot.name, value);
            }
            if res.is_err() {
                *out = res;
                return;
            }
        }
    }

    /// [`pass_watched`](Self::pass_watched) when nothing watches it (no observer, a
    /// sink that wants no bracketing event): one panic guard for the pass,
    /// nothing around each hook but its jump check. The pass keeps in `at`
    /// the index of the slot it is calling, so a panic becomes that
    /// middleware's classified error; it writes a failure to `out` where it
    /// happened and returns nothing (a `Result` moved out of the guard on
    /// every pass cost more than a hook: a 72-byte copy read back at once).
    #[inline]
    fn pass_quiet<H: HookCall>(
        list: &[Slot<S, C>],
        reverse: bool,
        ctx: &mut RunContext<C>,
        state: &S,
        value: &mut H::Value,
        out: &mut Result<()>,
    ) {
        let n = list.len();
        let mut at = 0;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for i in 0..n {
                at = if reverse { n - 1 - i } else { i };
                let slot = &list[at];
                slot.enter(ctx);
                let mut res = H::call_form(&*slot.forms, ctx, state, value);
                ctx.check_jump_in_place(&slot.name, slot.jumps, &mut res);
                if res.is_err() {
                    *out = res;
                    return;
                }
            }
        }));
        if let Err(payload) = caught {
            Self::panicked::<H>(list, at, ctx, out, payload);
        }
    }

    /// The hook at `list[at]` panicked: its classified error (a jump it asked
    /// for is checked like any other) goes to `out`.
    #[cold]
    #[inline(never)]
    fn panicked<H: Hook>(
        list: &[Slot<S, C>],
        at: usize,
        ctx: &mut RunContext<C>,
        out: &mut Result<()>,
        payload: Box<dyn std::any::Any + Send>,
    ) {
        let e = panic_error(&list[at].name, H::KIND, payload);
        *out = ctx.checked_jump(&list[at].name, list[at].jumps, Err(e));
    }

    /// A synchronous hook failed: every `on_error` sees it when the dispatch is awaited.
    #[cold]
    #[inline(never)]
    fn failed<'a>(&'a self, ctx: &'a mut RunContext<C>, state: &'a S, e: TinyAgentsError) -> HookDispatch<'a> {
        HookDispatch::later(Box::pin(async move {
            self.run_on_error(ctx, state, &e).await;
            Err(e)
        }))
    }
}

impl<S, C> MiddlewareStack<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    #[inline]
    fn run_delta<'a, H>(&'a self, ctx: &'a mut RunContext<C>, state: &'a S, delta: &'a mut H::Value) -> HookDispatch<'a>
    where
        H: HookCall,
        H::Value: Suppressible,
    {
        let list = self.list(H::KIND);
        if list.is_empty() {
            return HookDispatch::done();
        }
        if !self.all_sync(H::KIND) {
            return self.deltas_later::<H>(ctx, state, delta);
        }
        let mut res = Ok(());
        Self::deltas_now::<H>(list, ctx, state, delta, &mut res);
        self.settled(ctx, state, res)
    }

    /// Some delta hook is async: the whole pass runs when the dispatch is awaited.
    #[inline(never)]
    fn deltas_later<'a, H>(
        &'a self,
        ctx: &'a mut RunContext<C>,
        state: &'a S,
        delta: &'a mut H::Value,
    ) -> HookDispatch<'a>
    where
        H: HookCall,
        H::Value: Suppressible,
    {
        let list = self.list(H::KIND);
        HookDispatch::later(Box::pin(async move {
            for slot in list {
                slot.enter(ctx);
                let mut res = if slot.sync {
                    catch_sync(|| H::call_form(&*slot.forms, ctx, state, delta), &slot.name, H::KIND)
                } else {
                    catch(H::call(&*slot.mw, ctx, state, delta), &slot.name, H::KIND)
                        .await
                        .0
                };
                if Self::delta_step(ctx, slot, H::KIND, delta, &mut res) {
                    if let Err(e) = res {
                        self.run_on_error(ctx, state, &e).await;
                        return Err(e);
                    }
                    break;
                }
            }
            Ok(())
        }))
    }

    /// After one delta hook: whether the pass stops, because the hook failed
    /// (or asked for a jump it may not: `res` then holds the error) or
    /// suppressed the delta. `res` is checked in place, never moved.
    #[inline(always)]
    fn delta_step<D: Suppressible>(
        ctx: &mut RunContext<C>,
        slot: &Slot<S, C>,
        hook: HookKind,
        delta: &D,
        res: &mut Result<()>,
    ) -> bool {
        ctx.check_jump_in_place(&slot.name, slot.jumps, res);
        if res.is_err() {
            return true;
        }
        let suppressed = delta.is_suppressed();
        if suppressed {
            Self::suppressed(ctx, slot, hook);
        }
        suppressed
    }

    /// Every delta hook is synchronous: one panic guard for the whole pass.
    /// A failure is written to `out` where it happened; the pass itself
    /// returns nothing, so the common case moves no `Result` out of the guard.
    #[inline]
    fn deltas_now<H>(
        list: &[Slot<S, C>],
        ctx: &mut RunContext<C>,
        state: &S,
        delta: &mut H::Value,
        out: &mut Result<()>,
    ) where
        H: HookCall,
        H::Value: Suppressible,
    {
        // One panic guard for the pass (see `pass_quiet`).
        let mut at = 0;
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for (i, slot) in list.iter().enumerate() {
                at = i;
                slot.enter(ctx);
                let mut res = H::call_form(&*slot.forms, ctx, state, delta);
                if Self::delta_step(ctx, slot, H::KIND, delta, &mut res) {
                    if res.is_err() {
                        *out = res;
                    }
                    return;
                }
            }
        }));
        if let Err(payload) = caught {
            Self::panicked::<H>(list, at, ctx, out, payload);
        }
    }

    #[cold]
    fn suppressed(ctx: &RunContext<C>, slot: &Slot<S, C>, hook: HookKind) {
        ctx.events()
            .emit_with(EventKind::DeltaSuppressed, || AgentEvent::DeltaSuppressed {
                middleware: slot.name.clone(),
                hook,
            });
    }
}

/// Dispatches the `pre_compact` hook point through the stack the run is
/// driven by: compacting middleware call it before they compact, and leave
/// the context as it is when a hook [blocked](CompactionPlan::blocked) the
/// plan. A hook's error is returned (the compaction does not happen). A run
/// driven by no stack (a stack called directly, without an agent) has no
/// `pre_compact` hooks to ask.
///
/// ```
/// use tinyagents::harness::middleware::pre_compact;
/// use tinyagents::harness::provenance::CompactionPlan;
/// use tinyagents::prelude::*;
///
/// #[pre_compact]
/// async fn keep_short_histories(plan: &mut CompactionPlan) -> Result<()> {
///     if plan.messages < 10 {
///         plan.block("fewer than 10 messages");
///     }
///     Ok(())
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let stack = std::sync::Arc::new(MiddlewareStack::<()>::new().with(KeepShortHistories)?);
/// let mut ctx: RunContext = RunContext::new(RunConfig::new("run-1"), ());
/// stack.drive(&ctx);
/// let mut plan = CompactionPlan::new("summarization", "summarization/1", 4);
/// pre_compact(&mut ctx, &(), &mut plan).await?;
/// assert_eq!(plan.blocked(), Some("fewer than 10 messages"));
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
pub async fn pre_compact<S, C>(ctx: &mut RunContext<C>, state: &S, plan: &mut CompactionPlan) -> Result<()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    match MiddlewareStack::<S, C>::of_run(ctx) {
        Some(stack) => stack.run_pre_compact(ctx, state, plan).await,
        None => Ok(()),
    }
}
