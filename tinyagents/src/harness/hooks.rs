//! The hook table, and what the runtime derives from it: [`HookKind`],
//! [`HookSet`], one zero-sized type per hook (module [`hook`]), the
//! [`Middleware`](crate::harness::middleware::Middleware) methods, their synchronous forms and the
//! stack's dispatch.
//!
//! Adding a hook is one row here (and one row in the macro crate's table,
//! which a test compares with this one).

use serde::{Deserialize, Serialize};

/// The hook table: every hook, in lifecycle order, one row each. It hands
/// its rows to `$callback!`, which derives one thing from them (the kinds,
/// the trait, the dispatch, …).
///
/// A lifecycle row is `Kind method run_method FLAG order (value: Type)` with
/// `order` one of `forward` (registration order), `reverse` (reverse
/// registration order) or `delta` (registration order, stops at a
/// suppressed delta, no bracketing events; the row then names its typed
/// synchronous method and `HookSet` flag in `[...]`). `on_error` passes its
/// value by shared reference and has a row of its own; the wraps come last.
macro_rules! hook_table {
    ($callback:ident) => {
        $callback! {
            lifecycle {
                /// Once, when a run starts.
                BeforeAgent before_agent run_before_agent BEFORE_AGENT forward ();
                /// Once, when a run ends (also after a failed run), with its
                /// [`AgentRun`](crate::harness::run::AgentRun).
                AfterAgent after_agent run_after_agent AFTER_AGENT reverse (run: AgentRun);
                /// Before a steering command is applied: edit it (transform), or
                /// [`reject`](crate::harness::steering::SteeringCommand::reject) or
                /// [`defer`](crate::harness::steering::SteeringCommand::defer) it.
                BeforeSteering before_steering run_before_steering BEFORE_STEERING forward (command: SteeringCommand);
                /// After a steering command was decided.
                AfterSteering after_steering run_after_steering AFTER_STEERING reverse (outcome: SteeringOutcome);
                /// Before each model call, with the mutable request.
                BeforeModel before_model run_before_model BEFORE_MODEL forward (request: ModelRequest);
                /// Before each streaming model call, after every `before_model`.
                BeforeModelStream before_model_stream run_before_model_stream BEFORE_MODEL_STREAM forward (request: ModelRequest);
                /// For each streamed model delta, before it is forwarded or
                /// accumulated. May edit it or
                /// [`suppress`](crate::harness::model::ModelDelta::suppress) it.
                /// Emits no bracketing events.
                OnModelDelta on_model_delta run_on_model_delta ON_MODEL_DELTA delta (delta: ModelDelta)
                    [on_model_delta_sync SYNC_MODEL_DELTA];
                /// After each model call, with the mutable response.
                AfterModel after_model run_after_model AFTER_MODEL reverse (response: ModelResponse);
                /// Once per model reply with tool calls, before any `before_tool`:
                /// review the calls as the model made them (approvals,
                /// permissions, limits), reject calls or rewrite their arguments.
                OnToolBatch on_tool_batch run_on_tool_batch ON_TOOL_BATCH forward (batch: PreparedBatch);
                /// Before each tool call, with the mutable call. Every call of a
                /// batch passes its `before_tool` (in the model's order) before
                /// any of them runs. A `Validation` error refuses the call: by
                /// default it becomes the call's error result for the model.
                BeforeTool before_tool run_before_tool BEFORE_TOOL forward (call: ToolCall);
                /// Once per batch, after every `before_tool` and before any call
                /// runs: review the calls with their final effective arguments
                /// and the file access declared for them, the access the
                /// scheduler plans from (the parallel edit guard), and reject
                /// calls (a rewrite here would run unjudged: the run fails).
                OnPreparedToolCalls on_prepared_tool_calls run_on_prepared_tool_calls ON_PREPARED_TOOL_CALLS forward (batch: PreparedBatch);
                /// For each tool progress delta.
                OnToolDelta on_tool_delta run_on_tool_delta ON_TOOL_DELTA delta (delta: ToolDelta)
                    [on_tool_delta_sync SYNC_TOOL_DELTA];
                /// After each tool call, with the mutable result.
                AfterTool after_tool run_after_tool AFTER_TOOL reverse (result: ToolResult);
                /// Before a middleware compacts the context (a summary replacing
                /// older messages): may
                /// [`block`](crate::harness::provenance::CompactionPlan::block) it.
                /// Compacting middleware dispatch it through the run's stack with
                /// [`middleware::pre_compact`](crate::harness::middleware::pre_compact).
                PreCompact pre_compact run_pre_compact PRE_COMPACT forward (plan: CompactionPlan);
            }
            error {
                /// When a hook, the model or a tool failed. Best effort: errors
                /// returned here are ignored and never replace the original error.
                OnError on_error run_on_error ON_ERROR (error: TinyAgentsError);
            }
            wraps {
                /// Around each model call, with a `next` handler
                /// ([`ModelMiddleware`](crate::harness::middleware::ModelMiddleware)).
                WrapModel wrap_model WRAP_MODEL;
                /// Around each tool call, with a `next` handler
                /// ([`ToolMiddleware`](crate::harness::middleware::ToolMiddleware)).
                WrapTool wrap_tool WRAP_TOOL;
            }
        }
    };
}
pub(crate) use hook_table;

/// Derives [`HookKind`], [`HookSet`] and the hook types from the table.
macro_rules! define_kinds {
    (lifecycle { $($(#[$doc:meta])* $kind:ident $method:ident $run:ident $flag:ident $order:ident ($($arg:ident : $value:ty)?) $([$sync:ident $sync_flag:ident])?;)* }
     error { $(#[$edoc:meta])* $ekind:ident $emethod:ident $erun:ident $eflag:ident ($earg:ident : $evalue:ty); }
     wraps { $($(#[$wdoc:meta])* $wkind:ident $wmethod:ident $wflag:ident;)* }) => {
        /// One hook point of the middleware lifecycle.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        #[repr(u8)]
        pub enum HookKind {
            $( $(#[$doc])* $kind, )*
            $(#[$edoc])* $ekind,
            $( $(#[$wdoc])* $wkind, )*
        }

        impl HookKind {
            /// Every hook kind, in lifecycle order.
            pub const ALL: [HookKind; HookKind::COUNT] = [$(Self::$kind,)* Self::$ekind, $(Self::$wkind,)*];

            /// How many hook kinds there are.
            pub const COUNT: usize = [$(stringify!($kind),)* stringify!($ekind), $(stringify!($wkind),)*].len();

            /// The number of lifecycle hooks (all but the wraps).
            pub(crate) const LIFECYCLE_COUNT: usize = [$(stringify!($kind),)* stringify!($ekind)].len();

            /// The hook's snake_case name, as in the trait method (`before_model`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( Self::$kind => stringify!($method), )*
                    Self::$ekind => stringify!($emethod),
                    $( Self::$wkind => stringify!($wmethod), )*
                }
            }
        }


        /// The facts of every hook row, as the macro crate's table states them:
        /// `(trait method, HookKind variant, HookSet flag, value type, passed
        /// mutably, typed sync method and its flag)`. Compared with the macro
        /// crate's table in a test.
        #[cfg(test)]
        type Facts = (&'static str, &'static str, &'static str, Option<&'static str>, bool, Option<(&'static str, &'static str)>);
        #[cfg(test)]
        const TABLE_FACTS: &[Facts] = &[
            $((
                stringify!($method),
                stringify!($kind),
                stringify!($flag),
                <[&str]>::first(&[$(stringify!($value))?]).copied(),
                !<[&str]>::is_empty(&[$(stringify!($value))?]),
                <[(&str, &str)]>::first(&[$((stringify!($sync), stringify!($sync_flag)))?]).copied(),
            ),)*
            (stringify!($emethod), stringify!($ekind), stringify!($eflag), Some(stringify!($evalue)), false, None),
            $((stringify!($wmethod), stringify!($wkind), stringify!($wflag), None, false, None),)*
        ];

        bitflags::bitflags! {
            /// The hooks a middleware really implements.
            ///
            /// The stack reads it once, at registration, to build one dispatch list
            /// per hook: a hook that no middleware implements costs nothing at run
            /// time. A hand-written `Middleware` impl reports [`HookSet::EVERY`]
            /// by default (always correct, never fastest); the DSL reports the exact set.
            #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
            pub struct HookSet: u64 {
                $(
                    #[doc = concat!("`", stringify!($method), "`.")]
                    const $flag = 1 << HookKind::$kind as u8;
                )*
                #[doc = concat!("`", stringify!($emethod), "`.")]
                const $eflag = 1 << HookKind::$ekind as u8;
                $(
                    #[doc = concat!("`", stringify!($wmethod), "`: the stack puts the middleware in that onion.")]
                    const $wflag = 1 << HookKind::$wkind as u8;
                )*
                $($(
                    #[doc = concat!("The stack calls `", stringify!($sync), "` instead of the async `",
                        stringify!($method), "`: no boxed future per delta.")]
                    const $sync_flag = HookSet::sync_of(HookKind::$kind).bits();
                )?)*
                /// Every lifecycle hook.
                const LIFECYCLE = (1 << HookKind::LIFECYCLE_COUNT) - 1;
                /// Every hook, lifecycle and wraps (the default of a hand-written impl;
                /// no synchronous forms).
                const EVERY = (1 << HookKind::COUNT) - 1;
            }
        }

        /// One type per hook: the [`Hook`](hook::Hook) trait names its kind and the value it passes.
        ///
        /// ```
        /// use tinyagents::harness::middleware::hook::{BeforeModel, Hook};
        /// use tinyagents::prelude::*;
        ///
        /// assert_eq!(BeforeModel::KIND, HookKind::BeforeModel);
        /// let _request: <BeforeModel as Hook>::Value = ModelRequest::default();
        /// ```
        pub mod hook {
            use super::HookKind;
            use crate::harness::run::AgentRun;
            use crate::harness::error::TinyAgentsError;
            use crate::harness::tool::batch::PreparedBatch;
            use crate::harness::model::{ModelDelta, ModelRequest, ModelResponse};
            use crate::harness::provenance::CompactionPlan;
            use crate::harness::steering::{SteeringCommand, SteeringOutcome};
            use crate::harness::tool::{ToolCall, ToolDelta, ToolResult};

            mod sealed {
                pub trait Sealed {}
            }

            /// A lifecycle hook as a type: its [`HookKind`] and the value it
            /// passes (`()` for `before_agent`). Implemented by the types of
            /// this module only.
            pub trait Hook: sealed::Sealed + Send + Sync + 'static {
                /// The hook's kind.
                const KIND: HookKind;
                /// The value the hook passes after the context and the state.
                type Value: Send + Sync + 'static;
            }

            $( hook_type!($(#[$doc])* $kind = hook_value!($($value)?)); )*
            hook_type!($(#[$edoc])* $ekind = $evalue);
        }
    };
}

/// The zero-sized type of one hook, in module `hook`.
macro_rules! hook_type {
    ($(#[$doc:meta])* $kind:ident = $value:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $kind;
        impl sealed::Sealed for $kind {}
        impl Hook for $kind {
            const KIND: HookKind = HookKind::$kind;
            type Value = $value;
        }
    };
}

/// The value type of a hook row: `()` when it passes none.
macro_rules! hook_value {
    () => {
        ()
    };
    ($value:ty) => {
        $value
    };
}

hook_table!(define_kinds);

impl HookKind {
    /// The one-hook [`HookSet`].
    pub const fn as_set(self) -> HookSet {
        HookSet::from_bits_retain(1 << self as u8)
    }
}

impl std::fmt::Display for HookKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

// `HookSet::sync_of` puts the synchronous-form flags above every hook's own bit.
const _: () = assert!(HookKind::COUNT <= 32, "HookSet::sync_of needs a wider HookSet");

impl HookSet {
    /// The flag saying a lifecycle hook has a synchronous form the stack calls
    /// instead of the async one: [`Middleware::on_sync`](crate::harness::middleware::Middleware::on_sync)
    /// (or `on_model_delta_sync`/`on_tool_delta_sync` for the delta hooks).
    /// A plain (non-async) fn under a hook attribute gets it from the DSL:
    /// such a hook runs with no boxed future and no allocation.
    pub const fn sync_of(hook: HookKind) -> HookSet {
        // above every hook's own bit (`HookKind::COUNT` < 32)
        HookSet::from_bits_retain(1 << (32 + hook as u8))
    }

    /// The hook kinds in this set, in lifecycle order.
    pub fn kinds(self) -> impl Iterator<Item = HookKind> {
        HookKind::ALL.into_iter().filter(move |k| self.contains(k.as_set()))
    }

    /// Whether the set contains this hook.
    #[inline]
    pub const fn has(self, hook: HookKind) -> bool {
        self.bits() & (1 << hook as u8) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_in_all_once_and_in_lifecycle_order() {
        for (i, kind) in HookKind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i, "{kind} is out of place in HookKind::ALL");
        }
        assert_eq!(HookSet::LIFECYCLE.kinds().count(), HookKind::LIFECYCLE_COUNT);
        assert!(!HookSet::LIFECYCLE.has(HookKind::WrapModel));
        assert!(HookSet::LIFECYCLE.has(HookKind::OnError));
    }

    /// The macro crate cannot depend on the runtime: its own hook table is
    /// checked here, row by row, against the runtime's.
    #[test]
    fn the_macro_crate_table_matches_the_runtime_table() {
        let runtime: &[Facts] = TABLE_FACTS;
        let macros: &[Facts] = tinyagents_macros::__hook_table!();
        // `#[dynamic_prompt]` is DSL sugar for `before_model`, not a hook of its own.
        let macros: Vec<Facts> = macros.iter().copied().filter(|f| f.0 != "dynamic_prompt").collect();
        assert_eq!(macros, runtime, "the macro crate's hook table (tinyagents-macros/src/hook.rs) differs from the runtime's (tinyagents/src/harness/middleware/hooks.rs): add or fix the row in both");
    }
}
