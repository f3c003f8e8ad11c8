//! `#[middleware]` on an inherent impl block: each method annotated with a
//! hook attribute becomes that hook of the type's trait impls.

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};
use syn::{ImplItem, ItemImpl, Meta};

use crate::doc::{summary_from_attrs, Doc};
use crate::errors::Errors;
use crate::hook::Hook;
use crate::model::{Callee, HookDef, MiddlewareDef};
use crate::params::{analyze, Place, TypeSlot};
use crate::text::tokens_to_string;
use crate::{attr, expand, generics, kw};

/// Expands `#[middleware(args)] impl Type { … }`.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let mut block: ItemImpl = match syn::parse2(item.clone()) {
        Ok(b) => b,
        Err(_) => {
            errors.at(
                &item,
                "`#[middleware]` goes on an inherent impl block (`#[middleware] impl MyType { … }`) whose methods \
                 carry hook attributes; for a single fn use a hook attribute such as `#[before_model]`",
            );
            let errors = errors.into_compile_errors();
            return quote!(#item #errors);
        }
    };
    if let Some((path, _)) = &block.trait_ {
        errors.at(
            path,
            "`#[middleware]` goes on an inherent impl block (`impl MyType { … }`), not on a trait impl: \
             the macro writes the trait impls itself",
        );
        let errors = errors.into_compile_errors();
        return quote!(#block #errors);
    }
    let args = attr::parse(args, kw::BLOCK_KEYS, "`#[middleware(...)]`", &mut errors);
    let name = args
        .name
        .as_ref()
        .map_or_else(|| type_name(&block.self_ty), |n| n.value());

    let mut hooks: Vec<HookDef> = Vec::new();
    for item in &mut block.items {
        let ImplItem::Fn(method) = item else { continue };
        let mut found: Vec<(&'static Hook, syn::Attribute)> = Vec::new();
        method.attrs.retain(|a| {
            let hook = a
                .path()
                .segments
                .last()
                .and_then(|s| Hook::by_attr(&s.ident.to_string()));
            match hook {
                Some(h) => {
                    found.push((h, a.clone()));
                    false
                }
                None => true,
            }
        });
        let Some((hook, attr)) = found.first().cloned() else {
            continue;
        };
        for (_, extra) in found.iter().skip(1) {
            errors.at(
                extra,
                format_args!(
                    "`{}` already makes `{}` a hook: a method implements one hook; split it into two methods",
                    hook.display(),
                    method.sig.ident
                ),
            );
        }
        if !matches!(attr.meta, Meta::Path(_)) {
            errors.at(
                &attr,
                "hook attributes inside `#[middleware]` take no arguments: put `name`, `before`, `after`, \
                 `can_jump_to` and `doc` on `#[middleware(...)]`",
            );
        }
        if let Some(prev) = hooks.iter().find(|h| h.hook.kind == hook.kind) {
            errors.at(
                &attr,
                format_args!(
                    "hook `{}` is implemented twice in this block, by `{}` and by `{}`: a middleware has one \
                     method per hook; merge them into one method or split the type",
                    hook.method,
                    prev.ident(),
                    method.sig.ident
                ),
            );
            continue;
        }
        if let Some(sig) = analyze(hook, &method.sig, Place::Method, args.run_state.as_ref(), &mut errors) {
            let idents: Vec<_> = [&sig.state, &sig.ctx]
                .into_iter()
                .flatten()
                .filter_map(|(s, _)| match s {
                    TypeSlot::Generic(i) => Some(i.clone()),
                    TypeSlot::Concrete(_) => None,
                })
                .collect();
            let fn_generics = method.sig.generics.clone();
            generics::bound_fn_generics(&mut method.sig.generics, &idents);
            hooks.push(HookDef {
                hook,
                callee: Callee::Method(method.sig.ident.clone()),
                sig,
                fn_generics,
            });
        }
    }
    if let (Some(rs), true) = (&args.run_state, errors.is_empty()) {
        let sigs: Vec<&crate::params::HookSig> = hooks.iter().map(|h| &h.sig).collect();
        crate::expand::check_run_state_used(rs, sigs, &mut errors);
    }
    if hooks.is_empty() && errors.is_empty() {
        errors.at(
            &block.self_ty,
            "this `#[middleware]` block has no hook methods: annotate a method with a hook attribute such as \
             `#[before_model]` (taking `&self`)",
        );
    }
    let doc = Doc::resolve(
        &args.doc,
        summary_from_attrs(&block.attrs),
        args.builtin.as_ref(),
        &mut errors,
    );
    let self_ty = (*block.self_ty).clone();
    let args_config = args.config.clone();
    let impls = if errors.is_empty() {
        let def = MiddlewareDef {
            self_ty: self_ty.clone(),
            generics: block.generics.clone(),
            name: name.clone(),
            args,
            doc,
            hooks,
        };
        let resolved = generics::resolve(&def, &mut errors);
        if errors.is_empty() {
            expand::middleware(&def, &resolved)
        } else {
            expand::fallback(&self_ty, &block.generics, &name)
        }
    } else {
        expand::fallback(&self_ty, &block.generics, &name)
    };
    let config_check = expand::config_check(args_config.as_ref());
    let errors = errors.into_compile_errors();
    quote! {
        #block
        #impls
        #config_check
        #errors
    }
}

/// The type's name without its generic arguments (`Counter<T>` → `Counter`).
fn type_name(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map_or_else(|| tokens_to_string(ty.to_token_stream()), |s| s.ident.to_string()),
        other => tokens_to_string(other.to_token_stream()),
    }
}
