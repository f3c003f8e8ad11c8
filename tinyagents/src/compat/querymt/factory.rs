//! [`MiddlewareFactory`] and [`MIDDLEWARE_REGISTRY`]: drivers built from a
//! `[[middleware]]` table by its `type`.

use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock, RwLock};

use serde_json::Value;

use super::config::AgentConfig;
use super::driver::MiddlewareDriver;
use super::error::{MiddlewareError, Result};

/// Builds a driver from its config table.
pub trait MiddlewareFactory: Send + Sync {
    /// The `type` key the factory answers to (`my_middleware`).
    fn type_name(&self) -> &'static str;

    /// A driver for `config` (the whole `[[middleware]]` table, `type` and
    /// `enabled` included) in the agent `agent_config` describes. A table
    /// it cannot read is an error (a `ConfigError`, or any error: it is
    /// reported as the entry's configuration error).
    fn create(&self, config: &Value, agent_config: &AgentConfig) -> Result<Arc<dyn MiddlewareDriver>>;
}

/// The factories a configuration can name, by `type`: the type of
/// [`MIDDLEWARE_REGISTRY`].
///
/// A stack built from a configuration (an agent file, a
/// [`MiddlewareRegistry`](crate::config::MiddlewareRegistry)) builds an
/// entry whose `type` no built-in has from the factory registered under it
/// in [`MIDDLEWARE_REGISTRY`]. A factory named like a built-in never
/// shadows it: a configuration naming that type is refused until the
/// factory is renamed.
#[derive(Default)]
pub struct DriverRegistry {
    factories: RwLock<BTreeMap<&'static str, Arc<dyn MiddlewareFactory>>>,
}

impl std::fmt::Debug for DriverRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DriverRegistry").field("types", &self.types()).finish()
    }
}

/// The process-wide registry of driver factories.
///
/// ```
/// use std::sync::Arc;
/// use serde_json::{json, Value};
/// use tinyagents::compat::querymt::prelude::*;
///
/// struct Noop;
/// impl MiddlewareDriver for Noop {}
///
/// struct NoopFactory;
/// impl MiddlewareFactory for NoopFactory {
///     fn type_name(&self) -> &'static str {
///         "noop_driver_doc"
///     }
///     fn create(&self, _config: &Value, _agent: &AgentConfig) -> Result<Arc<dyn MiddlewareDriver>> {
///         Ok(Arc::new(Noop))
///     }
/// }
///
/// MIDDLEWARE_REGISTRY.register(Arc::new(NoopFactory));
/// let driver = MIDDLEWARE_REGISTRY
///     .create("noop_driver_doc", &json!({ "type": "noop_driver_doc" }), &AgentConfig::default())
///     .unwrap();
/// assert_eq!(driver.name(), "Noop");
/// assert!(MIDDLEWARE_REGISTRY.create("nope", &json!({}), &AgentConfig::default()).is_err());
/// ```
pub static MIDDLEWARE_REGISTRY: LazyLock<DriverRegistry> = LazyLock::new(DriverRegistry::new);

impl DriverRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<&'static str, Arc<dyn MiddlewareFactory>>> {
        // a panic while holding the lock cannot leave the map half-written
        self.factories.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `factory` under its [`type_name`](MiddlewareFactory::type_name);
    /// a later registration of the same type replaces the earlier one.
    pub fn register(&self, factory: Arc<dyn MiddlewareFactory>) {
        let mut map = self.factories.write().unwrap_or_else(|e| e.into_inner());
        map.insert(factory.type_name(), factory);
    }

    /// The registered types, sorted.
    pub fn types(&self) -> Vec<&'static str> {
        self.read().keys().copied().collect()
    }

    /// Whether a factory answers to `type_name`.
    pub fn contains(&self, type_name: &str) -> bool {
        self.read().contains_key(type_name)
    }

    /// The factory registered under `type_name`.
    pub fn get(&self, type_name: &str) -> Option<Arc<dyn MiddlewareFactory>> {
        self.read().get(type_name).cloned()
    }

    /// Builds the driver of `type_name` from `config`. An unknown type is a
    /// `ConfigError` listing the registered ones.
    pub fn create(
        &self,
        type_name: &str,
        config: &Value,
        agent_config: &AgentConfig,
    ) -> Result<Arc<dyn MiddlewareDriver>> {
        let Some(factory) = self.get(type_name) else {
            let types = self.types();
            let listed = if types.is_empty() {
                "none is registered".to_owned()
            } else {
                format!(
                    "the registered types are {}",
                    types.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
                )
            };
            return Err(MiddlewareError::config(format!(
                "no middleware factory has the type `{type_name}`; {listed}: register one with \
                 `MIDDLEWARE_REGISTRY.register(Arc::new(MyFactory))` before building"
            )));
        };
        factory.create(config, agent_config)
    }
}
