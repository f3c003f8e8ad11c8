//! The per-run locals facet of a run context.

use super::*;

/// The run's per-run state of any type, and its parent run's, from
/// [`RunContext::locals`]; the runtime's protocols ([`Interrupts`](crate::harness::interrupt::Interrupts),
/// [`ChildRunHooks`](crate::harness::child_run::ChildRunHooks)) live here too.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use tinyagents::harness::context::{RunConfig, RunContext};
///
/// #[derive(Default)]
/// struct Calls(AtomicU32);
///
/// let ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
/// assert!(ctx.locals().try_local::<Calls>().is_none());
/// ctx.locals().local::<Calls>().0.fetch_add(1, Ordering::Relaxed);
/// assert_eq!(ctx.locals().try_local::<Calls>().unwrap().0.load(Ordering::Relaxed), 1);
/// ```
pub struct Locals<'a, Ctx = ()> {
    pub(super) ctx: &'a RunContext<Ctx>,
}

impl<'a, Ctx> Locals<'a, Ctx> {
    /// Per-run state of type `T` for middleware, created with `T::default()` on first use.
    ///
    /// The value is shared by every part of the run (concurrent tool calls
    /// included), so `T` uses interior mutability (atomics, a mutex).
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use tinyagents::harness::context::{RunConfig, RunContext};
    ///
    /// #[derive(Default)]
    /// struct Seen(AtomicU32);
    ///
    /// let ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
    /// ctx.locals().local::<Seen>().0.fetch_add(1, Ordering::Relaxed);
    /// assert_eq!(ctx.locals().local::<Seen>().0.load(Ordering::Relaxed), 1);
    /// ```
    pub fn local<T: Default + Send + Sync + 'static>(self) -> Arc<T> {
        self.ctx.locals.get::<T>()
    }

    /// Per-run state of type `T`, created with `init` on first use (see [`local`](Locals::local)).
    pub fn local_with<T: Send + Sync + 'static>(self, init: impl FnOnce() -> T) -> Arc<T> {
        self.ctx.locals.get_with(init)
    }

    /// The per-run state of type `T` if some part of the run created it
    /// (with [`local`](Locals::local)); never creates it, never allocates.
    #[inline]
    pub fn try_local<T: Send + Sync + 'static>(self) -> Option<Arc<T>> {
        self.ctx.locals.try_get::<T>()
    }

    /// The parent run's per-run state of type `T`, when this is a child run
    /// (started with [`with_parent_locals`](RunContext::with_parent_locals)) and
    /// the parent created it. Never creates it.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use tinyagents::harness::context::{RunConfig, RunContext};
    ///
    /// #[derive(Default)]
    /// struct Tree(AtomicU32);
    ///
    /// let parent: RunContext = RunContext::new(RunConfig::new("p"), ());
    /// parent.locals().local::<Tree>().0.store(7, Ordering::Relaxed);
    /// let link = parent.as_parent();
    /// let child: RunContext = RunContext::new(RunConfig::child_of(&link, "p/c"), ()).with_parent_locals(&link.locals);
    /// assert_eq!(child.locals().parent_local::<Tree>().unwrap().0.load(Ordering::Relaxed), 7);
    /// assert!(parent.locals().parent_local::<Tree>().is_none());
    /// ```
    pub fn parent_local<T: Send + Sync + 'static>(self) -> Option<Arc<T>> {
        self.ctx.parent_locals.as_ref()?.try_get::<T>()
    }

    /// The run's pauses: the protocol of a middleware that pauses the run
    /// and of the answer that resumes it ([`Interrupts`](crate::harness::interrupt::Interrupts)).
    pub fn interrupts(self) -> Arc<crate::harness::interrupt::Interrupts> {
        self.local()
    }

    /// What this run's middleware does around its child runs
    /// ([`ChildRunHooks`](crate::harness::child_run::ChildRunHooks)).
    pub fn child_run_hooks(self) -> Arc<crate::harness::child_run::ChildRunHooks> {
        self.local()
    }
}

impl<Ctx> Clone for Locals<'_, Ctx> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Ctx> Copy for Locals<'_, Ctx> {}
