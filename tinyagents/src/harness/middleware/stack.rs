//! [`MiddlewareStack`]: registration, ordering, and dispatch of every hook.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::invoke::{catch, catch_sync, outcome_of, panic_error, Bracket, Slot};
use super::order::{resolve, OrderNode};
use super::{
    HookKind, HookSet, HookValue, Middleware, MiddlewareInfo, ModelBaseCall, ModelHandler, ModelMiddleware,
    PreparedBatch, ToolBaseCall, ToolHandler, ToolMiddleware,
};
use crate::harness::agent::AgentRun;
use crate::harness::context::{JumpSet, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::model::{ModelDelta, ModelRequest, ModelResponse};
use crate::harness::steering::{SteeringCommand, SteeringOutcome};
use crate::harness::tool::{ToolCall, ToolDelta, ToolResult};

/// One registration: a value in up to three roles, under one name.
struct Entry<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    name: Arc<str>,
    info: MiddlewareInfo,
    lifecycle: Option<Arc<dyn Middleware<S, C>>>,
    model: Option<Arc<dyn ModelMiddleware<S, C>>>,
    tool: Option<Arc<dyn ToolMiddleware<S, C>>>,
    /// A default-on built-in: registering a middleware of the same name
    /// replaces it instead of being a duplicate.
    default: bool,
}

/// A lifecycle hook, as a plain function over the value it passes (so one
/// dispatch loop serves every hook).
type HookFn<S, C, T> =
    for<'a> fn(&'a dyn Middleware<S, C>, &'a mut RunContext<C>, &'a S, &'a mut T) -> BoxFuture<'a, Result<()>>;

/// The composer of middleware: three ordered lists (lifecycle, model wraps,
/// tool wraps) and one precomputed dispatch list per hook.
///
/// * `before_*` hooks run in registration order, `after_*` in reverse;
///   wraps compose first-registered outermost (an onion); delta hooks run in
///   registration order.
/// * `before`/`after` constraints reorder registrations with the least
///   displacement: the middleware that declares a constraint moves (to just
///   before or just after the one it names), the others keep registration
///   order. A required constraint naming a middleware not registered yet, a
///   cycle or a duplicate name is a `Config` error and leaves the stack
///   unchanged; `before_if_present`/`after_if_present` order relative to a
///   middleware only when it is registered (before or after this one).
/// * Dispatching a hook that no middleware implements does nothing at all:
///   no allocation, no event.
/// * The first `Err` short-circuits; every middleware's `on_error` sees it;
///   the original error is returned. Panics are caught and classified.
/// * The stack is `Send + Sync`; share it with an `Arc` across concurrent runs.
///
/// ```
/// use tinyagents::prelude::*;
///
/// #[before_model]
/// async fn add_date(request: &mut ModelRequest) -> Result<()> {
///     request.set_volatile("date", "Today is Monday.");
///     Ok(())
/// }
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let mut stack: MiddlewareStack<()> = MiddlewareStack::new();
/// stack.add(AddDate)?;
/// let mut ctx: RunContext = RunContext::new(RunConfig::new("run-1"), ());
/// let mut request = ModelRequest::default();
/// stack.run_before_model(&mut ctx, &(), &mut request).await?;
/// assert_eq!(request.system_prompt(), "Today is Monday.");
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
pub struct MiddlewareStack<S, C = ()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    registered: Vec<Entry<S, C>>,
    order: Vec<usize>,
    lists: [Vec<Slot<dyn Middleware<S, C>>>; HookKind::LIFECYCLE_COUNT],
    model: Vec<Slot<dyn ModelMiddleware<S, C>>>,
    tool: Vec<Slot<dyn ToolMiddleware<S, C>>>,
    /// Per hook: whether every implementor takes the synchronous form.
    all_sync: [bool; HookKind::LIFECYCLE_COUNT],
    /// The tools the middleware contributed, with the name of each contributor.
    tools: Vec<(Arc<str>, Arc<dyn crate::harness::tool::Tool>)>,
}

impl<S, C> MiddlewareStack<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// A stack with nothing in it, not even the default-on built-ins that
    /// [`new`](Self::new) holds: the explicit opt-out of every default.
    ///
    /// ```
    /// use tinyagents::prelude::*;
    ///
    /// let stack: MiddlewareStack<()> = MiddlewareStack::empty();
    /// assert!(stack.is_empty());
    /// ```
    pub fn empty() -> Self {
        Self {
            registered: Vec::new(),
            order: Vec::new(),
            lists: Default::default(),
            model: Vec::new(),
            tool: Vec::new(),
            all_sync: [false; HookKind::LIFECYCLE_COUNT],
            tools: Vec::new(),
        }
    }
}

impl<S, C> std::fmt::Debug for MiddlewareStack<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiddlewareStack").field("order", &self.names()).finish()
    }
}

/// A lifecycle hook's synchronous form, as a plain function over the value it passes.
type SyncHookFn<S, C, T> = fn(&dyn Middleware<S, C>, &mut RunContext<C>, &S, &mut T) -> Result<()>;

macro_rules! sync_fn {
    ($name:ident, $variant:ident, $ty:ty) => {
        fn $name<S, C>(m: &dyn Middleware<S, C>, ctx: &mut RunContext<C>, state: &S, value: &mut $ty) -> Result<()>
        where
            S: Send + Sync + 'static,
            C: Send + Sync + 'static,
        {
            m.on_sync(ctx, state, HookValue::$variant(value))
        }
    };
}

sync_fn!(after_agent_sync, AfterAgent, AgentRun);
sync_fn!(before_steering_sync, BeforeSteering, SteeringCommand);
sync_fn!(after_steering_sync, AfterSteering, SteeringOutcome);
sync_fn!(before_model_sync, BeforeModel, ModelRequest);
sync_fn!(before_model_stream_sync, BeforeModelStream, ModelRequest);
sync_fn!(after_model_sync, AfterModel, ModelResponse);
sync_fn!(on_tool_batch_sync, OnToolBatch, PreparedBatch);
sync_fn!(before_tool_sync, BeforeTool, ToolCall);
sync_fn!(after_tool_sync, AfterTool, ToolResult);

fn before_agent_sync<S, C>(m: &dyn Middleware<S, C>, ctx: &mut RunContext<C>, state: &S, _: &mut ()) -> Result<()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    m.on_sync(ctx, state, HookValue::BeforeAgent)
}

macro_rules! hook_fn {
    ($name:ident, $method:ident, $ty:ty) => {
        fn $name<'a, S, C>(
            m: &'a dyn Middleware<S, C>,
            ctx: &'a mut RunContext<C>,
            state: &'a S,
            value: &'a mut $ty,
        ) -> BoxFuture<'a, Result<()>>
        where
            S: Send + Sync + 'static,
            C: Send + Sync + 'static,
        {
            m.$method(ctx, state, value)
        }
    };
}

hook_fn!(after_agent_fn, after_agent, AgentRun);
hook_fn!(before_steering_fn, before_steering, SteeringCommand);
hook_fn!(after_steering_fn, after_steering, SteeringOutcome);
hook_fn!(before_model_fn, before_model, ModelRequest);
hook_fn!(before_model_stream_fn, before_model_stream, ModelRequest);
hook_fn!(after_model_fn, after_model, ModelResponse);
hook_fn!(on_tool_batch_fn, on_tool_batch, PreparedBatch);
hook_fn!(before_tool_fn, before_tool, ToolCall);
hook_fn!(after_tool_fn, after_tool, ToolResult);

/// A synchronous delta hook, as a plain function.
type SyncDeltaFn<S, C, D> = fn(&dyn Middleware<S, C>, &mut RunContext<C>, &S, &mut D) -> Result<()>;

fn model_delta_sync<S, C>(
    m: &dyn Middleware<S, C>,
    ctx: &mut RunContext<C>,
    state: &S,
    d: &mut ModelDelta,
) -> Result<()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    m.on_model_delta_sync(ctx, state, d)
}

fn tool_delta_sync<S, C>(m: &dyn Middleware<S, C>, ctx: &mut RunContext<C>, state: &S, d: &mut ToolDelta) -> Result<()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    m.on_tool_delta_sync(ctx, state, d)
}

hook_fn!(model_delta_async, on_model_delta, ModelDelta);
hook_fn!(tool_delta_async, on_tool_delta, ToolDelta);

/// A delta a hook can suppress.
trait Suppressible {
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

/// The future of a delta dispatch ([`MiddlewareStack::run_on_model_delta`]):
/// already complete when every delta hook was synchronous.
#[must_use = "a delta dispatch does nothing more unless awaited (its synchronous hooks already ran)"]
pub struct DeltaDispatch<'a>(DeltaState<'a>);

enum DeltaState<'a> {
    Done(Option<Result<()>>),
    Later(BoxFuture<'a, Result<()>>),
}

impl<'a> DeltaDispatch<'a> {
    #[inline]
    fn done() -> Self {
        Self(DeltaState::Done(Some(Ok(()))))
    }

    fn later(fut: BoxFuture<'a, Result<()>>) -> Self {
        Self(DeltaState::Later(fut))
    }
}

impl std::future::Future for DeltaDispatch<'_> {
    type Output = Result<()>;

    #[inline]
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<()>> {
        match &mut self.0 {
            DeltaState::Done(out) => {
                std::task::Poll::Ready(out.take().expect("a delta dispatch polled after it completed"))
            }
            DeltaState::Later(fut) => fut.as_mut().poll(cx),
        }
    }
}

fn before_agent_fn<'a, S, C>(
    m: &'a dyn Middleware<S, C>,
    ctx: &'a mut RunContext<C>,
    state: &'a S,
    _: &'a mut (),
) -> BoxFuture<'a, Result<()>>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    m.before_agent(ctx, state)
}

impl<S, C> MiddlewareStack<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    // ----- registration -------------------------------------------------

    /// Registers a middleware in every list its metadata says it belongs to
    /// (each lifecycle hook it implements, the model onion, the tool onion).
    ///
    /// A duplicate name or an ordering cycle is a `Config` error; the stack is
    /// then unchanged.
    pub fn add<M: Middleware<S, C> + 'static>(&mut self, middleware: M) -> Result<&mut Self> {
        self.add_shared(Arc::new(middleware))
    }

    /// [`add`](Self::add) for a value you keep a handle to (to read its counters).
    pub fn add_shared<M: Middleware<S, C> + 'static>(&mut self, middleware: Arc<M>) -> Result<&mut Self> {
        self.add_dyn(middleware, None)
    }

    /// [`add`](Self::add) under a name of your choosing: how a second instance
    /// of the same middleware is registered.
    pub fn add_named<M: Middleware<S, C> + 'static>(
        &mut self,
        name: impl Into<String>,
        middleware: M,
    ) -> Result<&mut Self> {
        self.add_dyn(Arc::new(middleware), Some(name.into()))
    }

    /// Builder form of [`add`](Self::add).
    pub fn with<M: Middleware<S, C> + 'static>(mut self, middleware: M) -> Result<Self> {
        self.add(middleware)?;
        Ok(self)
    }

    /// Registers a shared lifecycle middleware (and its wraps, as
    /// [`add`](Self::add) does).
    ///
    /// # Panics
    /// On a duplicate name or an ordering cycle: use [`add`](Self::add) to get
    /// the error instead.
    pub fn push(&mut self, middleware: Arc<dyn Middleware<S, C>>) -> &mut Self {
        if let Err(e) = self.add_dyn(middleware, None) {
            panic!("MiddlewareStack::push: {e}");
        }
        self
    }

    /// Registers a wrap-only model middleware (one without a `Middleware` impl).
    ///
    /// # Panics
    /// On a duplicate name: use [`try_push_model`](Self::try_push_model) to get the error.
    pub fn push_model(&mut self, middleware: Arc<dyn ModelMiddleware<S, C>>) -> &mut Self {
        if let Err(e) = self.try_push_model(middleware) {
            panic!("MiddlewareStack::push_model: {e}");
        }
        self
    }

    /// Registers a wrap-only model middleware; a duplicate name is a `Config` error.
    pub fn try_push_model(&mut self, middleware: Arc<dyn ModelMiddleware<S, C>>) -> Result<&mut Self> {
        let info = MiddlewareInfo::new(middleware.name().to_owned()).with_hooks(HookSet::WRAP_MODEL);
        self.insert(Entry {
            name: Arc::from(info.name.as_ref()),
            info,
            lifecycle: None,
            model: Some(middleware),
            tool: None,
            default: false,
        })
    }

    /// Registers a wrap-only tool middleware (one without a `Middleware` impl).
    ///
    /// # Panics
    /// On a duplicate name: use [`try_push_tool`](Self::try_push_tool) to get the error.
    pub fn push_tool(&mut self, middleware: Arc<dyn ToolMiddleware<S, C>>) -> &mut Self {
        if let Err(e) = self.try_push_tool(middleware) {
            panic!("MiddlewareStack::push_tool: {e}");
        }
        self
    }

    /// Registers a wrap-only tool middleware; a duplicate name is a `Config` error.
    pub fn try_push_tool(&mut self, middleware: Arc<dyn ToolMiddleware<S, C>>) -> Result<&mut Self> {
        let info = MiddlewareInfo::new(middleware.name().to_owned()).with_hooks(HookSet::WRAP_TOOL);
        self.insert(Entry {
            name: Arc::from(info.name.as_ref()),
            info,
            lifecycle: None,
            model: None,
            tool: Some(middleware),
            default: false,
        })
    }

    fn add_dyn(&mut self, middleware: Arc<dyn Middleware<S, C>>, name: Option<String>) -> Result<&mut Self> {
        let mut info = middleware.info();
        if let Some(name) = name {
            info.name = name.into();
        }
        let model = middleware.clone().model_middleware();
        let tool = middleware.clone().tool_middleware();
        if model.is_some() {
            info.hooks |= HookSet::WRAP_MODEL;
        }
        if tool.is_some() {
            info.hooks |= HookSet::WRAP_TOOL;
        }
        let name: Arc<str> = Arc::from(info.name.as_ref());
        let tools = self.check_contributed(&name, middleware.tools())?;
        let lifecycle = info.hooks.intersects(HookSet::LIFECYCLE).then_some(middleware);
        self.insert(Entry {
            name: name.clone(),
            info,
            lifecycle,
            model,
            tool,
            default: false,
        })?;
        // A default-on built-in this registration replaced takes its tools along.
        self.tools.retain(|(owner, _)| *owner != name);
        self.tools.extend(tools.into_iter().map(|t| (name.clone(), t)));
        Ok(self)
    }

    /// The tools `name` contributes, refused when one's name is taken
    /// (by another middleware's tool, or twice in the list).
    fn check_contributed(
        &self,
        name: &Arc<str>,
        tools: Vec<Arc<dyn crate::harness::tool::Tool>>,
    ) -> Result<Vec<Arc<dyn crate::harness::tool::Tool>>> {
        for (i, tool) in tools.iter().enumerate() {
            let tool_name = &tool.schema().name;
            // A middleware of this name already registered is either a
            // default it replaces (its tools go) or a duplicate `insert` refuses.
            let owner = self
                .tools
                .iter()
                .find(|(owner, t)| owner != name && &t.schema().name == tool_name)
                .map(|(owner, _)| owner.clone())
                .or_else(|| {
                    tools[..i]
                        .iter()
                        .any(|t| &t.schema().name == tool_name)
                        .then(|| name.clone())
                });
            if let Some(owner) = owner {
                return Err(TinyAgentsError::config(format!(
                    "middleware `{name}` contributes a tool named `{tool_name}`, but middleware `{owner}` already \
                     contributes one; tool names must be unique — register only one of them, or give one tool \
                     another name"
                )));
            }
        }
        Ok(tools)
    }

    /// The tools the registered middleware contribute, each with the name
    /// of the middleware that contributed it, in registration order. An
    /// [`Agent`](crate::harness::agent::Agent) offers them next to its own.
    pub fn contributed_tools(&self) -> impl Iterator<Item = (&str, &Arc<dyn crate::harness::tool::Tool>)> {
        self.tools.iter().map(|(owner, tool)| (&**owner, tool))
    }

    fn insert(&mut self, entry: Entry<S, C>) -> Result<&mut Self> {
        let replaced = match self.registered.iter().position(|e| e.name == entry.name) {
            // a default-on built-in gives way to a registration of its name
            // (as a file's entry of its `type` does), at the new one's place
            Some(pos) if self.registered[pos].default => Some((pos, self.registered.remove(pos))),
            _ => None,
        };
        if replaced.is_none() {
            self.check_unique(&entry.name)?;
        }
        self.registered.push(entry);
        match self.resolve() {
            Ok(order) => {
                self.order = order;
                self.rebuild();
                Ok(self)
            }
            Err(e) => {
                self.registered.pop();
                if let Some((pos, old)) = replaced {
                    self.registered.insert(pos, old);
                }
                Err(e)
            }
        }
    }

    fn check_unique(&self, name: &str) -> Result<()> {
        if let Some(pos) = self.registered.iter().position(|e| &*e.name == name) {
            return Err(TinyAgentsError::config(format!(
                "a middleware named `{}` is already registered (registration #{}); names must be unique — \
                 register the second instance under its own name with `stack.add_named(\"{}-2\", …)`",
                name,
                pos + 1,
                name
            )));
        }
        Ok(())
    }

    /// Removes the middleware registered as `name`: how code turns off one
    /// of the default-on built-ins (a file says `enabled = false`). A name
    /// that is not registered, or whose removal would break another
    /// middleware's required ordering constraint, is a `Config` error and
    /// leaves the stack unchanged.
    ///
    /// ```
    /// use tinyagents::prelude::*;
    ///
    /// let stack: MiddlewareStack<()> = MiddlewareStack::new().without("output_limit_recovery")?;
    /// assert_eq!(stack.names(), ["parallel_edit_guard"]);
    /// assert!(MiddlewareStack::<()>::new().without("output_limit_recovry").is_err());
    /// # Ok::<(), TinyAgentsError>(())
    /// ```
    pub fn remove(&mut self, name: &str) -> Result<&mut Self> {
        let Some(pos) = self.registered.iter().position(|e| &*e.name == name) else {
            return Err(TinyAgentsError::config(format!(
                "cannot remove `{name}`: no middleware of that name is registered; the registered names are [{}]",
                self.names().join(", ")
            )));
        };
        let old = self.registered.remove(pos);
        match self.resolve() {
            Ok(order) => {
                self.order = order;
                self.rebuild();
                Ok(self)
            }
            Err(e) => {
                self.registered.insert(pos, old);
                Err(e)
            }
        }
    }

    /// Builder form of [`remove`](Self::remove).
    pub fn without(mut self, name: &str) -> Result<Self> {
        self.remove(name)?;
        Ok(self)
    }

    /// Marks every middleware registered so far as a default: a later
    /// registration of the same name replaces it.
    pub(crate) fn mark_defaults(&mut self) {
        for entry in &mut self.registered {
            entry.default = true;
        }
    }

    fn resolve(&self) -> Result<Vec<usize>> {
        let nodes: Vec<OrderNode<'_>> = self
            .registered
            .iter()
            .map(|e| OrderNode {
                name: &e.name,
                before: e.info.before.iter().map(|s| s.as_ref()).collect(),
                after: e.info.after.iter().map(|s| s.as_ref()).collect(),
                before_if_present: e.info.before_if_present.iter().map(|s| s.as_ref()).collect(),
                after_if_present: e.info.after_if_present.iter().map(|s| s.as_ref()).collect(),
            })
            .collect();
        resolve(&nodes)
    }

    fn rebuild(&mut self) {
        for list in &mut self.lists {
            list.clear();
        }
        self.model.clear();
        self.tool.clear();
        for &i in &self.order {
            let e = &self.registered[i];
            let (name, jumps, hooks) = (e.name.clone(), e.info.jumps, e.info.hooks);
            if let Some(mw) = &e.lifecycle {
                for kind in hooks.kinds().filter(|k| (*k as usize) < HookKind::LIFECYCLE_COUNT) {
                    let sync = hooks.contains(HookSet::sync_of(kind));
                    self.lists[kind as usize].push(Slot {
                        mw: mw.clone(),
                        name: name.clone(),
                        jumps,
                        sync,
                    });
                }
            }
            if let Some(mw) = &e.model {
                self.model.push(Slot {
                    mw: mw.clone(),
                    name: name.clone(),
                    jumps,
                    sync: false,
                });
            }
            if let Some(mw) = &e.tool {
                self.tool.push(Slot {
                    mw: mw.clone(),
                    name: name.clone(),
                    jumps,
                    sync: false,
                });
            }
        }
        for (flag, list) in self.all_sync.iter_mut().zip(&self.lists) {
            *flag = list.iter().all(|slot| slot.sync);
        }
    }

    // ----- introspection ------------------------------------------------

    /// The names of the registered middleware, in resolved order.
    pub fn names(&self) -> Vec<&str> {
        self.order.iter().map(|&i| &*self.registered[i].name).collect()
    }

    /// The metadata of the registered middleware, in resolved order.
    pub fn infos(&self) -> impl Iterator<Item = &MiddlewareInfo> {
        self.order.iter().map(|&i| &self.registered[i].info)
    }

    /// The names of the middleware that implement `hook`, in dispatch order
    /// (registration order; `after_*` hooks run them in reverse).
    pub fn implementors(&self, hook: HookKind) -> Vec<&str> {
        match hook {
            HookKind::WrapModel => self.model.iter().map(|s| &*s.name).collect(),
            HookKind::WrapTool => self.tool.iter().map(|s| &*s.name).collect(),
            _ => self.lists[hook as usize].iter().map(|s| &*s.name).collect(),
        }
    }

    /// Whether any middleware implements `hook`.
    #[inline]
    pub fn has(&self, hook: HookKind) -> bool {
        match hook {
            HookKind::WrapModel => !self.model.is_empty(),
            HookKind::WrapTool => !self.tool.is_empty(),
            _ => !self.lists[hook as usize].is_empty(),
        }
    }

    /// How many middleware are registered.
    pub fn len(&self) -> usize {
        self.registered.len()
    }

    /// Whether no middleware is registered.
    pub fn is_empty(&self) -> bool {
        self.registered.is_empty()
    }

    // ----- dispatch -----------------------------------------------------

    #[inline]
    async fn call_slot<T: Send>(
        slot: &Slot<dyn Middleware<S, C>>,
        hook: HookKind,
        ctx: &mut RunContext<C>,
        state: &S,
        value: &mut T,
        f: HookFn<S, C, T>,
        g: SyncHookFn<S, C, T>,
    ) -> Result<()> {
        let bracket = Bracket::open(ctx, &slot.name, hook);
        let (res, panicked) = if slot.sync {
            let res = catch_sync(|| g(&*slot.mw, ctx, state, value), &slot.name, hook);
            let panicked = matches!(&res, Err(TinyAgentsError::MiddlewarePanic { .. }));
            (res, panicked)
        } else {
            catch(f(&*slot.mw, ctx, state, value), &slot.name, hook).await
        };
        let res = ctx.checked_jump(&slot.name, slot.jumps, res);
        bracket.close(outcome_of(&res, panicked));
        res
    }

    async fn dispatch<T: Send>(
        &self,
        hook: HookKind,
        reverse: bool,
        ctx: &mut RunContext<C>,
        state: &S,
        value: &mut T,
        (f, g): (HookFn<S, C, T>, SyncHookFn<S, C, T>),
    ) -> Result<()> {
        let list = &self.lists[hook as usize];
        if list.is_empty() {
            return Ok(());
        }
        let mut res = Ok(());
        if reverse {
            for slot in list.iter().rev() {
                res = Self::call_slot(slot, hook, ctx, state, value, f, g).await;
                if res.is_err() {
                    break;
                }
            }
        } else {
            for slot in list {
                res = Self::call_slot(slot, hook, ctx, state, value, f, g).await;
                if res.is_err() {
                    break;
                }
            }
        }
        if let Err(e) = &res {
            self.run_on_error(ctx, state, e).await;
        }
        res
    }

    /// Runs every `on_error` hook, in registration order, with `error`.
    /// Their own errors and panics are ignored: they never replace `error`.
    pub async fn run_on_error(&self, ctx: &mut RunContext<C>, state: &S, error: &TinyAgentsError) {
        for slot in &self.lists[HookKind::OnError as usize] {
            let bracket = Bracket::open(ctx, &slot.name, HookKind::OnError);
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

    /// Runs `before_agent` hooks in registration order.
    pub async fn run_before_agent(&self, ctx: &mut RunContext<C>, state: &S) -> Result<()> {
        self.dispatch(
            HookKind::BeforeAgent,
            false,
            ctx,
            state,
            &mut (),
            (before_agent_fn, before_agent_sync),
        )
        .await
    }

    /// Runs `after_agent` hooks in reverse registration order.
    pub async fn run_after_agent(&self, ctx: &mut RunContext<C>, state: &S, run: &mut AgentRun) -> Result<()> {
        self.dispatch(
            HookKind::AfterAgent,
            true,
            ctx,
            state,
            run,
            (after_agent_fn, after_agent_sync),
        )
        .await
    }

    /// Runs `before_steering` hooks in registration order.
    pub async fn run_before_steering(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        command: &mut SteeringCommand,
    ) -> Result<()> {
        self.dispatch(
            HookKind::BeforeSteering,
            false,
            ctx,
            state,
            command,
            (before_steering_fn, before_steering_sync),
        )
        .await
    }

    /// Runs `after_steering` hooks in reverse registration order.
    pub async fn run_after_steering(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        outcome: &mut SteeringOutcome,
    ) -> Result<()> {
        self.dispatch(
            HookKind::AfterSteering,
            true,
            ctx,
            state,
            outcome,
            (after_steering_fn, after_steering_sync),
        )
        .await
    }

    /// Runs `before_model` hooks in registration order.
    ///
    /// When the run tracks its prompt-cache layout (it holds a
    /// [`CacheLayoutTracking`](crate::harness::cache::CacheLayoutTracking)
    /// local, installed by the prompt-cache layout guard), the stable prefix is
    /// fingerprinted around each hook and every hook that changed it is recorded.
    pub async fn run_before_model(&self, ctx: &mut RunContext<C>, state: &S, request: &mut ModelRequest) -> Result<()> {
        let list = &self.lists[HookKind::BeforeModel as usize];
        let tracking = if list.is_empty() {
            None
        } else {
            ctx.try_local::<crate::harness::cache::CacheLayoutTracking>()
        };
        let Some(tracking) = tracking else {
            return self
                .dispatch(
                    HookKind::BeforeModel,
                    false,
                    ctx,
                    state,
                    request,
                    (before_model_fn, before_model_sync),
                )
                .await;
        };
        let mut before = crate::harness::cache::fingerprint(request);
        tracking.begin(before);
        for slot in list {
            let res = Self::call_slot(
                slot,
                HookKind::BeforeModel,
                ctx,
                state,
                request,
                before_model_fn,
                before_model_sync,
            )
            .await;
            let after = crate::harness::cache::fingerprint(request);
            if after != before {
                tracking.record(crate::harness::cache::PrefixEdit {
                    middleware: slot.name.clone(),
                    before,
                    after,
                });
                before = after;
            }
            if let Err(e) = res {
                self.run_on_error(ctx, state, &e).await;
                return Err(e);
            }
        }
        Ok(())
    }

    /// Runs `before_model_stream` hooks in registration order.
    pub async fn run_before_model_stream(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        request: &mut ModelRequest,
    ) -> Result<()> {
        self.dispatch(
            HookKind::BeforeModelStream,
            false,
            ctx,
            state,
            request,
            (before_model_stream_fn, before_model_stream_sync),
        )
        .await
    }

    /// Runs `after_model` hooks in reverse registration order.
    pub async fn run_after_model(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        response: &mut ModelResponse,
    ) -> Result<()> {
        self.dispatch(
            HookKind::AfterModel,
            true,
            ctx,
            state,
            response,
            (after_model_fn, after_model_sync),
        )
        .await
    }

    /// Runs `on_tool_batch` hooks in registration order.
    pub async fn run_on_tool_batch(&self, ctx: &mut RunContext<C>, state: &S, batch: &mut PreparedBatch) -> Result<()> {
        self.dispatch(
            HookKind::OnToolBatch,
            false,
            ctx,
            state,
            batch,
            (on_tool_batch_fn, on_tool_batch_sync),
        )
        .await
    }

    /// Runs `before_tool` hooks in registration order.
    pub async fn run_before_tool(&self, ctx: &mut RunContext<C>, state: &S, call: &mut ToolCall) -> Result<()> {
        self.dispatch(
            HookKind::BeforeTool,
            false,
            ctx,
            state,
            call,
            (before_tool_fn, before_tool_sync),
        )
        .await
    }

    /// Runs `after_tool` hooks in reverse registration order.
    pub async fn run_after_tool(&self, ctx: &mut RunContext<C>, state: &S, result: &mut ToolResult) -> Result<()> {
        self.dispatch(
            HookKind::AfterTool,
            true,
            ctx,
            state,
            result,
            (after_tool_fn, after_tool_sync),
        )
        .await
    }

    /// Runs `on_model_delta` hooks in registration order, stopping at the
    /// first that suppresses the delta (recorded as
    /// [`AgentEvent::DeltaSuppressed`]). No bracketing events.
    ///
    /// When every delta hook is synchronous ([`HookSet::SYNC_MODEL_DELTA`],
    /// what the DSL gives a plain fn) they run right here, and the returned
    /// future is already complete: no boxed future, no allocation per delta.
    /// Otherwise the returned future runs them when awaited.
    #[inline]
    pub fn run_on_model_delta<'a>(
        &'a self,
        ctx: &'a mut RunContext<C>,
        state: &'a S,
        delta: &'a mut ModelDelta,
    ) -> DeltaDispatch<'a> {
        self.run_delta(
            HookKind::OnModelDelta,
            ctx,
            state,
            delta,
            model_delta_sync,
            model_delta_async,
        )
    }

    /// Runs `on_tool_delta` hooks in registration order; see [`run_on_model_delta`](Self::run_on_model_delta).
    #[inline]
    pub fn run_on_tool_delta<'a>(
        &'a self,
        ctx: &'a mut RunContext<C>,
        state: &'a S,
        delta: &'a mut ToolDelta,
    ) -> DeltaDispatch<'a> {
        self.run_delta(
            HookKind::OnToolDelta,
            ctx,
            state,
            delta,
            tool_delta_sync,
            tool_delta_async,
        )
    }

    #[inline]
    fn run_delta<'a, D: Suppressible + Send>(
        &'a self,
        hook: HookKind,
        ctx: &'a mut RunContext<C>,
        state: &'a S,
        delta: &'a mut D,
        now: SyncDeltaFn<S, C, D>,
        later: HookFn<S, C, D>,
    ) -> DeltaDispatch<'a> {
        let list = &self.lists[hook as usize];
        if list.is_empty() {
            return DeltaDispatch::done();
        }
        if !self.all_sync[hook as usize] {
            return self.deltas_later(hook, ctx, state, delta, now, later);
        }
        match Self::deltas_now(list, hook, ctx, state, delta, now) {
            Ok(()) => DeltaDispatch::done(),
            Err(e) => self.delta_failed(ctx, state, e),
        }
    }

    /// A delta hook failed: every `on_error` sees it when the dispatch is awaited.
    #[cold]
    #[inline(never)]
    fn delta_failed<'a>(&'a self, ctx: &'a mut RunContext<C>, state: &'a S, e: TinyAgentsError) -> DeltaDispatch<'a> {
        DeltaDispatch::later(Box::pin(async move {
            self.run_on_error(ctx, state, &e).await;
            Err(e)
        }))
    }

    /// Some delta hook is async: the whole pass runs when the dispatch is awaited.
    #[inline(never)]
    fn deltas_later<'a, D: Suppressible + Send>(
        &'a self,
        hook: HookKind,
        ctx: &'a mut RunContext<C>,
        state: &'a S,
        delta: &'a mut D,
        now: SyncDeltaFn<S, C, D>,
        later: HookFn<S, C, D>,
    ) -> DeltaDispatch<'a> {
        let list = &self.lists[hook as usize];
        DeltaDispatch::later(Box::pin(async move {
            for slot in list {
                let res = if slot.sync {
                    catch_sync(|| now(&*slot.mw, ctx, state, delta), &slot.name, hook)
                } else {
                    catch(later(&*slot.mw, ctx, state, delta), &slot.name, hook).await.0
                };
                if let Err(e) = ctx.checked_jump(&slot.name, slot.jumps, res) {
                    self.run_on_error(ctx, state, &e).await;
                    return Err(e);
                }
                if delta.is_suppressed() {
                    Self::suppressed(ctx, slot, hook);
                    break;
                }
            }
            Ok(())
        }))
    }

    /// Every delta hook is synchronous: one panic guard for the whole pass.
    #[inline]
    fn deltas_now<D: Suppressible>(
        list: &[Slot<dyn Middleware<S, C>>],
        hook: HookKind,
        ctx: &mut RunContext<C>,
        state: &S,
        delta: &mut D,
        now: SyncDeltaFn<S, C, D>,
    ) -> Result<()> {
        let mut at = 0;
        let pass = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for (i, slot) in list.iter().enumerate() {
                at = i;
                let res = now(&*slot.mw, ctx, state, delta);
                ctx.checked_jump(&slot.name, slot.jumps, res)?;
                if delta.is_suppressed() {
                    Self::suppressed(ctx, slot, hook);
                    break;
                }
            }
            Ok(())
        }));
        match pass {
            Ok(res) => res,
            Err(payload) => {
                // A jump the panicking hook asked for is checked like any other.
                let e = panic_error(&list[at].name, hook, payload);
                ctx.checked_jump(&list[at].name, list[at].jumps, Err(e))
            }
        }
    }

    #[cold]
    fn suppressed(ctx: &RunContext<C>, slot: &Slot<dyn Middleware<S, C>>, hook: HookKind) {
        ctx.emit_with(EventKind::DeltaSuppressed, || AgentEvent::DeltaSuppressed {
            middleware: slot.name.clone(),
            hook,
        });
    }

    /// Runs the model onion around `base`: the first-registered wrap is
    /// outermost. An error escaping the onion is shown to every `on_error`.
    pub async fn run_wrapped_model(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        request: ModelRequest,
        base: &(dyn ModelBaseCall<S, C> + '_),
    ) -> Result<ModelResponse> {
        let res = ModelHandler::new(&self.model, base).run(ctx, state, request).await;
        match res {
            Ok(outcome) => Ok(outcome.into_response()),
            Err(e) => {
                self.run_on_error(ctx, state, &e).await;
                Err(e)
            }
        }
    }

    /// Runs the tool onion around `base`; see [`run_wrapped_model`](Self::run_wrapped_model).
    pub async fn run_wrapped_tool(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        call: ToolCall,
        base: &(dyn ToolBaseCall<S, C> + '_),
    ) -> Result<ToolResult> {
        let res = ToolHandler::new(&self.tool, base).run(ctx, state, call).await;
        match res {
            Ok(outcome) => Ok(outcome.into_result()),
            Err(e) => {
                self.run_on_error(ctx, state, &e).await;
                Err(e)
            }
        }
    }

    /// The jump targets every registered middleware may request, united.
    pub fn declared_jumps(&self) -> JumpSet {
        self.registered
            .iter()
            .fold(JumpSet::empty(), |acc, e| acc | e.info.jumps)
    }
}
