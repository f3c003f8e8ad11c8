//! [`Recorder`]: a middleware that keeps every value every hook passes it.

use std::any::Any;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;

use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::hooks::hook::Hook;
use crate::harness::hooks::{HookKind, HookSet};
use crate::harness::middleware::{Middleware, PreparedBatch};
use crate::harness::model::{ModelDelta, ModelRequest, ModelResponse};
use crate::harness::provenance::CompactionPlan;
use crate::harness::run::AgentRun;
use crate::harness::steering::{SteeringCommand, SteeringOutcome};
use crate::harness::tool::{ToolCall, ToolDelta, ToolResult};

/// One value a [`Recorder`] saw: the hook and a copy of what it passed.
pub struct Recorded {
    /// The hook.
    pub kind: HookKind,
    value: Box<dyn Any + Send + Sync>,
}

impl std::fmt::Debug for Recorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorded")
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Recorded {
    /// The value, when it is the one hook `H` passes.
    pub fn value<H: Hook>(&self) -> Option<&H::Value> {
        if self.kind == H::KIND {
            self.value.downcast_ref::<H::Value>()
        } else {
            None
        }
    }
}

/// A middleware that observes every lifecycle hook and `on_error`, and keeps a
/// copy of each value in the order the hooks ran, for tests to assert on
/// what a stack (or a run) passed along. It changes nothing and never fails.
///
/// Clones share one record, so keep a clone and put the other in the stack.
/// Where it sits in the stack decides what it sees: last, it sees a request
/// after every other `before_model`; first, a response after every other
/// `after_model`.
///
/// ```
/// use tinyagents::harness::middleware::hook;
/// use tinyagents::prelude::*;
/// use tinyagents::testing::{Recorder, Scenario, ScriptedTurn};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let recorder = Recorder::new();
/// let done = Scenario::new([ScriptedTurn::text("hello")])
///     .middleware(recorder.clone())
///     .run("hi")
///     .await;
/// assert_eq!(done.text(), "hello");
/// let requests = recorder.values::<hook::BeforeModel>();
/// assert_eq!(requests.len(), 1);
/// assert_eq!(requests[0].messages.last().unwrap().text(), "hi");
/// assert_eq!(recorder.kinds().first(), Some(&HookKind::BeforeAgent));
/// # });
/// ```
#[derive(Clone, Default)]
pub struct Recorder {
    name: Option<Arc<str>>,
    seen: Arc<Mutex<Vec<Recorded>>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("name", &self.name)
            .field("kinds", &self.kinds())
            .finish()
    }
}

impl Recorder {
    /// A recorder named `Recorder`.
    pub fn new() -> Self {
        Self::default()
    }

    /// A recorder with its own name (two recorders in one stack need two).
    pub fn named(name: impl Into<Arc<str>>) -> Self {
        Self {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// The hooks that ran, in order.
    pub fn kinds(&self) -> Vec<HookKind> {
        self.lock().iter().map(|r| r.kind).collect()
    }

    /// Copies of the values hook `H` passed, in order.
    pub fn values<H: Hook>(&self) -> Vec<H::Value>
    where
        H::Value: Clone,
    {
        self.lock().iter().filter_map(|r| r.value::<H>().cloned()).collect()
    }

    /// Forgets what was recorded.
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Recorded>> {
        // a test's recorder: a panic while holding it already failed the test
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn push<T: Any + Send + Sync>(&self, kind: HookKind, value: T) {
        self.lock().push(Recorded {
            kind,
            value: Box::new(value),
        });
    }
}

macro_rules! define_recorder {
    (lifecycle { $($(#[$doc:meta])* $kind:ident $method:ident $run:ident $flag:ident $order:ident ($($arg:ident : $value:ty)?) $([$sync:ident $sync_flag:ident])?;)* }
     error { $(#[$edoc:meta])* $ekind:ident $emethod:ident $erun:ident $eflag:ident ($earg:ident : $evalue:ty); }
     wraps { $($(#[$wdoc:meta])* $wkind:ident $wmethod:ident $wflag:ident;)* }) => {
        // The parameters are named as the DSL names those of its generated
        // impls, so that rustc's list of `Middleware` implementors in a
        // "not a middleware" error stays one short list of type names.
        #[async_trait]
        impl<__TinyState, __TinyCtx> Middleware<__TinyState, __TinyCtx> for Recorder
        where
            __TinyState: Send + Sync + 'static,
            __TinyCtx: Send + Sync + 'static,
        {
            fn name(&self) -> &str {
                self.name.as_deref().unwrap_or("Recorder")
            }

            fn hooks(&self) -> HookSet {
                HookSet::LIFECYCLE
            }

            $(
                async fn $method(&self, _ctx: &mut RunContext<__TinyCtx>, _state: &__TinyState $(, $arg: &mut $value)?) -> Result<()> {
                    self.push(HookKind::$kind, ($($arg.clone())?));
                    Ok(())
                }
            )*

            async fn $emethod(&self, _ctx: &mut RunContext<__TinyCtx>, _state: &__TinyState, $earg: &$evalue) -> Result<()> {
                self.push(HookKind::$ekind, $earg.clone());
                Ok(())
            }
        }
    };
}

crate::harness::hooks::hook_table!(define_recorder);
