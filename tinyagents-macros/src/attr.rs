//! The arguments of a hook attribute on a free fn and of `#[middleware(...)]`:
//! `name`, `type_name`, `before`, `after`, `before_if_present`,
//! `after_if_present`, `can_jump_to`, `doc(...)`,
//! `builtin`, `config`, `run_state`.
//!
//! Ordering names (`before`/`after`) are string literals (a middleware's
//! name, taken verbatim) or paths to DSL middleware types, whose declared
//! name is used: a typo in a type is then a compile error, and a renamed
//! middleware keeps its constraints.

use proc_macro2::TokenStream;
use syn::{Expr, Ident, Lit, LitStr};

use crate::args::{check_keys, parse_args};
use crate::doc::DocArgs;
use crate::errors::{backticked, did_you_mean, Errors};
use crate::kw;

/// A middleware named in `before`/`after`.
pub(crate) enum OrderRef {
    /// `"name"`.
    Name(LitStr),
    /// `SomeMiddleware`: its declared name.
    Type(syn::Path),
}

/// The parsed arguments.
#[derive(Default)]
pub(crate) struct MiddlewareArgs {
    /// `name = "…"`.
    pub(crate) name: Option<LitStr>,
    /// `type_name = Ident`.
    pub(crate) type_name: Option<Ident>,
    /// `before = [..]`.
    pub(crate) before: Vec<OrderRef>,
    /// `after = [..]`.
    pub(crate) after: Vec<OrderRef>,
    /// `before_if_present = [..]`.
    pub(crate) before_if_present: Vec<OrderRef>,
    /// `after_if_present = [..]`.
    pub(crate) after_if_present: Vec<OrderRef>,
    /// `can_jump_to = [..]`: the `JumpSet` constants.
    pub(crate) jumps: Vec<&'static str>,
    /// `doc(...)`.
    pub(crate) doc: DocArgs,
    /// `builtin`, with its span.
    pub(crate) builtin: Option<Ident>,
    /// `config = Type`.
    pub(crate) config: Option<syn::Path>,
    /// `tools = path`.
    pub(crate) tools: Option<syn::Path>,
    /// `run_state = Type`.
    pub(crate) run_state: Option<syn::Type>,
}

/// Parses and checks the arguments of `attr` (e.g. `#[before_model(...)]`),
/// accepting the keys in `valid`.
pub(crate) fn parse(tokens: TokenStream, valid: &[&str], attr: &str, errors: &mut Errors) -> MiddlewareArgs {
    let mut out = MiddlewareArgs::default();
    let Some(args) = errors.ok(parse_args(tokens)) else {
        return out;
    };
    for arg in check_keys(args, valid, attr, errors) {
        match arg.name().as_str() {
            kw::NAME => {
                if let Some(s) = arg.string(r#"name = "my_middleware""#, errors) {
                    if s.value().trim().is_empty() {
                        errors.at(
                            &s,
                            "the middleware name cannot be empty: write `name = \"my_middleware\"`",
                        );
                    } else {
                        out.name = Some(s);
                    }
                }
            }
            kw::TYPE_NAME => match arg.expr("type_name = MyMiddleware", errors) {
                Some(Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. })) => errors.at(
                    s,
                    format_args!(
                        "`type_name` names a Rust type, so it takes an identifier, not a string: \
                         write `type_name = {}`",
                        s.value()
                    ),
                ),
                Some(Expr::Path(p)) if p.qself.is_none() && p.path.get_ident().is_some() => {
                    out.type_name = p.path.get_ident().cloned();
                }
                Some(other) => errors.at(
                    other,
                    "`type_name` takes one identifier: write `type_name = MyMiddleware`",
                ),
                None => {}
            },
            kw::BEFORE | kw::AFTER | kw::BEFORE_IF_PRESENT | kw::AFTER_IF_PRESENT => {
                let key = arg.name();
                let example = format!(r#"{key} = ["other_middleware", OtherType]"#);
                let refs = arg
                    .list(&example, errors)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|e| order_ref(e, &key, errors))
                    .collect();
                match key.as_str() {
                    kw::BEFORE => out.before = refs,
                    kw::AFTER => out.after = refs,
                    kw::BEFORE_IF_PRESENT => out.before_if_present = refs,
                    _ => out.after_if_present = refs,
                }
            }
            kw::CAN_JUMP_TO => {
                for e in arg
                    .list("can_jump_to = [model, tools, end]", errors)
                    .unwrap_or_default()
                {
                    if let Some(j) = jump_target(&e, errors) {
                        if out.jumps.contains(&j) {
                            errors.at(&e, "this jump target is already listed: remove the repetition");
                        } else {
                            out.jumps.push(j);
                        }
                    }
                }
            }
            kw::DOC => {
                if let Some(items) = arg.nested(r#"doc(summary = "…", mutation = "…")"#, errors) {
                    out.doc = DocArgs::parse(items, errors);
                }
            }
            kw::BUILTIN => {
                if arg.flag(errors) {
                    out.builtin = Some(arg.key.clone());
                }
            }
            kw::CONFIG => out.config = arg.path("config = MyConfig", errors),
            kw::TOOLS => out.tools = arg.path("tools = Self::my_tools", errors),
            kw::RUN_STATE => out.run_state = arg.ty("run_state = MyRunState", errors).cloned(),
            _ => unreachable!("check_keys keeps known keys only"),
        }
    }
    out
}

fn order_ref(e: Expr, key: &str, errors: &mut Errors) -> Option<OrderRef> {
    match e {
        Expr::Lit(syn::ExprLit { lit: Lit::Str(s), .. }) => Some(OrderRef::Name(s)),
        Expr::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last().map(|s| s.ident.to_string()).unwrap_or_default();
            if last.starts_with(|c: char| c.is_ascii_lowercase()) {
                // `after = [add_date]`: the fn, where the generated type was meant.
                let ty = crate::free_fn::upper_camel(&last);
                errors.at(
                    &p,
                    format_args!(
                        "`{key}` lists middleware types or names, and `{last}` looks like a fn: a hook fn \
                         `{last}` generates the type `{ty}`, so write `{key} = [{ty}]` (or the middleware's \
                         name as a string, `{key} = [\"{ty}\"]`)"
                    ),
                );
                return None;
            }
            Some(OrderRef::Type(p.path))
        }
        other => {
            errors.at(
                &other,
                format_args!(
                    "`{key}` lists middleware by name (a string literal, `\"rate_limit\"`) or by DSL type \
                     (`RateLimit`)"
                ),
            );
            None
        }
    }
}

fn jump_target(e: &Expr, errors: &mut Errors) -> Option<&'static str> {
    let names: Vec<&str> = kw::JUMP_TARGETS.iter().map(|(n, _)| *n).collect();
    let word = match e {
        Expr::Path(p) => p.path.get_ident().map(|i| i.to_string()),
        _ => None,
    };
    match word {
        Some(w) => match kw::JUMP_TARGETS.iter().find(|(n, _)| *n == w) {
            Some((_, flag)) => Some(flag),
            None => {
                errors.at(
                    e,
                    format_args!(
                        "unknown jump target `{w}`: a middleware can jump to {}{}",
                        backticked(&names),
                        did_you_mean(&w, &names)
                    ),
                );
                None
            }
        },
        None => {
            errors.at(
                e,
                format_args!(
                    "write a jump target as a bare word: {} (e.g. `can_jump_to = [end]`)",
                    backticked(&names)
                ),
            );
            None
        }
    }
}
