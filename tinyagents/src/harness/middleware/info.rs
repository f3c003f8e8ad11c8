//! Middleware metadata: [`MiddlewareInfo`] and the documentation record [`MiddlewareDoc`].

use std::borrow::Cow;

use super::{HookKind, HookSet};
use crate::harness::context::JumpSet;

/// What the stack needs to know about a middleware: its name, the hooks it
/// implements, its ordering constraints, the jumps it may request, and its
/// documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MiddlewareInfo {
    /// The name (unique in a stack).
    pub name: Cow<'static, str>,
    /// The hooks it implements.
    pub hooks: HookSet,
    /// Names of middleware this one must run before (outside of, for wraps).
    pub before: Vec<Cow<'static, str>>,
    /// Names of middleware this one must run after (inside of, for wraps).
    pub after: Vec<Cow<'static, str>>,
    /// Names of middleware this one runs before when they are registered
    /// (absent ones are ignored; `before` makes an absent one an error).
    pub before_if_present: Vec<Cow<'static, str>>,
    /// Names of middleware this one runs after when they are registered.
    pub after_if_present: Vec<Cow<'static, str>>,
    /// The jump targets it may request.
    pub jumps: JumpSet,
    /// Its documentation, when it has any.
    pub doc: Option<&'static MiddlewareDoc>,
    /// Whether it keeps typed per-run state (`#[middleware(run_state = T)]`):
    /// the stack then gives each registration of it a cell in every run.
    pub run_state: bool,
}

impl MiddlewareInfo {
    /// Info with a name, every hook ([`HookSet::EVERY`]), no ordering, every jump, no doc.
    pub fn new(name: impl Into<Cow<'static, str>>) -> Self {
        Self {
            name: name.into(),
            hooks: HookSet::EVERY,
            before: Vec::new(),
            after: Vec::new(),
            before_if_present: Vec::new(),
            after_if_present: Vec::new(),
            jumps: JumpSet::all(),
            doc: None,
            run_state: false,
        }
    }

    /// The same info with these hooks.
    pub fn with_hooks(mut self, hooks: HookSet) -> Self {
        self.hooks = hooks;
        self
    }

    /// The same info, ordered before `name`, which must be registered first
    /// (else registering this one is a `Config` error).
    pub fn before(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.before.push(name.into());
        self
    }

    /// The same info, ordered after `name`, which must be registered first.
    pub fn after(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.after.push(name.into());
        self
    }

    /// The same info, ordered before `name` when `name` is registered.
    pub fn before_if_present(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.before_if_present.push(name.into());
        self
    }

    /// The same info, ordered after `name` when `name` is registered.
    pub fn after_if_present(mut self, name: impl Into<Cow<'static, str>>) -> Self {
        self.after_if_present.push(name.into());
        self
    }

    /// The same info with these jump targets.
    pub fn with_jumps(mut self, jumps: JumpSet) -> Self {
        self.jumps = jumps;
        self
    }

    /// The same info with a doc.
    pub fn with_doc(mut self, doc: &'static MiddlewareDoc) -> Self {
        self.doc = Some(doc);
        self
    }
}

/// One config field of a built-in, for the documentation table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigFieldDoc {
    /// The field's key in a config table.
    pub name: &'static str,
    /// Its Rust type, as written.
    pub ty: &'static str,
    /// Its default, as written (empty when required).
    pub default: &'static str,
    /// Its validation rules, as written (`range = 0..=100`).
    pub rules: &'static str,
    /// The names it takes, for a [`ConfigEnum`](crate::config::ConfigEnum) field (else empty).
    pub choices: &'static [&'static str],
    /// Its doc comment.
    pub doc: &'static str,
}

/// The documentation every built-in carries (the design's "Each built-in must
/// document"). The hook points are derived from the annotated methods by the
/// DSL, so they cannot drift from the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MiddlewareDoc {
    /// The middleware's name.
    pub name: &'static str,
    /// The name of its Rust type, without path or generics (`ToolPolicyMiddleware`).
    pub type_name: &'static str,
    /// The source file that declares it, as `file!()` gives it there.
    pub file: &'static str,
    /// The config `type = "…"` key, when it can be built from config.
    pub config_type: Option<&'static str>,
    /// One-line summary.
    pub summary: &'static str,
    /// The hook points used (derived).
    pub hooks: &'static [HookKind],
    /// What it changes, and where.
    pub mutation: &'static str,
    /// The events it emits.
    pub events: &'static str,
    /// What happens when it fails, and whether it fails open or closed.
    pub failure: &'static str,
    /// How it behaves with streaming.
    pub streaming: &'static str,
    /// How it interacts with the provider prompt/KV-cache layout.
    pub cache: &'static str,
    /// How it interacts with retries and fallbacks.
    pub retries: &'static str,
    /// Its config fields (from `#[derive(MiddlewareConfig)]`).
    pub config: &'static [ConfigFieldDoc],
}
