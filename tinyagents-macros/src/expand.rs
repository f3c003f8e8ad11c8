//! Code generation: from a validated [`MiddlewareDef`] to the
//! `MiddlewareMetadata` and `Middleware` impls (wraps are `Middleware`
//! methods). Generated code names only `::tinyagents::__private`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned, ToTokens};
use syn::{Generics, Ident, LitStr, Type};

use crate::attr::OrderRef;
use crate::generics::Resolved;
use crate::hook::{Shape, Wrap};
use crate::model::{Callee, HookDef, MiddlewareDef};
use crate::params::{Returns, Role};

fn p() -> TokenStream {
    quote!(::tinyagents::__private)
}

/// The attributes every generated impl carries.
fn impl_attrs() -> TokenStream {
    quote! {
        #[automatically_derived]
        #[allow(unused_variables, unused_qualifications, clippy::all, clippy::pedantic, clippy::nursery)]
    }
}

/// Every impl of a valid middleware.
pub(crate) fn middleware(def: &MiddlewareDef, resolved: &Resolved) -> TokenStream {
    let metadata = metadata(def);
    let lifecycle = lifecycle_impl(def, resolved);
    quote! {
        #metadata
        #lifecycle
    }
}

/// The hook flags of the middleware, as a `HookSet` const expression.
fn hook_flags(def: &MiddlewareDef) -> TokenStream {
    let p = p();
    let mut flags: Vec<Ident> = Vec::new();
    for h in &def.hooks {
        flags.push(Ident::new(h.hook.flag, Span::call_site()));
        if let Some(sync) = h.hook.sync()
            && !h.sig.is_async
        {
            flags.push(Ident::new(sync.flag, Span::call_site()));
        }
    }
    let sync_kinds = def
        .hooks
        .iter()
        .filter(|h| has_sync_form(h))
        .map(|h| Ident::new(h.hook.kind, Span::call_site()));
    quote!(#p::HookSet::from_bits_retain(
        0 #(| #p::HookSet::#flags.bits())* #(| #p::HookSet::sync_of(#p::HookKind::#sync_kinds).bits())*
    ))
}

/// Whether a hook goes through `Middleware::on_sync`: a plain (non-async)
/// lifecycle fn other than the delta hooks (which have typed sync methods).
fn has_sync_form(h: &HookDef) -> bool {
    matches!(h.hook.shape, Shape::Lifecycle { sync: None, .. }) && !h.sig.is_async
}

/// `Middleware::on_sync`: one arm per plain lifecycle hook, so the stack
/// calls them with no future at all.
fn on_sync(def: &MiddlewareDef, state: &Type, ctx: &Type) -> Option<TokenStream> {
    let p = p();
    let arms: Vec<TokenStream> = def
        .hooks
        .iter()
        .filter(|h| has_sync_form(h))
        .map(|h| {
            let kind = Ident::new(h.hook.kind, Span::call_site());
            let body = checked_call(h, quote!(()));
            match h.hook.shape {
                Shape::Lifecycle { value: None, .. } => quote!(#p::HookValue::#kind => { #body }),
                _ => quote!(#p::HookValue::#kind(__value) => { #body }),
            }
        })
        .collect();
    if arms.is_empty() {
        return None;
    }
    Some(quote! {
        fn on_sync(
            &self,
            __ctx: &mut #p::RunContext<#ctx>,
            __state: &#state,
            __value: #p::HookValue<'_>,
        ) -> #p::Result<()> {
            #[allow(unreachable_patterns)]
            match __value {
                #(#arms)*
                __other => #p::Result::Err(#p::TinyAgentsError::middleware(
                    <Self as #p::MiddlewareMetadata>::NAME,
                    "`on_sync` was called for a hook this middleware does not implement synchronously",
                )),
            }
        }
    })
}

fn order_refs(refs: &[OrderRef]) -> TokenStream {
    let p = p();
    let items = refs.iter().map(|r| match r {
        OrderRef::Name(s) => quote!(#s),
        OrderRef::Type(t) => quote!(<#t as #p::MiddlewareMetadata>::NAME),
    });
    quote!(&[#(#items),*])
}

/// `impl MiddlewareMetadata`: the static facts about the middleware.
fn metadata(def: &MiddlewareDef) -> TokenStream {
    let p = p();
    let attrs = impl_attrs();
    let (impl_g, _, where_c) = def.generics.split_for_impl();
    let ty = &def.self_ty;
    let name = LitStr::new(&def.name, Span::call_site());
    let hooks = hook_flags(def);
    let jumps: Vec<Ident> = def
        .args
        .jumps
        .iter()
        .map(|j| Ident::new(j, Span::call_site()))
        .collect();
    let before = order_refs(&def.args.before);
    let after = order_refs(&def.args.after);
    let before_if_present = order_refs(&def.args.before_if_present);
    let run_state = def.args.run_state.as_ref().map(|t| {
        // `Default + Send + 'static`, checked where the type is written.
        let check = quote_spanned!(syn::spanned::Spanned::span(t)=> #p::assert_run_state::<#t>());
        quote!(const RUN_STATE: bool = { #check; true };)
    });
    let after_if_present = order_refs(&def.args.after_if_present);
    let doc = match &def.doc {
        Some(doc) => {
            let mut kinds: Vec<&str> = def.hooks.iter().map(|h| h.hook.kind).collect();
            kinds.sort_by_key(|k| crate::hook::HOOKS.iter().position(|h| h.kind == *k));
            kinds.dedup();
            let kinds: Vec<TokenStream> = kinds
                .iter()
                .map(|k| Ident::new(k, Span::call_site()).into_token_stream())
                .collect();
            let value = doc.expand(&def.name, &type_name(ty), &kinds, def.args.config.as_ref());
            quote!(#p::Option::Some(&#value))
        }
        None => quote!(#p::Option::None),
    };
    quote! {
        #attrs
        impl #impl_g #p::MiddlewareMetadata for #ty #where_c {
            const NAME: &'static str = #name;
            const HOOKS: #p::HookSet = #hooks;
            const JUMPS: #p::JumpSet = #p::JumpSet::from_bits_retain(0 #(| #p::JumpSet::#jumps.bits())*);
            const BEFORE: &'static [&'static str] = #before;
            const AFTER: &'static [&'static str] = #after;
            const BEFORE_IF_PRESENT: &'static [&'static str] = #before_if_present;
            const AFTER_IF_PRESENT: &'static [&'static str] = #after_if_present;
            const DOC: #p::Option<&'static #p::MiddlewareDoc> = #doc;
            #run_state
        }
    }
}

/// Records an error when `run_state = T` is declared and no hook takes it.
pub(crate) fn check_run_state_used<'a>(
    declared: &Type,
    sigs: impl IntoIterator<Item = &'a crate::params::HookSig>,
    errors: &mut crate::errors::Errors,
) {
    if sigs.into_iter().all(|s| s.run_state.is_none()) {
        let text = crate::text::tokens_to_string(declared.to_token_stream());
        errors.at(
            declared,
            format_args!(
                "`run_state = {text}` declares per-run state that no hook takes: take `&mut {text}` in a hook the \
                 loop runs one at a time (`#[before_model]`, `#[on_tool_batch]`, …) or `&RunState<{text}>` in any \
                 hook, or remove `run_state`"
            ),
        );
    }
}

/// The name of a middleware type as written, without its path or generics
/// (`ToolPolicyMiddleware` for `library::ToolPolicyMiddleware<S>`).
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().map_or_else(String::new, |s| s.ident.to_string()),
        other => other.to_token_stream().to_string(),
    }
}

/// The arguments of the call to the user's fn, in the order written.
fn call(h: &HookDef) -> TokenStream {
    let args = h.sig.params.iter().map(|p| match (p.role, p.shared) {
        (Role::Ctx, false) => quote!(__ctx),
        (Role::Ctx, true) => quote!(&*__ctx),
        (Role::State, _) => quote!(__state),
        (Role::Value, false) => quote!(__value),
        (Role::Value, true) => quote!(&*__value),
        (Role::Input, _) => quote!(__input),
        (Role::Next, _) => quote!(__next),
        (Role::RunStateMut, _) => quote!(&mut *__run_state),
        (Role::RunStateRef, _) => quote!(&*__run_state),
    });
    let ident = h.ident();
    let span = ident.span();
    let call = match &h.callee {
        Callee::Fn(f) => quote_spanned!(span=> #f(#(#args),*)),
        Callee::Method(m) => quote_spanned!(span=> Self::#m(self, #(#args),*)),
    };
    let call = if h.sig.is_async {
        quote_spanned!(span=> #call.await)
    } else {
        call
    };
    let Some(run_state) = &h.sig.run_state else {
        return call;
    };
    // The run state cell the stack named for this call; `&mut T` borrows it for the call.
    let p = p();
    let attr = h.hook.attr;
    let cell = quote! {
        #p::run_state_of::<#run_state, _>(__ctx, <Self as #p::MiddlewareMetadata>::NAME)?
    };
    let borrow = if h.sig.params.iter().any(|p| p.role == Role::RunStateMut) {
        quote!(let mut __run_state = #p::lend_run_state(#cell, #attr)?;)
    } else {
        quote!(let __run_state = #cell;)
    };
    quote! {
        {
            #borrow
            #call
        }
    }
}

/// The call to the user's fn as tinyagents's `Result<#ok>`, through
/// `HookResult` spanned on the fn's return type: a `Result` of another crate
/// (a `use anyhow::Result;` in scope) is one error there, naming the rule.
fn checked_call(h: &HookDef, ok: TokenStream) -> TokenStream {
    let p = p();
    let call = call(h);
    let span = h.sig.returns_span;
    let value = Ident::new("__hook_value", span);
    quote_spanned! {span=>
        {
            let #value = #call;
            #p::HookResult::<#ok>::into_result(#value)
        }
    }
}

/// The `Middleware` impl: metadata methods, each lifecycle hook, and the wraps.
fn lifecycle_impl(def: &MiddlewareDef, r: &Resolved) -> TokenStream {
    let p = p();
    let attrs = impl_attrs();
    let (impl_g, _, where_c) = r.generics.split_for_impl();
    let (ty, state, ctx) = (&def.self_ty, &r.state, &r.ctx);
    let on_sync = on_sync(def, state, ctx);
    let mut methods = Vec::new();
    for h in &def.hooks {
        let method = Ident::new(h.hook.method, Span::call_site());
        match h.hook.shape {
            Shape::Wrap(w) => methods.push(wrap_method(h, w, state, ctx)),
            Shape::Lifecycle { value, sync } => {
                let value_param = value.map(|v| {
                    let vt = Ident::new(v.ty, Span::call_site());
                    if v.mutable {
                        quote!(, __value: &mut #p::#vt)
                    } else {
                        quote!(, __value: &#p::#vt)
                    }
                });
                let params = quote!(&self, __ctx: &mut #p::RunContext<#ctx>, __state: &#state #value_param);
                let body = checked_call(h, quote!(()));
                match sync {
                    Some(sync) if !h.sig.is_async => {
                        let sync_method = Ident::new(sync.method, Span::call_site());
                        methods.push(quote! {
                            #[inline]
                            fn #sync_method(#params) -> #p::Result<()> {
                                #body
                            }
                            async fn #method(#params) -> #p::Result<()> {
                                <Self as #p::Middleware<#state, #ctx>>::#sync_method(self, __ctx, __state, __value)
                            }
                        });
                    }
                    _ => methods.push(quote! {
                        async fn #method(#params) -> #p::Result<()> {
                            #body
                        }
                    }),
                }
            }
            Shape::DynamicPrompt => {
                let text = match h.sig.returns {
                    Returns::Text => call(h),
                    Returns::Result => {
                        let body = checked_call(h, quote!(#p::String));
                        quote!(#body?)
                    }
                };
                methods.push(quote! {
                    async fn #method(
                        &self,
                        __ctx: &mut #p::RunContext<#ctx>,
                        __state: &#state,
                        __value: &mut #p::ModelRequest,
                    ) -> #p::Result<()> {
                        let __text: #p::String = #text;
                        __value.set_volatile(<Self as #p::MiddlewareMetadata>::NAME, __text);
                        #p::Result::Ok(())
                    }
                });
            }
        }
    }
    let tools = def.args.tools.as_ref().map(|path| {
        quote! {
            fn tools(&self) -> #p::Vec<#p::Arc<dyn #p::Tool>> {
                #path(self)
            }
        }
    });
    quote! {
        #attrs
        #[#p::async_trait]
        impl #impl_g #p::Middleware<#state, #ctx> for #ty #where_c {
            #tools
            #[inline]
            fn name(&self) -> &str {
                <Self as #p::MiddlewareMetadata>::NAME
            }
            #[inline]
            fn hooks(&self) -> #p::HookSet {
                <Self as #p::MiddlewareMetadata>::HOOKS
            }
            fn info(&self) -> #p::MiddlewareInfo {
                #p::info_of::<Self>()
            }
            #on_sync
            #(#methods)*
        }
    }
}

/// The `Middleware::wrap_model`/`wrap_tool` method of a wrap hook.
fn wrap_method(h: &HookDef, w: Wrap, state: &Type, ctx: &Type) -> TokenStream {
    let p = p();
    let method = Ident::new(h.hook.method, Span::call_site());
    let input = Ident::new(w.input, Span::call_site());
    let handler = Ident::new(w.handler, Span::call_site());
    let outcome = Ident::new(w.outcome, Span::call_site());
    let body = checked_call(h, quote!(#p::#outcome));
    quote! {
        async fn #method(
            &self,
            __ctx: &mut #p::RunContext<#ctx>,
            __state: &#state,
            __input: #p::#input,
            __next: #p::#handler<'_, #state, #ctx>,
        ) -> #p::Result<#p::#outcome> {
            #body
        }
    }
}

/// The check of `config = X`, emitted whether or not `doc(...)` reads it:
/// `X` must be a `#[derive(MiddlewareConfig)]` type (an error spanned on `X`).
pub(crate) fn config_check(config: Option<&syn::Path>) -> TokenStream {
    let Some(c) = config else { return TokenStream::new() };
    let p = p();
    let span = syn::spanned::Spanned::span(c);
    quote_spanned! {span=>
        const _: &str = <#c as #p::MiddlewareConfig>::TYPE;
    }
}

/// What is emitted for a middleware with errors: metadata and a `Middleware`
/// impl with no hooks, so that uses of the type elsewhere do not add errors
/// of their own to the ones reported.
pub(crate) fn fallback(self_ty: &Type, generics: &Generics, name: &str) -> TokenStream {
    let p = p();
    let attrs = impl_attrs();
    let mut g = generics.clone();
    let (s, c) = (
        format_ident!("{}", crate::generics::STATE_PARAM),
        format_ident!("{}", crate::generics::CTX_PARAM),
    );
    let bounds = crate::generics::runtime_bounds();
    g.params.push(syn::parse_quote!(#s));
    g.params.push(syn::parse_quote!(#c));
    g.make_where_clause().predicates.push(syn::parse_quote!(#s: #bounds));
    g.make_where_clause().predicates.push(syn::parse_quote!(#c: #bounds));
    let (impl_g, _, where_c) = g.split_for_impl();
    let (meta_g, _, meta_where) = generics.split_for_impl();
    quote! {
        #attrs
        impl #meta_g #p::MiddlewareMetadata for #self_ty #meta_where {
            const NAME: &'static str = #name;
            const HOOKS: #p::HookSet = #p::HookSet::empty();
            const JUMPS: #p::JumpSet = #p::JumpSet::empty();
            const BEFORE: &'static [&'static str] = &[];
            const AFTER: &'static [&'static str] = &[];
            const DOC: #p::Option<&'static #p::MiddlewareDoc> = #p::Option::None;
        }
        #attrs
        impl #impl_g #p::Middleware<#s, #c> for #self_ty #where_c {}
    }
}
