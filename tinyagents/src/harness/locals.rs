//! Per-run middleware state keyed by type ([`RunLocals`]), and the opaque
//! handle a child run reads its parent's state through ([`RunLocalsHandle`]).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::harness::middleware::run_state::RunStates;

type LocalMap = HashMap<TypeId, Arc<dyn Any + Send + Sync>>;

/// Per-run state of middleware, keyed by type and shared by every part of a
/// run (including concurrent tool calls of one batch).
#[derive(Clone, Default)]
pub(crate) struct RunLocals(Arc<Locals>);

#[derive(Default)]
struct Locals {
    map: Mutex<LocalMap>,
    /// How many entries the map has: lets a lookup in an empty map skip the lock.
    len: AtomicUsize,
    /// Whether any hook observer was installed: lets every dispatch of a run
    /// with none skip the lookup (one load instead of a lock and a search).
    observed: AtomicBool,
    /// The typed state of the middleware registrations that declare one.
    states: RunStates,
}

impl RunLocals {
    /// The value of type `T`, created with `T::default()` on first use.
    pub(crate) fn get<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        self.get_with(T::default)
    }

    /// The value of type `T`, created with `init` on first use.
    pub(crate) fn get_with<T: Send + Sync + 'static>(&self, init: impl FnOnce() -> T) -> Arc<T> {
        let locals = &self.0;
        let mut map = locals.map.lock().expect("run locals lock");
        let entry = map.entry(TypeId::of::<T>()).or_insert_with(|| {
            locals.len.fetch_add(1, Ordering::Release);
            Arc::new(init())
        });
        Arc::clone(entry)
            .downcast::<T>()
            .expect("run local keyed by its own TypeId")
    }

    /// The value of type `T` if some part of the run created it; never
    /// creates it, and never locks while the map is empty.
    #[inline]
    pub(crate) fn try_get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        if self.0.len.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.find::<T>()
    }

    /// Notes that a hook observer is installed in the run (set before the observer is added).
    pub(crate) fn note_observer(&self) {
        self.0.observed.store(true, Ordering::Release);
    }

    /// Whether any hook observer was ever installed in the run.
    #[inline]
    pub(crate) fn observed(&self) -> bool {
        self.0.observed.load(Ordering::Acquire)
    }

    /// The typed run state of the middleware registrations ([`RunStates`]).
    #[inline]
    pub(crate) fn run_states(&self) -> &RunStates {
        &self.0.states
    }

    /// The lookup behind [`try_get`](Self::try_get), once the map is known not to be empty.
    #[inline(never)]
    fn find<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        let locals = &self.0;
        let map = locals.map.lock().expect("run locals lock");
        let entry = map.get(&TypeId::of::<T>())?;
        Arc::clone(entry).downcast::<T>().ok()
    }
}

/// A handle on a run's per-run state
/// ([`Locals::local`](crate::harness::context::Locals::local)),
/// carried by [`ParentRun`](crate::harness::tool::ParentRun) so that a child
/// run can find the state its parent's middleware keeps for the whole run
/// tree (a price budget, for instance) with
/// [`Locals::parent_local`](crate::harness::context::Locals::parent_local).
/// It is opaque: a child reads its parent's values, it never replaces them.
#[derive(Clone, Default, educe::Educe)]
#[educe(Debug)]
pub struct RunLocalsHandle(#[educe(Debug(ignore))] pub(crate) RunLocals);

impl RunLocalsHandle {
    /// The value of type `T` in the run's state, created on first use.
    pub(crate) fn get<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        self.0.get::<T>()
    }

    /// The value of type `T` if some part of the run created it; never creates it.
    pub fn try_get<T: Send + Sync + 'static>(&self) -> Option<Arc<T>> {
        self.0.try_get::<T>()
    }
}
