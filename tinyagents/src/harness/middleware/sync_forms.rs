//! The synchronous forms of a registered middleware, as the dispatch lists
//! call them: one trait object per registration whose methods are
//! monomorphised for the middleware's own type.
//!
//! Calling a hook's synchronous form through `Arc<dyn Middleware>` costs
//! more than the call: the value's address is computed from the vtable's
//! alignment (a load the call then waits on), and the hook's value is
//! passed to [`Middleware::on_sync`] as a [`HookValue`](super::HookValue)
//! whose tag the middleware checks again. A [`Forms`] of the concrete type,
//! behind a `Box` (whose data address needs no computing), has one method
//! per hook that calls the middleware's `on_sync` (or typed delta method)
//! statically: the compiler inlines it and folds the tag away, so a plain
//! DSL hook costs one indirect call, as a direct call through a vtable does.

use std::sync::Arc;

use super::dispatch::HookCall;
use super::hook::{self, Hook};
use super::Middleware;
use crate::harness::context::RunContext;
use crate::harness::error::Result;

/// A middleware of type `M` (a concrete type when registered with
/// [`MiddlewareStack::add`](super::MiddlewareStack::add), or
/// `dyn Middleware` when registered as one), viewed through its
/// synchronous forms.
pub(crate) struct Forms<M: ?Sized>(pub(crate) Arc<M>);

/// Derives [`SyncForms`] from the hook table: one method per lifecycle hook.
macro_rules! define_sync_forms {
    (lifecycle { $($(#[$doc:meta])* $kind:ident $method:ident $run:ident $flag:ident $order:ident ($($arg:ident : $value:ty)?) $([$sync:ident $sync_flag:ident])?;)* }
     error { $(#[$edoc:meta])* $ekind:ident $emethod:ident $erun:ident $eflag:ident ($earg:ident : $evalue:ty); }
     wraps { $($(#[$wdoc:meta])* $wkind:ident $wmethod:ident $wflag:ident;)* }) => {
        /// The synchronous form of every lifecycle hook of one registered
        /// middleware (see the [module](self)).
        pub(crate) trait SyncForms<S, C>: Send + Sync
        where
            S: Send + Sync + 'static,
            C: Send + Sync + 'static,
        {
            $(
                #[doc = concat!("The synchronous form of `", stringify!($method), "`.")]
                fn $method(
                    &self,
                    ctx: &mut RunContext<C>,
                    state: &S,
                    value: &mut <hook::$kind as Hook>::Value,
                ) -> Result<()>;
            )*

            /// A copy for another dispatch list.
            fn boxed(&self) -> Box<dyn SyncForms<S, C>>;
        }

        impl<S, C, M> SyncForms<S, C> for Forms<M>
        where
            S: Send + Sync + 'static,
            C: Send + Sync + 'static,
            M: Middleware<S, C> + ?Sized + 'static,
        {
            $(
                #[inline]
                fn $method(
                    &self,
                    ctx: &mut RunContext<C>,
                    state: &S,
                    value: &mut <hook::$kind as Hook>::Value,
                ) -> Result<()> {
                    <hook::$kind as HookCall>::call_sync(&*self.0, ctx, state, value)
                }
            )*

            fn boxed(&self) -> Box<dyn SyncForms<S, C>> {
                Box::new(Forms(self.0.clone()))
            }
        }

        $(
            impl FormCall for hook::$kind {
                #[inline(always)]
                fn call_form<S, C>(
                    forms: &dyn SyncForms<S, C>,
                    ctx: &mut RunContext<C>,
                    state: &S,
                    value: &mut Self::Value,
                ) -> Result<()>
                where
                    S: Send + Sync + 'static,
                    C: Send + Sync + 'static,
                {
                    forms.$method(ctx, state, value)
                }
            }
        )*
    };
}

/// How the dispatch calls one hook's method of [`SyncForms`].
pub(crate) trait FormCall: Hook {
    /// Calls this hook's synchronous form.
    fn call_form<S, C>(
        forms: &dyn SyncForms<S, C>,
        ctx: &mut RunContext<C>,
        state: &S,
        value: &mut Self::Value,
    ) -> Result<()>
    where
        S: Send + Sync + 'static,
        C: Send + Sync + 'static;
}

crate::harness::hooks::hook_table!(define_sync_forms);
