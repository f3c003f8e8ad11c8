//! [`HookKind`] and [`HookSet`]: which hooks exist and which a middleware implements.

use serde::{Deserialize, Serialize};

/// One hook point of the middleware lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum HookKind {
    /// Once, when a run starts.
    BeforeAgent,
    /// Once, when a run ends, with the [`AgentRun`](crate::harness::agent::AgentRun).
    AfterAgent,
    /// Before a steering command is applied: accept, reject, transform or defer.
    BeforeSteering,
    /// After a steering command was decided.
    AfterSteering,
    /// Before each model call, with the mutable request.
    BeforeModel,
    /// Before each streaming model call, after `before_model`.
    BeforeModelStream,
    /// For each streamed model delta, before it is forwarded or accumulated.
    OnModelDelta,
    /// After each model call, with the mutable response.
    AfterModel,
    /// Once per model reply with tool calls: review the whole prepared batch.
    OnToolBatch,
    /// Before each tool call, with the mutable call.
    BeforeTool,
    /// For each tool progress delta.
    OnToolDelta,
    /// After each tool call, with the mutable result.
    AfterTool,
    /// When any hook, model or tool fails.
    OnError,
    /// Around each model call, with a `next` handler.
    WrapModel,
    /// Around each tool call, with a `next` handler.
    WrapTool,
}

impl HookKind {
    /// Every hook kind, in lifecycle order.
    pub const ALL: [HookKind; 15] = [
        Self::BeforeAgent,
        Self::AfterAgent,
        Self::BeforeSteering,
        Self::AfterSteering,
        Self::BeforeModel,
        Self::BeforeModelStream,
        Self::OnModelDelta,
        Self::AfterModel,
        Self::OnToolBatch,
        Self::BeforeTool,
        Self::OnToolDelta,
        Self::AfterTool,
        Self::OnError,
        Self::WrapModel,
        Self::WrapTool,
    ];

    /// The number of lifecycle hooks (all but the two wraps).
    pub(crate) const LIFECYCLE_COUNT: usize = 13;

    /// The hook's snake_case name, as in the trait method (`before_model`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::BeforeAgent => "before_agent",
            Self::AfterAgent => "after_agent",
            Self::BeforeSteering => "before_steering",
            Self::AfterSteering => "after_steering",
            Self::BeforeModel => "before_model",
            Self::BeforeModelStream => "before_model_stream",
            Self::OnModelDelta => "on_model_delta",
            Self::AfterModel => "after_model",
            Self::OnToolBatch => "on_tool_batch",
            Self::BeforeTool => "before_tool",
            Self::OnToolDelta => "on_tool_delta",
            Self::AfterTool => "after_tool",
            Self::OnError => "on_error",
            Self::WrapModel => "wrap_model",
            Self::WrapTool => "wrap_tool",
        }
    }

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

bitflags::bitflags! {
    /// The hooks a middleware really implements.
    ///
    /// The stack reads it once, at registration, to build one dispatch list
    /// per hook: a hook that no middleware implements costs nothing at run
    /// time. A hand-written `Middleware` impl reports [`HookSet::LIFECYCLE`]
    /// by default (always correct, never fastest); the DSL reports the exact set.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct HookSet: u32 {
        /// `before_agent`.
        const BEFORE_AGENT = 1 << HookKind::BeforeAgent as u8;
        /// `after_agent`.
        const AFTER_AGENT = 1 << HookKind::AfterAgent as u8;
        /// `before_steering`.
        const BEFORE_STEERING = 1 << HookKind::BeforeSteering as u8;
        /// `after_steering`.
        const AFTER_STEERING = 1 << HookKind::AfterSteering as u8;
        /// `before_model`.
        const BEFORE_MODEL = 1 << HookKind::BeforeModel as u8;
        /// `before_model_stream`.
        const BEFORE_MODEL_STREAM = 1 << HookKind::BeforeModelStream as u8;
        /// `on_model_delta`.
        const ON_MODEL_DELTA = 1 << HookKind::OnModelDelta as u8;
        /// `after_model`.
        const AFTER_MODEL = 1 << HookKind::AfterModel as u8;
        /// `on_tool_batch`.
        const ON_TOOL_BATCH = 1 << HookKind::OnToolBatch as u8;
        /// `before_tool`.
        const BEFORE_TOOL = 1 << HookKind::BeforeTool as u8;
        /// `on_tool_delta`.
        const ON_TOOL_DELTA = 1 << HookKind::OnToolDelta as u8;
        /// `after_tool`.
        const AFTER_TOOL = 1 << HookKind::AfterTool as u8;
        /// `on_error`.
        const ON_ERROR = 1 << HookKind::OnError as u8;
        /// `wrap_model` (informational: the stack registers wraps through
        /// [`Middleware::model_middleware`](super::Middleware::model_middleware)).
        const WRAP_MODEL = 1 << HookKind::WrapModel as u8;
        /// `wrap_tool` (informational, like `WRAP_MODEL`).
        const WRAP_TOOL = 1 << HookKind::WrapTool as u8;
        /// The stack calls `on_model_delta_sync` instead of the async
        /// `on_model_delta`: no boxed future per delta.
        const SYNC_MODEL_DELTA = HookSet::sync_of(HookKind::OnModelDelta).bits();
        /// The stack calls `on_tool_delta_sync` instead of the async `on_tool_delta`.
        const SYNC_TOOL_DELTA = HookSet::sync_of(HookKind::OnToolDelta).bits();
        /// Every lifecycle hook (the default of a hand-written impl).
        const LIFECYCLE = (1 << HookKind::LIFECYCLE_COUNT) - 1;
    }
}

impl HookSet {
    /// The flag saying a lifecycle hook has a synchronous form the stack calls
    /// instead of the async one: [`Middleware::on_sync`](super::Middleware::on_sync)
    /// (or `on_model_delta_sync`/`on_tool_delta_sync` for the delta hooks).
    /// A plain (non-async) fn under a hook attribute gets it from the DSL:
    /// such a hook runs with no boxed future and no allocation.
    pub const fn sync_of(hook: HookKind) -> HookSet {
        HookSet::from_bits_retain(1 << (16 + hook as u8))
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
