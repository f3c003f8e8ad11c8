//! Which separate wrap impls a registered type has, checked by the compiler.
//!
//! A type may implement [`Middleware`] and, in impls of their own,
//! [`ModelMiddleware`] and [`ToolMiddleware`] (the middleware design's
//! shape). The stack dispatches a value through its `Middleware` impl, so a
//! separate wrap runs only when it is registered too. The registration
//! methods say which impls they register, and the compiler refuses a type
//! whose separate wrap a method would leave out:
//!
//! | the type implements | register it with |
//! | --- | --- |
//! | `Middleware` | [`add`](super::MiddlewareStack::add), [`with`](super::MiddlewareStack::with), [`push`](super::MiddlewareStack::push), … |
//! | `Middleware` + `ModelMiddleware` | [`add_with_model_wrap`](super::MiddlewareStack::add_with_model_wrap) |
//! | `Middleware` + `ToolMiddleware` | [`add_with_tool_wrap`](super::MiddlewareStack::add_with_tool_wrap) |
//! | all three | [`add_layers`](super::MiddlewareStack::add_layers) |
//!
//! A method given a type with a separate wrap it does not register fails to
//! compile with `E0283` ("type annotations needed … multiple `impl`s
//! satisfying `T: LifecycleOnly<…>`"): the impls it lists name the wrap
//! ([`HasSeparateModelWrap`], [`HasSeparateToolWrap`]); register the type
//! with the method of the table above that registers that wrap. (Stable Rust
//! has no way to ask "does `T` implement this trait?" inside a generic
//! method; two impls that both apply are how the question becomes a
//! compile error.) A function that forwards a middleware to one of these
//! keeps the check only if it states the bound too, as the crate's do
//! (`Agent::single().middleware`, `CompositeDriver::push_middleware`,
//! `Scenario::middleware`, `MiddlewareHarness::new`): in a function generic
//! over `M: Middleware` alone, `M` has just the one shape. Only a value
//! already erased to `Arc<dyn Middleware>` is beyond the check: register its wraps with
//! [`push_model`](super::MiddlewareStack::push_model) /
//! [`push_tool`](super::MiddlewareStack::push_tool) under its name.

use std::sync::Arc;

use super::{Middleware, ModelMiddleware, ToolMiddleware};

/// The shape of a type with no separate wrap impl: the only shape
/// [`LifecycleOnly`] has for it.
#[derive(Debug)]
pub enum LifecycleShape {}

/// The shape of a type that also implements [`ModelMiddleware`] in an impl
/// of its own: register it with
/// [`add_with_model_wrap`](super::MiddlewareStack::add_with_model_wrap) (or
/// [`add_layers`](super::MiddlewareStack::add_layers)), so its wrap runs.
#[derive(Debug)]
pub enum HasSeparateModelWrap {}

/// The shape of a type that also implements [`ToolMiddleware`] in an impl
/// of its own: register it with
/// [`add_with_tool_wrap`](super::MiddlewareStack::add_with_tool_wrap) (or
/// [`add_layers`](super::MiddlewareStack::add_layers)), so its wrap runs.
#[derive(Debug)]
pub enum HasSeparateToolWrap {}

/// A type with no separate wrap impl: what
/// [`add`](super::MiddlewareStack::add) and its siblings register (they
/// require [`Middleware`] too). `Shape` is inferred: every type has
/// [`LifecycleShape`], and a type with a separate [`ModelMiddleware`] or
/// [`ToolMiddleware`] impl has a second shape, an ambiguity the compiler
/// reports (`E0283`) instead of registering it without its wrap. See the [module](self) for the methods
/// that register the wraps too.
pub trait LifecycleOnly<S, C, Shape> {}

impl<S, C, M> LifecycleOnly<S, C, LifecycleShape> for M
where
    M: ?Sized,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
}

impl<S, C, M> LifecycleOnly<S, C, HasSeparateModelWrap> for M
where
    M: ModelMiddleware<S, C> + ?Sized,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
}

impl<S, C, M> LifecycleOnly<S, C, HasSeparateToolWrap> for M
where
    M: ToolMiddleware<S, C> + ?Sized,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
}

/// A type with no separate [`ToolMiddleware`] impl: what
/// [`add_with_model_wrap`](super::MiddlewareStack::add_with_model_wrap)
/// registers (with its [`ModelMiddleware`]). A type with a separate tool
/// wrap too is refused (`E0283`): register it with
/// [`add_layers`](super::MiddlewareStack::add_layers).
pub trait WithoutToolWrap<S, C, Shape> {}

impl<S, C, M> WithoutToolWrap<S, C, LifecycleShape> for M
where
    M: ?Sized,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
}

impl<S, C, M> WithoutToolWrap<S, C, HasSeparateToolWrap> for M
where
    M: ToolMiddleware<S, C> + ?Sized,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
}

/// A type with no separate [`ModelMiddleware`] impl: what
/// [`add_with_tool_wrap`](super::MiddlewareStack::add_with_tool_wrap)
/// registers (with its [`ToolMiddleware`]). A type with a separate model
/// wrap too is refused (`E0283`): register it with
/// [`add_layers`](super::MiddlewareStack::add_layers).
pub trait WithoutModelWrap<S, C, Shape> {}

impl<S, C, M> WithoutModelWrap<S, C, LifecycleShape> for M
where
    M: ?Sized,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
}

impl<S, C, M> WithoutModelWrap<S, C, HasSeparateModelWrap> for M
where
    M: ModelMiddleware<S, C> + ?Sized,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
}

/// A shared middleware as the `dyn Middleware` the stack keeps: a concrete
/// type, or a value already erased (for [`push`](super::MiddlewareStack::push)).
pub trait IntoDynMiddleware<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// The value as a `dyn Middleware`.
    fn into_dyn(self: Arc<Self>) -> Arc<dyn Middleware<S, C>>;
}

impl<S, C, M> IntoDynMiddleware<S, C> for M
where
    M: Middleware<S, C> + 'static,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn into_dyn(self: Arc<Self>) -> Arc<dyn Middleware<S, C>> {
        self
    }
}

impl<S, C> IntoDynMiddleware<S, C> for dyn Middleware<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn into_dyn(self: Arc<Self>) -> Arc<dyn Middleware<S, C>> {
        self
    }
}
