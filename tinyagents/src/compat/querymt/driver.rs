//! [`MiddlewareDriver`]: QueryMT's middleware trait, and
//! [`DriverMiddleware`], the adapter that runs a driver as a native
//! [`Middleware`] in any stack.

use std::sync::Arc;

use async_trait::async_trait;

use super::error::Result;
use super::views::{ExecutionState, Request, Response, ToolCall, ToolResult};
use crate::harness::context::RunContext;
use crate::harness::error::{Result as NativeResult, TinyAgentsError};
use crate::harness::middleware::{HookSet, HookValue, Middleware, PreparedBatch, PreparedCallVerdict};
use crate::harness::model::ModelResponse;

/// QueryMT's middleware trait: synchronous hooks around each model call
/// and each tool call. Every method has a default (pass through), so a
/// driver writes only the hooks it needs.
///
/// In a native stack (through [`DriverMiddleware`], which `Agent::single().middleware(…)`
/// and [`CompositeDriver`](super::CompositeDriver) use) each method runs in
/// a native hook ([`ExecutionState::hook`]): `process_request` and
/// `process_tool_call` in registration order, `process_response` and
/// `process_tool_result` in reverse, each bracketed by the same
/// `middleware_started`/`middleware_completed` events as a native hook. An
/// `Err` stops the step as the native error it becomes
/// ([`MiddlewareError::into_native`](super::MiddlewareError::into_native)).
pub trait MiddlewareDriver: Send + Sync {
    /// Unique name for this middleware (default: the type's short name).
    fn name(&self) -> &str {
        let full = std::any::type_name::<Self>();
        let base = full.split('<').next().unwrap_or(full);
        base.rsplit("::").next().unwrap_or(base)
    }

    /// Process incoming request (before agent processes).
    fn process_request(&self, request: &mut Request) -> Result<()> {
        let _ = request;
        Ok(())
    }

    /// Process outgoing response (after agent processes).
    fn process_response(&self, response: &mut Response) -> Result<()> {
        let _ = response;
        Ok(())
    }

    /// Process tool call (before tool execution). An error refuses the
    /// call: `ValidationError` and `PermissionDenied` answer it with an
    /// error result (the tool does not run), other kinds end the run.
    fn process_tool_call(&self, tool_call: &mut ToolCall) -> Result<()> {
        let _ = tool_call;
        Ok(())
    }

    /// Process tool result (after tool execution).
    fn process_tool_result(&self, result: &mut ToolResult) -> Result<()> {
        let _ = result;
        Ok(())
    }

    /// Reviews every tool call of one model reply before any runs, from
    /// their effective arguments (after alias normalisation and every
    /// `process_tool_call`/`before_tool` rewrite) and the file access
    /// declared for them, the access the scheduler plans from (not the raw
    /// model text). Returns one verdict per call, in order:
    /// [`Proceed`](PreparedCallVerdict::Proceed), or
    /// [`Reject(result)`](PreparedCallVerdict::Reject) with the call's final
    /// error result (the call does not run and that is its one result). A
    /// `Proceed` never overturns an earlier middleware's rejection. Default:
    /// every call proceeds.
    fn on_prepared_tool_calls(&self, batch: &PreparedBatch) -> Result<Vec<PreparedCallVerdict>> {
        Ok(vec![PreparedCallVerdict::Proceed; batch.len()])
    }

    /// The states this driver has hooks for (default: all). Narrowing it
    /// saves the others' dispatch and their events; it never changes what
    /// the listed hooks do.
    fn states(&self) -> &[ExecutionState] {
        &ExecutionState::ALL
    }
}

/// A driver behind a pointer is the driver: every method forwards.
macro_rules! forward_driver {
    ($($pointer:ident),*) => {$(
        impl<D: MiddlewareDriver + ?Sized> MiddlewareDriver for $pointer<D> {
            fn name(&self) -> &str {
                (**self).name()
            }
            fn process_request(&self, request: &mut Request) -> Result<()> {
                (**self).process_request(request)
            }
            fn process_response(&self, response: &mut Response) -> Result<()> {
                (**self).process_response(response)
            }
            fn process_tool_call(&self, tool_call: &mut ToolCall) -> Result<()> {
                (**self).process_tool_call(tool_call)
            }
            fn process_tool_result(&self, result: &mut ToolResult) -> Result<()> {
                (**self).process_tool_result(result)
            }
            fn on_prepared_tool_calls(&self, batch: &PreparedBatch) -> Result<Vec<PreparedCallVerdict>> {
                (**self).on_prepared_tool_calls(batch)
            }
            fn states(&self) -> &[ExecutionState] {
                (**self).states()
            }
        }
    )*};
}

forward_driver!(Arc, Box);

/// A [`MiddlewareDriver`] as a native [`Middleware`] for any stack: add it
/// like any middleware (`stack.add(DriverMiddleware::new(driver))`).
///
/// Its hooks are the synchronous forms of the native hooks of the driver's
/// [`states`](MiddlewareDriver::states), so it is ordered, observed and
/// failed exactly as a native middleware with those hooks; a panic in a
/// driver is caught as a native hook's is.
///
/// ```
/// use tinyagents::compat::querymt::prelude::*;
/// use tinyagents::harness::middleware::MiddlewareStack;
///
/// struct Deny;
/// impl MiddlewareDriver for Deny {
///     fn process_tool_call(&self, call: &mut ToolCall) -> Result<()> {
///         Err(MiddlewareError::permission_denied(call.function.name.clone()))
///     }
/// }
///
/// let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
/// stack.add(DriverMiddleware::new(Deny)).unwrap();
/// assert_eq!(stack.names(), ["Deny"]);
/// ```
pub struct DriverMiddleware<D: ?Sized>(Arc<D>);

impl<D: MiddlewareDriver + 'static> DriverMiddleware<D> {
    /// The adapter of `driver`.
    pub fn new(driver: D) -> Self {
        Self(Arc::new(driver))
    }
}

impl<D: MiddlewareDriver + ?Sized> DriverMiddleware<D> {
    /// The adapter of a shared driver (a factory's `Arc<dyn MiddlewareDriver>`).
    pub fn shared(driver: Arc<D>) -> Self {
        Self(driver)
    }

    /// The driver.
    pub fn driver(&self) -> &Arc<D> {
        &self.0
    }

    fn fail(&self, error: super::MiddlewareError) -> TinyAgentsError {
        error.into_native(self.0.name())
    }

    fn review(&self, batch: &mut PreparedBatch) -> NativeResult<()> {
        let verdicts = self.0.on_prepared_tool_calls(batch).map_err(|e| self.fail(e))?;
        if verdicts.len() != batch.len() {
            return Err(TinyAgentsError::middleware(
                self.0.name(),
                format!(
                    "`on_prepared_tool_calls` returned {} verdicts for a batch of {} calls; return exactly one \
                     `PreparedCallVerdict` per call, in the batch's order",
                    verdicts.len(),
                    batch.len()
                ),
            ));
        }
        for (i, verdict) in verdicts.into_iter().enumerate() {
            if let PreparedCallVerdict::Reject(mut result) = verdict {
                // a rejection is the call's final error result, whatever the driver set
                if result.error.is_none() {
                    result.error = Some(result.content.clone());
                }
                batch.reject_with(i, result);
            }
        }
        Ok(())
    }
}

impl<D: ?Sized> Clone for DriverMiddleware<D> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<D: MiddlewareDriver + ?Sized> std::fmt::Debug for DriverMiddleware<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DriverMiddleware").field(&self.0.name()).finish()
    }
}

// The generic names are the DSL's: rustc then lists this type among a
// `Middleware` error's implementors by its name alone, like the others.
#[async_trait]
impl<__TinyState, __TinyCtx, D> Middleware<__TinyState, __TinyCtx> for DriverMiddleware<D>
where
    __TinyState: Send + Sync + 'static,
    __TinyCtx: Send + Sync + 'static,
    D: MiddlewareDriver + ?Sized + 'static,
{
    fn name(&self) -> &str {
        self.0.name()
    }

    fn hooks(&self) -> HookSet {
        self.0.states().iter().fold(HookSet::empty(), |set, state| {
            set | state.hook().as_set() | HookSet::sync_of(state.hook())
        })
    }

    fn on_sync(
        &self,
        _ctx: &mut RunContext<__TinyCtx>,
        _state: &__TinyState,
        value: HookValue<'_>,
    ) -> NativeResult<()> {
        match value {
            HookValue::BeforeModel(request) => {
                let mut view = Request::new(std::mem::take(request));
                let outcome = self.0.process_request(&mut view);
                *request = view.into_inner();
                outcome.map_err(|e| self.fail(e))
            }
            HookValue::AfterModel(response) => {
                let mut view = Response::new(std::mem::replace(response, ModelResponse::text("")));
                let outcome = self.0.process_response(&mut view);
                *response = view.into_inner();
                outcome.map_err(|e| self.fail(e))
            }
            HookValue::OnPreparedToolCalls(batch) => self.review(batch),
            HookValue::BeforeTool(call) => {
                let mut view = ToolCall::from_native(call);
                self.0.process_tool_call(&mut view).map_err(|e| self.fail(e))?;
                view.write_back(self.0.name(), call)
            }
            HookValue::AfterTool(result) => {
                let mut view = ToolResult::from_native(result);
                self.0.process_tool_result(&mut view).map_err(|e| self.fail(e))?;
                view.write_back(self.0.name(), result)
            }
            other => Err(TinyAgentsError::middleware(
                self.0.name(),
                format!(
                    "a driver has no `{}` hook; it was called because the stack's hook list and the driver's \
                     `states()` disagree",
                    other.hook()
                ),
            )),
        }
    }
}
