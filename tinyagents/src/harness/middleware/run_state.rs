//! Typed per-run state of one middleware registration: what
//! `#[middleware(run_state = T)]` declares and a hook receives as `&mut T`
//! (or as [`&RunState<T>`](RunState)).
//!
//! Where it lives: each registration that declares run state gets an index
//! in its stack; a run keeps one table per stack it is driven by, with one
//! cell per index, created on first use. So two registrations of the same
//! middleware in one stack have separate state, every run (a sub-agent's
//! included) has its own, and the concurrent branches of one run (the tool
//! calls of a batch) share it. A stack with no run state never makes a table.
//!
//! How a hook reaches its cell: the stack names the registration's slot in
//! the run context right before it calls one of that registration's hooks,
//! and the DSL's glue takes it at the start of the hook.
//!
//! Access: a hook that takes `&mut T` borrows the state for its whole call
//! (the DSL accepts `&mut T` only on the hooks the loop runs one at a time
//! in a run). The hooks that may run concurrently or around other hooks of
//! the same middleware (`after_tool`, `on_tool_delta`, `on_error`, the
//! wraps) take `&RunState<T>` and [`lock`](RunState::lock) it for what they
//! change. A borrow while another hook of the same registration holds the
//! state (a hook point the middleware dispatches itself, such as
//! `pre_compact`) is a classified `Middleware` error, never a deadlock.

use std::any::Any;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};

/// The per-run state of one middleware registration, as the hooks that may
/// run concurrently receive it (`state: &RunState<T>`): lock it for what
/// you read or change, and do not hold the guard across an `.await` (the
/// compiler refuses that in a hook: the guard is not `Send`).
///
/// ```
/// use tinyagents::prelude::*;
///
/// #[derive(Default)]
/// struct Seen {
///     results: u32,
/// }
///
/// #[derive(Default)]
/// struct CountResults;
///
/// #[middleware(name = "count_results", run_state = Seen)]
/// impl CountResults {
///     #[after_tool]
///     fn count(&self, seen: &RunState<Seen>, result: &mut ToolResult) -> Result<()> {
///         let _ = result;
///         seen.lock()?.results += 1;
///         Ok(())
///     }
/// }
/// # let _ = MiddlewareStack::<()>::empty().with(CountResults).unwrap();
/// ```
pub struct RunState<T> {
    middleware: &'static str,
    /// The value, or the hook it is lent to (`&mut T` for one call).
    value: Mutex<std::result::Result<Box<T>, &'static str>>,
}

impl<T> std::fmt::Debug for RunState<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunState")
            .field("middleware", &self.middleware)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> RunState<T> {
    fn new(middleware: &'static str, value: T) -> Self {
        Self {
            middleware,
            value: Mutex::new(Ok(Box::new(value))),
        }
    }

    fn slot(&self) -> MutexGuard<'_, std::result::Result<Box<T>, &'static str>> {
        // A hook that panicked while holding the lock has been reported
        // (a `MiddlewarePanic`); the state stays usable, as it was left.
        self.value.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Exclusive access to the state until the guard drops.
    ///
    /// # Errors
    /// `Middleware` when a hook of the same registration holds the state as
    /// `&mut T` right now (this hook runs inside it: a hook point that hook
    /// dispatched itself).
    pub fn lock(&self) -> Result<RunStateGuard<'_, T>> {
        let slot = self.slot();
        match &*slot {
            Ok(_) => Ok(RunStateGuard(slot)),
            Err(holder) => Err(self.in_use(holder, "lock")),
        }
    }

    /// Lends the value to a hook that takes `&mut T`, until the loan drops.
    fn lend(self: Arc<Self>, hook: &'static str) -> Result<Lent<T>> {
        let taken = std::mem::replace(&mut *self.slot(), Err(hook));
        match taken {
            Ok(value) => Ok(Lent {
                cell: self,
                value: Some(value),
            }),
            Err(holder) => {
                *self.slot() = Err(holder);
                Err(self.in_use(holder, hook))
            }
        }
    }

    #[cold]
    fn in_use(&self, holder: &str, wants: &str) -> TinyAgentsError {
        TinyAgentsError::middleware(
            self.middleware,
            format!(
                "the run state of `{}` is borrowed by its `#[{holder}]` hook, and `{wants}` asked for it inside \
                 that hook (a hook point it dispatched itself, such as `pre_compact`): a hook holding `&mut T` \
                 has the state to itself; take `&RunState<T>` in one of the two and lock it only for what it \
                 changes",
                self.middleware
            ),
        )
    }
}

/// The guard [`RunState::lock`] returns: the state, exclusively, until it drops.
pub struct RunStateGuard<'a, T>(MutexGuard<'a, std::result::Result<Box<T>, &'static str>>);

impl<T> Deref for RunStateGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        match &*self.0 {
            Ok(value) => value,
            Err(_) => unreachable!("a guard is made only while the value is in its cell"),
        }
    }
}

impl<T> DerefMut for RunStateGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        match &mut *self.0 {
            Ok(value) => value,
            Err(_) => unreachable!("a guard is made only while the value is in its cell"),
        }
    }
}

/// The state lent to a hook that takes `&mut T`: back in its cell when this
/// drops (when the hook returns, fails, panics or is cancelled).
#[doc(hidden)]
pub struct Lent<T: Send + 'static> {
    cell: Arc<RunState<T>>,
    value: Option<Box<T>>,
}

impl<T: Send + 'static> Deref for Lent<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.value
            .as_deref()
            .unwrap_or_else(|| unreachable!("taken back only on drop"))
    }
}

impl<T: Send + 'static> DerefMut for Lent<T> {
    fn deref_mut(&mut self) -> &mut T {
        self.value
            .as_deref_mut()
            .unwrap_or_else(|| unreachable!("taken back only on drop"))
    }
}

impl<T: Send + 'static> Drop for Lent<T> {
    fn drop(&mut self) {
        if let Some(value) = self.value.take() {
            *self.cell.slot() = Ok(value);
        }
    }
}

/// Which cell the hook about to run owns: its stack's table and its index
/// there (the stack writes it into the run context before the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StateSlot {
    /// The stack layout the index belongs to.
    pub(crate) stack: u64,
    /// The registration's index.
    pub(crate) index: u32,
    /// How many registrations of the stack keep run state (the table's length).
    pub(crate) count: u32,
}

/// A fresh stack layout id: every (re)built stack gets one, so a run driven
/// by two stacks (or by a stack changed between runs) keeps their states apart.
pub(crate) fn next_layout() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

type Cell = OnceLock<Arc<dyn Any + Send + Sync>>;

/// One stack's cells in one run.
struct Table {
    stack: u64,
    cells: Box<[Cell]>,
}

impl Table {
    fn new(slot: StateSlot) -> Arc<Self> {
        Arc::new(Self {
            stack: slot.stack,
            cells: (0..slot.count).map(|_| Cell::new()).collect(),
        })
    }
}

/// The run state of every registration of the stacks a run is driven by:
/// one table per stack (nearly always one), each made on first use.
#[derive(Default)]
pub(crate) struct RunStates {
    first: OnceLock<Arc<Table>>,
    more: Mutex<Vec<Arc<Table>>>,
}

impl RunStates {
    fn table(&self, slot: StateSlot) -> Arc<Table> {
        let first = self.first.get_or_init(|| Table::new(slot));
        if first.stack == slot.stack {
            return first.clone();
        }
        let mut more = self.more.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = more.iter().find(|t| t.stack == slot.stack) {
            return t.clone();
        }
        let t = Table::new(slot);
        more.push(t.clone());
        t
    }
}

/// The run state the hook about to run owns, created with `T::default()` on
/// first use (the DSL's glue calls this; not a public API).
///
/// # Errors
/// `Middleware` when the hook was not called by a stack (the state belongs
/// to a registration), or when the cell holds another type (the same
/// registration declared two run state types: not possible with the DSL).
#[doc(hidden)]
pub fn run_state_of<T, C>(ctx: &mut RunContext<C>, middleware: &'static str) -> Result<Arc<RunState<T>>>
where
    T: Default + Send + 'static,
{
    let Some(slot) = ctx.take_state_slot() else {
        return Err(TinyAgentsError::middleware(
            middleware,
            format!(
                "`{middleware}` keeps run state (`run_state = …`), which belongs to its registration in a stack, \
                 and this hook was called directly: register it in a `MiddlewareStack` and dispatch through the \
                 stack (or test it with `tinyagents::testing::MiddlewareHarness`)"
            ),
        ));
    };
    let table = ctx.run_locals().run_states().table(slot);
    let cell = table
        .cells
        .get(slot.index as usize)
        .ok_or_else(|| mismatch(middleware))?
        .get_or_init(|| Arc::new(RunState::new(middleware, T::default())));
    Arc::clone(cell)
        .downcast::<RunState<T>>()
        .map_err(|_| mismatch(middleware))
}

#[cold]
fn mismatch(middleware: &'static str) -> TinyAgentsError {
    TinyAgentsError::middleware(
        middleware,
        format!(
            "the run state cell of `{middleware}` holds another type than this hook declares: a registration has \
             one `run_state` type; declare it once, on `#[middleware(run_state = T)]`"
        ),
    )
}

/// Lends the run state to a hook that takes `&mut T` (the DSL's glue).
///
/// # Errors
/// `Middleware` when another hook of the registration holds it.
#[doc(hidden)]
pub fn lend_run_state<T: Send + 'static>(cell: Arc<RunState<T>>, hook: &'static str) -> Result<Lent<T>> {
    cell.lend(hook)
}

/// Compiles only for a type that can be run state: `Default` (each run
/// starts from it), `Send` (a run moves between threads) and `'static`.
#[doc(hidden)]
pub const fn assert_run_state<T: Default + Send + 'static>() {}
