//! The attributes of `#[derive(MiddlewareConfig)]`: `#[config(type, builds,
//! validate)]` on the struct and `#[config(default, range, finite,
//! non_negative, one_of)]` on fields, with the checks that compare each rule
//! to the field's type.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{Attribute, Expr, Field, Ident, Lit, LitStr, Type};

use crate::args::{check_keys, parse_args, Arg};
use crate::errors::Errors;
use crate::kw;
use crate::text::tokens_to_string;

/// The struct-level arguments.
#[derive(Default)]
pub(crate) struct StructArgs {
    /// `type = "…"`.
    pub(crate) type_key: Option<LitStr>,
    /// `builds = Type`.
    pub(crate) builds: Option<syn::Path>,
    /// `validate = path`.
    pub(crate) validate: Option<syn::Path>,
}

/// The numeric class of a field type.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Num {
    /// `i8` … `isize`.
    Signed,
    /// `u8` … `usize`.
    Unsigned,
    /// `f32`, `f64`.
    Float,
}

/// What the derive knows of a field's type.
pub(crate) struct FieldType {
    /// `Option<T>`: the field defaults to `None`.
    pub(crate) option: Option<Type>,
    /// The numeric class of the (inner) type.
    pub(crate) num: Option<Num>,
    /// Whether the (inner) type is `String`.
    pub(crate) string: bool,
    /// Whether the (inner) type is `bool`.
    pub(crate) boolean: bool,
    /// Whether the field is a `ConfigEnum` (a string default on a type that
    /// is not a string, a number or a bool; set by `field`).
    pub(crate) choice: bool,
}

impl FieldType {
    fn of(ty: &Type) -> Self {
        let inner = option_inner(ty);
        let name = last_ident(inner.unwrap_or(ty));
        let num = match name.as_deref() {
            Some("i8" | "i16" | "i32" | "i64" | "i128" | "isize") => Some(Num::Signed),
            Some("u8" | "u16" | "u32" | "u64" | "u128" | "usize") => Some(Num::Unsigned),
            Some("f32" | "f64") => Some(Num::Float),
            _ => None,
        };
        Self {
            option: inner.cloned(),
            num,
            string: name.as_deref() == Some("String"),
            boolean: name.as_deref() == Some("bool"),
            choice: false,
        }
    }

    /// The type the rules apply to (the `T` of `Option<T>`).
    pub(crate) fn inner<'a>(&'a self, ty: &'a Type) -> &'a Type {
        self.option.as_ref().unwrap_or(ty)
    }
}

fn last_ident(ty: &Type) -> Option<String> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    let seg = p.path.segments.last()?;
    if seg.ident != "Option" {
        return None;
    }
    match &seg.arguments {
        syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|g| match g {
            syn::GenericArgument::Type(t) => Some(t),
            _ => None,
        }),
        _ => None,
    }
}

/// One field, validated.
pub(crate) struct FieldSpec {
    /// The field.
    pub(crate) ident: Ident,
    /// Its key in a table.
    pub(crate) key: String,
    /// Its type.
    pub(crate) ty: Type,
    /// What the derive knows of its type.
    pub(crate) class: FieldType,
    /// `default = expr`.
    pub(crate) default: Option<Expr>,
    /// `range = a..=b`.
    pub(crate) range: Option<Expr>,
    /// `finite`.
    pub(crate) finite: bool,
    /// `non_negative`.
    pub(crate) non_negative: bool,
    /// `one_of = [..]`.
    pub(crate) one_of: Option<Vec<Expr>>,
    /// The rules as written, for the docs.
    pub(crate) rules_text: Vec<String>,
    /// Its doc comment (first paragraph).
    pub(crate) doc: String,
    /// Other keys it is read under (`#[serde(alias = "…")]`).
    pub(crate) aliases: Vec<String>,
}

/// The `#[serde(...)]` keys the derive reads on a field.
#[derive(Default)]
struct SerdeArgs {
    /// `rename = "…"`: the field's key in a table.
    rename: Option<LitStr>,
    /// `alias = "…"` (repeatable): other keys it is read under.
    aliases: Vec<LitStr>,
}

/// Reads `#[serde(rename = "…", alias = "…")]` on a field; any other serde
/// key is an error (the derive reads tables itself, not through serde).
fn serde_args(attrs: &[Attribute], errors: &mut Errors) -> SerdeArgs {
    let mut out = SerdeArgs::default();
    for attr in attrs.iter().filter(|a| a.path().is_ident(kw::SERDE_ATTR)) {
        let syn::Meta::List(list) = &attr.meta else {
            errors.at(
                attr,
                "write `#[serde(rename = \"my-key\")]` or `#[serde(alias = \"my-key\")]`",
            );
            continue;
        };
        let Some(args) = errors.ok(parse_args(list.tokens.clone())) else {
            continue;
        };
        for arg in args {
            let name = arg.name();
            match name.as_str() {
                kw::RENAME => {
                    if let Some(s) = arg.string(r#"rename = "my-key""#, errors) {
                        if out.rename.is_some() {
                            errors.at(
                                &arg.key,
                                "duplicate `rename`: a field has one key; list other keys with `alias`",
                            );
                        } else {
                            out.rename = Some(s);
                        }
                    }
                }
                kw::ALIAS => {
                    if let Some(s) = arg.string(r#"alias = "my-key""#, errors) {
                        out.aliases.push(s);
                    }
                }
                _ => errors.at(
                    &arg.key,
                    format_args!(
                        "`#[serde({name})]` is not read by `MiddlewareConfig`, which reads tables itself: it reads \
                         `#[serde(rename = \"…\")]` and `#[serde(alias = \"…\")]` only; give defaults with \
                         `#[config(default = …)]`{}",
                        if name == kw::DEFAULT { "" } else { " and remove this" }
                    ),
                ),
            }
        }
    }
    out
}

/// The `#[config(...)]` args of an item (several attributes are merged).
fn config_args(attrs: &[Attribute], errors: &mut Errors) -> Vec<Arg> {
    let mut out = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident(kw::CONFIG_ATTR)) {
        match &attr.meta {
            syn::Meta::List(list) => {
                if let Some(args) = errors.ok(parse_args(list.tokens.clone())) {
                    out.extend(args);
                }
            }
            other => errors.at(other, "write the rules in parentheses: `#[config(default = …)]`"),
        }
    }
    out
}

/// Parses the struct-level `#[config(...)]`.
pub(crate) fn struct_args(attrs: &[Attribute], ident: &Ident, errors: &mut Errors) -> StructArgs {
    let mut out = StructArgs::default();
    let args = config_args(attrs, errors);
    for arg in check_keys(args, kw::STRUCT_KEYS, "the struct's `#[config(...)]`", errors) {
        match arg.name().as_str() {
            kw::TYPE => {
                if let Some(s) = arg.string(r#"type = "my_middleware""#, errors) {
                    if s.value().trim().is_empty() {
                        errors.at(
                            &s,
                            "the config `type` cannot be empty: write `type = \"my_middleware\"`",
                        );
                    } else {
                        out.type_key = Some(s);
                    }
                }
            }
            kw::BUILDS => out.builds = arg.path("builds = MyMiddleware", errors),
            kw::VALIDATE => out.validate = arg.path("validate = check_my_config", errors),
            _ => unreachable!("check_keys keeps known keys only"),
        }
    }
    if out.type_key.is_none() && errors.is_empty() {
        errors.at(
            ident,
            "a middleware config needs its table `type`: add `#[config(type = \"my_middleware\")]` to the struct",
        );
    }
    out
}

/// Parses and checks one named field.
pub(crate) fn field(field: &Field, errors: &mut Errors) -> Option<FieldSpec> {
    let ident = field.ident.clone()?;
    let key = syn::ext::IdentExt::unraw(&ident).to_string();
    if let Type::Reference(r) = &field.ty {
        let owned = match &*r.elem {
            Type::Path(p) if p.path.is_ident("str") => "String".to_owned(),
            Type::Slice(s) => format!("Vec<{}>", tokens_to_string(s.elem.to_token_stream())),
            other => tokens_to_string(other.to_token_stream()),
        };
        errors.at(
            &field.ty,
            format_args!(
                "a config field owns its value, read from a table at run time, so `{key}` cannot be a reference \
                 (`{}`): write `{key}: {owned}`",
                tokens_to_string(field.ty.to_token_stream())
            ),
        );
        return None;
    }
    let serde = serde_args(&field.attrs, errors);
    let key = serde.rename.as_ref().map_or(key, LitStr::value);
    if kw::RESERVED_FIELDS.contains(&key.as_str()) {
        errors.at(
            &ident,
            format_args!(
                "`{key}` is a reserved key of every config table (`type` names the middleware, `enabled = false` \
                 turns it off): rename the field"
            ),
        );
    }
    let class = FieldType::of(&field.ty);
    let ty_text = tokens_to_string(field.ty.to_token_stream());
    let inner_text = tokens_to_string(class.inner(&field.ty).to_token_stream());
    let mut spec = FieldSpec {
        ident: ident.clone(),
        key: key.clone(),
        ty: field.ty.clone(),
        class,
        default: None,
        range: None,
        finite: false,
        non_negative: false,
        one_of: None,
        rules_text: serde
            .aliases
            .iter()
            .map(|a| format!("alias = \"{}\"", a.value()))
            .collect(),
        doc: crate::doc::summary_from_attrs(&field.attrs).unwrap_or_default(),
        aliases: serde.aliases.iter().map(LitStr::value).collect(),
    };
    let mut args = config_args(&field.attrs, errors);
    // `min = 1, max = 10`: bounds are one `range`.
    args.retain(|arg| {
        let name = arg.name();
        if matches!(name.as_str(), "min" | "max" | "minimum" | "maximum") {
            errors.at(
                &arg.key,
                format_args!(
                    "a field's bounds are one `range` rule, not `{name}`: write `range = min..=max` \
                     (`range = 1..`, `range = ..=10` for one bound)"
                ),
            );
            false
        } else {
            true
        }
    });
    for arg in check_keys(args, kw::FIELD_KEYS, "a field's `#[config(...)]`", errors) {
        match arg.name().as_str() {
            kw::DEFAULT => {
                if let Some(e) = arg.expr("default = …", errors) {
                    // A string default on a type that is not a string, a number or a bool
                    // names a variant of a `ConfigEnum` (checked at compile time by the expansion).
                    spec.class.choice = matches!(literal(e), Some((Lit::Str(_), false)))
                        && !spec.class.string
                        && spec.class.num.is_none()
                        && !spec.class.boolean
                        && spec.class.option.is_none()
                        && !matches!(
                            last_ident(&spec.ty).as_deref(),
                            Some("Vec" | "HashMap" | "BTreeMap" | "HashSet" | "BTreeSet" | "Duration" | "PathBuf")
                        );
                    check_default(e, &spec.class, &key, &ty_text, errors);
                    spec.default = Some(e.clone());
                }
            }
            kw::RANGE => {
                if let Some(e) = arg.expr("range = 1..=10", errors)
                    && check_range(e, &spec.class, &key, &ty_text, errors)
                {
                    spec.rules_text
                        .push(format!("range = {}", tokens_to_string(e.to_token_stream())));
                    spec.range = Some(e.clone());
                }
            }
            kw::FINITE => {
                if arg.flag(errors) {
                    if spec.class.num == Some(Num::Float) {
                        spec.finite = true;
                        spec.rules_text.push(kw::FINITE.to_owned());
                    } else {
                        errors.at(
                            &arg.key,
                            format_args!(
                                "`finite` applies to `f32`/`f64` fields, and `{key}` is `{ty_text}`: remove it"
                            ),
                        );
                    }
                }
            }
            kw::NON_NEGATIVE => {
                if arg.flag(errors) {
                    match spec.class.num {
                        Some(Num::Signed | Num::Float) => {
                            spec.non_negative = true;
                            spec.rules_text.push(kw::NON_NEGATIVE.to_owned());
                        }
                        Some(Num::Unsigned) => errors.at(
                            &arg.key,
                            format_args!(
                                "`non_negative` is always true for `{key}`, an unsigned `{inner_text}`: remove it"
                            ),
                        ),
                        None => errors.at(
                            &arg.key,
                            format_args!(
                                "`non_negative` applies to numeric fields, and `{key}` is `{ty_text}`: remove it"
                            ),
                        ),
                    }
                }
            }
            kw::ONE_OF => {
                if let Some(items) = arg.list(r#"one_of = ["a", "b"]"#, errors)
                    && check_one_of(&arg.key, &items, &spec.class, &key, &ty_text, errors)
                {
                    let text = items
                        .iter()
                        .map(|e| tokens_to_string(e.to_token_stream()))
                        .collect::<Vec<_>>()
                        .join(", ");
                    spec.rules_text.push(format!("one_of = [{text}]"));
                    spec.one_of = Some(items);
                }
            }
            _ => unreachable!("check_keys keeps known keys only"),
        }
    }
    Some(spec)
}

/// A literal, seen through a leading minus.
fn literal(e: &Expr) -> Option<(&Lit, bool)> {
    match e {
        Expr::Lit(l) => Some((&l.lit, false)),
        Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => literal(&u.expr).map(|(l, _)| (l, true)),
        Expr::Group(g) => literal(&g.expr),
        Expr::Paren(p) => literal(&p.expr),
        _ => None,
    }
}

fn check_default(e: &Expr, class: &FieldType, key: &str, ty: &str, errors: &mut Errors) {
    let Some((lit, negative)) = literal(e) else { return };
    let what = match lit {
        Lit::Str(_) if !class.string && !class.choice => Some("a string"),
        Lit::Int(_) | Lit::Float(_) if class.num.is_none() && (class.string || class.boolean) => Some("a number"),
        Lit::Float(_) if matches!(class.num, Some(Num::Signed | Num::Unsigned)) => Some("a float"),
        Lit::Int(_) if class.num == Some(Num::Float) => {
            errors.at(
                e,
                format_args!(
                    "the default of `{key}` is an integer but the field is `{ty}`: write it as a float (`{}.0`)",
                    tokens_to_string(e.to_token_stream())
                ),
            );
            return;
        }
        Lit::Bool(_) if !class.boolean => Some("a bool"),
        _ if negative && class.num == Some(Num::Unsigned) => {
            errors.at(
                e,
                format_args!("the default of `{key}` is negative but the field is an unsigned `{ty}`"),
            );
            return;
        }
        _ => None,
    };
    if let Some(what) = what {
        errors.at(
            e,
            format_args!("the default of `{key}` is {what} but the field is `{ty}`: give a `{ty}` value"),
        );
    }
}

fn number(e: &Expr) -> Option<f64> {
    let (lit, negative) = literal(e)?;
    let v = match lit {
        Lit::Int(i) => i.base10_digits().parse::<f64>().ok()?,
        Lit::Float(f) => f.base10_digits().parse::<f64>().ok()?,
        _ => return None,
    };
    Some(if negative { -v } else { v })
}

/// Checks `range = …` against the field; returns whether it is usable.
fn check_range(e: &Expr, class: &FieldType, key: &str, ty: &str, errors: &mut Errors) -> bool {
    let Expr::Range(r) = e else {
        errors.at(
            e,
            "`range` takes a range: write `range = 1..=10`, `range = 0.0..=1.0` or `range = 1..`",
        );
        return false;
    };
    if class.num.is_none() {
        errors.at(
            e,
            format_args!("`range` applies to numeric fields, and `{key}` is `{ty}`: remove it, or use `one_of`"),
        );
        return false;
    }
    let bounds = [r.start.as_deref(), r.end.as_deref()];
    for bound in bounds.into_iter().flatten() {
        let fix = match (literal(bound), class.num) {
            (Some((Lit::Float(_), _)), Some(Num::Signed | Num::Unsigned)) => {
                Some("the bounds of an integer field are integers: write `range = 1..=10`".to_owned())
            }
            (Some((Lit::Int(i), _)), Some(Num::Float)) => Some(format!(
                "the bounds of a float field are floats: write `{}.0` (e.g. `range = 0.0..=1.0`)",
                i.base10_digits()
            )),
            (Some((_, true)), Some(Num::Unsigned)) => {
                Some("an unsigned field cannot hold a negative bound: start the range at `0` or later".to_owned())
            }
            _ => None,
        };
        if let Some(fix) = fix {
            errors.at(bound, format_args!("`range` of `{key}`, a `{ty}`: {fix}"));
            return false;
        }
    }
    if let (Some(lo), Some(hi)) = (r.start.as_deref().and_then(number), r.end.as_deref().and_then(number)) {
        let empty = match r.limits {
            syn::RangeLimits::Closed(_) => lo > hi,
            syn::RangeLimits::HalfOpen(_) => lo >= hi,
        };
        if empty {
            errors.at(
                e,
                "this range is empty, so no value would pass: put the lower bound first (`range = 1..=10`)",
            );
            return false;
        }
    }
    true
}

fn check_one_of(at: &Ident, items: &[Expr], class: &FieldType, key: &str, ty: &str, errors: &mut Errors) -> bool {
    if items.is_empty() {
        errors.at(at, "`one_of` needs at least one value: write `one_of = [\"a\", \"b\"]`");
        return false;
    }
    if !class.string && class.num.is_none() {
        errors.at(
            at,
            format_args!("`one_of` applies to string and numeric fields, and `{key}` is `{ty}`: remove it"),
        );
        return false;
    }
    let mut ok = true;
    for item in items {
        let fits = match literal(item) {
            Some((Lit::Str(_), _)) => class.string,
            Some((Lit::Int(i), _)) if class.num == Some(Num::Float) => {
                errors.at(
                    item,
                    format_args!(
                        "`one_of` of `{key}`, a `{ty}`, lists floats: write `{}.0`",
                        i.base10_digits()
                    ),
                );
                ok = false;
                continue;
            }
            Some((Lit::Int(_), _)) => class.num.is_some(),
            Some((Lit::Float(_), _)) => class.num == Some(Num::Float),
            _ => false,
        };
        if !fits {
            errors.at(
                item,
                format_args!("`one_of` lists literal values of the field's type, and `{key}` is `{ty}`"),
            );
            ok = false;
        }
    }
    ok
}

/// The field's default as an expression of its type, or `None`.
pub(crate) fn default_tokens(spec: &FieldSpec) -> Option<TokenStream> {
    let p = quote::quote!(::tinyagents::__private);
    match (&spec.default, &spec.class.option) {
        (Some(e), option) => {
            let is_str = matches!(literal(e), Some((Lit::Str(_), _)));
            let is_lit = literal(e).is_some();
            let value = if is_str && spec.class.string {
                quote::quote!(#p::String::from(#e))
            } else {
                e.to_token_stream()
            };
            Some(if option.is_some() && is_lit {
                quote::quote!(#p::Option::Some(#value))
            } else {
                value
            })
        }
        (None, Some(_)) => Some(quote::quote!(#p::Option::None)),
        (None, None) => None,
    }
}
