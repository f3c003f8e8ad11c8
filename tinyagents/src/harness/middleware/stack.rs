//! [`MiddlewareStack`]: registration, ordering, and the one dispatch pass
//! every lifecycle hook goes through (the `run_*` methods are derived from
//! the hook table in `dispatch.rs`).

use std::sync::Arc;

use super::invoke::Slot;
use super::order::{resolve, OrderNode};
use super::run_state::{next_layout, StateSlot};
use super::shape::{IntoDynMiddleware, LifecycleOnly, WithoutModelWrap, WithoutToolWrap};
use super::sync_forms::{Forms, SyncForms};
use super::wrap_only::WrapOnly;
use super::{
    HookKind, HookSet, Middleware, MiddlewareInfo, ModelBaseCall, ModelHandler, ModelMiddleware, ToolBaseCall,
    ToolHandler, ToolMiddleware,
};
use crate::harness::context::{JumpSet, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::model::{ModelRequest, ModelResponse};
use crate::harness::tool::{ToolCall, ToolResult};

/// One registration: a value, under one name, in the lists of the hooks it implements.
struct Entry<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    name: Arc<str>,
    info: MiddlewareInfo,
    /// The value, dispatched for each hook in `info.hooks` (wraps included).
    mw: Arc<dyn Middleware<S, C>>,
    /// Its synchronous forms, monomorphised for its type where it was known.
    forms: Box<dyn SyncForms<S, C>>,
    /// A default-on built-in: registering a middleware of the same name
    /// replaces it instead of being a duplicate.
    default: bool,
    /// Whether `mw` carries lifecycle hooks (`false`: a wrap-only registration).
    lifecycle: bool,
    /// A separately implemented [`ModelMiddleware`] registered under this
    /// name (`push_model`): dispatched in the model onion in `mw`'s place.
    model_wrap: Option<Arc<dyn Middleware<S, C>>>,
    /// A separately implemented [`ToolMiddleware`] registered under this name.
    tool_wrap: Option<Arc<dyn Middleware<S, C>>>,
}

/// The separate wrap impls registered with a type's lifecycle hooks
/// ([`MiddlewareStack::add_layers`] and its siblings).
struct Wraps<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    model: Option<Arc<dyn ModelMiddleware<S, C>>>,
    tool: Option<Arc<dyn ToolMiddleware<S, C>>>,
}

impl<S, C> Default for Wraps<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn default() -> Self {
        Self {
            model: None,
            tool: None,
        }
    }
}

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
    lists: [Vec<Slot<S, C>>; HookKind::LIFECYCLE_COUNT],
    model: Vec<Slot<S, C>>,
    tool: Vec<Slot<S, C>>,
    /// Per hook: whether every implementor takes the synchronous form.
    all_sync: [bool; HookKind::LIFECYCLE_COUNT],
    /// The tools the middleware contributed, with the name of each contributor.
    tools: Vec<(Arc<str>, Arc<dyn crate::harness::tool::Tool>)>,
    /// This layout's id, for the run state cells (fresh on every rebuild).
    layout: u64,
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
            layout: 0,
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

impl<S, C> MiddlewareStack<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    // ----- registration -------------------------------------------------

    /// Registers a middleware in every list its metadata says it belongs to
    /// (each lifecycle hook it implements, the model onion, the tool onion:
    /// its [`Middleware::wrap_model`]/[`Middleware::wrap_tool`]).
    ///
    /// A duplicate name or an ordering cycle is a `Config` error; the stack is
    /// then unchanged.
    ///
    /// A type that also implements [`ModelMiddleware`] or [`ToolMiddleware`]
    /// in an impl of its own does not compile here (`E0283`, "multiple
    /// `impl`s satisfying `T: LifecycleOnly<…>`"): registered through
    /// `Middleware` alone its separate wrap would never run. Register it with
    /// [`add_with_model_wrap`](Self::add_with_model_wrap),
    /// [`add_with_tool_wrap`](Self::add_with_tool_wrap) or
    /// [`add_layers`](Self::add_layers) (see [`shape`](super::shape)).
    pub fn add<M, Shape>(&mut self, middleware: M) -> Result<&mut Self>
    where
        M: Middleware<S, C> + LifecycleOnly<S, C, Shape> + 'static,
    {
        self.add_shared(Arc::new(middleware))
    }

    /// [`add`](Self::add) for a value you keep a handle to (to read its counters).
    pub fn add_shared<M, Shape>(&mut self, middleware: Arc<M>) -> Result<&mut Self>
    where
        M: Middleware<S, C> + LifecycleOnly<S, C, Shape> + 'static,
    {
        let forms = Box::new(Forms(middleware.clone()));
        self.add_dyn(middleware, forms, None, Wraps::default())
    }

    /// [`add`](Self::add) under a name of your choosing: how a second instance
    /// of the same middleware is registered.
    pub fn add_named<M, Shape>(&mut self, name: impl Into<String>, middleware: M) -> Result<&mut Self>
    where
        M: Middleware<S, C> + LifecycleOnly<S, C, Shape> + 'static,
    {
        let middleware = Arc::new(middleware);
        let forms = Box::new(Forms(middleware.clone()));
        self.add_dyn(middleware, forms, Some(name.into()), Wraps::default())
    }

    /// Builder form of [`add`](Self::add).
    pub fn with<M, Shape>(mut self, middleware: M) -> Result<Self>
    where
        M: Middleware<S, C> + LifecycleOnly<S, C, Shape> + 'static,
    {
        self.add(middleware)?;
        Ok(self)
    }

    /// Registers a type implementing [`Middleware`] and, in an impl of its
    /// own, [`ModelMiddleware`] (the middleware design's shape): one
    /// registration, its lifecycle hooks in their lists and its separate
    /// `wrap_model` in the model onion at its place (instead of
    /// `Middleware::wrap_model`). A type with a separate [`ToolMiddleware`]
    /// too does not compile here: use [`add_layers`](Self::add_layers).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use tinyagents::harness::middleware::ModelMiddleware;
    /// use tinyagents::prelude::*;
    ///
    /// #[derive(Default)]
    /// struct Timed {
    ///     calls: AtomicU32,
    /// }
    ///
    /// #[async_trait::async_trait]
    /// impl Middleware<()> for Timed {
    ///     fn hooks(&self) -> HookSet {
    ///         HookSet::BEFORE_MODEL
    ///     }
    /// }
    ///
    /// #[async_trait::async_trait]
    /// impl ModelMiddleware<()> for Timed {
    ///     async fn wrap_model(
    ///         &self,
    ///         ctx: &mut RunContext,
    ///         state: &(),
    ///         request: ModelRequest,
    ///         next: ModelHandler<'_, ()>,
    ///     ) -> Result<MiddlewareModelOutcome> {
    ///         self.calls.fetch_add(1, Ordering::Relaxed);
    ///         next.run(ctx, state, request).await
    ///     }
    /// }
    ///
    /// let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    /// stack.add_with_model_wrap(Timed::default())?;
    /// assert_eq!(stack.implementors(HookKind::WrapModel), ["Timed"]);
    /// assert_eq!(stack.implementors(HookKind::BeforeModel), ["Timed"]);
    /// // `stack.add(Timed::default())` does not compile: its wrap would never run.
    /// # Ok::<(), TinyAgentsError>(())
    /// ```
    pub fn add_with_model_wrap<M, Shape>(&mut self, middleware: M) -> Result<&mut Self>
    where
        M: Middleware<S, C> + ModelMiddleware<S, C> + WithoutToolWrap<S, C, Shape> + 'static,
    {
        let middleware = Arc::new(middleware);
        let wraps = Wraps {
            model: Some(middleware.clone()),
            tool: None,
        };
        let forms = Box::new(Forms(middleware.clone()));
        self.add_dyn(middleware, forms, None, wraps)
    }

    /// Registers a type implementing [`Middleware`] and, in an impl of its
    /// own, [`ToolMiddleware`]; see [`add_with_model_wrap`](Self::add_with_model_wrap).
    pub fn add_with_tool_wrap<M, Shape>(&mut self, middleware: M) -> Result<&mut Self>
    where
        M: Middleware<S, C> + ToolMiddleware<S, C> + WithoutModelWrap<S, C, Shape> + 'static,
    {
        let middleware = Arc::new(middleware);
        let wraps = Wraps {
            model: None,
            tool: Some(middleware.clone()),
        };
        let forms = Box::new(Forms(middleware.clone()));
        self.add_dyn(middleware, forms, None, wraps)
    }

    /// Registers a type implementing [`Middleware`], [`ModelMiddleware`] and
    /// [`ToolMiddleware`] in three impls (every hook of the middleware
    /// design's "Hook Types"): one registration, its lifecycle hooks in their
    /// lists and its separate wraps in the two onions at its place.
    pub fn add_layers<M>(&mut self, middleware: M) -> Result<&mut Self>
    where
        M: Middleware<S, C> + ModelMiddleware<S, C> + ToolMiddleware<S, C> + 'static,
    {
        let middleware = Arc::new(middleware);
        let wraps = Wraps {
            model: Some(middleware.clone()),
            tool: Some(middleware.clone()),
        };
        let forms = Box::new(Forms(middleware.clone()));
        self.add_dyn(middleware, forms, None, wraps)
    }

    /// Registers a shared lifecycle middleware (and its wraps, as
    /// [`add`](Self::add) does), a concrete type or an `Arc<dyn Middleware>`.
    /// A concrete type with a separate wrap impl does not compile, as with
    /// [`add`](Self::add); a value already erased to `dyn Middleware` cannot
    /// be checked: register its separate wraps with
    /// [`push_model`](Self::push_model)/[`push_tool`](Self::push_tool).
    ///
    /// # Panics
    /// On a duplicate name or an ordering cycle: use [`add`](Self::add) to get
    /// the error instead.
    pub fn push<M, Shape>(&mut self, middleware: Arc<M>) -> &mut Self
    where
        M: IntoDynMiddleware<S, C> + Middleware<S, C> + LifecycleOnly<S, C, Shape> + ?Sized + 'static,
    {
        let forms = Box::new(Forms(middleware.clone()));
        if let Err(e) = self.add_dyn(middleware.into_dyn(), forms, None, Wraps::default()) {
            panic!("MiddlewareStack::push: {e}");
        }
        self
    }

    /// Registers a model wrap ([`ModelMiddleware`]). Under the name of a
    /// middleware registered for its lifecycle hooks (a value implementing
    /// both traits, erased to `Arc<dyn Middleware>` and `push`ed), it joins
    /// that registration: one entry, in the model onion at its place, this
    /// wrap instead of its `Middleware::wrap_model`. Otherwise it is a
    /// wrap-only registration of its own. A concrete type with both impls
    /// registers in one call: [`add_with_model_wrap`](Self::add_with_model_wrap).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tinyagents::harness::middleware::ModelMiddleware;
    /// use tinyagents::prelude::*;
    ///
    /// struct Both;
    ///
    /// #[async_trait::async_trait]
    /// impl Middleware<()> for Both {
    ///     fn hooks(&self) -> HookSet {
    ///         HookSet::BEFORE_MODEL
    ///     }
    ///     async fn before_model(&self, _: &mut RunContext, _: &(), _: &mut ModelRequest) -> Result<()> {
    ///         Ok(())
    ///     }
    /// }
    ///
    /// #[async_trait::async_trait]
    /// impl ModelMiddleware<()> for Both {
    ///     fn name(&self) -> &str {
    ///         "Both"
    ///     }
    ///     async fn wrap_model(
    ///         &self,
    ///         ctx: &mut RunContext,
    ///         state: &(),
    ///         request: ModelRequest,
    ///         next: ModelHandler<'_, ()>,
    ///     ) -> Result<MiddlewareModelOutcome> {
    ///         next.run(ctx, state, request).await
    ///     }
    /// }
    ///
    /// let both = Arc::new(Both);
    /// let erased: Arc<dyn Middleware<()>> = both.clone();
    /// let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    /// stack.push(erased).push_model(both);
    /// assert_eq!(stack.names(), ["Both"]);
    /// assert_eq!(stack.implementors(HookKind::WrapModel), ["Both"]);
    /// assert_eq!(stack.implementors(HookKind::BeforeModel), ["Both"]);
    /// ```
    ///
    /// # Panics
    /// On a duplicate name: use [`try_push_model`](Self::try_push_model) to get the error.
    pub fn push_model(&mut self, middleware: Arc<dyn ModelMiddleware<S, C>>) -> &mut Self {
        if let Err(e) = self.try_push_model(middleware) {
            panic!("MiddlewareStack::push_model: {e}");
        }
        self
    }

    /// [`push_model`](Self::push_model), returning the error: a second
    /// model wrap under one name is a `Config` error.
    pub fn try_push_model(&mut self, middleware: Arc<dyn ModelMiddleware<S, C>>) -> Result<&mut Self> {
        self.add_wrap(WrapOnly::Model(middleware))
    }

    /// Registers a tool wrap ([`ToolMiddleware`]); under the name of a
    /// lifecycle registration it joins it, as [`push_model`](Self::push_model) does.
    ///
    /// # Panics
    /// On a duplicate name: use [`try_push_tool`](Self::try_push_tool) to get the error.
    pub fn push_tool(&mut self, middleware: Arc<dyn ToolMiddleware<S, C>>) -> &mut Self {
        if let Err(e) = self.try_push_tool(middleware) {
            panic!("MiddlewareStack::push_tool: {e}");
        }
        self
    }

    /// [`push_tool`](Self::push_tool), returning the error: a second tool
    /// wrap under one name is a `Config` error.
    pub fn try_push_tool(&mut self, middleware: Arc<dyn ToolMiddleware<S, C>>) -> Result<&mut Self> {
        self.add_wrap(WrapOnly::Tool(middleware))
    }

    /// Registers one wrap: it joins a registration of its name that has no
    /// separate wrap of its kind yet, or is a wrap-only registration of its own.
    fn add_wrap(&mut self, wrap: WrapOnly<S, C>) -> Result<&mut Self> {
        let is_model = matches!(wrap, WrapOnly::Model(_));
        let flag = if is_model {
            HookSet::WRAP_MODEL
        } else {
            HookSet::WRAP_TOOL
        };
        let name = Middleware::name(&wrap).to_owned();
        let wrap: Arc<dyn Middleware<S, C>> = Arc::new(wrap);
        if let Some(entry) = self.registered.iter_mut().find(|e| *e.name == *name && !e.default) {
            let slot = if is_model {
                &mut entry.model_wrap
            } else {
                &mut entry.tool_wrap
            };
            if slot.is_none() {
                *slot = Some(wrap);
                entry.info.hooks |= flag;
                self.rebuild();
                return Ok(self);
            }
            // a second wrap of this kind: `insert` reports the duplicate name
        }
        let forms = Box::new(Forms(wrap.clone()));
        let mut info = wrap.info();
        info.name = name.into();
        let entry = Entry {
            name: Arc::from(info.name.as_ref()),
            info,
            mw: wrap.clone(),
            forms,
            default: false,
            lifecycle: false,
            model_wrap: is_model.then(|| wrap.clone()),
            tool_wrap: (!is_model).then_some(wrap),
        };
        self.insert(entry)
    }

    fn add_dyn(
        &mut self,
        middleware: Arc<dyn Middleware<S, C>>,
        forms: Box<dyn SyncForms<S, C>>,
        name: Option<String>,
        wraps: Wraps<S, C>,
    ) -> Result<&mut Self> {
        let mut info = middleware.info();
        if let Some(name) = name {
            info.name = name.into();
        }
        let model_wrap = wraps.model.map(|m| {
            info.hooks |= HookSet::WRAP_MODEL;
            Arc::new(WrapOnly::Model(m)) as Arc<dyn Middleware<S, C>>
        });
        let tool_wrap = wraps.tool.map(|t| {
            info.hooks |= HookSet::WRAP_TOOL;
            Arc::new(WrapOnly::Tool(t)) as Arc<dyn Middleware<S, C>>
        });
        let name: Arc<str> = Arc::from(info.name.as_ref());
        let tools = self.check_contributed(&name, middleware.tools())?;
        self.insert(Entry {
            name: name.clone(),
            info,
            mw: middleware,
            forms,
            default: false,
            lifecycle: true,
            model_wrap,
            tool_wrap,
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

    fn insert(&mut self, mut entry: Entry<S, C>) -> Result<&mut Self> {
        let replaced = match self.registered.iter().position(|e| e.name == entry.name) {
            // a default-on built-in gives way to a registration of its name
            // (as a file's entry of its `type` does), at the new one's place
            Some(pos) if self.registered[pos].default => Some((pos, self.registered.remove(pos))),
            // the lifecycle hooks of a type whose wraps were registered
            // first (`push_model`, then `push`): one entry, both roles
            // (a wrap registered twice is a duplicate `check_unique` reports)
            Some(pos) if entry.lifecycle && !self.registered[pos].lifecycle && !self.wraps_clash(&entry, pos) => {
                let wraps = self.registered.remove(pos);
                entry.info.hooks |= wraps.info.hooks;
                entry.model_wrap = entry.model_wrap.take().or_else(|| wraps.model_wrap.clone());
                entry.tool_wrap = entry.tool_wrap.take().or_else(|| wraps.tool_wrap.clone());
                Some((pos, wraps))
            }
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

    /// Whether `entry` brings a separate wrap of a kind the registration at
    /// `pos` already has.
    fn wraps_clash(&self, entry: &Entry<S, C>, pos: usize) -> bool {
        let there = &self.registered[pos];
        (entry.model_wrap.is_some() && there.model_wrap.is_some())
            || (entry.tool_wrap.is_some() && there.tool_wrap.is_some())
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
        // One run state cell per registration that keeps run state, in resolved order.
        let count = self.registered.iter().filter(|e| e.info.run_state).count();
        let count = u32::try_from(count).expect("fewer than 2^32 registrations");
        self.layout = if count == 0 { 0 } else { next_layout() };
        let mut index = 0;
        for &i in &self.order {
            let e = &self.registered[i];
            let state = e.info.run_state.then(|| {
                index += 1;
                StateSlot {
                    stack: self.layout,
                    index: index - 1,
                    count,
                }
            });
            let (name, jumps, hooks) = (e.name.clone(), e.info.jumps, e.info.hooks);
            for kind in hooks.kinds() {
                let list = match kind {
                    HookKind::WrapModel => &mut self.model,
                    HookKind::WrapTool => &mut self.tool,
                    _ => &mut self.lists[kind as usize],
                };
                let mw = match kind {
                    HookKind::WrapModel => e.model_wrap.as_ref().unwrap_or(&e.mw),
                    HookKind::WrapTool => e.tool_wrap.as_ref().unwrap_or(&e.mw),
                    _ => &e.mw,
                };
                list.push(Slot {
                    mw: mw.clone(),
                    forms: e.forms.boxed(),
                    name: name.clone(),
                    jumps,
                    sync: hooks.contains(HookSet::sync_of(kind)),
                    state,
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

    /// The dispatch list of a lifecycle hook.
    #[inline]
    pub(super) fn list(&self, hook: HookKind) -> &[Slot<S, C>] {
        &self.lists[hook as usize]
    }

    /// Whether every implementor of a lifecycle hook takes its synchronous form.
    #[inline]
    pub(super) fn all_sync(&self, hook: HookKind) -> bool {
        self.all_sync[hook as usize]
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
        self.shown_to_on_error(ctx, state, res.map(|outcome| outcome.into_response()))
            .await
    }

    /// `res`, with its error (one that escaped an onion) first shown to every `on_error`.
    pub(crate) async fn shown_to_on_error<T>(&self, ctx: &mut RunContext<C>, state: &S, res: Result<T>) -> Result<T> {
        if let Err(e) = &res {
            self.run_on_error(ctx, state, e).await;
        }
        res
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
        self.shown_to_on_error(ctx, state, res.map(|outcome| outcome.into_result()))
            .await
    }

    /// The jump targets every registered middleware may request, united.
    pub fn declared_jumps(&self) -> JumpSet {
        self.registered
            .iter()
            .fold(JumpSet::empty(), |acc, e| acc | e.info.jumps)
    }
}
