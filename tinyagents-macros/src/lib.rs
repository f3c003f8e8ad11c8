//! The tinyagents middleware DSL. Use it through `tinyagents` (feature
//! `macros`, on by default): `use tinyagents::prelude::*;`.
//!
//! * One attribute per hook kind on a free fn (`#[before_model]`,
//!   `#[wrap_tool]`, …): the fn stays as written, and a unit struct named
//!   after it (`add_date` → `AddDate`) implements the hook.
//! * [`macro@middleware`] on an impl block: each method carrying a hook
//!   attribute becomes that hook of the type.
//! * [`derive@MiddlewareConfig`]: typed, validated, documented config
//!   tables.
//!
//! The crate is structured parse → validate → expand: `hook.rs` is the table
//! of hook kinds, `params.rs` classifies parameters, `attr.rs` and `doc.rs`
//! read the attribute arguments, `free_fn.rs` and `impl_block.rs` build one
//! `model::MiddlewareDef`, `generics.rs` picks the state and context types,
//! and `expand.rs` writes the impls. `config_attr.rs` and `config_derive.rs`
//! are the derive; `kw.rs` names every keyword and `errors.rs` accumulates
//! errors so all of an item's mistakes are reported together.

mod args;
mod attr;
mod config_attr;
mod config_derive;
mod doc;
mod errors;
mod expand;
mod free_fn;
mod generics;
mod hook;
mod impl_block;
mod kw;
mod model;
mod params;
mod text;
mod tool;

use proc_macro::TokenStream;

fn hook_attr(attr: &str, args: TokenStream, item: TokenStream) -> TokenStream {
    let hook = hook::Hook::by_attr(attr).expect("every entry point is in the hook table");
    free_fn::expand(hook, args.into(), item.into()).into()
}

macro_rules! hook_attributes {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        ///
        /// Parameters are recognised by type, in any order and any subset:
        /// the context (`&mut RunContext<C>`), the state (another shared
        /// reference, `&S`; a std or tinyagents data type only when the
        /// parameter is named `state` or its type is a type parameter), the
        /// hook's value, and the run state (`&mut T` or `&RunState<T>`, with
        /// `run_state = T`). A concrete state or
        /// context type pins the generated impl; type parameters make it
        /// generic. The arguments (`name`, `type_name`, `before`, `after`,
        /// `can_jump_to`, `doc(...)`, `builtin`, `config`, `run_state`) and
        /// every rule are in the reference on [`macro@middleware`].
        #[proc_macro_attribute]
        pub fn $name(args: TokenStream, item: TokenStream) -> TokenStream {
            hook_attr(stringify!($name), args, item)
        }
    )*};
}

hook_attributes! {
    /// Once, when a run starts: `async fn f(ctx: &mut RunContext<C>, state: &S) -> Result<()>`.
    before_agent;
    /// Once, when a run ends, with `&mut AgentRun`.
    after_agent;
    /// Before a steering command is applied, with `&mut SteeringCommand`.
    before_steering;
    /// After a steering command was decided, with `&mut SteeringOutcome`.
    after_steering;
    /// Before each model call, with `&mut ModelRequest`.
    ///
    /// ```
    /// use tinyagents::prelude::*;
    ///
    /// #[before_model]
    /// async fn add_date(request: &mut ModelRequest) -> Result<()> {
    ///     request.set_volatile("date", "Today is Monday.");
    ///     Ok(())
    /// }
    ///
    /// let stack: MiddlewareStack<()> = MiddlewareStack::empty().with(AddDate).unwrap();
    /// assert_eq!(stack.implementors(HookKind::BeforeModel), ["AddDate"]);
    /// ```
    before_model;
    /// Before each streaming model call, with `&mut ModelRequest`.
    before_model_stream;
    /// For each streamed model delta, with `&mut ModelDelta`. A plain
    /// (non-async) fn takes the fast path: the stack calls it without
    /// boxing a future.
    on_model_delta;
    /// After each model call, with `&mut ModelResponse`.
    after_model;
    /// Once per reply with tool calls, before any `before_tool`, with the
    /// `&mut PreparedBatch` of the calls as the model made them.
    on_tool_batch;
    /// Before each tool call, with `&mut ToolCall`.
    before_tool;
    /// Once per batch, after every `before_tool`, with the `&mut
    /// PreparedBatch` of the calls' final effective arguments and declared
    /// file access (what the scheduler plans from).
    on_prepared_tool_calls;
    /// For each tool progress delta, with `&mut ToolDelta`; a plain fn takes the fast path.
    on_tool_delta;
    /// After each tool call, with `&mut ToolResult`.
    after_tool;
    /// Before a middleware compacts the context, with `&mut CompactionPlan`
    /// (block it with `plan.block(reason)`).
    pre_compact;
    /// When a hook, the model or a tool failed, with `&TinyAgentsError`.
    on_error;
    /// Around each model call: an `async fn` taking the `ModelRequest` by
    /// value and `next: ModelHandler<'_, S, C>`, returning
    /// `Result<ModelResponse>` or `Result<MiddlewareModelOutcome>`.
    wrap_model;
    /// Around each tool call: an `async fn` taking the `ToolCall` by value and
    /// `next: ToolHandler<'_, S, C>`, returning `Result<ToolResult>` or
    /// `Result<MiddlewareToolOutcome>`.
    wrap_tool;
    /// The system prompt's volatile tail: a fn returning `String` or
    /// `Result<String>`, written before each model call into the volatile
    /// segment named after the middleware. It may read `&ModelRequest`.
    dynamic_prompt;
}

/// Makes an impl block's annotated methods the hooks of its type.
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use tinyagents::prelude::*;
///
/// #[derive(Default)]
/// struct CountCalls {
///     calls: AtomicU32,
/// }
///
/// #[middleware(name = "count_calls", doc(summary = "Counts model calls."))]
/// impl CountCalls {
///     #[before_model]
///     fn count(&self) -> Result<()> {
///         self.calls.fetch_add(1, Ordering::Relaxed);
///         Ok(())
///     }
/// }
///
/// let stack: MiddlewareStack<()> = MiddlewareStack::empty().with(CountCalls::default()).unwrap();
/// assert_eq!(stack.names(), ["count_calls"]);
/// ```
///
#[doc = include_str!("../doc/reference.md")]
#[proc_macro_attribute]
pub fn middleware(args: TokenStream, item: TokenStream) -> TokenStream {
    impl_block::expand(args.into(), item.into()).into()
}

/// Makes an async fn a tool the model can call: a unit struct named after
/// the fn (`get_weather` → `GetWeather`) implements `Tool`.
///
/// ```
/// use tinyagents::prelude::*;
///
/// /// Returns the weather in a city.
/// #[tool]
/// async fn get_weather(/** The city's name. */ city: String, days: Option<u32>) -> Result<String> {
///     Ok(format!("{city}: sunny for {} day(s)", days.unwrap_or(1)))
/// }
///
/// let tools = ToolRegistry::new().with(GetWeather).unwrap();
/// let schema = &tools.schemas()[0];
/// assert_eq!(schema.name, "get_weather");
/// assert_eq!(schema.description, "Returns the weather in a city.");
/// assert_eq!(schema.parameters["required"], serde_json::json!(["city"]));
/// ```
///
#[doc = include_str!("../doc/tool.md")]
#[proc_macro_attribute]
pub fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    tool::expand(args.into(), item.into()).into()
}

/// Derives `tinyagents::config::MiddlewareConfig` for a config struct with
/// named fields.
///
/// On the struct: `#[config(type = "…", builds = Middleware, validate = path)]`.
/// On a field: `#[config(default = expr, range = a..=b, finite,
/// non_negative, one_of = [..])]`; `Option<T>` fields default to `None`;
/// doc comments become the field docs. `#[serde(rename = "max-tokens")]`
/// sets a field's key (for TOML keys with dashes; the docs show it) and
/// `#[serde(alias = "…")]` adds another key it is read under; other serde
/// attributes are errors. A field's type is any `serde::Deserialize` type
/// that owns its data (`String`, not `&'static str`). A field whose type is a
/// `tinyagents::config::ConfigEnum` (declared with `tinyagents::config_enum!`)
/// takes a string default naming a variant (`#[config(default = "end")]`,
/// checked at compile time) and reads only the enum's names: any other value
/// is an error listing them, with a did-you-mean.
#[proc_macro_derive(MiddlewareConfig, attributes(config, serde))]
pub fn derive_middleware_config(item: TokenStream) -> TokenStream {
    config_derive::expand(item.into()).into()
}

/// The macro crate's hook table as data, for the runtime's test that checks
/// it against the runtime's own table. Not a public API.
#[doc(hidden)]
#[proc_macro]
pub fn __hook_table(_input: TokenStream) -> TokenStream {
    hook::facts().into()
}
