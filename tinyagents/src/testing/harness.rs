//! [`MiddlewareHarness`]: a stack's hooks run one at a time, in isolation,
//! with one method per hook generated from the hook table.

use std::any::Any;
use std::sync::Arc;

use crate::harness::context::{RunConfig, RunContext};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, CollectingSink};
use crate::harness::middleware::shape::LifecycleOnly;
use crate::harness::middleware::{Middleware, MiddlewareStack, ModelBaseCall, PreparedBatch, ToolBaseCall};
use crate::harness::model::{ModelDelta, ModelRequest, ModelResponse};
use crate::harness::provenance::CompactionPlan;
use crate::harness::run::AgentRun;
use crate::harness::steering::{SteeringCommand, SteeringOutcome};
use crate::harness::tool::{ToolCall, ToolDelta, ToolResult};

use super::trace::trace;

/// Runs one middleware's hooks in isolation: a stack holding only it, a run
/// context reporting to a [`CollectingSink`], and a default state.
///
/// It has one method per hook, named after the hook and generated from the
/// same table as the [`Middleware`] trait, so it covers every hook: a
/// lifecycle hook's method takes the value, runs the stack's hooks on it and
/// hands it back as they left it; `on_error` takes the error; `wrap_model`
/// and `wrap_tool` take the innermost call ([`model_base`](super::model_base),
/// [`tool_base`](super::tool_base)).
pub struct MiddlewareHarness<S = (), C = ()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// The stack of one.
    pub stack: MiddlewareStack<S, C>,
    /// The run context the hooks get.
    pub ctx: RunContext<C>,
    /// The state the hooks get.
    pub state: S,
    sink: Arc<CollectingSink>,
}

impl<S, C> MiddlewareHarness<S, C>
where
    S: Default + Send + Sync + 'static,
    C: Default + Send + Sync + 'static,
{
    /// A harness around `middleware`, with default state and context.
    ///
    /// # Panics
    /// If the middleware cannot be registered (it cannot fail for one middleware).
    pub fn new<M, Shape>(middleware: M) -> Self
    where
        M: Middleware<S, C> + LifecycleOnly<S, C, Shape> + 'static,
    {
        let mut stack = MiddlewareStack::empty();
        stack
            .add(middleware)
            .expect("a stack of one middleware always registers");
        Self::with_stack(stack, S::default(), C::default())
    }
}

impl<S, C> MiddlewareHarness<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// A harness around a whole stack, with a given state and context.
    pub fn with_stack(stack: MiddlewareStack<S, C>, state: S, context: C) -> Self {
        let sink = Arc::new(CollectingSink::new());
        let ctx = RunContext::new(RunConfig::new("test-run"), context).with_sink(sink.clone());
        Self {
            stack,
            ctx,
            state,
            sink,
        }
    }

    /// The events emitted so far.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.sink.events()
    }

    /// The [`trace`] of the events so far.
    pub fn trace(&self) -> Vec<String> {
        trace(&self.sink.events())
    }

    /// Runs `on_model_delta` on a text delta per item, returning the deltas
    /// that were not suppressed (and any a hook released ahead of one, in the
    /// order the loop would forward them).
    pub async fn model_deltas(&mut self, texts: impl IntoIterator<Item = &str>) -> Result<Vec<ModelDelta>> {
        let mut out = Vec::new();
        for text in texts {
            let mut delta = ModelDelta::text(text);
            self.stack
                .run_on_model_delta(&mut self.ctx, &self.state, &mut delta)
                .await?;
            out.extend(delta.take_released());
            if !delta.is_suppressed() {
                out.push(delta);
            }
        }
        Ok(out)
    }

    /// Runs the model onion (`wrap_model`) around `base`.
    pub async fn wrap_model(
        &mut self,
        request: ModelRequest,
        base: &(dyn ModelBaseCall<S, C> + '_),
    ) -> Result<ModelResponse> {
        self.stack
            .run_wrapped_model(&mut self.ctx, &self.state, request, base)
            .await
    }

    /// Runs the tool onion (`wrap_tool`) around `base`.
    pub async fn wrap_tool(&mut self, call: ToolCall, base: &(dyn ToolBaseCall<S, C> + '_)) -> Result<ToolResult> {
        self.stack
            .run_wrapped_tool(&mut self.ctx, &self.state, call, base)
            .await
    }
}

/// What the loop does to a hook's value around the hook: a run gets the
/// run's compressions attached, before and after `after_agent`.
fn as_the_loop_does<C>(ctx: &RunContext<C>, value: &mut dyn Any) {
    if let Some(run) = value.downcast_mut::<AgentRun>() {
        crate::harness::compression::attach(ctx, run);
    }
}

/// One harness method per lifecycle hook.
macro_rules! harness_method {
    ($(#[$doc:meta])* $method:ident $run:ident ()) => {
        #[doc = concat!("Runs the stack's `", stringify!($method), "` hooks.")]
        ///
        /// The hook's own documentation:
        ///
        $(#[$doc])*
        pub async fn $method(&mut self) -> Result<()> {
            self.stack.$run(&mut self.ctx, &self.state).await
        }
    };
    ($(#[$doc:meta])* $method:ident $run:ident ($arg:ident : $value:ty)) => {
        #[doc = concat!("Runs the stack's `", stringify!($method), "` hooks on `", stringify!($arg),
            "` and returns it as they left it.")]
        ///
        /// The hook's own documentation:
        ///
        $(#[$doc])*
        pub async fn $method(&mut self, mut $arg: $value) -> Result<$value> {
            as_the_loop_does(&self.ctx, &mut $arg);
            self.stack.$run(&mut self.ctx, &self.state, &mut $arg).await?;
            as_the_loop_does(&self.ctx, &mut $arg);
            Ok($arg)
        }
    };
}

macro_rules! define_harness {
    (lifecycle { $($(#[$doc:meta])* $kind:ident $method:ident $run:ident $flag:ident $order:ident ($($arg:ident : $value:ty)?) $([$sync:ident $sync_flag:ident])?;)* }
     error { $(#[$edoc:meta])* $ekind:ident $emethod:ident $erun:ident $eflag:ident ($earg:ident : $evalue:ty); }
     wraps { $($(#[$wdoc:meta])* $wkind:ident $wmethod:ident $wflag:ident;)* }) => {
        impl<S, C> MiddlewareHarness<S, C>
        where
            S: Send + Sync + 'static,
            C: Send + Sync + 'static,
        {
            $( harness_method!($(#[$doc])* $method $run ($($arg : $value)?)); )*

            #[doc = concat!("Runs the stack's `", stringify!($emethod), "` hooks with `", stringify!($earg), "`.")]
            ///
            /// The hook's own documentation:
            ///
            $(#[$edoc])*
            pub async fn $emethod(&mut self, $earg: &$evalue) {
                self.stack.$erun(&mut self.ctx, &self.state, $earg).await
            }
        }

        /// The hooks the harness has a method for: the generated ones, and
        /// the wraps written above.
        #[cfg(test)]
        const COVERED: &[&str] = &[$(stringify!($method),)* stringify!($emethod), "wrap_model", "wrap_tool"];
    };
}

crate::harness::hooks::hook_table!(define_harness);

#[cfg(test)]
mod tests {
    use crate::harness::hooks::HookKind;

    #[test]
    fn every_hook_has_a_harness_method() {
        let missing: Vec<&str> = HookKind::ALL
            .iter()
            .map(|k| k.as_str())
            .filter(|name| !super::COVERED.contains(name))
            .collect();
        assert!(missing.is_empty(), "MiddlewareHarness has no method for {missing:?}");
        assert_eq!(super::COVERED.len(), HookKind::COUNT);
    }
}
