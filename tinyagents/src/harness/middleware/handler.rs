//! The `next` handles passed to wrap middleware: [`ModelHandler`] and [`ToolHandler`].

use super::invoke::{outcome_of, Bracket, Slot, Unpanicking};
use super::{HookKind, Middleware, MiddlewareModelOutcome, MiddlewareToolOutcome, ModelBaseCall, ToolBaseCall};
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::model::ModelRequest;
use crate::harness::tool::ToolCall;

macro_rules! handler {
    (
        $(#[$doc:meta])*
        $handler:ident, $base:ident, $method:ident, $input:ty, $outcome:ty, $hook:expr
    ) => {
        $(#[$doc])*
        pub struct $handler<'a, State, Ctx = ()>
        where
            State: Send + Sync + 'static,
            Ctx: Send + Sync + 'static,
        {
            layers: &'a [Slot<State, Ctx>],
            base: &'a (dyn $base<State, Ctx> + 'a),
        }

        impl<State, Ctx> Clone for $handler<'_, State, Ctx>
        where
            State: Send + Sync + 'static,
            Ctx: Send + Sync + 'static,
        {
            fn clone(&self) -> Self {
                *self
            }
        }

        impl<State, Ctx> Copy for $handler<'_, State, Ctx>
        where
            State: Send + Sync + 'static,
            Ctx: Send + Sync + 'static,
        {
        }

        impl<'a, State, Ctx> $handler<'a, State, Ctx>
        where
            State: Send + Sync + 'static,
            Ctx: Send + Sync + 'static,
        {
            pub(crate) fn new(layers: &'a [Slot<State, Ctx>], base: &'a (dyn $base<State, Ctx> + 'a)) -> Self {
                Self { layers, base }
            }

            /// How many wrap layers are still inside this handler.
            pub fn depth(&self) -> usize {
                self.layers.len()
            }

            /// Proceeds to the next layer (and, at the end, the real call).
            /// May be called any number of times.
            pub async fn run(&self, ctx: &mut RunContext<Ctx>, state: &State, input: $input) -> Result<$outcome> {
                let Some((slot, rest)) = self.layers.split_first() else {
                    return self.base.call(ctx, state, input).await.map(Into::into);
                };
                let next = Self { layers: rest, base: self.base };
                let mut bracket = Bracket::open(ctx, &slot.name, $hook);
                slot.enter(ctx);
                // The layer's result is checked and labelled in place: it is
                // moved once, out to the caller.
                let mut panicked = false;
                let mut res = Unpanicking {
                    fut: Middleware::$method(&*slot.mw, ctx, state, input, next),
                    name: &slot.name,
                    hook: $hook,
                    panicked: &mut panicked,
                }
                .await;
                ctx.check_jump_in_place(&slot.name, slot.jumps, &mut res);
                bracket.close(outcome_of(&res, panicked));
                res
            }
        }
    };
}

handler!(
    /// The rest of the model onion, as a wrap layer sees it: call
    /// [`run`](ModelHandler::run) zero, one or many times. `Copy`, so a retry
    /// loop can call it again.
    ModelHandler, ModelBaseCall, wrap_model, ModelRequest, MiddlewareModelOutcome, HookKind::WrapModel
);

handler!(
    /// The rest of the tool onion, as a wrap layer sees it; see [`ModelHandler`].
    ToolHandler, ToolBaseCall, wrap_tool, ToolCall, MiddlewareToolOutcome, HookKind::WrapTool
);
