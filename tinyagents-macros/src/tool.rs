//! `#[tool]` on an async fn: the fn stays as written, and a unit struct
//! named after it (`get_weather` → `GetWeather`) implements `Tool`, with a
//! JSON Schema made from the parameter types (`schemars`), the doc comment as
//! the description, and arguments read back into those types.
//!
//! Parse → validate (every mistake recorded, spanned on its token) → expand.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Attribute, Expr, FnArg, Ident, ItemFn, LitStr, Pat, ReturnType, Type};

use crate::args::{check_keys, parse_args};
use crate::errors::{did_you_mean, Errors};
use crate::free_fn::upper_camel;
use crate::text::tokens_to_string;

/// `#[tool(name = "…")]`: the tool's name (default: the fn's name).
const NAME: &str = "name";
/// `#[tool(type_name = Ident)]`: the generated type's name.
const TYPE_NAME: &str = "type_name";
/// `#[tool(description = "…")]`: the description (default: the doc comment).
const DESCRIPTION: &str = "description";
/// `#[tool(policy = expr)]`: the tool's `ToolPolicy`.
const POLICY: &str = "policy";
/// `#[tool(allow_unknown_args)]`: accept argument keys the fn does not take.
const ALLOW_UNKNOWN: &str = "allow_unknown_args";
/// The keys of `#[tool(...)]`.
const KEYS: &[&str] = &[NAME, TYPE_NAME, DESCRIPTION, POLICY, ALLOW_UNKNOWN];

/// The parameter attribute naming a file the tool touches.
const FILE_ATTR: &str = "file";
/// The parameter attribute taking the whole arguments object as one type.
const ARGS_ATTR: &str = "args";
/// The modes of `#[file(...)]`.
const FILE_MODES: &[&str] = &["read", "write"];

/// What one parameter is.
enum ParamKind {
    /// `cx: ToolContext` or `cx: &ToolContext`.
    Context { by_ref: bool },
    /// A model argument: a property of the arguments object.
    Arg {
        name: Ident,
        ty: Type,
        optional: bool,
        doc: Option<String>,
        file: Option<Ident>,
    },
    /// `#[args] a: T`: the whole arguments object.
    Whole { ty: Type },
}

/// The `#[tool(...)]` arguments.
#[derive(Default)]
struct ToolArgs {
    name: Option<LitStr>,
    type_name: Option<Ident>,
    description: Option<LitStr>,
    policy: Option<Expr>,
    allow_unknown: bool,
}

fn parse_attr(args: TokenStream, errors: &mut Errors) -> ToolArgs {
    let mut out = ToolArgs::default();
    let Some(items) = errors.ok(parse_args(args)) else {
        return out;
    };
    for item in check_keys(items, KEYS, "`#[tool(...)]`", errors) {
        match item.name().as_str() {
            NAME => out.name = item.string(r#"name = "my_tool""#, errors),
            DESCRIPTION => out.description = item.string(r#"description = "What the tool does.""#, errors),
            TYPE_NAME => {
                if let Some(path) = item.path("type_name = MyTool", errors) {
                    match path.get_ident() {
                        Some(ident) => out.type_name = Some(ident.clone()),
                        None => errors.at(&path, "`type_name` takes one identifier: write `type_name = MyTool`"),
                    }
                }
            }
            POLICY => out.policy = item.expr("policy = ToolPolicy::classified()", errors).cloned(),
            ALLOW_UNKNOWN => out.allow_unknown = item.flag(errors),
            _ => {}
        }
    }
    if let Some(name) = &out.name {
        let text = name.value();
        if text.is_empty()
            || !text.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            || text.len() > 64
        {
            errors.at(
                name,
                "a tool name is 1 to 64 ASCII letters, digits, `_` or `-` (what providers accept): rename it",
            );
        }
    }
    out
}

/// The doc comment as one text: lines trimmed, paragraphs kept, cut before
/// the first code block or `#` heading (examples are for people).
fn doc_text(attrs: &[Attribute]) -> Option<String> {
    let mut lines = Vec::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("doc")) {
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s), ..
            }) = &nv.value
        {
            let value = s.value();
            // `///` alone is an empty doc line: a paragraph break.
            lines.extend(value.split('\n').map(|line| line.trim().to_owned()));
        }
    }
    let mut out = String::new();
    let mut blank = false;
    for line in lines.iter().skip_while(|l| l.is_empty()) {
        if line.starts_with("```") || line.starts_with('#') {
            break;
        }
        if line.is_empty() {
            blank = true;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank { "\n\n" } else { " " });
        }
        blank = false;
        out.push_str(line);
    }
    (!out.is_empty()).then_some(out)
}

/// The last path segment's name of a type (`Option` for `std::option::Option<T>`).
fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match ty {
        Type::Path(p) if p.qself.is_none() => p.path.segments.last(),
        Type::Group(g) => last_segment(&g.elem),
        Type::Paren(p) => last_segment(&p.elem),
        _ => None,
    }
}

/// `String`, `PathBuf`, or a `Vec`/`Option` of one: what the file guards
/// read as a path string or an array of them.
fn is_path_type(ty: &Type) -> bool {
    let Some(seg) = last_segment(ty) else {
        return false;
    };
    match seg.ident.to_string().as_str() {
        "String" | "PathBuf" => matches!(seg.arguments, syn::PathArguments::None),
        "Vec" | "Option" => match &seg.arguments {
            syn::PathArguments::AngleBracketed(a) if a.args.len() == 1 => match &a.args[0] {
                syn::GenericArgument::Type(inner) => is_path_type(inner),
                _ => false,
            },
            _ => false,
        },
        _ => false,
    }
}

fn is_named(ty: &Type, name: &str) -> bool {
    last_segment(ty).is_some_and(|s| s.ident == name)
}

/// Classifies one parameter, recording its mistakes; strips the attributes
/// the macro reads (`///`, `#[file]`, `#[args]`) so the fn compiles as written.
fn param(arg: &mut FnArg, errors: &mut Errors) -> Option<ParamKind> {
    let pt = match arg {
        FnArg::Receiver(r) => {
            errors.at(
                &*r,
                "a `#[tool]` fn is a free fn, not a method: remove `self` (hold shared data in a `static`, or \
                 implement `Tool` by hand for a type with fields)",
            );
            return None;
        }
        FnArg::Typed(pt) => pt,
    };
    let mut file = None;
    let mut whole = None;
    let mut doc_attrs = Vec::new();
    let mut kept = Vec::new();
    for attr in std::mem::take(&mut pt.attrs) {
        if attr.path().is_ident("doc") {
            doc_attrs.push(attr);
        } else if attr.path().is_ident(FILE_ATTR) {
            match attr.parse_args::<Ident>() {
                Ok(mode) if FILE_MODES.contains(&mode.to_string().as_str()) => {
                    if !is_path_type(&pt.ty) {
                        errors.at(
                            &*pt.ty,
                            format_args!(
                                "a `#[file(...)]` argument names files, so its type is `String`, `PathBuf`, or a \
                                 `Vec` or `Option` of one: `{}` is not; change the type or remove `#[file(...)]`",
                                tokens_to_string(pt.ty.to_token_stream())
                            ),
                        );
                    }
                    file = Some(mode);
                }
                Ok(mode) => errors.at(
                    &mode,
                    format_args!(
                        "unknown file access `{mode}`: write `#[file(read)]` or `#[file(write)]`{}",
                        did_you_mean(&mode.to_string(), FILE_MODES)
                    ),
                ),
                Err(_) => errors.at(
                    &attr,
                    "`#[file]` says how the tool touches the file this argument names: write `#[file(read)]` or \
                     `#[file(write)]`",
                ),
            }
        } else if attr.path().is_ident(ARGS_ATTR) {
            if !matches!(attr.meta, syn::Meta::Path(_)) {
                errors.at(&attr, "`#[args]` takes no value: write `#[args]` alone");
            }
            whole = Some(attr);
        } else {
            kept.push(attr);
        }
    }
    pt.attrs = kept;
    let ty = (*pt.ty).clone();
    if is_named(&ty, "ToolContext") {
        return Some(ParamKind::Context { by_ref: false });
    }
    if let Type::Reference(r) = &ty {
        if is_named(&r.elem, "ToolContext") {
            if r.mutability.is_some() {
                errors.at(
                    r.mutability,
                    "the tool context is taken as `cx: ToolContext` or `cx: &ToolContext`: remove `mut`",
                );
            }
            return Some(ParamKind::Context { by_ref: true });
        }
        let owned = match &*r.elem {
            Type::Path(p) if p.path.is_ident("str") => "String".to_owned(),
            Type::Path(p) if p.path.is_ident("Path") => "PathBuf".to_owned(),
            Type::Slice(s) => format!("Vec<{}>", tokens_to_string(s.elem.to_token_stream())),
            other => tokens_to_string(other.to_token_stream()),
        };
        errors.at(
            &*pt.ty,
            format_args!(
                "a tool argument is read from the model's JSON into an owned value: write `{owned}` instead of \
                 `{}`",
                tokens_to_string(pt.ty.to_token_stream())
            ),
        );
        return None;
    }
    if let Type::ImplTrait(_) = &ty {
        errors.at(
            &*pt.ty,
            "a tool argument has one concrete type (its JSON Schema is made from it): write a type, not `impl Trait`",
        );
        return None;
    }
    let name = match &*pt.pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => p.ident.clone(),
        other => {
            errors.at(
                other,
                "a tool argument is a plain name (it becomes the JSON property): write `name: Type`",
            );
            return None;
        }
    };
    if let Some(attr) = whole {
        if file.is_some() {
            errors.at(
                &attr,
                "`#[file]` goes on a plain argument, not on `#[args]`: take the path as its own argument",
            );
        }
        return Some(ParamKind::Whole { ty });
    }
    let optional = is_named(&ty, "Option");
    let name = syn::Ident::new(name.to_string().trim_start_matches("r#"), name.span());
    Some(ParamKind::Arg {
        name,
        ty,
        optional,
        doc: doc_text(&doc_attrs),
        file,
    })
}

/// How the fn's result reaches the model.
enum Returns {
    /// `Result<T>` / `Result<T, E>`.
    Result,
    /// A plain value.
    Value,
}

/// Expands `#[tool(args)] async fn …`.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let mut item_fn: ItemFn = match syn::parse2(item.clone()) {
        Ok(f) => f,
        Err(_) => {
            errors.at(
                &item,
                "`#[tool]` goes on an async fn: write `#[tool] async fn my_tool(arg: Type) -> Result<String>`",
            );
            let errors = errors.into_compile_errors();
            return quote!(#item #errors);
        }
    };
    let attr = parse_attr(args, &mut errors);
    let sig = &item_fn.sig;
    if let Some(receiver) = sig.receiver() {
        errors.at(
            receiver,
            "`#[tool]` goes on a free fn, not a method: move it out of the impl block (hold shared data in a \
             `static`, or implement `Tool` by hand for a type with fields)",
        );
        let errors = errors.into_compile_errors();
        return quote!(#item_fn #errors);
    }
    if sig.asyncness.is_none() {
        errors.at(
            sig.fn_token,
            "a tool is an async fn (tools may wait on I/O): write `async fn`",
        );
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        errors.at(
            &sig.generics,
            "a tool cannot be generic: its JSON Schema is made from concrete types; write the types out",
        );
    }
    if let Some(v) = &sig.variadic {
        errors.at(v, "a tool cannot be variadic: take a `Vec<T>` argument instead");
    }
    let returns = match &sig.output {
        ReturnType::Default => {
            errors.at_span(
                sig.paren_token.span.close(),
                "a tool returns what the model sees: add `-> Result<String>` (or `Result<T>` for any `T: Serialize`, \
                 or a plain `String`)",
            );
            None
        }
        ReturnType::Type(_, ty) => Some(if is_named(ty, "Result") {
            Returns::Result
        } else {
            Returns::Value
        }),
    };
    let description = attr
        .description
        .as_ref()
        .map(LitStr::value)
        .or_else(|| doc_text(&item_fn.attrs));
    if description.is_none() {
        errors.at(
            &item_fn.sig.ident,
            "a tool needs a description (the model reads it to choose the tool): add a doc comment `/// What it \
             does.` above the fn, or `#[tool(description = \"…\")]`",
        );
    }

    let mut params = Vec::new();
    for input in item_fn.sig.inputs.iter_mut() {
        params.push(param(input, &mut errors));
    }
    // Cross-parameter rules.
    let contexts: Vec<_> = item_fn
        .sig
        .inputs
        .iter()
        .zip(&params)
        .filter(|(_, p)| matches!(p, Some(ParamKind::Context { .. })))
        .collect();
    for (input, _) in contexts.iter().skip(1) {
        errors.at(input, "the tool context is taken once: remove this parameter");
    }
    let wholes = params
        .iter()
        .filter(|p| matches!(p, Some(ParamKind::Whole { .. })))
        .count();
    let plain = params
        .iter()
        .filter(|p| matches!(p, Some(ParamKind::Arg { .. })))
        .count();
    if wholes > 0 && (wholes > 1 || plain > 0) {
        for (input, p) in item_fn.sig.inputs.iter().zip(&params) {
            if matches!(p, Some(ParamKind::Whole { .. })) {
                errors.at(
                    input,
                    "`#[args]` takes the whole arguments object: it is the only argument besides the tool context; \
                     move the other arguments into its type",
                );
            }
        }
    }
    if wholes > 0 && attr.allow_unknown {
        // The struct's own serde attributes decide; say so rather than pretend.
        errors.at_span(
            Span::call_site(),
            "`allow_unknown_args` is for plain arguments; with `#[args]` the type decides (unknown keys are refused \
             unless it has `#[serde(flatten)]` of a map): remove `allow_unknown_args`",
        );
    }

    let fn_ident = item_fn.sig.ident.clone();
    let type_ident = attr
        .type_name
        .clone()
        .unwrap_or_else(|| Ident::new(&upper_camel(&fn_ident.to_string()), fn_ident.span()));
    let tool_name = attr.name.as_ref().map_or_else(
        || fn_ident.to_string().trim_start_matches("r#").to_owned(),
        LitStr::value,
    );
    if attr.name.is_none() && !tool_name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        errors.at(
            &fn_ident,
            "a tool name is ASCII letters, digits, `_` or `-` (what providers accept), and this fn's name is not: \
             give the tool one with `#[tool(name = \"…\")]`",
        );
    }
    let vis = &item_fn.vis;
    let p = quote!(::tinyagents::__private);
    let struct_doc = format!("The tool `{tool_name}`, generated by `#[tool]` from the fn `{fn_ident}`.");
    let unit = quote! {
        #[doc = #struct_doc]
        #[derive(#p::Debug, #p::Clone, #p::Copy, #p::Default, #p::PartialEq, #p::Eq, #p::Hash)]
        #vis struct #type_ident;
    };

    let (Some(returns), Some(description), true) = (returns, description, errors.is_empty()) else {
        let errors = errors.into_compile_errors();
        return quote! {
            #item_fn
            #unit
            #errors
        };
    };
    let params: Vec<ParamKind> = params.into_iter().flatten().collect();

    // The schema.
    let allow_unknown = attr.allow_unknown;
    let whole_ty = params.iter().find_map(|param| match param {
        ParamKind::Whole { ty } => Some(ty.clone()),
        _ => None,
    });
    let arg_specs: Vec<TokenStream> = params
        .iter()
        .filter_map(|param| match param {
            ParamKind::Arg {
                name,
                ty,
                optional,
                doc,
                ..
            } => {
                let key = name.to_string();
                let mut spec = quote_spanned!(ty.span()=> #p::ToolArg::new::<#ty>(#key));
                if let Some(doc) = doc {
                    spec = quote!(#spec.describe(#doc));
                }
                if *optional {
                    spec = quote!(#spec.optional());
                }
                Some(spec)
            }
            _ => None,
        })
        .collect();
    let parameters = match &whole_ty {
        Some(ty) => quote!(#p::whole_schema::<#ty>()),
        None => quote!(#p::parameters_schema(ARGS, #allow_unknown)),
    };

    // Reading the arguments and calling the fn.
    let mut reads = Vec::new();
    let mut call_args = Vec::new();
    let mut files = Vec::new();
    for (i, param) in params.iter().enumerate() {
        let local = Ident::new(&format!("__arg{i}"), Span::call_site());
        match param {
            ParamKind::Context { by_ref } => {
                call_args.push(if *by_ref { quote!(&cx) } else { quote!(cx) });
                continue;
            }
            ParamKind::Arg {
                name,
                ty,
                optional,
                file,
                ..
            } => {
                let key = name.to_string();
                let shown = tokens_to_string(ty.to_token_stream());
                let required = !optional;
                reads.push(quote!(let #local: #ty = args.get(#key, #shown, #required)?;));
                if let Some(mode) = file {
                    let mode = Ident::new(if mode == "read" { "Read" } else { "Write" }, mode.span());
                    files.push(quote!((#key, #p::FileAccessMode::#mode)));
                }
            }
            ParamKind::Whole { ty } => {
                let shown = tokens_to_string(ty.to_token_stream());
                reads.push(quote!(let #local: #ty = #p::ToolArgs::whole(NAME, &arguments, #shown)?;));
            }
        }
        call_args.push(quote!(#local));
    }
    let check_args = if whole_ty.is_some() {
        quote!(#p::check_whole_keys(NAME, &arguments, self.schema())?;)
    } else {
        quote!(let args = #p::ToolArgs::new(NAME, &arguments, ARGS, #allow_unknown)?;)
    };
    let output = match returns {
        Returns::Result => quote! {
            match #fn_ident(#(#call_args),*).await {
                #p::Result::Ok(value) => (&#p::Returned::new(value)).tool_output(NAME),
                #p::Result::Err(error) => #p::Result::Err((&#p::Failed(error)).tool_error(NAME)),
            }
        },
        Returns::Value => quote! {
            (&#p::Returned::new(#fn_ident(#(#call_args),*).await)).tool_output(NAME)
        },
    };
    let policy = attr.policy.as_ref().map(|expr| {
        quote! {
            fn policy(&self) -> #p::ToolPolicy {
                #expr
            }
        }
    });
    let file_access = (!files.is_empty()).then(|| {
        quote! {
            fn file_access(&self, arguments: &#p::JsonValue) -> #p::Vec<#p::FileAccess> {
                #p::declared_paths(arguments, &[#(#files),*])
            }
        }
    });
    let cx_unused = if params.iter().any(|param| matches!(param, ParamKind::Context { .. })) {
        quote!()
    } else {
        quote!(let _ = cx;)
    };

    let impls = quote! {
        const _: () = {
            #[allow(unused_imports)]
            use #p::{ReturnDirect as _, ReturnJson as _, FailKeep as _, FailDisplay as _};
            const NAME: &str = #tool_name;
            #[allow(dead_code)]
            const ARGS: &[#p::ToolArg] = &[#(#arg_specs),*];

            #[#p::async_trait]
            impl #p::Tool for #type_ident {
                fn schema(&self) -> &#p::ToolSchema {
                    static SCHEMA: #p::OnceLock<#p::ToolSchema> = #p::OnceLock::new();
                    SCHEMA.get_or_init(|| #p::ToolSchema::new(NAME, #description).with_parameters(#parameters))
                }

                #policy

                #file_access

                async fn call(&self, cx: #p::ToolContext, arguments: #p::JsonValue) -> #p::Result<#p::ToolOutput> {
                    #cx_unused
                    #check_args
                    #(#reads)*
                    #output
                }
            }
        };
    };
    let errors = errors.into_compile_errors();
    quote! {
        #item_fn
        #unit
        #impls
        #errors
    }
}
