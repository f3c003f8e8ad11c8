//! Every keyword the DSL's attributes accept, as named constants, so the
//! parser, the validator and the error messages spell them one way.

/// `name = "…"`: the middleware's name (default: the type's name).
pub(crate) const NAME: &str = "name";
/// `type_name = Ident`: the generated type's name (free fns only).
pub(crate) const TYPE_NAME: &str = "type_name";
/// `before = [..]`: run before these middleware.
pub(crate) const BEFORE: &str = "before";
/// `after = [..]`: run after these middleware.
pub(crate) const AFTER: &str = "after";
/// `before_if_present = [..]`: run before these middleware when they are registered.
pub(crate) const BEFORE_IF_PRESENT: &str = "before_if_present";
/// `after_if_present = [..]`: run after these middleware when they are registered.
pub(crate) const AFTER_IF_PRESENT: &str = "after_if_present";
/// `can_jump_to = [model, tools, end]`: the jumps the middleware may request.
pub(crate) const CAN_JUMP_TO: &str = "can_jump_to";
/// `doc(...)`: the documentation record.
pub(crate) const DOC: &str = "doc";
/// `builtin`: every doc field is mandatory.
pub(crate) const BUILTIN: &str = "builtin";
/// `config = Type`: the `#[derive(MiddlewareConfig)]` struct that configures it.
pub(crate) const CONFIG: &str = "config";

/// `run_state = Type`: the middleware's typed per-run state (one value per
/// run and registration; hooks take `&mut Type` or `&RunState<Type>`).
pub(crate) const RUN_STATE: &str = "run_state";
/// The keys whose value is a type (parsed as one, so `Vec<u32>` reads whole).
pub(crate) const TYPE_KEYS: &[&str] = &[RUN_STATE];

/// `tools = path`: a method `fn(&self) -> Vec<Arc<dyn Tool>>` giving the
/// tools the middleware contributes (`#[middleware]` blocks only).
pub(crate) const TOOLS: &str = "tools";

/// The keys of a hook attribute on a free fn.
pub(crate) const FN_KEYS: &[&str] = &[
    NAME,
    TYPE_NAME,
    BEFORE,
    AFTER,
    BEFORE_IF_PRESENT,
    AFTER_IF_PRESENT,
    CAN_JUMP_TO,
    DOC,
    BUILTIN,
    CONFIG,
    RUN_STATE,
];
/// The keys of `#[middleware(...)]`.
pub(crate) const BLOCK_KEYS: &[&str] = &[
    NAME,
    BEFORE,
    AFTER,
    BEFORE_IF_PRESENT,
    AFTER_IF_PRESENT,
    CAN_JUMP_TO,
    DOC,
    BUILTIN,
    CONFIG,
    TOOLS,
    RUN_STATE,
];

/// `doc(summary = "…")`.
pub(crate) const SUMMARY: &str = "summary";
/// `doc(mutation = "…")`.
pub(crate) const MUTATION: &str = "mutation";
/// `doc(events = "…")`.
pub(crate) const EVENTS: &str = "events";
/// `doc(failure = "…")`.
pub(crate) const FAILURE: &str = "failure";
/// `doc(streaming = "…")`.
pub(crate) const STREAMING: &str = "streaming";
/// `doc(cache = "…")`.
pub(crate) const CACHE: &str = "cache";
/// `doc(retries = "…")`.
pub(crate) const RETRIES: &str = "retries";
/// The seven fields of `doc(...)`, in the order of the documentation table.
pub(crate) const DOC_KEYS: &[&str] = &[SUMMARY, MUTATION, EVENTS, FAILURE, STREAMING, CACHE, RETRIES];

/// `can_jump_to = [model]`.
pub(crate) const JUMP_MODEL: &str = "model";
/// `can_jump_to = [tools]`.
pub(crate) const JUMP_TOOLS: &str = "tools";
/// `can_jump_to = [end]`.
pub(crate) const JUMP_END: &str = "end";
/// Every jump target, with the `JumpSet` constant it sets.
pub(crate) const JUMP_TARGETS: &[(&str, &str)] = &[(JUMP_MODEL, "MODEL"), (JUMP_TOOLS, "TOOLS"), (JUMP_END, "END")];

/// The attribute of `#[derive(MiddlewareConfig)]` (on the struct and its fields).
pub(crate) const CONFIG_ATTR: &str = "config";
/// `#[config(type = "…")]`: the `type` key of a config table.
pub(crate) const TYPE: &str = "type";
/// `#[config(builds = Type)]`: the middleware the config builds.
pub(crate) const BUILDS: &str = "builds";
/// `#[config(validate = path)]`: a cross-field check.
pub(crate) const VALIDATE: &str = "validate";
/// The keys of `#[config(...)]` on the struct.
pub(crate) const STRUCT_KEYS: &[&str] = &[TYPE, BUILDS, VALIDATE];

/// `#[config(default = expr)]`.
pub(crate) const DEFAULT: &str = "default";
/// `#[config(range = a..=b)]`.
pub(crate) const RANGE: &str = "range";
/// `#[config(finite)]`.
pub(crate) const FINITE: &str = "finite";
/// `#[config(non_negative)]`.
pub(crate) const NON_NEGATIVE: &str = "non_negative";
/// `#[config(one_of = [..])]`.
pub(crate) const ONE_OF: &str = "one_of";
/// The keys of `#[config(...)]` on a field.
pub(crate) const FIELD_KEYS: &[&str] = &[DEFAULT, RANGE, FINITE, NON_NEGATIVE, ONE_OF];

/// The serde attribute, read on config fields for its `rename` and `alias`.
pub(crate) const SERDE_ATTR: &str = "serde";
/// `#[serde(rename = "…")]`: the field's key in a table.
pub(crate) const RENAME: &str = "rename";
/// `#[serde(alias = "…")]`: another key the field is read under.
pub(crate) const ALIAS: &str = "alias";

/// Keys of a config table the runtime reads itself, never a field's.
pub(crate) const RESERVED_FIELDS: &[&str] = &["type", "enabled"];
