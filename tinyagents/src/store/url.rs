//! [`StoreUrl`]: the `[store] url` of an agent file, and [`SharedStores`],
//! what opening it gives.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::LedgerStore;
use super::RateLimitStore;
use crate::config::{ConfigError, ConfigErrors};
use crate::graph::Checkpointer;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::secrets::{mask_url as redact, redactor};

/// Where shared state lives, as an agent file names it (`[store] url`):
/// `redis://HOST[:PORT][/DB]` (or `rediss://`), `postgres://…` (or
/// `postgresql://…`, any libpq URL), or `sqlite:PATH` (a file, created if
/// missing; relative to the working directory).
///
/// Parsing checks the scheme and that the build has the feature the
/// scheme needs: a URL whose feature is not compiled in is an error naming
/// the URL and the feature. Displaying a URL hides its password and its
/// secret query values ([`mask_url`](crate::harness::secrets::mask_url)), and
/// parsing teaches them to the process's
/// [`Redactor`](crate::harness::secrets::Redactor), so an error of the
/// store's client that quotes them has them masked.
///
/// ```
/// use tinyagents::store::StoreUrl;
///
/// let url = StoreUrl::parse("sqlite:state/agent.db");
/// # #[cfg(feature = "sqlite")]
/// assert_eq!(url.unwrap().feature(), "sqlite");
/// let err = StoreUrl::parse("mysql://db").unwrap_err();
/// assert!(err.contains("`mysql://db`"), "{err}");
/// // A password never shows in a message.
/// let err = StoreUrl::parse("mongodb://me:hunter2@db").unwrap_err();
/// assert!(!err.contains("hunter2") && err.contains("me:***@db"), "{err}");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// A Redis server (feature `redis`): rate-limit buckets, budgets, counters.
    Redis(String),
    /// A PostgreSQL server (feature `postgres`): checkpoints (and approvals), budgets, counters.
    Postgres(String),
    /// A SQLite file (feature `sqlite`): checkpoints (and approvals), budgets, counters, for one machine.
    Sqlite(PathBuf),
}

fn compiled(feature: &str) -> bool {
    [
        ("redis", cfg!(feature = "redis")),
        ("postgres", cfg!(feature = "postgres")),
        ("sqlite", cfg!(feature = "sqlite")),
    ]
    .iter()
    .any(|&(name, on)| on && name == feature)
}

impl StoreUrl {
    /// Parses and checks a store URL; `Err` is a message naming the URL
    /// (password hidden), the rule and the fix.
    pub fn parse(url: &str) -> std::result::Result<Self, String> {
        redactor().add_url(url);
        let shown = redact(url);
        let parsed = if let Some(path) = url.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() || path.contains('\0') {
                return Err(format!(
                    "store url `{shown}`: a SQLite store is `sqlite:PATH`, a file path (such as `sqlite:state/agent.db`)"
                ));
            }
            Self::Sqlite(PathBuf::from(path))
        } else if url.starts_with("redis://") || url.starts_with("rediss://") {
            Self::Redis(url.to_owned())
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Self::Postgres(url.to_owned())
        } else {
            return Err(format!(
                "store url `{shown}`: the scheme is not one of `redis://`, `rediss://`, `postgres://`, \
                 `postgresql://` or `sqlite:`; name a Redis or PostgreSQL server, or a SQLite file"
            ));
        };
        let feature = parsed.feature();
        if !compiled(feature) {
            return Err(format!(
                "store url `{shown}` needs the `{feature}` feature of the `tinyagents` crate, which this build \
                 does not have: build with `--features {feature}` (or `tinyagents/{feature}` from another crate)"
            ));
        }
        Ok(parsed)
    }

    /// The `[store]` section of an agent file (`None` when absent): a table
    /// with one key, `url`, a string [`parse`](Self::parse) accepts. Each
    /// problem is a [`ConfigError`] at `store` or `store.url`.
    ///
    /// ```
    /// use tinyagents::store::StoreUrl;
    ///
    /// assert!(StoreUrl::of_section(None).unwrap().is_none());
    /// let err = StoreUrl::of_section(Some(&serde_json::json!({"url": "ftp://x", "pool": 3}))).unwrap_err();
    /// assert_eq!(err.len(), 2);
    /// ```
    ///
    /// # Errors
    /// Every problem of the section.
    pub fn of_section(section: Option<&Value>) -> std::result::Result<Option<Self>, ConfigErrors> {
        let Some(section) = section else { return Ok(None) };
        let mut errors = ConfigErrors::new();
        let Some(table) = section.as_object() else {
            errors.push(ConfigError::new(
                "store",
                Some(section.clone()),
                "must be a table: `[store]` with `url = \"redis://…\" | \"postgres://…\" | \"sqlite:PATH\"`",
            ));
            return Err(errors);
        };
        for key in table.keys().filter(|k| *k != "url") {
            errors.push(ConfigError::new(
                format!("store.{key}"),
                None,
                "unknown key: `[store]` takes only `url`",
            ));
        }
        let url = match table.get("url") {
            None => {
                errors.push(ConfigError::new(
                    "store.url",
                    None,
                    "is required: `url = \"redis://…\" | \"postgres://…\" | \"sqlite:PATH\"`",
                ));
                None
            }
            Some(Value::String(url)) => match Self::parse(url) {
                Ok(url) => Some(url),
                Err(why) => {
                    errors.push(ConfigError::new("store.url", Some(Value::String(redact(url))), why));
                    None
                }
            },
            Some(other) => {
                errors.push(ConfigError::new("store.url", Some(other.clone()), "must be a string"));
                None
            }
        };
        errors.into_result()?;
        Ok(url)
    }

    /// The cargo feature this store needs.
    pub fn feature(&self) -> &'static str {
        match self {
            Self::Redis(_) => "redis",
            Self::Postgres(_) => "postgres",
            Self::Sqlite(_) => "sqlite",
        }
    }

    /// Connects (or opens the file), checking the server answers and
    /// creating the tables a SQL store needs.
    ///
    /// # Errors
    /// A `Config` error naming the URL (password hidden) and the feature
    /// when the server cannot be reached or the file opened.
    pub async fn open(&self) -> Result<SharedStores> {
        match self {
            #[cfg(feature = "redis")]
            Self::Redis(url) => {
                let store = Arc::new(super::RedisStore::connect(url).await?);
                Ok(SharedStores {
                    url: self.clone(),
                    rate_limits: Some(store.clone()),
                    ledger: store.clone(),
                    checkpointer: Some(store),
                })
            }
            #[cfg(feature = "postgres")]
            Self::Postgres(url) => {
                let store = Arc::new(super::PostgresStore::connect(url).await?);
                Ok(SharedStores {
                    url: self.clone(),
                    rate_limits: None,
                    ledger: store.clone(),
                    checkpointer: Some(store),
                })
            }
            #[cfg(feature = "sqlite")]
            Self::Sqlite(path) => {
                let store = Arc::new(super::SqliteStore::open(path).await?);
                Ok(SharedStores {
                    url: self.clone(),
                    rate_limits: None,
                    ledger: store.clone(),
                    checkpointer: Some(store),
                })
            }
            #[allow(unreachable_patterns)]
            _ => Err(TinyAgentsError::config(format!(
                "store url `{self}` needs the `{}` feature of the `tinyagents` crate, which this build does not have",
                self.feature()
            ))),
        }
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Redis(url) | Self::Postgres(url) => f.write_str(&redact(url)),
            Self::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
        }
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreUrl({self})")
    }
}

/// What an opened [`StoreUrl`] serves: a ledger and checkpoints (and so
/// pending approvals) always, rate-limit buckets on Redis.
#[derive(Clone)]
pub struct SharedStores {
    url: StoreUrl,
    rate_limits: Option<Arc<dyn RateLimitStore>>,
    ledger: Arc<dyn LedgerStore>,
    checkpointer: Option<Arc<dyn Checkpointer>>,
}

impl fmt::Debug for SharedStores {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedStores")
            .field("url", &self.url)
            .field("rate_limits", &self.rate_limits.is_some())
            .field("checkpointer", &self.checkpointer.is_some())
            .finish_non_exhaustive()
    }
}

impl SharedStores {
    /// The URL it was opened from.
    pub fn url(&self) -> &StoreUrl {
        &self.url
    }

    /// The budgets' and counters' ledger.
    pub fn ledger(&self) -> Arc<dyn LedgerStore> {
        self.ledger.clone()
    }

    /// The rate-limit buckets, when this store keeps them.
    ///
    /// # Errors
    /// A `Config` error naming the URL when it does not (only Redis does).
    pub fn rate_limits(&self) -> Result<Arc<dyn RateLimitStore>> {
        self.rate_limits.clone().ok_or_else(|| {
            TinyAgentsError::config(format!(
                "store `{}` keeps no rate-limit buckets (only a `redis://` store does); name a Redis store, or \
                 keep the limiter's buckets in process",
                self.url
            ))
        })
    }

    /// The checkpointer, when this store keeps checkpoints (every store does).
    ///
    /// # Errors
    /// A `Config` error naming the URL when it does not.
    pub fn checkpointer(&self) -> Result<Arc<dyn Checkpointer>> {
        self.checkpointer.clone().ok_or_else(|| {
            TinyAgentsError::config(format!(
                "store `{}` keeps no checkpoints; name a `postgres://`, `sqlite:` or `redis://` store",
                self.url
            ))
        })
    }
}
