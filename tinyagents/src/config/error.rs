//! [`ConfigError`], [`ConfigErrors`] and [`ConfigViolation`]: what is wrong with
//! a configuration, where, and why.

use std::fmt;

use serde_json::Value;

use crate::harness::error::TinyAgentsError;
use crate::harness::shorten::shorten;

/// One problem in a configuration: the path of the key, the value given
/// (when there was one) and the rule it breaks, phrased as the fix.
///
/// Displays as ``  `middleware[2].max_steps` = 0: must be in 1..=100  ``.
/// What the file gave is echoed bounded and escaped: the value cut after
/// [`ECHO_VALUE`] characters and the path after [`ECHO_PATH`] (each with an
/// ellipsis and the full length), control characters escaped, so a 10 MB
/// value or a key holding terminal escapes cannot flood or forge a log.
///
/// ```
/// use tinyagents::config::ConfigError;
///
/// let e = ConfigError::new("level", Some("x".repeat(10_000_000).into()), "must be one of `info`, `debug`");
/// let shown = e.to_string();
/// assert!(shown.len() < 200 && shown.contains("… (10000002 bytes in all)"), "{shown}");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError {
    /// Where: `middleware[2].max_steps` (empty for the document itself).
    pub path: String,
    /// The value given, when the key was present.
    pub value: Option<Value>,
    /// The rule broken, phrased so it says what to do.
    pub rule: String,
}

impl ConfigError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, value: Option<Value>, rule: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            value,
            rule: rule.into(),
        }
    }
}

/// The most characters of a value echoed in an error.
pub const ECHO_VALUE: usize = 80;
/// The most characters of a path echoed in an error.
pub const ECHO_PATH: usize = 200;
/// The most characters of a rule shown (rules may quote a parser's message).
const ECHO_RULE: usize = 2000;

/// A value as an error shows it: its JSON text, shortened.
pub(crate) fn echo_value(value: &Value) -> String {
    shorten(&value.to_string(), ECHO_VALUE)
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.path.is_empty() {
            write!(f, "`{}`", shorten(&self.path, ECHO_PATH))?;
            if let Some(v) = &self.value {
                write!(f, " = {}", echo_value(v))?;
            }
            f.write_str(": ")?;
        }
        f.write_str(&shorten(&self.rule, ECHO_RULE))
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in a configuration (never empty when returned as an error).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ConfigErrors(Vec<ConfigError>);

impl ConfigErrors {
    /// No errors yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// One error.
    pub fn one(error: ConfigError) -> Self {
        Self(vec![error])
    }

    /// Adds an error.
    pub fn push(&mut self, error: ConfigError) {
        self.0.push(error);
    }

    /// Adds all of `other`.
    pub fn extend(&mut self, other: ConfigErrors) {
        self.0.extend(other.0);
    }

    /// The errors, in the order found.
    pub fn errors(&self) -> &[ConfigError] {
        &self.0
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `Ok(())` when empty, else `Err(self)`.
    pub fn into_result(self) -> Result<(), Self> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl From<ConfigError> for ConfigErrors {
    fn from(error: ConfigError) -> Self {
        Self::one(error)
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [] => f.write_str("no configuration errors"),
            [one] => write!(f, "invalid configuration: {one}"),
            many => {
                write!(f, "{} configuration errors:", many.len())?;
                for e in many {
                    write!(f, "\n  - {e}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigErrors> for TinyAgentsError {
    fn from(errors: ConfigErrors) -> Self {
        match errors.0.as_slice() {
            [one] if !one.path.is_empty() => {
                let rule = shorten(&one.rule, ECHO_RULE);
                let message = match &one.value {
                    Some(v) => format!("got {}: {rule}", echo_value(v)),
                    None => rule,
                };
                TinyAgentsError::config_at(shorten(&one.path, ECHO_PATH), message)
            }
            _ => TinyAgentsError::config(errors.to_string()),
        }
    }
}

/// A cross-field rule broken, returned by a config's `validate = path` fn;
/// the derive adds the path.
///
/// ```
/// use tinyagents::config::ConfigViolation;
///
/// let v = ConfigViolation::new("warn_at", "must be below `compact_at`").with_value(90);
/// assert_eq!(v.key, "warn_at");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigViolation {
    /// The key to blame.
    pub key: String,
    /// The rule, phrased as the fix.
    pub rule: String,
    /// The value to show, when useful.
    pub value: Option<Value>,
}

impl ConfigViolation {
    /// A violation of `rule` by `key`.
    pub fn new(key: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            rule: rule.into(),
            value: None,
        }
    }

    /// The same violation showing `value`.
    pub fn with_value(mut self, value: impl serde::Serialize) -> Self {
        self.value = serde_json::to_value(value).ok();
        self
    }
}
