//! `doc(...)`: the documentation record of a middleware, its `builtin`
//! completeness rule, and the summary taken from doc comments.

use std::collections::BTreeMap;

use proc_macro2::{Span, TokenStream};
use quote::quote;
use syn::{Attribute, Expr, Ident, Lit, LitStr};

use crate::args::{check_keys, Arg};
use crate::errors::Errors;
use crate::kw;

/// The fields given in `doc(...)`.
#[derive(Default)]
pub(crate) struct DocArgs {
    /// Whether `doc(...)` was written at all.
    pub(crate) given: bool,
    fields: BTreeMap<&'static str, LitStr>,
}

impl DocArgs {
    /// Parses the items of `doc(...)`.
    pub(crate) fn parse(items: Vec<Arg>, errors: &mut Errors) -> Self {
        let mut out = Self {
            given: true,
            ..Self::default()
        };
        for item in check_keys(items, kw::DOC_KEYS, "`doc(...)`", errors) {
            let key = kw::DOC_KEYS
                .iter()
                .find(|k| **k == item.name())
                .expect("check_keys keeps known keys only");
            let example = format!(r#"{key} = "…""#);
            if let Some(s) = item.string(&example, errors) {
                out.fields.insert(key, s);
            }
        }
        out
    }
}

/// The first paragraph of an item's doc comment, on one line.
pub(crate) fn summary_from_attrs(attrs: &[Attribute]) -> Option<String> {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("doc")) {
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) = &nv.value
        {
            lines.push(s.value());
        }
    }
    let text = lines
        .iter()
        .map(|l| l.trim())
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    (!text.is_empty()).then_some(text)
}

/// The resolved documentation of one middleware.
pub(crate) struct Doc {
    fields: BTreeMap<&'static str, String>,
}

impl Doc {
    /// Resolves `doc(...)`, falling back to `doc_summary` for the summary;
    /// `None` when the middleware has no doc. Under `builtin`, every missing
    /// field is its own error, spanned on `builtin`.
    pub(crate) fn resolve(
        args: &DocArgs,
        doc_summary: Option<String>,
        builtin: Option<&Ident>,
        errors: &mut Errors,
    ) -> Option<Self> {
        if !args.given && builtin.is_none() {
            return None;
        }
        let mut fields: BTreeMap<&'static str, String> = args.fields.iter().map(|(k, v)| (*k, v.value())).collect();
        if !fields.contains_key(kw::SUMMARY)
            && let Some(s) = doc_summary
        {
            fields.insert(kw::SUMMARY, s);
        }
        if let Some(b) = builtin {
            for key in kw::DOC_KEYS.iter().filter(|k| !fields.contains_key(*k)) {
                let hint = if *key == kw::SUMMARY { " (or a doc comment)" } else { "" };
                errors.at(
                    b,
                    format_args!(
                        "a `builtin` middleware must document `{key}`: add `{key} = \"…\"` to `doc(...)`{hint}"
                    ),
                );
            }
        }
        Some(Self { fields })
    }

    /// A `MiddlewareDoc` value: `hooks` is the derived hook-kind list, `config`
    /// the config type, `type_name` the middleware type's name as written.
    pub(crate) fn expand(
        &self,
        name: &str,
        type_name: &str,
        hooks: &[TokenStream],
        config: Option<&syn::Path>,
    ) -> TokenStream {
        let field = |k: &str| self.fields.get(k).cloned().unwrap_or_default();
        let lit = |k: &str| LitStr::new(&field(k), Span::call_site());
        let (summary, mutation, events, failure, streaming, cache, retries) = (
            lit(kw::SUMMARY),
            lit(kw::MUTATION),
            lit(kw::EVENTS),
            lit(kw::FAILURE),
            lit(kw::STREAMING),
            lit(kw::CACHE),
            lit(kw::RETRIES),
        );
        let p = quote!(::tinyagents::__private);
        let (config_type, config_fields) = match config {
            Some(c) => (
                quote!(#p::Option::Some(<#c as #p::MiddlewareConfig>::TYPE)),
                quote!(<#c as #p::MiddlewareConfig>::FIELDS),
            ),
            None => (quote!(#p::Option::None), quote!(&[])),
        };
        quote! {
            #p::MiddlewareDoc {
                name: #name,
                type_name: #type_name,
                file: ::core::file!(),
                config_type: #config_type,
                summary: #summary,
                hooks: &[#(#p::HookKind::#hooks),*],
                mutation: #mutation,
                events: #events,
                failure: #failure,
                streaming: #streaming,
                cache: #cache,
                retries: #retries,
                config: #config_fields,
            }
        }
    }
}
