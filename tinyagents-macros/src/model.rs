//! The validated description of one middleware, shared by the free-fn and
//! impl-block front ends and consumed by [`crate::expand`].

use syn::{Generics, Ident, Type};

use crate::attr::MiddlewareArgs;
use crate::doc::Doc;
use crate::hook::Hook;
use crate::params::HookSig;

/// How the generated impl calls the user's code.
pub(crate) enum Callee {
    /// A free fn, by name.
    Fn(Ident),
    /// A method of the type, as `Self::method(self, …)`.
    Method(Ident),
}

/// One hook of a middleware.
pub(crate) struct HookDef {
    /// The hook's row.
    pub(crate) hook: &'static Hook,
    /// What to call.
    pub(crate) callee: Callee,
    /// The analysed signature.
    pub(crate) sig: HookSig,
    /// The fn's own generics (their bounds carry over to the impl).
    pub(crate) fn_generics: Generics,
}

impl HookDef {
    /// The fn or method name.
    pub(crate) fn ident(&self) -> &Ident {
        match &self.callee {
            Callee::Fn(i) | Callee::Method(i) => i,
        }
    }
}

/// A middleware: a type, its metadata and its hooks.
pub(crate) struct MiddlewareDef {
    /// The type the traits are implemented for.
    pub(crate) self_ty: Type,
    /// The type's generics (the impl block's; empty for a free fn).
    pub(crate) generics: Generics,
    /// The middleware's name.
    pub(crate) name: String,
    /// The attribute's arguments.
    pub(crate) args: MiddlewareArgs,
    /// The documentation record, when it has one.
    pub(crate) doc: Option<Doc>,
    /// The hooks, in the order written.
    pub(crate) hooks: Vec<HookDef>,
}
