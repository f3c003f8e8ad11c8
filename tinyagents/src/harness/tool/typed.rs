//! Typed tool arguments: JSON Schemas made from Rust types (`schemars`), and
//! the model's arguments read back into those types with errors that name
//! the tool, the argument and the type expected.
//!
//! The [`#[tool]`](macro@crate::tool) attribute generates code against this
//! module; a hand-written [`Tool`](super::Tool) can use it too:
//!
//! ```
//! use serde_json::json;
//! use tinyagents::harness::tool::typed::{parameters_schema, ToolArg, ToolArgs};
//!
//! const ARGS: &[ToolArg] = &[
//!     ToolArg::new::<String>("city").describe("The city."),
//!     ToolArg::new::<Option<u32>>("days").optional(),
//! ];
//! let schema = parameters_schema(ARGS, false);
//! assert_eq!(schema["required"], json!(["city"]));
//! assert_eq!(schema["additionalProperties"], json!(false));
//!
//! let arguments = json!({"city": "Lyon"});
//! let args = ToolArgs::new("weather", &arguments, ARGS, false).unwrap();
//! let city: String = args.get("city", "String", true).unwrap();
//! let days: Option<u32> = args.get("days", "Option<u32>", false).unwrap();
//! assert_eq!((city.as_str(), days), ("Lyon", None));
//!
//! let bad = json!({"city": "Lyon", "days": "three"});
//! let err = ToolArgs::new("weather", &bad, ARGS, false).unwrap()
//!     .get::<Option<u32>>("days", "Option<u32>", false).unwrap_err();
//! assert!(err.to_string().contains("argument `days` of tool `weather` is not a valid `Option<u32>`"));
//! ```

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::config::suggest::{did_you_mean, list};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::shorten::shorten;

/// The longest argument name or value quoted in an error (a hostile model
/// may send a megabyte-long key).
const QUOTE_MAX: usize = 80;

/// One argument of a typed tool: its name, description, whether it is
/// required, and how to make its JSON Schema.
#[derive(Debug, Clone, Copy)]
pub struct ToolArg {
    /// The argument's name (a property of the arguments object).
    pub name: &'static str,
    /// What the argument means, for the model.
    pub description: Option<&'static str>,
    /// Whether the model must send it (`false` for `Option<T>` arguments).
    pub required: bool,
    /// Its schema.
    pub schema: fn(&mut SchemaGenerator) -> Schema,
}

impl ToolArg {
    /// A required argument `name` of type `T`.
    pub const fn new<T: JsonSchema>(name: &'static str) -> Self {
        Self {
            name,
            description: None,
            required: true,
            schema: subschema::<T>,
        }
    }

    /// The same argument with a description.
    pub const fn describe(mut self, description: &'static str) -> Self {
        self.description = Some(description);
        self
    }

    /// The same argument, optional (its type reads a missing value, as `Option<T>` does).
    pub const fn optional(mut self) -> Self {
        self.required = false;
        self
    }
}

fn subschema<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

/// The generator every typed schema is made with: JSON Schema 2020-12,
/// subschemas inlined (a recursive type keeps its `$ref`s into `$defs`), no
/// `$schema` key (providers refuse it in tool parameters).
fn generator() -> SchemaGenerator {
    schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator()
}

/// The JSON Schema of a tool's arguments object: one property per
/// argument, the required ones listed, and — unless `allow_unknown` —
/// `"additionalProperties": false`.
pub fn parameters_schema(args: &[ToolArg], allow_unknown: bool) -> Value {
    let mut generator = generator();
    let mut properties = Map::new();
    let mut required = Vec::new();
    for arg in args {
        let mut schema = (arg.schema)(&mut generator).to_value();
        if let (Some(text), Some(obj)) = (arg.description, schema.as_object_mut()) {
            obj.insert("description".into(), Value::String(text.to_owned()));
        }
        properties.insert(arg.name.to_owned(), schema);
        if arg.required {
            required.push(Value::String(arg.name.to_owned()));
        }
    }
    let mut root = Map::new();
    root.insert("type".into(), "object".into());
    root.insert("properties".into(), Value::Object(properties));
    root.insert("required".into(), Value::Array(required));
    if !allow_unknown {
        root.insert("additionalProperties".into(), Value::Bool(false));
    }
    let defs = generator.take_definitions(true);
    if !defs.is_empty() {
        root.insert("$defs".into(), Value::Object(defs));
    }
    Value::Object(root)
}

/// The JSON Schema of `T`, for tool parameters or a structured reply:
/// subschemas inlined, no `$schema` key.
///
/// ```
/// use serde_json::json;
///
/// #[derive(schemars::JsonSchema)]
/// struct City {
///     name: String,
/// }
/// let schema = tinyagents::harness::tool::typed::schema_for_type::<City>();
/// assert_eq!(schema["properties"]["name"]["type"], json!("string"));
/// assert_eq!(schema["required"], json!(["name"]));
/// ```
pub fn schema_for_type<T: JsonSchema + ?Sized>() -> Value {
    let mut value = generator().into_root_schema_for::<T>().to_value();
    if let Some(obj) = value.as_object_mut() {
        obj.remove("$schema");
    }
    value
}

/// A JSON type name for an error message (`a string`, `an array`).
fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The model's arguments to a typed tool, checked to be an object whose
/// keys are all known (unless unknown ones are allowed).
#[derive(Debug, Clone, Copy)]
pub struct ToolArgs<'a> {
    tool: &'a str,
    object: &'a Map<String, Value>,
}

impl<'a> ToolArgs<'a> {
    /// Checks `arguments` for tool `tool`: a `Tool` error when it is not an
    /// object, or (unless `allow_unknown`) has a key that is not one of `args`.
    pub fn new(tool: &'a str, arguments: &'a Value, args: &[ToolArg], allow_unknown: bool) -> Result<Self> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        let object = match arguments {
            Value::Object(object) => object,
            // A model that sends nothing for a tool without required arguments.
            Value::Null if args.iter().all(|a| !a.required) => EMPTY.get_or_init(Map::new),
            other => {
                return Err(TinyAgentsError::tool(
                    tool,
                    format!(
                        "the arguments must be a JSON object with the keys {}, not {}; send an object",
                        list(args.iter().map(|a| a.name)),
                        kind(other)
                    ),
                ))
            }
        };
        if !allow_unknown && let Some(key) = object.keys().find(|k| !args.iter().any(|a| a.name == k.as_str())) {
            return Err(TinyAgentsError::tool(
                tool,
                format!(
                    "tool `{tool}` has no argument `{}`: its arguments are {}{}; unknown arguments are \
                         refused, send only these",
                    shorten(key, QUOTE_MAX),
                    list(args.iter().map(|a| a.name)),
                    did_you_mean(key, args.iter().map(|a| a.name))
                ),
            ));
        }
        Ok(Self { tool, object })
    }

    /// The argument `name` as a `T` (`ty` is the type as written, for the
    /// error). A missing argument reads as JSON `null` when it is not
    /// `required` (so `Option<T>` is `None`); a missing required argument
    /// and a value that is not a `T` are `Tool` errors naming the tool, the
    /// argument and `ty`.
    pub fn get<T: DeserializeOwned>(&self, name: &str, ty: &str, required: bool) -> Result<T> {
        let value = match self.object.get(name) {
            Some(value) => value,
            None if required => {
                return Err(TinyAgentsError::tool(
                    self.tool,
                    format!(
                        "argument `{name}` of tool `{}` is missing: it is required, of type `{ty}`; send it",
                        self.tool
                    ),
                ))
            }
            None => &Value::Null,
        };
        T::deserialize(value).map_err(|e| {
            TinyAgentsError::tool(
                self.tool,
                format!(
                    "argument `{name}` of tool `{}` is not a valid `{ty}`: {}; send a value of that type (see the \
                     tool's schema)",
                    self.tool,
                    shorten(&e.to_string(), 2 * QUOTE_MAX)
                ),
            )
        })
    }

    /// Every argument as one `T` (a struct deriving `Deserialize` and
    /// `JsonSchema`): a `Tool` error naming the tool, the type and serde's
    /// reason (with the field it failed on).
    pub fn whole<T: DeserializeOwned>(tool: &str, arguments: &Value, ty: &str) -> Result<T> {
        let null_as_empty;
        let value = if arguments.is_null() {
            null_as_empty = Value::Object(Map::new());
            &null_as_empty
        } else {
            arguments
        };
        T::deserialize(value).map_err(|e| {
            TinyAgentsError::tool(
                tool,
                format!(
                    "the arguments of tool `{tool}` are not a valid `{ty}`: {}; send them as the tool's schema says",
                    shorten(&e.to_string(), 2 * QUOTE_MAX)
                ),
            )
        })
    }
}

// ----- what `#[tool]` generates code against (re-exported in `__private`) -----

/// The parameter schema of an `#[args]` tool: `T`'s schema, closed to
/// unknown keys (`"additionalProperties": false`) when `T` lists its
/// properties and says nothing itself.
#[doc(hidden)]
pub fn whole_schema<T: JsonSchema + ?Sized>() -> Value {
    let mut schema = schema_for_type::<T>();
    if let Some(obj) = schema.as_object_mut()
        && obj.contains_key("properties")
        && !obj.contains_key("additionalProperties")
    {
        obj.insert("additionalProperties".into(), Value::Bool(false));
    }
    schema
}

/// Refuses an `#[args]` tool's arguments that are not an object or carry a
/// key its schema does not list (when the schema is closed).
#[doc(hidden)]
pub fn check_whole_keys(tool: &str, arguments: &Value, schema: &super::ToolSchema) -> Result<()> {
    let closed = schema.parameters.get("additionalProperties") == Some(&Value::Bool(false));
    let Some(properties) = schema.parameters.get("properties").and_then(Value::as_object) else {
        return Ok(());
    };
    let object = match arguments {
        Value::Object(object) => object,
        Value::Null => return Ok(()),
        other => {
            return Err(TinyAgentsError::tool(
                tool,
                format!(
                    "the arguments must be a JSON object with the keys {}, not {}; send an object",
                    list(properties.keys().map(String::as_str)),
                    kind(other)
                ),
            ))
        }
    };
    if closed && let Some(key) = object.keys().find(|k| !properties.contains_key(k.as_str())) {
        return Err(TinyAgentsError::tool(
            tool,
            format!(
                "tool `{tool}` has no argument `{}`: its arguments are {}{}; unknown arguments are refused, \
                     send only these",
                shorten(key, QUOTE_MAX),
                list(properties.keys().map(String::as_str)),
                did_you_mean(key, properties.keys().map(String::as_str))
            ),
        ));
    }
    Ok(())
}

/// The files the `#[file(...)]` arguments of a call name.
#[doc(hidden)]
pub fn declared_paths(arguments: &Value, keys: &[(&str, super::FileAccessMode)]) -> Vec<super::FileAccess> {
    keys.iter()
        .flat_map(|(key, mode)| {
            super::registry::paths_at(arguments, key)
                .into_iter()
                .map(|path| super::FileAccess {
                    path: path.to_owned(),
                    mode: *mode,
                })
        })
        .collect()
}

/// A tool fn's successful value, on its way to a [`ToolOutput`](super::ToolOutput).
#[doc(hidden)]
pub struct Returned<T>(std::cell::Cell<Option<T>>);

impl<T> Returned<T> {
    /// Wraps the value.
    pub fn new(value: T) -> Self {
        Self(std::cell::Cell::new(Some(value)))
    }

    fn take(&self, tool: &str) -> Result<T> {
        self.0
            .take()
            .ok_or_else(|| TinyAgentsError::tool(tool, "the tool's value was read twice (a bug in tinyagents)"))
    }
}

/// Text and outputs go to the model as they are (chosen first).
#[doc(hidden)]
pub trait ReturnDirect {
    /// The output.
    fn tool_output(&self, tool: &str) -> Result<super::ToolOutput>;
}

impl<T: Into<super::ToolOutput>> ReturnDirect for Returned<T> {
    fn tool_output(&self, tool: &str) -> Result<super::ToolOutput> {
        self.take(tool).map(Into::into)
    }
}

/// Any other `Serialize` value goes as JSON (text and `data`).
#[doc(hidden)]
pub trait ReturnJson {
    /// The output.
    fn tool_output(&self, tool: &str) -> Result<super::ToolOutput>;
}

impl<T: serde::Serialize> ReturnJson for &Returned<T> {
    fn tool_output(&self, tool: &str) -> Result<super::ToolOutput> {
        let value = self.take(tool)?;
        serde_json::to_value(&value).map(super::ToolOutput::from).map_err(|e| {
            TinyAgentsError::tool(
                tool,
                format!("its result could not be turned into JSON: {e}; return a type that serialises"),
            )
        })
    }
}

/// A tool fn's error, on its way to a [`TinyAgentsError`].
#[doc(hidden)]
pub struct Failed<E>(pub E);

/// A `TinyAgentsError` keeps its class (chosen first).
#[doc(hidden)]
pub trait FailKeep {
    /// The error.
    fn tool_error(&self, tool: &str) -> TinyAgentsError;
}

impl FailKeep for Failed<TinyAgentsError> {
    fn tool_error(&self, _tool: &str) -> TinyAgentsError {
        self.0.clone()
    }
}

/// Any other error is a `Tool` error with its text.
#[doc(hidden)]
pub trait FailDisplay {
    /// The error.
    fn tool_error(&self, tool: &str) -> TinyAgentsError;
}

impl<E: std::fmt::Display> FailDisplay for &Failed<E> {
    fn tool_error(&self, tool: &str) -> TinyAgentsError {
        TinyAgentsError::tool(tool, self.0.to_string())
    }
}
