//! Observing a hook's value around the other middleware's hooks: the seam a
//! middleware uses to learn *which* middleware changed a value (the prompt-cache
//! layout guard blames prefix edits this way). The stack knows no observer by
//! name: it calls whatever the run installed.

use std::sync::{Arc, Mutex};

use super::hook::Hook;
use crate::harness::context::RunContext;

/// Watches the value of one hook while the stack runs that hook's middleware.
///
/// [`begin`](Self::begin) sees the value before the first middleware's hook,
/// [`after`](Self::after) after each one (also when it failed). Observers see
/// the hooks dispatched in order (`before_*`, `after_*`, the batch review), not
/// the per-delta hooks; a hook no middleware implements is not dispatched, so
/// it is not observed either.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use tinyagents::harness::middleware::hook::BeforeModel;
/// use tinyagents::harness::middleware::{observe_hook, HookObserver};
/// use tinyagents::prelude::*;
///
/// #[derive(Default)]
/// struct WhoTouchedTools(Mutex<Vec<String>>);
///
/// impl HookObserver<ModelRequest> for WhoTouchedTools {
///     fn after(&self, middleware: &Arc<str>, request: &ModelRequest) {
///         if !request.tools.is_empty() {
///             self.0.lock().unwrap().push(middleware.to_string());
///         }
///     }
/// }
///
/// #[before_model]
/// async fn add_tool(request: &mut ModelRequest) -> Result<()> {
///     request.tools.push(ToolSchema::new("echo", "Echoes."));
///     Ok(())
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let stack: MiddlewareStack<()> = MiddlewareStack::new().with(AddTool)?;
/// let mut ctx: RunContext = RunContext::new(RunConfig::new("run-1"), ());
/// let seen = Arc::new(WhoTouchedTools::default());
/// observe_hook::<BeforeModel, _>(&ctx, seen.clone());
/// stack.run_before_model(&mut ctx, &(), &mut ModelRequest::default()).await?;
/// assert_eq!(*seen.0.lock().unwrap(), ["AddTool"]);
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
pub trait HookObserver<T>: Send + Sync {
    /// The value before the first middleware's hook runs.
    fn begin(&self, value: &T) {
        let _ = value;
    }

    /// The value after `middleware`'s hook returned.
    fn after(&self, middleware: &Arc<str>, value: &T);
}

/// The observers a run installed on hook `H` (a run local).
pub(crate) struct Observers<H: Hook>(Mutex<Vec<Arc<dyn HookObserver<H::Value>>>>);

impl<H: Hook> Default for Observers<H> {
    fn default() -> Self {
        Self(Mutex::new(Vec::new()))
    }
}

/// Installs `observer` on hook `H` for the rest of the run (and the branches
/// it forks for concurrent tool calls). Installing the same observer twice
/// installs it once.
pub fn observe_hook<H: Hook, C>(ctx: &RunContext<C>, observer: Arc<dyn HookObserver<H::Value>>) {
    ctx.run_locals().note_observer();
    let observers = ctx.locals().local::<Observers<H>>();
    let mut list = observers.0.lock().expect("hook observers lock");
    let new = Arc::as_ptr(&observer).cast::<()>();
    if !list.iter().any(|o| Arc::as_ptr(o).cast::<()>() == new) {
        list.push(observer);
    }
}

/// The observers installed on hook `H`, when there are any (a run with none
/// pays one load).
#[inline(always)]
pub(crate) fn observers_of<H: Hook, C>(ctx: &RunContext<C>) -> Option<Vec<Arc<dyn HookObserver<H::Value>>>> {
    if !ctx.run_locals().observed() {
        return None;
    }
    installed::<H, C>(ctx)
}

/// [`observers_of`] once the run has some observer.
#[inline(never)]
fn installed<H: Hook, C>(ctx: &RunContext<C>) -> Option<Vec<Arc<dyn HookObserver<H::Value>>>> {
    let observers = ctx.locals().try_local::<Observers<H>>()?;
    let list = observers.0.lock().expect("hook observers lock");
    (!list.is_empty()).then(|| list.clone())
}
