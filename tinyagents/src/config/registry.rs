//! [`MiddlewareRegistry`]: config `type` → factory, and stacks built from a
//! `[[middleware]]` list.

use std::collections::BTreeMap;

use serde_json::Value;

use super::error::{ConfigError, ConfigErrors};
use super::suggest::{did_you_mean, list};
use super::traits::{toml_to_value, BuildMiddleware, BuildShared};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::middleware::{ConfigFieldDoc, Middleware, MiddlewareStack};
use crate::store::SharedStores;

/// Builds one middleware from its table into a stack.
type Factory<S, C> = fn(&Value, &str, &mut MiddlewareStack<S, C>) -> std::result::Result<(), ConfigErrors>;

/// Builds a middleware that keeps its shared state in the registry's stores.
type SharedFactory<S, C> =
    fn(&Value, &str, &SharedStores, &mut MiddlewareStack<S, C>) -> std::result::Result<(), ConfigErrors>;

struct Entry<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    build: Factory<S, C>,
    /// How it is built when the registry has shared stores (`None`: as without).
    shared: Option<SharedFactory<S, C>>,
    fields: &'static [ConfigFieldDoc],
}

/// The middleware a configuration can name, by their `type` key.
///
/// ```
/// use tinyagents::config::MiddlewareRegistry;
/// use tinyagents::prelude::*;
/// use tinyagents::MiddlewareConfig;
///
/// #[derive(Debug, MiddlewareConfig)]
/// #[config(type = "greeting", builds = Greeting)]
/// struct GreetingConfig {
///     /// The text added to the system prompt.
///     #[config(default = "Be kind.")]
///     text: String,
/// }
///
/// struct Greeting(String);
///
/// impl From<GreetingConfig> for Greeting {
///     fn from(c: GreetingConfig) -> Self {
///         Greeting(c.text)
///     }
/// }
///
/// #[middleware(name = "greeting")]
/// impl Greeting {
///     #[before_model]
///     fn greet(&self, request: &mut ModelRequest) -> Result<()> {
///         request.set_volatile("greeting", self.0.clone());
///         Ok(())
///     }
/// }
///
/// let registry: MiddlewareRegistry<()> = MiddlewareRegistry::new().with::<GreetingConfig>().unwrap();
/// let stack = registry
///     .stack_from_toml("[[middleware]]\ntype = \"greeting\"\ntext = \"Hello.\"")
///     .unwrap();
/// assert_eq!(stack.names(), ["greeting"]);
///
/// let err = registry.stack_from_toml("[[middleware]]\ntype = \"greting\"").unwrap_err();
/// assert!(err.to_string().contains("did you mean `greeting`?"));
/// ```
pub struct MiddlewareRegistry<S, C = ()>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    factories: BTreeMap<&'static str, Entry<S, C>>,
    /// Middleware on by default in stacks built from a file: `type` and table, in order.
    defaults: Vec<(&'static str, Value)>,
    /// The stores of an agent file's `[store]`, opened: the middleware that
    /// can share their state are built to keep it there.
    stores: Option<SharedStores>,
}

impl<S, C> Default for MiddlewareRegistry<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn default() -> Self {
        Self {
            factories: BTreeMap::new(),
            defaults: Vec::new(),
            stores: None,
        }
    }
}

impl<S, C> std::fmt::Debug for MiddlewareRegistry<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiddlewareRegistry")
            .field("types", &self.factories.keys().collect::<Vec<_>>())
            .field("defaults", &self.defaults.iter().map(|(t, _)| t).collect::<Vec<_>>())
            .finish()
    }
}

fn build_one<T, S, C>(
    value: &Value,
    path: &str,
    stack: &mut MiddlewareStack<S, C>,
) -> std::result::Result<(), ConfigErrors>
where
    T: BuildMiddleware,
    T::Middleware: Middleware<S, C>,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    let config = T::from_value(value, path)?;
    stack
        .add(config.build())
        .map(|_| ())
        .map_err(|e| ConfigError::new(path, None, e.to_string()).into())
}

fn build_one_shared<T, S, C>(
    value: &Value,
    path: &str,
    stores: &SharedStores,
    stack: &mut MiddlewareStack<S, C>,
) -> std::result::Result<(), ConfigErrors>
where
    T: BuildShared,
    T::Middleware: Middleware<S, C>,
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    let config = T::from_value(value, path)?;
    let middleware = config
        .build_shared(stores)
        .map_err(|e| ConfigError::new(path, None, e.to_string()))?;
    stack
        .add(middleware)
        .map(|_| ())
        .map_err(|e| ConfigError::new(path, None, e.to_string()).into())
}

/// The reserved `enabled` key of a table: absent or `true` builds it.
fn enabled(map: &serde_json::Map<String, Value>, path: &str) -> std::result::Result<bool, ConfigErrors> {
    match map.get("enabled") {
        None | Some(Value::Bool(true)) => Ok(true),
        Some(Value::Bool(false)) => Ok(false),
        Some(other) => Err(ConfigError::new(
            super::join(path, "enabled"),
            Some(other.clone()),
            "must be `true` or `false`",
        )
        .into()),
    }
}

/// Builds a table whose `type` a driver factory of
/// [`MIDDLEWARE_REGISTRY`](crate::compat::querymt::MIDDLEWARE_REGISTRY) answers to.
fn build_driver<S, C>(
    factory: &dyn crate::compat::querymt::MiddlewareFactory,
    map: &serde_json::Map<String, Value>,
    table: &Value,
    path: &str,
    stack: &mut MiddlewareStack<S, C>,
) -> std::result::Result<bool, ConfigErrors>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    use crate::compat::querymt::{AgentConfig, DriverMiddleware};
    if !enabled(map, path)? {
        return Ok(false);
    }
    let driver = factory.create(table, &AgentConfig::default()).map_err(|e| {
        ConfigError::new(
            path,
            None,
            format!("the `{}` factory refused it: {e}", factory.type_name()),
        )
    })?;
    stack
        .add(DriverMiddleware::shared(driver))
        .map(|_| true)
        .map_err(|e| ConfigError::new(path, None, e.to_string()).into())
}

impl<S, C> MiddlewareRegistry<S, C>
where
    S: Send + Sync + 'static,
    C: Send + Sync + 'static,
{
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers the config type `T` under `T::TYPE`; a type registered twice is a `Config` error.
    pub fn register<T>(&mut self) -> Result<&mut Self>
    where
        T: BuildMiddleware,
        T::Middleware: Middleware<S, C>,
    {
        if self.factories.contains_key(T::TYPE) {
            return Err(TinyAgentsError::config(format!(
                "a middleware config of type `{}` is already registered; each `type` names one middleware",
                T::TYPE
            )));
        }
        self.factories.insert(
            T::TYPE,
            Entry {
                build: build_one::<T, S, C>,
                shared: None,
                fields: T::FIELDS,
            },
        );
        Ok(self)
    }

    /// Registers `T` as [`register`](Self::register) does, and to be built
    /// with [`BuildShared::build_shared`] when the registry has shared
    /// stores ([`set_stores`](Self::set_stores)).
    pub fn register_shared<T>(&mut self) -> Result<&mut Self>
    where
        T: BuildShared,
        T::Middleware: Middleware<S, C>,
    {
        self.register::<T>()?;
        self.share::<T>();
        Ok(self)
    }

    /// Builds the registered `T` with `build_shared` when the registry has stores.
    pub(crate) fn share<T>(&mut self)
    where
        T: BuildShared,
        T::Middleware: Middleware<S, C>,
    {
        if let Some(entry) = self.factories.get_mut(T::TYPE) {
            entry.shared = Some(build_one_shared::<T, S, C>);
        }
    }

    /// Builds from now on every middleware whose type shares state
    /// ([`register_shared`](Self::register_shared)) to keep it in `stores`:
    /// what an agent file's `[store] url` does once the store is opened
    /// (the built-ins: `rate_limiter`'s buckets on Redis; a thread's
    /// `max_steps` of `limits`, and the `thread_limit` counts of
    /// `model_call_limit` and `tool_call_limit`, in the store's ledger).
    ///
    /// ```
    /// use tinyagents::config::MiddlewareRegistry;
    /// use tinyagents::store::StoreUrl;
    ///
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// # let dir = std::env::temp_dir().join(format!("ta-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let url = format!("sqlite:{}", dir.join("agent.db").display());
    /// # #[cfg(feature = "sqlite")] {
    /// let stores = StoreUrl::parse(&url).unwrap().open().await?;
    /// let mut registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    /// registry.set_stores(stores);
    /// assert_eq!(registry.shared_types().collect::<Vec<_>>(), ["limits", "model_call_limit", "rate_limiter", "tool_call_limit"]);
    /// # }
    /// # Ok::<(), tinyagents::TinyAgentsError>(()) }).unwrap();
    /// ```
    pub fn set_stores(&mut self, stores: SharedStores) -> &mut Self {
        self.stores = Some(stores);
        self
    }

    /// The registered types that keep state in shared stores when the registry has them, sorted.
    pub fn shared_types(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.factories
            .iter()
            .filter(|(_, e)| e.shared.is_some())
            .map(|(k, _)| *k)
    }

    /// Builder form of [`register`](Self::register).
    pub fn with<T>(mut self) -> Result<Self>
    where
        T: BuildMiddleware,
        T::Middleware: Middleware<S, C>,
    {
        self.register::<T>()?;
        Ok(self)
    }

    /// The registered `type` keys, sorted.
    pub fn types(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.factories.keys().copied()
    }

    /// The registered `type` key a table's `type` names: itself when
    /// registered, the new key when it is a renamed built-in's old key (see
    /// [`DEPRECATED_TYPES`](super::DEPRECATED_TYPES)), else `None`.
    pub fn canonical_type(&self, type_key: &str) -> Option<&'static str> {
        match self.factories.get_key_value(type_key) {
            Some((&key, _)) => Some(key),
            None => self.renamed(type_key).map(|(new, _)| new),
        }
    }

    /// The new key and note of an old, renamed key whose new key is registered.
    fn renamed(&self, type_key: &str) -> Option<(&'static str, &'static str)> {
        if self.factories.contains_key(type_key) {
            return None;
        }
        super::builtins::DEPRECATED_TYPES
            .iter()
            .find(|(old, new, _)| *old == type_key && self.factories.contains_key(new))
            .map(|(_, new, note)| (*new, *note))
    }

    /// The config fields of a registered type.
    pub fn fields(&self, type_key: &str) -> Option<&'static [ConfigFieldDoc]> {
        self.factories.get(type_key).map(|e| e.fields)
    }

    /// Builds the middleware a table describes into `stack`, unless it says
    /// `enabled = false`; returns whether one was added. `path` prefixes errors.
    pub fn build_into(
        &self,
        table: &Value,
        path: &str,
        stack: &mut MiddlewareStack<S, C>,
    ) -> std::result::Result<bool, ConfigErrors> {
        let Some(map) = table.as_object() else {
            return Err(ConfigError::new(path, Some(table.clone()), "must be a table with a `type` key").into());
        };
        let type_path = super::join(path, "type");
        let type_key = match map.get("type") {
            Some(Value::String(t)) => t.as_str(),
            Some(other) => {
                return Err(
                    ConfigError::new(type_path, Some(other.clone()), "must be a string naming a middleware").into(),
                )
            }
            None => {
                return Err(ConfigError::new(
                    type_path,
                    None,
                    format!(
                        "required key is missing: name the middleware with `type = \"…\"`; the registered types are {}",
                        list(self.types())
                    ),
                )
                .into())
            }
        };
        // A renamed built-in's old key: read as the new one, with a notice.
        let renamed;
        let (type_key, table) = match self.renamed(type_key) {
            Some((new, note)) => {
                tracing::warn!(
                    target: "tinyagents::config",
                    "`{type_path}` = \"{type_key}\" is deprecated: this middleware's type is now `{new}`{note}; \
                     write `type = \"{new}\"` (the old key is read as the new one for now)"
                );
                let mut map = map.clone();
                map.insert("type".to_owned(), Value::String(new.to_owned()));
                renamed = Value::Object(map);
                (new, &renamed)
            }
            None => (type_key, table),
        };
        let driver_factory = crate::compat::querymt::MIDDLEWARE_REGISTRY.get(type_key);
        let Some(entry) = self.factories.get(type_key) else {
            if let Some(factory) = driver_factory {
                return build_driver(factory.as_ref(), map, table, path, stack);
            }
            if let Some((_, feature)) = super::builtins::NOT_COMPILED.iter().find(|(t, _)| *t == type_key) {
                return Err(ConfigError::new(
                    type_path,
                    Some(Value::String(type_key.to_owned())),
                    format!(
                        "this built-in is not in this build: tinyagents was built without its `{feature}` feature; \
                         turn it on (`tinyagents = {{ features = [\"{feature}\"] }}`, on by default)"
                    ),
                )
                .into());
            }
            if super::builtins::CODE_ONLY.contains(&type_key) {
                return Err(ConfigError::new(
                    type_path,
                    Some(Value::String(type_key.to_owned())),
                    "this built-in needs something only code can give (a model or a predicate), so a \
                     configuration cannot build it: build it in code from its config and add it to the stack",
                )
                .into());
            }
            return Err(ConfigError::new(
                type_path,
                Some(Value::String(type_key.to_owned())),
                format!(
                    "unknown middleware type; the registered types are {}{}",
                    list(self.types()),
                    did_you_mean(type_key, self.types())
                ),
            )
            .into());
        };
        if driver_factory.is_some() {
            return Err(ConfigError::new(
                type_path,
                Some(Value::String(type_key.to_owned())),
                "both a built-in and a driver factory registered in `MIDDLEWARE_REGISTRY` have this type, so \
                 which to build is ambiguous: rename the factory's `type_name`",
            )
            .into());
        }
        if !enabled(map, path)? {
            return Ok(false);
        }
        match (&self.stores, entry.shared) {
            (Some(stores), Some(shared)) => shared(table, path, stores, stack)?,
            _ => (entry.build)(table, path, stack)?,
        }
        Ok(true)
    }

    /// Turns the registered type `type_key` on by default, with the options
    /// in `table`: a stack built by [`build_stack`](Self::build_stack) (or from
    /// a file) holds it unless the configuration has an entry of the same
    /// `type`, which replaces the default instance (at the entry's position),
    /// or that entry says `enabled = false`, which removes it. Defaults come
    /// first, in the order they were set. Setting a type again replaces its
    /// options. The table is checked now: a bad one is a `Config` error.
    ///
    /// ```
    /// use serde_json::json;
    /// use tinyagents::config::MiddlewareRegistry;
    ///
    /// let mut registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    /// for t in ["parallel_edit_guard", "output_limit_recovery"] {
    ///     registry.clear_default(t);
    /// }
    /// registry.set_default("logging", json!({ "level": "debug" })).unwrap();
    /// assert_eq!(registry.stack_from_toml("").unwrap().names(), ["logging"]);
    /// let off = "[[middleware]]\ntype = \"logging\"\nenabled = false";
    /// assert!(registry.stack_from_toml(off).unwrap().is_empty());
    /// assert!(registry.set_default("logging", json!({ "level": "loud" })).is_err());
    /// ```
    pub fn set_default(&mut self, type_key: &str, table: Value) -> Result<&mut Self> {
        let Some((&key, entry)) = self.factories.get_key_value(type_key) else {
            return Err(TinyAgentsError::config(format!(
                "cannot turn `{type_key}` on by default: no middleware config of that type is registered; \
                 the registered types are {}{}",
                list(self.types()),
                did_you_mean(type_key, self.types())
            )));
        };
        let mut table = table;
        if let Value::Object(map) = &mut table {
            map.entry("type").or_insert_with(|| Value::String(key.to_owned()));
        }
        let mut scratch = MiddlewareStack::empty();
        (entry.build)(&table, &format!("defaults.{key}"), &mut scratch).map_err(TinyAgentsError::from)?;
        self.defaults.retain(|(t, _)| *t != key);
        self.defaults.push((key, table));
        Ok(self)
    }

    /// Stops `type_key` being on by default.
    pub fn clear_default(&mut self, type_key: &str) -> &mut Self {
        self.defaults.retain(|(t, _)| *t != type_key);
        self
    }

    /// The types on by default, in the order they are added to a stack.
    pub fn defaults(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.defaults.iter().map(|(t, _)| *t)
    }

    /// Builds a stack from `{ "middleware": [ {type = …, …}, … ], "hooks": [ … ] }`:
    /// first the [defaults](Self::set_default) no entry names, then the
    /// entries in list order (ordering constraints still apply), then, when
    /// there is a `hooks` list, one [`external_hooks`](crate::external_hooks)
    /// middleware running those commands (it orders itself before every
    /// other middleware, so the guards judge its rewrites). Other keys are
    /// left to the caller.
    /// Every error of every entry is reported, each under its path
    /// (`middleware[i].key`, `hooks[i].key`); nothing half-built is returned.
    pub fn build_stack(&self, config: &Value) -> std::result::Result<MiddlewareStack<S, C>, ConfigErrors> {
        let mut stack = MiddlewareStack::empty();
        let mut errors = ConfigErrors::new();
        let listed: &[Value] = match config.get("middleware") {
            None => &[],
            Some(Value::Array(a)) => a,
            Some(other) => {
                errors.push(ConfigError::new(
                    "middleware",
                    Some(other.clone()),
                    "must be a list of tables: write `[[middleware]]` entries",
                ));
                &[]
            }
        };
        // `preset = "…"`: the preset's tables, with the listed entries laid over them
        let entries: Vec<(String, Value)> = match config.get("preset") {
            None => listed
                .iter()
                .enumerate()
                .map(|(i, e)| (format!("middleware[{i}]"), e.clone()))
                .collect(),
            Some(Value::String(name)) => match crate::presets::Preset::from_name(name) {
                Ok(preset) => preset.merge(listed),
                Err(_) => {
                    errors.push(ConfigError::new(
                        "preset",
                        Some(Value::String(name.clone())),
                        crate::presets::unknown(name),
                    ));
                    Vec::new()
                }
            },
            Some(other) => {
                errors.push(ConfigError::new(
                    "preset",
                    Some(other.clone()),
                    format!("must be a preset's name, one of {}", list(crate::presets::names())),
                ));
                Vec::new()
            }
        };
        let named: Vec<&str> = entries
            .iter()
            .filter_map(|(_, e)| e.get("type").and_then(Value::as_str))
            .map(|t| self.canonical_type(t).unwrap_or(t))
            .collect();
        for (type_key, table) in self.defaults.iter().filter(|(t, _)| !named.contains(t)) {
            if let Err(e) = self.build_into(table, &format!("defaults.{type_key}"), &mut stack) {
                errors.extend(e);
            }
        }
        // code that adds a middleware of a default's name later replaces it
        stack.mark_defaults();
        for (path, entry) in &entries {
            if let Err(e) = self.build_into(entry, path, &mut stack) {
                errors.extend(e);
            }
        }
        if let Some(hooks) = config.get("hooks") {
            match crate::external_hooks::ExternalHooksConfig::from_list(hooks, "hooks") {
                Ok(config) => {
                    if let Err(e) = stack.add(crate::external_hooks::ExternalHooksMiddleware::from(config)) {
                        errors.push(ConfigError::new("hooks", None, e.to_string()));
                    }
                }
                Err(e) => errors.extend(e),
            }
        }
        errors.into_result().map(|()| stack)
    }

    /// [`build_stack`](Self::build_stack) from TOML text.
    pub fn stack_from_toml(&self, text: &str) -> std::result::Result<MiddlewareStack<S, C>, ConfigErrors> {
        self.build_stack(&toml_to_value(text)?)
    }
}
