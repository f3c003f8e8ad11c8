//! The table of hook kinds: for each attribute, the trait method it
//! implements, the value it passes, its sync fast path and, for wraps, the
//! trait, handler and outcome types. Everything else in the crate is one
//! implementation parameterised by a row of this table.

/// What a lifecycle hook passes after the context and the state.
#[derive(Clone, Copy)]
pub(crate) struct Value {
    /// The value's type, as exported from `tinyagents::__private`.
    pub(crate) ty: &'static str,
    /// Whether the hook passes it `&mut` (else `&`).
    pub(crate) mutable: bool,
}

/// The synchronous form of a delta hook.
#[derive(Clone, Copy)]
pub(crate) struct Sync {
    /// The trait method (`on_model_delta_sync`).
    pub(crate) method: &'static str,
    /// The `HookSet` flag telling the stack to call it (`SYNC_MODEL_DELTA`).
    pub(crate) flag: &'static str,
}

/// What a wrap hook is made of.
#[derive(Clone, Copy)]
pub(crate) struct Wrap {
    /// The input passed by value (`ModelRequest`).
    pub(crate) input: &'static str,
    /// The input's usual parameter name (`request`).
    pub(crate) input_var: &'static str,
    /// The lifecycle hook that edits the input without wrapping (`before_model`).
    pub(crate) edit_hook: &'static str,
    /// The `next` handler (`ModelHandler`).
    pub(crate) handler: &'static str,
    /// The outcome type (`MiddlewareModelOutcome`).
    pub(crate) outcome: &'static str,
    /// The plain result a hook may return instead (`ModelResponse`).
    pub(crate) plain: &'static str,
}

/// The shape of a hook.
#[derive(Clone, Copy)]
pub(crate) enum Shape {
    /// A lifecycle hook of `Middleware`, with its value (none for `before_agent`).
    Lifecycle {
        /// The value passed.
        value: Option<Value>,
        /// The sync fast path, for the delta hooks.
        sync: Option<Sync>,
    },
    /// A wrap hook.
    Wrap(Wrap),
    /// `#[dynamic_prompt]`: a `before_model` hook returning the prompt text.
    DynamicPrompt,
}

/// One row of the table.
pub(crate) struct Hook {
    /// The attribute (`before_model`).
    pub(crate) attr: &'static str,
    /// The trait method it implements (`before_model`; `wrap_model` for wraps).
    pub(crate) method: &'static str,
    /// The `HookKind` variant (`BeforeModel`).
    pub(crate) kind: &'static str,
    /// The `HookSet` constant (`BEFORE_MODEL`).
    pub(crate) flag: &'static str,
    /// Its shape.
    pub(crate) shape: Shape,
}

const fn lifecycle(attr: &'static str, kind: &'static str, flag: &'static str, value: Option<Value>) -> Hook {
    Hook {
        attr,
        method: attr,
        kind,
        flag,
        shape: Shape::Lifecycle { value, sync: None },
    }
}

const fn mutable(ty: &'static str) -> Option<Value> {
    Some(Value { ty, mutable: true })
}

/// Every hook attribute.
pub(crate) const HOOKS: &[Hook] = &[
    lifecycle("before_agent", "BeforeAgent", "BEFORE_AGENT", None),
    lifecycle("after_agent", "AfterAgent", "AFTER_AGENT", mutable("AgentRun")),
    lifecycle(
        "before_steering",
        "BeforeSteering",
        "BEFORE_STEERING",
        mutable("SteeringCommand"),
    ),
    lifecycle(
        "after_steering",
        "AfterSteering",
        "AFTER_STEERING",
        mutable("SteeringOutcome"),
    ),
    lifecycle("before_model", "BeforeModel", "BEFORE_MODEL", mutable("ModelRequest")),
    lifecycle(
        "before_model_stream",
        "BeforeModelStream",
        "BEFORE_MODEL_STREAM",
        mutable("ModelRequest"),
    ),
    Hook {
        attr: "on_model_delta",
        method: "on_model_delta",
        kind: "OnModelDelta",
        flag: "ON_MODEL_DELTA",
        shape: Shape::Lifecycle {
            value: mutable("ModelDelta"),
            sync: Some(Sync {
                method: "on_model_delta_sync",
                flag: "SYNC_MODEL_DELTA",
            }),
        },
    },
    lifecycle("after_model", "AfterModel", "AFTER_MODEL", mutable("ModelResponse")),
    lifecycle(
        "on_tool_batch",
        "OnToolBatch",
        "ON_TOOL_BATCH",
        mutable("PreparedBatch"),
    ),
    lifecycle("before_tool", "BeforeTool", "BEFORE_TOOL", mutable("ToolCall")),
    lifecycle(
        "on_prepared_tool_calls",
        "OnPreparedToolCalls",
        "ON_PREPARED_TOOL_CALLS",
        mutable("PreparedBatch"),
    ),
    Hook {
        attr: "on_tool_delta",
        method: "on_tool_delta",
        kind: "OnToolDelta",
        flag: "ON_TOOL_DELTA",
        shape: Shape::Lifecycle {
            value: mutable("ToolDelta"),
            sync: Some(Sync {
                method: "on_tool_delta_sync",
                flag: "SYNC_TOOL_DELTA",
            }),
        },
    },
    lifecycle("after_tool", "AfterTool", "AFTER_TOOL", mutable("ToolResult")),
    lifecycle("pre_compact", "PreCompact", "PRE_COMPACT", mutable("CompactionPlan")),
    lifecycle(
        "on_error",
        "OnError",
        "ON_ERROR",
        Some(Value {
            ty: "TinyAgentsError",
            mutable: false,
        }),
    ),
    Hook {
        attr: "wrap_model",
        method: "wrap_model",
        kind: "WrapModel",
        flag: "WRAP_MODEL",
        shape: Shape::Wrap(Wrap {
            input: "ModelRequest",
            input_var: "request",
            edit_hook: "before_model",
            handler: "ModelHandler",
            outcome: "MiddlewareModelOutcome",
            plain: "ModelResponse",
        }),
    },
    Hook {
        attr: "wrap_tool",
        method: "wrap_tool",
        kind: "WrapTool",
        flag: "WRAP_TOOL",
        shape: Shape::Wrap(Wrap {
            input: "ToolCall",
            input_var: "call",
            edit_hook: "before_tool",
            handler: "ToolHandler",
            outcome: "MiddlewareToolOutcome",
            plain: "ToolResult",
        }),
    },
    Hook {
        attr: "dynamic_prompt",
        method: "before_model",
        kind: "BeforeModel",
        flag: "BEFORE_MODEL",
        shape: Shape::DynamicPrompt,
    },
];

/// The runtime types a parameter may name; a reference to any other type is the state.
pub(crate) const RUNTIME_TYPES: &[&str] = &[
    "RunContext",
    "AgentRun",
    "SteeringCommand",
    "SteeringOutcome",
    "ModelRequest",
    "ModelResponse",
    "ModelDelta",
    "PreparedBatch",
    "ToolCall",
    "ToolDelta",
    "ToolResult",
    "CompactionPlan",
    "TinyAgentsError",
    "ModelHandler",
    "ToolHandler",
];

/// The type name of a run state's cell (`&RunState<T>`).
pub(crate) const RUN_STATE_CELL: &str = "RunState";

/// The type name of the run context.
pub(crate) const RUN_CONTEXT: &str = "RunContext";

impl Hook {
    /// The row of the attribute named `attr`.
    pub(crate) fn by_attr(attr: &str) -> Option<&'static Hook> {
        HOOKS.iter().find(|h| h.attr == attr)
    }

    /// The attribute as written: `#[before_model]`.
    pub(crate) fn display(&self) -> String {
        format!("#[{}]", self.attr)
    }

    /// The value the hook passes to a lifecycle method (the request for a dynamic prompt).
    pub(crate) fn value(&self) -> Option<Value> {
        match self.shape {
            Shape::Lifecycle { value, .. } => value,
            Shape::DynamicPrompt => Some(Value {
                ty: "ModelRequest",
                mutable: true,
            }),
            Shape::Wrap(_) => None,
        }
    }

    /// The wrap row, for wrap hooks.
    pub(crate) fn wrap(&self) -> Option<Wrap> {
        match self.shape {
            Shape::Wrap(w) => Some(w),
            _ => None,
        }
    }

    /// The sync fast path, for delta hooks.
    pub(crate) fn sync(&self) -> Option<Sync> {
        match self.shape {
            Shape::Lifecycle { sync, .. } => sync,
            _ => None,
        }
    }

    /// Why this hook cannot borrow the run state as `&mut T` for its whole
    /// call (`None`: the loop runs it one at a time in a run, so it can).
    pub(crate) fn shared_state_only(&self) -> Option<&'static str> {
        match self.attr {
            "wrap_model" | "wrap_tool" => Some(
                "holds it across `next`, where the hooks the wrapped call runs (this middleware's own included) \
                 may need it",
            ),
            "after_tool" | "on_tool_delta" => Some("runs concurrently for the calls of one batch"),
            "on_error" => Some("may run inside one of the concurrent tool calls of a batch"),
            _ => None,
        }
    }

    /// The parameters this hook accepts, for error messages.
    pub(crate) fn accepted(&self) -> String {
        let mut out = vec!["`&mut RunContext<C>`".to_owned(), "the state `&S`".to_owned()];
        match self.shape {
            Shape::Lifecycle { value: Some(v), .. } if v.mutable => out.push(format!("`&mut {}`", v.ty)),
            Shape::Lifecycle { value: Some(v), .. } => out.push(format!("`&{}`", v.ty)),
            Shape::Lifecycle { value: None, .. } => {}
            Shape::DynamicPrompt => out.push("`&ModelRequest`".to_owned()),
            Shape::Wrap(w) => {
                out.push(format!("`{}` by value", w.input));
                out.push(format!("`next: {}<'_, S, C>`", w.handler));
            }
        }
        out.join(", ")
    }

    /// The return type to write, for error messages.
    pub(crate) fn expected_return(&self) -> String {
        match self.shape {
            Shape::Lifecycle { .. } => "Result<()>".to_owned(),
            Shape::Wrap(w) => format!("Result<{}>` or `Result<{}>", w.plain, w.outcome),
            Shape::DynamicPrompt => "String` or `Result<String>".to_owned(),
        }
    }
}

/// The facts of every row, as a Rust expression the runtime's test compares
/// with its own table: `&[(method, kind, flag, value type, mutable, sync)]`.
pub(crate) fn facts() -> proc_macro2::TokenStream {
    let rows = HOOKS.iter().map(|h| {
        let (method, kind, flag) = (h.method, h.kind, h.flag);
        let attr_is_method = h.attr == h.method;
        let value = match h.value().filter(|_| !matches!(h.shape, Shape::DynamicPrompt)) {
            Some(v) => {
                let (ty, mutable) = (v.ty, v.mutable);
                (quote::quote!(::core::option::Option::Some(#ty)), mutable)
            }
            None => (quote::quote!(::core::option::Option::None), false),
        };
        let (value, mutable) = value;
        let sync = match h.sync() {
            Some(s) => {
                let (m, f) = (s.method, s.flag);
                quote::quote!(::core::option::Option::Some((#m, #f)))
            }
            None => quote::quote!(::core::option::Option::None),
        };
        // A row whose attribute is not its method (`dynamic_prompt`) keeps its attribute, so the test can tell it.
        let name = if attr_is_method { method } else { h.attr };
        quote::quote!((#name, #kind, #flag, #value, #mutable, #sync))
    });
    quote::quote!(&[#(#rows),*])
}
