//! [`CompositeDriver`]: an ordered chain of drivers (and native
//! middleware), added to a stack as one unit.

use std::sync::Arc;

use super::driver::{DriverMiddleware, MiddlewareDriver};
use super::error::{MiddlewareError, Result};
use super::views::{Request, Response, ToolCall, ToolResult};
use crate::harness::error::Result as NativeResult;
use crate::harness::middleware::shape::LifecycleOnly;
use crate::harness::middleware::{Middleware, MiddlewareStack, PreparedBatch, PreparedCallVerdict};

/// One link of a [`CompositeDriver`].
enum Link<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    Driver(Arc<dyn MiddlewareDriver>),
    /// A native middleware: its name, and how it adds itself to a stack.
    Native(String, AddFn<S, C>),
}

/// Adds one native middleware (kept by the closure) to a stack.
type AddFn<S, C> = Arc<dyn Fn(&mut MiddlewareStack<S, C>) -> NativeResult<()> + Send + Sync>;

impl<S, C> Clone for Link<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn clone(&self) -> Self {
        match self {
            Self::Driver(d) => Self::Driver(d.clone()),
            Self::Native(n, add) => Self::Native(n.clone(), add.clone()),
        }
    }
}

/// Drivers chained in the order they were added: requests and tool calls
/// pass them first to last, responses and tool results last to first.
///
/// Added to a stack ([`add_to`](Self::add_to), or `Agent::single().middleware(composite)`)
/// each link becomes an entry of its own at the composite's place, so the
/// order, events and errors are exactly those of the links added one by
/// one. A native [`Middleware`] can be a link too
/// ([`with_middleware`](Self::with_middleware)): it keeps every native hook
/// (wraps, `before_agent`, …) in the stack.
///
/// The composite is itself a [`MiddlewareDriver`] (QueryMT code calls its
/// methods directly): called that way it runs its driver links in order and
/// refuses (an `InternalError` naming the link) when it holds a native
/// middleware, which runs only in a stack.
///
/// ```
/// use tinyagents::compat::querymt::prelude::*;
/// use tinyagents::harness::middleware::MiddlewareStack;
///
/// struct A;
/// impl MiddlewareDriver for A {}
/// struct B;
/// impl MiddlewareDriver for B {}
///
/// let chain: CompositeDriver = CompositeDriver::new(vec![]).with(A).with(B);
/// let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
/// chain.add_to(&mut stack).unwrap();
/// assert_eq!(stack.names(), ["A", "B"]);
/// ```
pub struct CompositeDriver<S = (), C = ()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    links: Vec<Link<S, C>>,
}

impl<S, C> Clone for CompositeDriver<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn clone(&self) -> Self {
        Self {
            links: self.links.clone(),
        }
    }
}

impl<S, C> Default for CompositeDriver<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn default() -> Self {
        Self { links: Vec::new() }
    }
}

impl<S, C> std::fmt::Debug for CompositeDriver<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompositeDriver").field("links", &self.names()).finish()
    }
}

impl<S, C> CompositeDriver<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// A chain of these drivers, in this order.
    pub fn new(drivers: Vec<Arc<dyn MiddlewareDriver>>) -> Self {
        Self {
            links: drivers.into_iter().map(Link::Driver).collect(),
        }
    }

    /// Appends a driver.
    pub fn push(&mut self, driver: impl MiddlewareDriver + 'static) -> &mut Self {
        self.links.push(Link::Driver(Arc::new(driver)));
        self
    }

    /// Appends a shared driver (a factory's).
    pub fn push_shared(&mut self, driver: Arc<dyn MiddlewareDriver>) -> &mut Self {
        self.links.push(Link::Driver(driver));
        self
    }

    /// Appends a native middleware (one with no separate wrap impl: see
    /// [`shape`](crate::harness::middleware::shape)).
    pub fn push_middleware<M, Shape>(&mut self, middleware: M) -> &mut Self
    where
        M: Middleware<S, C> + LifecycleOnly<S, C, Shape> + 'static,
    {
        let middleware = Arc::new(middleware);
        let name = middleware.name().to_owned();
        let add: AddFn<S, C> =
            Arc::new(move |stack: &mut MiddlewareStack<S, C>| stack.add_shared(middleware.clone()).map(|_| ()));
        self.links.push(Link::Native(name, add));
        self
    }

    /// Appends every link of `other`, in its order.
    pub fn extend(&mut self, other: CompositeDriver<S, C>) -> &mut Self {
        self.links.extend(other.links);
        self
    }

    /// Builder form of [`push`](Self::push).
    pub fn with(mut self, driver: impl MiddlewareDriver + 'static) -> Self {
        self.push(driver);
        self
    }

    /// Builder form of [`push_middleware`](Self::push_middleware).
    pub fn with_middleware<M, Shape>(mut self, middleware: M) -> Self
    where
        M: Middleware<S, C> + LifecycleOnly<S, C, Shape> + 'static,
    {
        self.push_middleware(middleware);
        self
    }

    /// The links' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.links
            .iter()
            .map(|l| match l {
                Link::Driver(d) => d.name(),
                Link::Native(name, _) => name,
            })
            .collect()
    }

    /// How many links.
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// Whether the chain is empty.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Adds every link to `stack`, in order (the stack's ordering
    /// constraints and duplicate-name check apply to each).
    pub fn add_to(&self, stack: &mut MiddlewareStack<S, C>) -> NativeResult<()> {
        for link in &self.links {
            match link {
                Link::Driver(d) => {
                    stack.add(DriverMiddleware::shared(d.clone()))?;
                }
                Link::Native(_, add) => add(stack)?,
            }
        }
        Ok(())
    }

    /// A stack of the links, in order.
    pub fn into_stack(self) -> NativeResult<MiddlewareStack<S, C>> {
        let mut stack = MiddlewareStack::empty();
        self.add_to(&mut stack)?;
        Ok(stack)
    }

    /// The driver links, or an error naming the first native one.
    fn drivers(&self) -> Result<impl DoubleEndedIterator<Item = &Arc<dyn MiddlewareDriver>>> {
        if let Some(Link::Native(name, _)) = self.links.iter().find(|l| matches!(l, Link::Native(..))) {
            return Err(MiddlewareError::internal(format!(
                "the composite holds the native middleware `{}`, which runs only in a stack: add the composite \
                 to a stack (`add_to`, or `Agent::single().middleware(composite)`) instead of calling it directly",
                name
            )));
        }
        Ok(self.links.iter().filter_map(|l| match l {
            Link::Driver(d) => Some(d),
            Link::Native(..) => None,
        }))
    }
}

impl<S, C> MiddlewareDriver for CompositeDriver<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn name(&self) -> &str {
        "composite"
    }

    fn process_request(&self, request: &mut Request) -> Result<()> {
        self.drivers()?.try_for_each(|d| d.process_request(request))
    }

    fn process_response(&self, response: &mut Response) -> Result<()> {
        self.drivers()?.rev().try_for_each(|d| d.process_response(response))
    }

    fn process_tool_call(&self, tool_call: &mut ToolCall) -> Result<()> {
        self.drivers()?.try_for_each(|d| d.process_tool_call(tool_call))
    }

    fn process_tool_result(&self, result: &mut ToolResult) -> Result<()> {
        self.drivers()?.rev().try_for_each(|d| d.process_tool_result(result))
    }

    /// The first rejection of each call wins, as in a stack.
    fn on_prepared_tool_calls(&self, batch: &PreparedBatch) -> Result<Vec<PreparedCallVerdict>> {
        let mut verdicts = vec![PreparedCallVerdict::Proceed; batch.len()];
        for driver in self.drivers()? {
            let theirs = driver.on_prepared_tool_calls(batch)?;
            if theirs.len() != batch.len() {
                return Err(MiddlewareError::internal(format!(
                    "`{}` returned {} verdicts for a batch of {} calls; return exactly one per call",
                    driver.name(),
                    theirs.len(),
                    batch.len()
                )));
            }
            for (mine, theirs) in verdicts.iter_mut().zip(theirs) {
                if *mine == PreparedCallVerdict::Proceed {
                    *mine = theirs;
                }
            }
        }
        Ok(verdicts)
    }
}
