//! `#[derive(MiddlewareConfig)]`: parsing from a JSON value / TOML table with
//! unknown keys rejected, validation naming path, value and rule, the field
//! table for the docs, and the `BuildMiddleware` factory.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::{Data, DeriveInput, Fields, LitStr};

use crate::config_attr::{default_tokens, field, struct_args, FieldSpec};
use crate::errors::Errors;
use crate::text::tokens_to_string;

/// Expands the derive.
pub(crate) fn expand(item: TokenStream) -> TokenStream {
    let mut errors = Errors::default();
    let input: DeriveInput = match syn::parse2(item) {
        Ok(i) => i,
        Err(e) => return e.to_compile_error(),
    };
    let ident = &input.ident;
    let fields = match &input.data {
        Data::Struct(s) => match &s.fields {
            Fields::Named(n) => Some(n.named.iter().collect::<Vec<_>>()),
            Fields::Unnamed(u) => {
                errors.at(
                    u,
                    "`MiddlewareConfig` needs named fields, one per config key: write `struct MyConfig { key: Type }`",
                );
                None
            }
            Fields::Unit => {
                errors.at(
                    ident,
                    format_args!(
                        "`MiddlewareConfig` reads named fields, one per config key, and a unit struct has none: for \
                         a middleware with no options write `struct {ident} {{}}` (a table with only `type` reads \
                         into it)"
                    ),
                );
                None
            }
        },
        Data::Enum(e) => {
            errors.at(
                e.enum_token,
                "`MiddlewareConfig` derives on a struct with named fields (one per config key), not on an enum; \
                 use an enum as a field's type instead",
            );
            None
        }
        Data::Union(u) => {
            errors.at(
                u.union_token,
                "`MiddlewareConfig` derives on a struct with named fields, not on a union",
            );
            None
        }
    };
    if !input.generics.params.is_empty() {
        errors.at(
            &input.generics,
            "a middleware config cannot be generic: the registry builds it from a table by its `type` alone; \
             use concrete field types",
        );
    }
    let args = struct_args(&input.attrs, ident, &mut errors);
    let specs: Vec<FieldSpec> = fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|f| field(f, &mut errors))
        .collect();
    if !errors.is_empty() {
        return errors.into_compile_errors();
    }
    let p = quote!(::tinyagents::__private);
    let type_key = args.type_key.expect("checked");
    let keys: Vec<&String> = specs.iter().map(|s| &s.key).collect();

    let field_docs = specs.iter().map(|s| {
        let name = &s.key;
        let ty = tokens_to_string(s.ty.to_token_stream());
        let default = match (&s.default, &s.class.option) {
            (Some(e), _) => tokens_to_string(e.to_token_stream()),
            (None, Some(_)) => "None".to_owned(),
            (None, None) => String::new(),
        };
        let rules = s.rules_text.join(", ");
        let doc = &s.doc;
        let field_ty = &s.ty;
        let choices = if s.class.choice {
            quote!(<#field_ty as #p::ConfigEnum>::NAMES)
        } else {
            quote!(&[])
        };
        quote!(#p::ConfigFieldDoc { name: #name, ty: #ty, default: #default, rules: #rules, choices: #choices, doc: #doc })
    });

    let reads = specs.iter().map(|s| {
        let (ident, ty) = (&s.ident, &s.ty);
        // A field with aliases is read under the key the table writes.
        let key = if s.aliases.is_empty() {
            s.key.to_token_stream()
        } else {
            let (k, aliases) = (&s.key, &s.aliases);
            quote!(__reader.aliased(#k, &[#(#aliases),*]))
        };
        let ty_text = tokens_to_string(ty.to_token_stream());
        let span = ty.span();
        let read = match default_tokens(s) {
            Some(_) if s.class.choice => {
                let d = s.default.as_ref().expect("a choice field has a default");
                let dspan = d.span();
                // Named after the field, since rustc names it when the default is not a variant.
                let konst = syn::Ident::new(
                    &format!(
                        "{}_DEFAULT",
                        syn::ext::IdentExt::unraw(ident).to_string().to_uppercase()
                    ),
                    dspan,
                );
                quote_spanned! {dspan=>
                    let #ident = {
                        // The default is one of the enum's names, checked when this compiles.
                        const #konst: #ty = <#ty as #p::ConfigEnum>::ALL
                            [#p::choice_index(<#ty as #p::ConfigEnum>::NAMES, #d)];
                        let __key: &str = #key;
                        __reader.choice::<#ty>(__key, #konst)
                    };
                }
            }
            Some(d) => {
                let dspan = s.default.as_ref().map_or(span, |e| e.span());
                let d = quote_spanned!(dspan=> { let __default: #ty = #d; __default });
                quote_spanned! {span=>
                    let __key: &str = #key;
                    let #ident = <#ty as #p::ConfigValue>::read_or_default(&mut __reader, __key, #ty_text, || #d);
                }
            }
            None => quote_spanned! {span=>
                let __key: &str = #key;
                let #ident = <#ty as #p::ConfigValue>::read_required(&mut __reader, __key, #ty_text);
            },
        };
        let rules = check_tokens(s, Source::Read);
        quote! {
            #read
            #rules
        }
    });
    let idents: Vec<_> = specs.iter().map(|s| &s.ident).collect();
    let build = if idents.is_empty() {
        quote!(let __config = Self {};)
    } else {
        quote! {
            let (#(#p::Option::Some(#idents),)*) = (#(#idents,)*) else {
                return #p::Result::Err(__reader.into_errors());
            };
            let __config = Self { #(#idents),* };
        }
    };

    let checks = specs.iter().map(|s| check_tokens(s, Source::SelfField));
    // `validate = f`: `f` is first taken as the fn pointer it must be, so a
    // wrong signature is one error on `f` naming the expected one.
    let validate = |config: TokenStream, clean: TokenStream, checker: TokenStream| {
        args.validate.as_ref().map(|v| {
            let fn_ty = quote_spanned!(v.span()=> fn(&#ident) -> #p::Result<(), #p::ConfigViolation>);
            quote_spanned! {v.span()=>
                if #clean {
                    let __validate: #fn_ty = #v;
                    if let #p::Result::Err(__violation) = __validate(#config) {
                        #checker.violation(__violation);
                    }
                }
            }
        })
    };
    let validate_read = validate(
        quote!(&__config),
        quote!(__reader.is_clean()),
        quote!(__reader.checker()),
    );
    let validate_self = validate(quote!(self), quote!(__checker.is_clean()), quote!(__checker));

    let factory = args.builds.as_ref().map(|b| {
        quote_spanned! {b.span()=>
            #[automatically_derived]
            impl #p::BuildMiddleware for #ident {
                type Middleware = #b;
                fn build(self) -> #b {
                    <#b as #p::From<#ident>>::from(self)
                }
            }
        }
    });
    let key_list: Vec<LitStr> = keys
        .iter()
        .copied()
        .chain(specs.iter().flat_map(|s| &s.aliases))
        .map(|k| LitStr::new(k, Span::call_site()))
        .collect();
    quote! {
        #[automatically_derived]
        #[allow(unused_variables, clippy::all, clippy::pedantic)]
        impl #p::MiddlewareConfig for #ident {
            const TYPE: &'static str = #type_key;
            const FIELDS: &'static [#p::ConfigFieldDoc] = &[#(#field_docs),*];

            fn from_value(__value: &#p::JsonValue, __path: &str) -> #p::Result<Self, #p::ConfigErrors> {
                let mut __reader = #p::ConfigReader::new(__value, __path, #type_key, &[#(#key_list),*])?;
                #(#reads)*
                #build
                #validate_read
                __reader.finish()?;
                #p::Result::Ok(__config)
            }

            fn check(&self, __path: &str) -> #p::Result<(), #p::ConfigErrors> {
                let mut __checker_owned = #p::ConfigChecker::new(__path);
                let __checker = &mut __checker_owned;
                #(#checks)*
                #validate_self
                __checker_owned.finish()
            }
        }
        #factory
    }
}

/// Where the rules of a field find its value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// `self.field`, in `check`.
    SelfField,
    /// The `Option` the reader returned for the field, in `from_value`.
    Read,
}

/// The rule checks of one field.
fn check_tokens(s: &FieldSpec, source: Source) -> TokenStream {
    let p = quote!(::tinyagents::__private);
    let ident = &s.ident;
    // Read from a table, an aliased field's errors name the key the table wrote.
    let key = match source {
        Source::Read if !s.aliases.is_empty() => quote!(__key),
        _ => s.key.to_token_stream(),
    };
    let inner = s.class.inner(&s.ty);
    let mut rules = Vec::new();
    if let Some(r) = &s.range {
        let text = tokens_to_string(r.to_token_stream());
        rules.push(quote_spanned!(r.span()=> __checker.range(#key, __v, #r, #text);));
    }
    if s.finite {
        rules.push(quote!(__checker.finite(#key, __v);));
    }
    if s.non_negative {
        rules.push(quote!(__checker.non_negative(#key, __v);));
    }
    if let Some(items) = &s.one_of {
        let text = items
            .iter()
            .map(|e| tokens_to_string(e.to_token_stream()))
            .collect::<Vec<_>>()
            .join(", ");
        let elem = if s.class.string {
            quote!(&'static str)
        } else {
            inner.to_token_stream()
        };
        rules.push(quote! {
            let __allowed: &[#elem] = &[#(#items),*];
            __checker.one_of(#key, __v, __allowed, #text);
        });
    }
    if rules.is_empty() {
        return TokenStream::new();
    }
    let checker = match source {
        Source::SelfField => quote!(let __checker = &mut *__checker;),
        Source::Read => quote!(let __checker = __reader.checker();),
    };
    let pattern = match (source, s.class.option.is_some()) {
        (Source::SelfField, false) => quote!(__v),
        (Source::SelfField, true) | (Source::Read, false) => quote!(#p::Option::Some(__v)),
        (Source::Read, true) => quote!(#p::Option::Some(#p::Option::Some(__v))),
    };
    let place = match source {
        Source::SelfField => quote!(&self.#ident),
        Source::Read => quote!(&#ident),
    };
    quote! {
        #[allow(irrefutable_let_patterns)]
        if let #pattern = #place {
            #checker
            #(#rules)*
        }
    }
}
