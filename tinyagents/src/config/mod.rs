//! Config-driven middleware: typed config structs (`#[derive(MiddlewareConfig)]`)
//! and the registry that builds stacks from TOML.
//!
//! A config struct derives [`MiddlewareConfig`]: it parses from a JSON value
//! or a TOML table with unknown keys rejected, validates every field
//! (`range`, `finite`, `non_negative`, `one_of`, a cross-field `validate`
//! fn; a [`ConfigEnum`] field takes only its enum's names), and reports *every* problem at once as [`ConfigErrors`], each naming
//! the path (`middleware[2].max_steps`), the value given and the rule broken.
//! With `builds = T` it is also a [`BuildMiddleware`] factory (`T: From<Config>`),
//! which a [`MiddlewareRegistry`] maps from its `type = "…"` key.
//!
//! Two keys of every table are reserved: `type` names the middleware and
//! `enabled = false` leaves it out of the stack.
//!
//! ```
//! use tinyagents::config::{from_toml_str, MiddlewareConfig};
//! use tinyagents::MiddlewareConfig;
//!
//! /// Caps model turns.
//! #[derive(Debug, MiddlewareConfig)]
//! #[config(type = "step_cap")]
//! struct StepCapConfig {
//!     /// Most model turns per run.
//!     #[config(default = 10, range = 1..=100)]
//!     max_steps: u32,
//! }
//!
//! let ok: StepCapConfig = from_toml_str("max_steps = 5").unwrap();
//! assert_eq!(ok.max_steps, 5);
//! let err = from_toml_str::<StepCapConfig>("max_steps = 0\nmax_step = 1").unwrap_err();
//! assert_eq!(err.len(), 2);
//! assert!(err.to_string().contains("`max_steps` = 0: must be in 1..=100"));
//! assert!(err.to_string().contains("did you mean `max_steps`?"));
//! assert_eq!(StepCapConfig::FIELDS[0].rules, "range = 1..=100");
//! ```

mod builtins;
pub(crate) mod choice;
mod error;
mod file;
pub(crate) mod reader;
mod registry;
pub(crate) mod suggest;
mod traits;

pub(crate) use builtins::builtin_docs;
#[cfg(all(unix, feature = "commands"))]
pub(crate) use builtins::default_shell_rules;
pub use builtins::{BUILTIN_TYPES, CODE_ONLY, DEFAULT_ON, DEPRECATED_TYPES, NOT_COMPILED};
pub use choice::{choice_index, ConfigEnum};
pub use error::{ConfigError, ConfigErrors, ConfigViolation, ECHO_PATH, ECHO_VALUE};
pub use file::{ConfigFile, FileErrors, LocatedError, Location, FILE_SECTIONS};
pub use reader::ConfigValue;
pub use registry::MiddlewareRegistry;
pub use traits::{from_toml_str, from_value, BuildMiddleware, BuildShared, MiddlewareConfig};

/// Keys every config table may carry, read by the runtime and never by a field.
pub const RESERVED_KEYS: [&str; 2] = ["type", "enabled"];

/// `prefix.key`, or `key` at the root.
pub(crate) fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}
