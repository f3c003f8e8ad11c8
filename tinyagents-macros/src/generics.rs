//! Choosing the `State` and `Ctx` of the generated impls: a concrete type
//! written in any hook pins the impl; otherwise the impl is generic, with
//! the bounds the hooks declared on their type parameters (plus the
//! `Send + Sync + 'static` every middleware needs).

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::visit_mut::VisitMut;
use syn::{GenericParam, Generics, Ident, Type, WherePredicate};

use crate::errors::Errors;
use crate::model::MiddlewareDef;
use crate::params::TypeSlot;
use crate::text::tokens_to_string;

/// The generic parameter a generic state gets in the generated impl.
pub(crate) const STATE_PARAM: &str = "__TinyState";
/// The generic parameter a generic context gets in the generated impl.
pub(crate) const CTX_PARAM: &str = "__TinyCtx";

/// The `State`/`Ctx` of the impls and the impl generics that go with them.
pub(crate) struct Resolved {
    /// The `State` type argument.
    pub(crate) state: Type,
    /// The `Ctx` type argument.
    pub(crate) ctx: Type,
    /// The generics of the trait impls (the type's, plus any fresh parameters and bounds).
    pub(crate) generics: Generics,
}

/// The `Send + Sync + 'static` bound.
pub(crate) fn runtime_bounds() -> TokenStream {
    quote!(::tinyagents::__private::Send + ::tinyagents::__private::Sync + 'static)
}

/// Resolves the state and context of `def`, recording a conflict between
/// two concrete types as an error.
pub(crate) fn resolve(def: &MiddlewareDef, errors: &mut Errors) -> Resolved {
    let mut generics = def.generics.clone();
    let mut slots = Vec::new();
    for (which, fresh) in [("state", STATE_PARAM), ("context", CTX_PARAM)] {
        let mut concrete: Option<(Type, String, &Ident)> = None;
        let mut generic_idents = Vec::new();
        for h in &def.hooks {
            let slot = if which == "state" { &h.sig.state } else { &h.sig.ctx };
            match slot {
                Some((TypeSlot::Concrete(t), at)) => {
                    let text = tokens_to_string(t.to_token_stream());
                    match &concrete {
                        Some((_, prev, prev_fn)) if *prev != text => errors.at(
                            at,
                            format_args!(
                                "the {which} type is `{prev}` in `{prev_fn}` but `{text}` in `{}`: the hooks of one \
                                 middleware share one {which} type; make them the same, or make one generic",
                                h.ident()
                            ),
                        ),
                        Some(_) => {}
                        None => concrete = Some(((**t).clone(), text, h.ident())),
                    }
                }
                Some((TypeSlot::Generic(i), _)) => generic_idents.push((h, i.clone())),
                None => {}
            }
        }
        let fresh = Ident::new(fresh, Span::call_site());
        match concrete {
            Some((t, _, _)) => slots.push(t),
            None => {
                generics.params.push(syn::parse_quote!(#fresh));
                let bounds = runtime_bounds();
                generics
                    .make_where_clause()
                    .predicates
                    .push(syn::parse_quote!(#fresh: #bounds));
                for (h, ident) in generic_idents {
                    carry_bounds(&h.fn_generics, &ident, &fresh, &mut generics);
                }
                slots.push(syn::parse_quote!(#fresh));
            }
        }
    }
    let ctx = slots.pop().expect("two slots");
    let state = slots.pop().expect("two slots");
    Resolved { state, ctx, generics }
}

/// Copies the bounds a hook fn put on its type parameter `from` (inline and
/// in its where clause) onto the impl parameter `to`.
fn carry_bounds(fn_generics: &Generics, from: &Ident, to: &Ident, out: &mut Generics) {
    let mut preds: Vec<WherePredicate> = Vec::new();
    for p in &fn_generics.params {
        if let GenericParam::Type(t) = p
            && t.ident == *from
            && !t.bounds.is_empty()
        {
            let bounds = &t.bounds;
            preds.push(syn::parse_quote!(#from: #bounds));
        }
    }
    if let Some(w) = &fn_generics.where_clause {
        preds.extend(w.predicates.iter().filter(|p| mentions(p, from)).cloned());
    }
    let mut rename = Rename { from, to };
    let where_clause = out.make_where_clause();
    for mut p in preds {
        rename.visit_where_predicate_mut(&mut p);
        let text = tokens_to_string(p.to_token_stream());
        if !where_clause
            .predicates
            .iter()
            .any(|q| tokens_to_string(q.to_token_stream()) == text)
        {
            where_clause.predicates.push(p);
        }
    }
}

fn mentions(p: &WherePredicate, ident: &Ident) -> bool {
    fn walk(ts: TokenStream, ident: &Ident) -> bool {
        ts.into_iter().any(|t| match t {
            proc_macro2::TokenTree::Ident(i) => i == *ident,
            proc_macro2::TokenTree::Group(g) => walk(g.stream(), ident),
            _ => false,
        })
    }
    walk(p.to_token_stream(), ident)
}

/// Renames one type parameter in a predicate.
struct Rename<'a> {
    from: &'a Ident,
    to: &'a Ident,
}

impl VisitMut for Rename<'_> {
    fn visit_path_mut(&mut self, path: &mut syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() == 1 && path.segments[0].ident == *self.from {
            path.segments[0].ident = self.to.clone();
        }
        syn::visit_mut::visit_path_mut(self, path);
    }
}

/// Adds `Send + Sync + 'static` to the type parameters of a hook fn that are
/// its state or context, so that handler types in its signature are
/// well-formed without the user writing the bounds.
pub(crate) fn bound_fn_generics(generics: &mut Generics, idents: &[Ident]) {
    if idents.is_empty() {
        return;
    }
    let bounds = runtime_bounds();
    let where_clause = generics.make_where_clause();
    for i in idents {
        where_clause.predicates.push(syn::parse_quote!(#i: #bounds));
    }
}
