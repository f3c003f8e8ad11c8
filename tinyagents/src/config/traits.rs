//! [`MiddlewareConfig`] (derived), [`BuildMiddleware`] (the factory) and the
//! entry points [`from_toml_str`] and [`from_value`].

use serde_json::Value;

use super::error::{ConfigError, ConfigErrors};
use crate::harness::middleware::ConfigFieldDoc;

/// A typed, validated middleware config. Derive it with
/// `#[derive(MiddlewareConfig)]`; see the [module docs](crate::config).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a middleware config (it does not implement `MiddlewareConfig`)",
    label = "not a `MiddlewareConfig`",
    note = "a config is a struct with named fields and `#[derive(MiddlewareConfig)]` plus `#[config(type = \"my_middleware\")]`; `config = X` in a middleware attribute names such a struct"
)]
pub trait MiddlewareConfig: Sized + Send + Sync + 'static {
    /// The `type = "…"` key that names this middleware in a config table.
    const TYPE: &'static str;

    /// The fields, for the documentation table.
    const FIELDS: &'static [ConfigFieldDoc];

    /// Parses and validates a table; `path` prefixes every error
    /// (`middleware[2]`; empty at the root). Unknown keys are rejected, the
    /// reserved keys `type` and `enabled` are allowed, and every error is reported.
    fn from_value(value: &Value, path: &str) -> Result<Self, ConfigErrors>;

    /// Checks the field rules and the cross-field `validate` fn, for a config
    /// built in code.
    fn check(&self, path: &str) -> Result<(), ConfigErrors>;

    /// The config with every default (an error when a key has no default).
    fn defaults() -> Result<Self, ConfigErrors> {
        Self::from_value(&Value::Object(serde_json::Map::new()), "")
    }
}

/// A config that builds its middleware: derived from `#[config(builds = T)]`
/// with `T: From<Config>` (do fallible checks in `validate`, so `from` cannot fail).
#[diagnostic::on_unimplemented(
    message = "`{Self}` does not build a middleware (it does not implement `BuildMiddleware`)",
    label = "no `#[config(builds = …)]`",
    note = "a registry builds a middleware from its config: add `#[config(builds = MyMiddleware)]` to the config struct, with `impl From<MyConfig> for MyMiddleware`"
)]
pub trait BuildMiddleware: MiddlewareConfig {
    /// The middleware it builds.
    type Middleware: Send + Sync + 'static;

    /// Builds the middleware.
    fn build(self) -> Self::Middleware;
}

/// A config whose middleware can keep state that many processes share (a
/// rate limiter's buckets, a thread's call counts) in the stores an agent
/// file's `[store] url` opens. Register it with
/// [`MiddlewareRegistry::register_shared`](super::MiddlewareRegistry::register_shared);
/// a registry given stores ([`set_stores`](super::MiddlewareRegistry::set_stores))
/// builds it with [`build_shared`](Self::build_shared) instead of
/// [`build`](BuildMiddleware::build).
pub trait BuildShared: BuildMiddleware {
    /// Builds the middleware keeping its shared state in `stores`. An error
    /// (a store that cannot keep what the config asks to share) is the
    /// entry's build error.
    fn build_shared(self, stores: &crate::store::SharedStores) -> crate::Result<Self::Middleware>;
}

/// Parses a config from a TOML table (the text of one `[[middleware]]` entry or a whole file).
pub fn from_toml_str<T: MiddlewareConfig>(text: &str) -> Result<T, ConfigErrors> {
    T::from_value(&toml_to_value(text)?, "")
}

/// Parses a config from a JSON value, with errors prefixed by `path`.
pub fn from_value<T: MiddlewareConfig>(value: &Value, path: &str) -> Result<T, ConfigErrors> {
    T::from_value(value, path)
}

/// A TOML document as a JSON value. Non-finite floats, which JSON cannot
/// hold, are carried as the strings `nan`, `inf` and `-inf` (float fields
/// read them back); datetimes become their TOML text.
pub(crate) fn toml_to_value(text: &str) -> Result<Value, ConfigErrors> {
    let table: toml::Table = toml::from_str(text)
        .map_err(|e| ConfigError::new("", None, format!("invalid TOML: {}", e.message().trim_end())))?;
    Ok(toml_table_to_value(table))
}

/// A parsed TOML table as the JSON value configs read.
pub(crate) fn toml_table_to_value(table: toml::Table) -> Value {
    convert(toml::Value::Table(table))
}

fn convert(value: toml::Value) -> Value {
    use super::reader::{INF, NAN, NEG_INF};
    match value {
        toml::Value::String(s) => Value::String(s),
        toml::Value::Integer(i) => Value::from(i),
        toml::Value::Float(f) if f.is_nan() => Value::from(NAN),
        toml::Value::Float(f) if f.is_infinite() => Value::from(if f > 0.0 { INF } else { NEG_INF }),
        toml::Value::Float(f) => Value::from(f),
        toml::Value::Boolean(b) => Value::Bool(b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.into_iter().map(convert).collect()),
        toml::Value::Table(t) => Value::Object(t.into_iter().map(|(k, v)| (k, convert(v))).collect()),
    }
}
