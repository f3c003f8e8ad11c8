//! The shape every DSL attribute shares: a comma-separated list of `key`,
//! `key = expr` and `key(...)` items. Parsing is purely syntactic; each
//! attribute checks its keys and values with [`check_keys`] and the
//! accessors on [`Arg`], recording every mistake in [`Errors`].

use proc_macro2::{Delimiter, Group, TokenStream};
use quote::ToTokens;
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, Lit, LitStr, Token};

use crate::errors::{backticked, did_you_mean, Errors};

/// One `key`, `key = value` or `key(...)` item.
pub(crate) struct Arg {
    /// The key (keywords such as `type` are accepted as keys).
    pub(crate) key: Ident,
    /// Its value.
    pub(crate) value: ArgValue,
}

/// The value of an [`Arg`].
pub(crate) enum ArgValue {
    /// `key` alone.
    Flag,
    /// `key = expr`.
    Expr(Expr),
    /// `key(...)`.
    List(Group),
    /// `key = Type`, for the keys that take a type ([`crate::kw::TYPE_KEYS`]).
    Type(Box<syn::Type>),
}

impl Parse for Arg {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let key = Ident::parse_any(input)?;
        let value = if input.peek(Token![=]) {
            input.parse::<Token![=]>()?;
            if crate::kw::TYPE_KEYS.contains(&key.unraw().to_string().as_str()) {
                ArgValue::Type(input.parse()?)
            } else {
                ArgValue::Expr(input.parse()?)
            }
        } else if input.peek(syn::token::Paren) {
            ArgValue::List(input.parse()?)
        } else {
            ArgValue::Flag
        };
        Ok(Self { key, value })
    }
}

/// Parses an attribute's arguments.
pub(crate) fn parse_args(tokens: TokenStream) -> syn::Result<Vec<Arg>> {
    let list = Punctuated::<Arg, Token![,]>::parse_terminated.parse2(tokens)?;
    Ok(list.into_iter().collect())
}

/// Keeps the args whose key is in `valid` and given once; records an error
/// for each unknown key (listing the valid ones) and each repeated key.
pub(crate) fn check_keys(args: Vec<Arg>, valid: &[&str], attr: &str, errors: &mut Errors) -> Vec<Arg> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for arg in args {
        let key = arg.key.unraw().to_string();
        if !valid.contains(&key.as_str()) {
            errors.at(
                &arg.key,
                format_args!(
                    "unknown key `{key}` in {attr}: the valid keys are {}{}",
                    backticked(valid),
                    did_you_mean(&key, valid)
                ),
            );
        } else if seen.contains(&key) {
            errors.at(
                &arg.key,
                format_args!("duplicate key `{key}` in {attr}: give each key once; remove this one"),
            );
        } else {
            seen.push(key);
            out.push(arg);
        }
    }
    out
}

impl Arg {
    /// The key as a string (`r#type` reads `type`).
    pub(crate) fn name(&self) -> String {
        self.key.unraw().to_string()
    }

    /// The `= Type` value of a key in [`crate::kw::TYPE_KEYS`]; records an
    /// error (with `example`) for a flag or a list.
    pub(crate) fn ty(&self, example: &str, errors: &mut Errors) -> Option<&syn::Type> {
        match &self.value {
            ArgValue::Type(t) => Some(t),
            _ => {
                errors.at(
                    &self.key,
                    format_args!("`{}` needs a type: write `{example}`", self.name()),
                );
                None
            }
        }
    }

    /// The `= expr` value; records an error (with `example`) for a flag or a list.
    pub(crate) fn expr(&self, example: &str, errors: &mut Errors) -> Option<&Expr> {
        match &self.value {
            ArgValue::Expr(e) => Some(e),
            _ => {
                errors.at(
                    &self.key,
                    format_args!("`{}` needs a value: write `{example}`", self.name()),
                );
                None
            }
        }
    }

    /// A string-literal value; records an error otherwise.
    pub(crate) fn string(&self, example: &str, errors: &mut Errors) -> Option<LitStr> {
        let expr = self.expr(example, errors)?;
        match expr {
            Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => Some(s.clone()),
            other => {
                errors.at(
                    other,
                    format_args!("`{}` takes a string literal: write `{example}`", self.name()),
                );
                None
            }
        }
    }

    /// A bracketed list value `[a, b]`; records an error otherwise.
    pub(crate) fn list(&self, example: &str, errors: &mut Errors) -> Option<Vec<Expr>> {
        let expr = self.expr(example, errors)?;
        match expr {
            Expr::Array(a) => Some(a.elems.iter().cloned().collect()),
            other => {
                errors.at(
                    other,
                    format_args!("`{}` takes a list in brackets: write `{example}`", self.name()),
                );
                None
            }
        }
    }

    /// A path value (`Type`, `module::function`); records an error otherwise.
    pub(crate) fn path(&self, example: &str, errors: &mut Errors) -> Option<syn::Path> {
        let expr = self.expr(example, errors)?;
        match expr {
            Expr::Path(p) if p.qself.is_none() => Some(p.path.clone()),
            other => {
                errors.at(other, format_args!("`{}` takes a path: write `{example}`", self.name()));
                None
            }
        }
    }

    /// A flag (no value); records an error otherwise.
    pub(crate) fn flag(&self, errors: &mut Errors) -> bool {
        match &self.value {
            ArgValue::Flag => true,
            ArgValue::Expr(e) => {
                errors.at(
                    e,
                    format_args!("`{0}` is a flag and takes no value: write `{0}` alone", self.name()),
                );
                false
            }
            ArgValue::List(g) => {
                errors.at(
                    g,
                    format_args!("`{0}` is a flag and takes no value: write `{0}` alone", self.name()),
                );
                false
            }
            ArgValue::Type(t) => {
                errors.at(
                    t,
                    format_args!("`{0}` is a flag and takes no value: write `{0}` alone", self.name()),
                );
                false
            }
        }
    }

    /// The items of a `key(...)` value, parsed as args; records an error otherwise.
    pub(crate) fn nested(&self, example: &str, errors: &mut Errors) -> Option<Vec<Arg>> {
        match &self.value {
            ArgValue::List(g) if g.delimiter() == Delimiter::Parenthesis => errors.ok(parse_args(g.stream())),
            ArgValue::List(g) => {
                errors.at(g, format_args!("write `{example}`"));
                None
            }
            ArgValue::Expr(e) => {
                errors.at(
                    e.to_token_stream(),
                    format_args!("`{}` takes a parenthesised list: write `{example}`", self.name()),
                );
                None
            }
            ArgValue::Type(t) => {
                errors.at(
                    t,
                    format_args!("`{}` takes a parenthesised list: write `{example}`", self.name()),
                );
                None
            }
            ArgValue::Flag => {
                errors.at(
                    &self.key,
                    format_args!("`{}` needs its fields: write `{example}`", self.name()),
                );
                None
            }
        }
    }
}
