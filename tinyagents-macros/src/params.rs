//! Signature analysis: which role each parameter plays (recognised by type,
//! in any order, any subset), whether the fn is async, what it returns, and
//! which types pin the state and the context.

use proc_macro2::{Span, TokenStream};
use quote::ToTokens;
use syn::{FnArg, GenericArgument, GenericParam, Ident, PathArguments, PathSegment, ReturnType, Signature, Type};

use crate::errors::Errors;
use crate::hook::{Hook, Shape, RUNTIME_TYPES, RUN_CONTEXT, RUN_STATE_CELL};

/// The role of one parameter.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// `&mut RunContext<C>` (or `&RunContext<C>`).
    Ctx,
    /// `&S`: any other shared reference.
    State,
    /// The hook's value (`&mut ModelRequest`, `&TinyAgentsError`, …).
    Value,
    /// A wrap's input, by value (`ModelRequest`, `ToolCall`).
    Input,
    /// A wrap's `next` handler.
    Next,
    /// The run state, borrowed for the call: `&mut T` (`run_state = T`).
    RunStateMut,
    /// The run state's cell: `&RunState<T>`.
    RunStateRef,
}

impl Role {
    fn describe(self) -> &'static str {
        match self {
            Self::Ctx => "the run context",
            Self::State => "the state",
            Self::Value => "the hook's value",
            Self::Input => "the wrapped input",
            Self::Next => "the `next` handler",
            Self::RunStateMut | Self::RunStateRef => "the run state",
        }
    }

    fn is_run_state(self) -> bool {
        matches!(self, Self::RunStateMut | Self::RunStateRef)
    }
}

/// One classified parameter.
pub(crate) struct Param {
    /// Its role.
    pub(crate) role: Role,
    /// Whether a `&mut` value is taken as `&` (passed as `&*value`).
    pub(crate) shared: bool,
    /// The parameter as written, for spans.
    pub(crate) tokens: TokenStream,
}

/// The state or context type of a hook.
#[derive(Clone)]
pub(crate) enum TypeSlot {
    /// One of the fn's type parameters, with its bounds.
    Generic(Ident),
    /// A concrete type: it pins the impl.
    Concrete(Box<Type>),
}

impl TypeSlot {
    /// The slot as written, for comparisons and messages.
    pub(crate) fn text(&self) -> String {
        match self {
            Self::Generic(i) => i.to_string(),
            Self::Concrete(t) => crate::text::tokens_to_string(t.to_token_stream()),
        }
    }
}

/// What the fn returns, where it matters for the generated call.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Returns {
    /// `Result<…>`.
    Result,
    /// `String` (dynamic prompts only).
    Text,
}

/// The analysed signature of one hook fn or method.
pub(crate) struct HookSig {
    /// The parameters, in the order written (receiver excluded).
    pub(crate) params: Vec<Param>,
    /// Whether it is an `async fn`.
    pub(crate) is_async: bool,
    /// What it returns.
    pub(crate) returns: Returns,
    /// Where the return type is written (the generated code checks the
    /// returned value there, so a foreign `Result` is reported on it).
    pub(crate) returns_span: Span,
    /// The state type, when a parameter names it (with where it was found).
    pub(crate) state: Option<(TypeSlot, TokenStream)>,
    /// The context type, when a parameter names it.
    pub(crate) ctx: Option<(TypeSlot, TokenStream)>,
    /// The declared run state type, when a parameter takes the run state.
    pub(crate) run_state: Option<Type>,
}

/// Where the fn is, which decides the receiver rule.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// A free fn: no receiver.
    FreeFn,
    /// A method in a `#[middleware]` block: `&self` first.
    Method,
}

fn strip(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => strip(&g.elem),
        Type::Paren(p) => strip(&p.elem),
        other => other,
    }
}

/// The last path segment of a plain path type (`a::b::C<T>` → `C<T>`).
fn last_segment(ty: &Type) -> Option<&PathSegment> {
    match strip(ty) {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        _ => None,
    }
}

/// The type arguments of a segment, lifetimes skipped.
fn type_args(seg: &PathSegment) -> Vec<&Type> {
    match &seg.arguments {
        PathArguments::AngleBracketed(a) => a
            .args
            .iter()
            .filter_map(|g| match g {
                GenericArgument::Type(t) => Some(t),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn unit_type() -> Type {
    syn::parse_quote!(())
}

/// Analyses `sig` as the signature of `hook`. Returns `None` when an error was recorded.
pub(crate) fn analyze(
    hook: &Hook,
    sig: &Signature,
    place: Place,
    run_state: Option<&Type>,
    errors: &mut Errors,
) -> Option<HookSig> {
    let before = errors.count();
    let mut an = Analyzer {
        hook,
        generics: sig
            .generics
            .params
            .iter()
            .filter_map(|p| match p {
                GenericParam::Type(t) => Some(t.ident.clone()),
                _ => None,
            })
            .collect(),
        errors,
        params: Vec::new(),
        state: None,
        ctx: None,
        next_meant: false,
        run_state,
    };
    an.receiver(sig, place);
    for arg in &sig.inputs {
        if let FnArg::Typed(pt) = arg {
            an.param(&pt.ty, &pt.pat, arg.to_token_stream());
        }
    }
    an.generics_rules(sig);
    let is_async = sig.asyncness.is_some();
    if let Some(w) = hook.wrap() {
        if !is_async {
            an.errors.at(
                sig.fn_token,
                format_args!(
                    "`{}` needs an `async fn`: a wrap hook awaits `next.run(ctx, state, {})`; write `async fn {}`",
                    hook.display(),
                    w.input_var,
                    sig.ident
                ),
            );
        }
        if !an.next_meant {
            an.errors.at(
                &sig.ident,
                format_args!(
                    "`{}` must take `next: {}<'_, S, C>` and call `next.run(...).await` to proceed; a hook that only edits the {} is a `#[{}]`",
                    hook.display(),
                    w.handler,
                    w.input_var,
                    w.edit_hook,
                ),
            );
        }
    }
    let returns = an.returns(sig);
    let returns_span = match &sig.output {
        ReturnType::Type(_, ty) => syn::spanned::Spanned::span(ty),
        ReturnType::Default => sig.paren_token.span.close(),
    };
    let Analyzer {
        params,
        state,
        ctx,
        run_state,
        ..
    } = an;
    let run_state = run_state
        .filter(|_| params.iter().any(|p| p.role.is_run_state()))
        .cloned();
    (errors.count() == before).then_some(HookSig {
        params,
        is_async,
        returns: returns?,
        returns_span,
        state,
        ctx,
        run_state,
    })
}

struct Analyzer<'a> {
    hook: &'a Hook,
    generics: Vec<Ident>,
    errors: &'a mut Errors,
    params: Vec<Param>,
    state: Option<(TypeSlot, TokenStream)>,
    ctx: Option<(TypeSlot, TokenStream)>,
    /// A parameter meant as `next` was seen (even a wrong one): no "missing `next`" error then.
    next_meant: bool,
    /// The declared `run_state = T`.
    run_state: Option<&'a Type>,
}

impl Analyzer<'_> {
    fn receiver(&mut self, sig: &Signature, place: Place) {
        let receiver = sig.receiver();
        match (place, receiver) {
            (Place::FreeFn, Some(r)) => self.errors.at(
                r,
                format_args!(
                    "`{}` on a fn with a `self` receiver: a hook fn is free-standing; to implement hooks on a type, \
                     put its methods in a `#[middleware] impl` block",
                    self.hook.display()
                ),
            ),
            (Place::Method, None) => self.errors.at(
                &sig.ident,
                format_args!(
                    "hook method `{0}` needs `&self` as its first parameter: write `fn {0}(&self, …)`",
                    sig.ident
                ),
            ),
            (Place::Method, Some(r))
                if !matches!(r.kind, syn::ReceiverKind::Reference(_, _, None)) || r.mutability.is_some() =>
            {
                self.errors.at(
                    r,
                    "hook methods take `&self`: a middleware is shared by concurrent runs; keep per-run state \
                     in `RunContext` and shared state in atomics or a mutex",
                )
            }
            _ => {}
        }
    }

    fn slot(&mut self, ty: &Type) -> TypeSlot {
        let ty = strip(ty);
        if let Some(seg) = last_segment(ty)
            && let Type::Path(p) = ty
            && p.path.segments.len() == 1
            && seg.arguments.is_none()
            && self.generics.contains(&seg.ident)
        {
            return TypeSlot::Generic(seg.ident.clone());
        }
        TypeSlot::Concrete(Box::new(ty.clone()))
    }

    fn set_slot(&mut self, which: Role, slot: TypeSlot, at: TokenStream) {
        let (target, what) = match which {
            Role::State => (&mut self.state, "state"),
            _ => (&mut self.ctx, "context"),
        };
        match target {
            Some((prev, prev_at)) if prev.text() != slot.text() => {
                let msg = format!(
                    "the {what} type is `{}` in `{}` but `{}` here: a hook has one {what} type; make them the same",
                    prev.text(),
                    crate::text::tokens_to_string(prev_at.clone()),
                    slot.text()
                );
                self.errors.at(at, msg);
            }
            Some(_) => {}
            None => *target = Some((slot, at)),
        }
    }

    /// Records a parameter; `false` (with an error) when its role is taken.
    fn push(&mut self, role: Role, shared: bool, tokens: TokenStream) -> bool {
        if let Some(prev) = self
            .params
            .iter()
            .find(|p| p.role == role || (p.role.is_run_state() && role.is_run_state()))
        {
            let msg = format!(
                "{} is already taken by `{}`: a hook receives each of the context, the state, the value and `next` \
                 (and the run state) at most once; remove this parameter{}",
                role.describe(),
                crate::text::tokens_to_string(prev.tokens.clone()),
                if role == Role::State {
                    " (any shared reference to a type the DSL does not know is the state)"
                } else {
                    ""
                }
            );
            self.errors.at(&tokens, msg);
            return false;
        }
        self.params.push(Param { role, shared, tokens });
        true
    }

    fn unknown(&mut self, tokens: &TokenStream, ty: &Type) {
        let text = crate::text::tokens_to_string(ty.to_token_stream());
        // A plain named type by value is most likely the state, which is lent to the hook.
        let hint = match strip(ty) {
            Type::Path(p) if p.qself.is_none() && !ambiguous_state(ty) => format!(
                "; if `{text}` is the state, take it by reference (the stack lends it to every hook): write `&{text}`"
            ),
            _ => String::new(),
        };
        let msg = format!(
            "unsupported parameter type `{text}` in `{}`: parameters are recognised by type; this hook accepts {}{hint}",
            self.hook.display(),
            self.hook.accepted()
        );
        self.errors.at(tokens, msg);
    }

    /// The rules a `&T` must meet to be the state: a sized type lent for
    /// one call (`&'static` and `&dyn Trait` are refused with the reason),
    /// and declared (a type parameter, or a parameter named `state`) unless
    /// the type is unambiguous (not a std or tinyagents data type, which a
    /// user more likely meant as data than as the stack's state).
    fn state_rules(&mut self, r: &syn::TypeReference, elem: &Type, pat: &syn::Pat, tokens: &TokenStream) -> bool {
        let text = crate::text::tokens_to_string(elem.to_token_stream());
        if let Some(lt) = &r.lifetime
            && lt.ident == "static"
        {
            let msg = format!(
                "the state is lent to the hook for one call, so it cannot be `&'static {text}`: write \
                     `&{text}`; to keep a value for longer, clone what you need out of it (or hold an `Arc` in \
                     the state)"
            );
            self.errors.at(lt, msg);
            return false;
        }
        let unsized_what = match elem {
            Type::TraitObject(_) => Some("a trait object"),
            Type::Slice(_) => Some("a slice"),
            _ if last_segment(elem).is_some_and(|s| s.ident == "str") => Some("`str`"),
            _ => None,
        };
        if let Some(what) = unsized_what {
            let fix = match elem {
                Type::TraitObject(t) => {
                    let bounds = crate::text::tokens_to_string(t.bounds.to_token_stream());
                    format!(
                        "make the hook generic over it, `fn hook<S: {bounds}>(state: &S)`, or name the concrete type"
                    )
                }
                Type::Slice(s) => format!(
                    "name an owned type such as `Vec<{}>`",
                    crate::text::tokens_to_string(s.elem.to_token_stream())
                ),
                _ => "name an owned type such as `String`".to_owned(),
            };
            let msg = format!(
                "the state `&{text}` is {what}: the state is the one sized type the stack is built over \
                 (`MiddlewareStack<S>`, shared across threads); {fix}"
            );
            self.errors.at(elem, msg);
            return false;
        }
        // A type parameter nested in the type (`&Vec<S>`) is the generics rule's to report.
        let declared = matches!(self.slot(elem), TypeSlot::Generic(_))
            || self.generics.iter().any(|g| mentions(elem, g))
            || matches!(pat, syn::Pat::Ident(p) if is_state_name(&p.ident.to_string()));
        if declared || !ambiguous_state(elem) {
            return true;
        }
        let param = crate::text::tokens_to_string(tokens.clone());
        let name = match pat {
            syn::Pat::Ident(p) => p.ident.to_string(),
            _ => "state".to_owned(),
        };
        let msg = format!(
            "`{param}` would be read as the state (the one value the stack is built over, \
             `MiddlewareStack<{text}>`), and `{text}` is not obviously a state type: a hook receives only \
             {accepted}; if it is the state, declare it by naming the parameter `state` \
             (`state: &{text}`){data}",
            accepted = self.hook.accepted(),
            data = if name == "state" {
                String::new()
            } else {
                format!("; if `{name}` is data of the run, read it from the hook's value or the context instead")
            },
        );
        self.errors.at(tokens, msg);
        false
    }

    fn param(&mut self, ty: &Type, pat: &syn::Pat, tokens: TokenStream) {
        let hook = self.hook;
        let referent = match strip(ty) {
            Type::Reference(r) => &*r.elem,
            other => other,
        };
        let is_handler =
            last_segment(strip(referent)).is_some_and(|s| s.ident == "ModelHandler" || s.ident == "ToolHandler");
        self.next_meant |= is_handler || matches!(pat, syn::Pat::Ident(p) if p.ident == "next");
        match strip(ty) {
            Type::Reference(r) => {
                let mutable = r.mutability.is_some();
                let elem = strip(&r.elem);
                if let Type::ImplTrait(_) = elem {
                    self.errors.at(
                        elem,
                        "name the state type: `impl Trait` is not supported in a hook parameter; \
                         write `fn hook<S: Trait>(state: &S)`",
                    );
                    return;
                }
                let name = last_segment(elem).map(|s| s.ident.to_string());
                match name.as_deref() {
                    Some(RUN_CONTEXT) => {
                        let seg = last_segment(elem).expect("checked");
                        let ctx_ty = type_args(seg).first().map(|t| (*t).clone()).unwrap_or_else(unit_type);
                        if self.push(Role::Ctx, !mutable, tokens.clone()) {
                            let slot = self.slot(&ctx_ty);
                            self.set_slot(Role::Ctx, slot, tokens);
                        }
                    }
                    Some(RUN_STATE_CELL) => self.run_state_cell(mutable, elem, tokens),
                    Some(n) if RUNTIME_TYPES.contains(&n) => self.runtime_ref(n, mutable, elem, tokens),
                    _ if mutable && self.run_state.is_some() => self.run_state_mut(elem, tokens),
                    _ if mutable => {
                        let text = crate::text::tokens_to_string(elem.to_token_stream());
                        let msg = format!(
                            "unsupported parameter type `{}` in `{}`: `&mut {text}` is per-run state, and this \
                             middleware declares none; declare it on the attribute, `run_state = {text}` (a \
                             `Default + Send + 'static` type, one value per run and registration), or take the \
                             stack's state read-only (`&S`); this hook accepts {}",
                            crate::text::tokens_to_string(ty.to_token_stream()),
                            hook.display(),
                            hook.accepted()
                        );
                        self.errors.at(&tokens, msg);
                    }
                    _ if self.is_run_state_type(elem) => {
                        let text = crate::text::tokens_to_string(elem.to_token_stream());
                        let msg = format!(
                            "`{text}` is this middleware's run state, which a hook borrows mutably: write \
                             `&mut {text}`{}",
                            if self.hook.shared_state_only().is_some() {
                                format!(" (in `{}`, `&RunState<{text}>`)", self.hook.display())
                            } else {
                                String::new()
                            }
                        );
                        self.errors.at(&tokens, msg);
                    }
                    _ => {
                        if self.state_rules(r, elem, pat, &tokens) && self.push(Role::State, true, tokens.clone()) {
                            let slot = self.slot(elem);
                            self.set_slot(Role::State, slot, tokens);
                        }
                    }
                }
            }
            other => {
                let seg = last_segment(other);
                let name = seg.map(|s| s.ident.to_string());
                let wrap = hook.wrap();
                match (name.as_deref(), wrap) {
                    (Some(n), Some(w)) if n == w.handler => {
                        if self.push(Role::Next, false, tokens.clone()) {
                            let args = type_args(seg.expect("checked"));
                            if let Some(s) = args.first() {
                                let slot = self.slot(s);
                                self.set_slot(Role::State, slot, tokens.clone());
                            }
                            let c = args.get(1).map(|t| (*t).clone()).unwrap_or_else(unit_type);
                            let slot = self.slot(&c);
                            self.set_slot(Role::Ctx, slot, tokens);
                        }
                    }
                    (Some(n), Some(w)) if n == w.input => {
                        self.push(Role::Input, false, tokens);
                    }
                    (Some(n @ ("ModelHandler" | "ToolHandler")), Some(w)) => {
                        let msg = format!(
                            "`{}` is given a `{}`, not a `{n}`: write `next: {}<'_, S, C>`",
                            hook.display(),
                            w.handler,
                            w.handler
                        );
                        self.errors.at(other, msg);
                    }
                    (Some("ModelHandler" | "ToolHandler"), None) => {
                        let msg = format!(
                            "only wrap hooks (`#[wrap_model]`, `#[wrap_tool]`) receive a `next` handler; `{}` runs \
                             at a fixed point and cannot call the rest of the stack: remove this parameter",
                            hook.display()
                        );
                        self.errors.at(&tokens, msg);
                    }
                    (Some(RUN_STATE_CELL), _) => {
                        let msg = "take the run state's cell by reference: `state: &RunState<T>`";
                        self.errors.at(&tokens, msg);
                    }
                    (Some(n), _) if RUNTIME_TYPES.contains(&n) => {
                        let fix = match hook.value() {
                            Some(v) if v.ty == n && v.mutable => format!(": write `&mut {n}`"),
                            Some(v) if v.ty == n => format!(": write `&{n}`"),
                            _ if n == RUN_CONTEXT => format!(": write `&mut {n}<C>`"),
                            _ => format!("; this hook accepts {}", hook.accepted()),
                        };
                        let msg = format!("`{}` does not receive `{n}` by value{fix}", hook.display());
                        self.errors.at(&tokens, msg);
                    }
                    _ if matches!(pat, syn::Pat::Ident(p) if p.ident == "next") => {
                        let msg = match wrap {
                            Some(w) => format!("`next` must be the handler: write `next: {}<'_, S, C>`", w.handler),
                            None => format!(
                                "only wrap hooks receive a `next` handler; `{}` accepts {}",
                                hook.display(),
                                hook.accepted()
                            ),
                        };
                        self.errors.at(&tokens, msg);
                    }
                    _ => self.unknown(&tokens, other),
                }
            }
        }
    }

    /// Whether `ty` is the declared run state type.
    fn is_run_state_type(&self, ty: &Type) -> bool {
        self.run_state.is_some_and(|rs| {
            crate::text::tokens_to_string(rs.to_token_stream()) == crate::text::tokens_to_string(ty.to_token_stream())
        })
    }

    /// Checks `ty` against the declared run state (recording a mismatch or a
    /// missing declaration at `at`); `true` when it is the run state.
    fn check_run_state_type(&mut self, ty: &Type, written: &str, at: &TokenStream) -> bool {
        let text = crate::text::tokens_to_string(ty.to_token_stream());
        match self.run_state {
            None => {
                let msg = format!(
                    "`{written}` takes run state, and this middleware declares none: declare it on the attribute, \
                     `run_state = {text}` (a `Default + Send + 'static` type, one value per run and registration)"
                );
                self.errors.at(at, msg);
                false
            }
            Some(_) if self.is_run_state_type(ty) => true,
            Some(rs) => {
                let declared = crate::text::tokens_to_string(rs.to_token_stream());
                let fixed = written.replacen(&text, &declared, 1);
                let msg = format!(
                    "the run state is declared `run_state = {declared}`, but this parameter takes `{text}`: a \
                     middleware has one run state type; write `{fixed}` (or change `run_state`)"
                );
                self.errors.at(at, msg);
                false
            }
        }
    }

    /// `&mut T`: the run state, borrowed for the hook's call.
    fn run_state_mut(&mut self, elem: &Type, tokens: TokenStream) {
        let text = crate::text::tokens_to_string(elem.to_token_stream());
        if !self.check_run_state_type(elem, &format!("&mut {text}"), &tokens) {
            return;
        }
        if let Some(why) = self.hook.shared_state_only() {
            let msg = format!(
                "`{}` cannot borrow the run state as `&mut {text}` for its whole call: it {why}; take its cell, \
                 `state: &RunState<{text}>`, and lock it for what you change: `state.lock()?.field += 1` \
                 (hooks the loop runs one at a time, such as `#[before_model]` or `#[on_tool_batch]`, may take \
                 `&mut {text}`)",
                self.hook.display()
            );
            self.errors.at(&tokens, msg);
            return;
        }
        self.push(Role::RunStateMut, false, tokens);
    }

    /// `&RunState<T>`: the run state's cell.
    fn run_state_cell(&mut self, mutable: bool, elem: &Type, tokens: TokenStream) {
        let seg = last_segment(elem).expect("named RunState");
        let Some(inner) = type_args(seg).first().copied() else {
            self.errors
                .at(&tokens, "name the run state type: `state: &RunState<T>`");
            return;
        };
        let text = crate::text::tokens_to_string(inner.to_token_stream());
        if mutable {
            let msg = format!(
                "take the run state's cell by shared reference, `&RunState<{text}>`: its `lock()` gives exclusive \
                 access"
            );
            self.errors.at(&tokens, msg);
            return;
        }
        if self.check_run_state_type(inner, &format!("&RunState<{text}>"), &tokens) {
            self.push(Role::RunStateRef, true, tokens);
        }
    }

    fn runtime_ref(&mut self, name: &str, mutable: bool, elem: &Type, tokens: TokenStream) {
        let hook = self.hook;
        match (hook.value(), hook.wrap()) {
            (Some(v), _) if v.ty == name => {
                if mutable && !v.mutable {
                    let msg = format!(
                        "`{}` receives the {} read-only: write `&{name}`",
                        hook.display(),
                        if name == "TinyAgentsError" { "error" } else { "value" }
                    );
                    self.errors.at(&tokens, msg);
                } else {
                    // `&T` where `&mut T` is passed is accepted: an observer says so in its signature.
                    self.push(Role::Value, !mutable, tokens);
                }
            }
            (_, Some(w)) if w.input == name => {
                let msg = format!(
                    "`{}` owns the {what}: take it by value (`{what}: {name}`) and hand it on with \
                     `next.run(ctx, state, {what})`",
                    hook.display(),
                    what = w.input_var
                );
                self.errors.at(&tokens, msg);
            }
            (_, Some(w)) if w.handler == name => {
                let msg = format!("take the handler by value: `next: {name}<'_, S, C>` (it is `Copy`)");
                self.errors.at(&tokens, msg);
            }
            _ => {
                let what = match hook.value() {
                    Some(v) => format!("its value is `&{}{}`", if v.mutable { "mut " } else { "" }, v.ty),
                    None => "it has no value".to_owned(),
                };
                let msg = format!(
                    "`{}` does not receive a `{name}` ({what}): this hook accepts {}",
                    hook.display(),
                    hook.accepted()
                );
                self.errors.at(elem, msg);
            }
        }
    }

    /// Generic parameters: lifetimes are free; a type parameter must be the
    /// whole state or context type; const parameters are not supported.
    fn generics_rules(&mut self, sig: &Signature) {
        let used: Vec<String> = [&self.state, &self.ctx]
            .into_iter()
            .flatten()
            .filter_map(|(s, _)| match s {
                TypeSlot::Generic(i) => Some(i.to_string()),
                TypeSlot::Concrete(_) => None,
            })
            .collect();
        for p in &sig.generics.params {
            match p {
                GenericParam::Type(t) if !used.contains(&t.ident.to_string()) => {
                    let nested = [&self.state, &self.ctx]
                        .into_iter()
                        .flatten()
                        .find(|(s, _)| matches!(s, TypeSlot::Concrete(ty) if mentions(ty, &t.ident)));
                    let msg = match nested {
                        Some((slot, _)) => format!(
                            "unsupported generic parameter `{0}`: it must be the whole state type (`state: &{0}`) or \
                             context type (`RunContext<{0}>`), not part of `{1}`; make the hook generic over the \
                             whole type",
                            t.ident,
                            slot.text()
                        ),
                        None => format!(
                            "unsupported generic parameter `{}`: a hook may be generic only over its state \
                             (`state: &S`) and its context (`ctx: &mut RunContext<C>`); remove it or use a concrete type",
                            t.ident
                        ),
                    };
                    self.errors.at(&t.ident, msg);
                }
                GenericParam::Const(c) => self.errors.at(
                    c,
                    "const generic parameters are not supported on hooks: the generated middleware is generic \
                     only over the state and the context; use a field of a `#[middleware]` type instead",
                ),
                _ => {}
            }
        }
    }

    fn returns(&mut self, sig: &Signature) -> Option<Returns> {
        let hook = self.hook;
        let expected = hook.expected_return();
        let ty = match &sig.output {
            ReturnType::Default => {
                let span = sig.paren_token.span.close();
                self.errors.at_span(
                    span,
                    format_args!(
                        "`{}` must return `{expected}`: add `-> {}` after the parameters",
                        hook.display(),
                        expected.split('`').next().unwrap_or_default()
                    ),
                );
                return None;
            }
            ReturnType::Type(_, ty) => ty,
        };
        let seg = last_segment(ty);
        let is = |s: Option<&PathSegment>, name: &str| s.is_some_and(|s| s.ident == name);
        let inner = match result_ok_type(ty) {
            Ok(inner) => inner,
            Err(foreign) => {
                let ok = crate::text::tokens_to_string(foreign.to_token_stream());
                self.errors.at(
                    ty,
                    format_args!(
                        "`{}` must return `{expected}` of tinyagents (`Result<{ok}, TinyAgentsError>`), not `{}`: \
                         the stack reads a hook's error as a `TinyAgentsError`; write `-> Result<{ok}>` with \
                         `use tinyagents::prelude::*`, and turn other errors into one with \
                         `.map_err(|e| TinyAgentsError::middleware(\"my_hook\", e.to_string()))?`",
                        hook.display(),
                        crate::text::tokens_to_string(ty.to_token_stream())
                    ),
                );
                return None;
            }
        };
        let ok = match hook.shape {
            Shape::Lifecycle { .. } => {
                let unit = matches!(inner.map(strip), Some(Type::Tuple(t)) if t.elems.is_empty());
                if !unit {
                    // A lifecycle hook returning what a wrap returns: the user wants the wrap.
                    let wrap = inner.and_then(last_segment).and_then(|s| {
                        crate::hook::HOOKS
                            .iter()
                            .find(|h| h.wrap().is_some_and(|w| s.ident == w.plain || s.ident == w.outcome))
                    });
                    if let Some(wrap) = wrap {
                        let w = wrap.wrap().expect("found by its wrap");
                        self.errors.at(
                            ty,
                            format_args!(
                                "`{}` edits the `{}` in place and returns `Result<()>`, so it cannot return a `{}`; \
                                 to answer instead of the rest of the stack, use `{}`: \
                                 `async fn f({}: {}, next: {}<'_, S, C>) -> Result<{}>` (call `next.run(...)` to \
                                 proceed, or return your own `{}`)",
                                hook.display(),
                                hook.value().map_or("value", |v| v.ty),
                                w.plain,
                                wrap.display(),
                                w.input_var,
                                w.input,
                                w.handler,
                                w.plain,
                                w.plain
                            ),
                        );
                        return None;
                    }
                }
                unit.then_some(Returns::Result)
            }
            Shape::Wrap(w) => inner
                .and_then(last_segment)
                .filter(|s| s.ident == w.outcome || s.ident == w.plain)
                .map(|_| Returns::Result),
            Shape::DynamicPrompt => {
                if is(seg, "String") {
                    Some(Returns::Text)
                } else if is(inner.and_then(last_segment), "String") {
                    Some(Returns::Result)
                } else {
                    None
                }
            }
        };
        if ok.is_none() {
            self.errors.at(
                ty,
                format_args!(
                    "`{}` must return `{expected}`, not `{}`",
                    hook.display(),
                    crate::text::tokens_to_string(ty.to_token_stream())
                ),
            );
        }
        ok
    }
}

/// The `T` of a hook's `Result<T>`: `Ok(None)` when `ty` is not a
/// `Result`, `Err(T)` when it is another crate's `Result` (`anyhow::Result<T>`)
/// or has an error type other than `TinyAgentsError`.
fn result_ok_type(ty: &Type) -> Result<Option<&Type>, &Type> {
    let Type::Path(p) = strip(ty) else { return Ok(None) };
    let Some(seg) = p.path.segments.last().filter(|s| s.ident == "Result") else {
        return Ok(None);
    };
    let args = type_args(seg);
    let Some(ok) = args.first().copied() else {
        return Ok(None);
    };
    let prefix: Vec<String> = p
        .path
        .segments
        .iter()
        .rev()
        .skip(1)
        .map(|s| s.ident.to_string())
        .collect();
    match args.get(1) {
        // `Result<T>`: tinyagents's alias, bare or through the crate's path.
        None if prefix.is_empty() || matches!(prefix[0].as_str(), "tinyagents" | "crate" | "prelude") => Ok(Some(ok)),
        // `Result<T, E>` (std's): the error must be `TinyAgentsError`.
        Some(err) if last_segment(err).is_some_and(|s| s.ident == "TinyAgentsError") => Ok(Some(ok)),
        _ => Err(ok),
    }
}

/// The parameter names that declare the state: `state`, `_state`, `app_state`, ….
pub(crate) fn is_state_name(name: &str) -> bool {
    let name = name.trim_start_matches('_');
    name == "state" || name.ends_with("_state")
}

/// Std and tinyagents data types: a `&T` of one of them is the state only
/// when declared (a user writing `messages: &Vec<Message>` meant data).
pub(crate) const AMBIGUOUS_STATE_TYPES: &[&str] = &[
    "Vec", "VecDeque", "String", "Option", "Box", "Arc", "Rc", "Cow", "HashMap", "BTreeMap", "HashSet", "BTreeSet",
    "Message", "Role", "Value", "Usage", "bool", "char", "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16",
    "i32", "i64", "i128", "isize", "f32", "f64",
];

/// Whether a `&T` state needs declaring: a std or tinyagents data type, an
/// array or a non-empty tuple (`()` is the usual stateless state).
fn ambiguous_state(ty: &Type) -> bool {
    match strip(ty) {
        Type::Tuple(t) => !t.elems.is_empty(),
        Type::Array(_) => true,
        other => last_segment(other).is_some_and(|s| AMBIGUOUS_STATE_TYPES.contains(&s.ident.to_string().as_str())),
    }
}

/// Whether `ty` mentions the identifier `ident` anywhere.
fn mentions(ty: &Type, ident: &Ident) -> bool {
    ty.to_token_stream().into_iter().any(|t| match_ident(&t, ident))
}

fn match_ident(tt: &proc_macro2::TokenTree, ident: &Ident) -> bool {
    match tt {
        proc_macro2::TokenTree::Ident(i) => i == ident,
        proc_macro2::TokenTree::Group(g) => g.stream().into_iter().any(|t| match_ident(&t, ident)),
        _ => false,
    }
}
