//! The runtime half of `#[derive(MiddlewareConfig)]`: [`ConfigReader`] reads
//! a table field by field and [`ConfigChecker`] applies the rules, both
//! collecting every error. Generated code calls them through
//! `tinyagents::__private`; they are not a public API.

use std::ops::RangeBounds;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::{ConfigError, ConfigErrors, ConfigViolation};
use super::suggest::{did_you_mean, list};
use super::{join, RESERVED_KEYS};

/// Reads the keys of one table.
pub struct ConfigReader<'a> {
    map: &'a Map<String, Value>,
    path: &'a str,
    errors: ConfigErrors,
}

impl<'a> ConfigReader<'a> {
    /// Starts reading `value` (which must be a table) for a config of type
    /// `type_key` with these field keys; records unknown keys, a mistyped
    /// `enabled` and a `type` naming another middleware.
    pub fn new(value: &'a Value, path: &'a str, type_key: &str, keys: &[&str]) -> Result<Self, ConfigErrors> {
        let Some(map) = value.as_object() else {
            return Err(ConfigError::new(path, Some(value.clone()), "must be a table of keys (`key = value`)").into());
        };
        let mut errors = ConfigErrors::new();
        for (key, v) in map {
            match key.as_str() {
                "type" => {
                    if v.as_str() != Some(type_key) {
                        errors.push(ConfigError::new(
                            join(path, key),
                            Some(v.clone()),
                            format!("this table configures `{type_key}`: write `type = \"{type_key}\"` or remove it"),
                        ));
                    }
                }
                "enabled" => {
                    if !v.is_boolean() {
                        errors.push(ConfigError::new(
                            join(path, key),
                            Some(v.clone()),
                            "must be `true` or `false`",
                        ));
                    }
                }
                k if keys.contains(&k) => {}
                k => {
                    let valid = keys.iter().copied().chain(RESERVED_KEYS);
                    errors.push(ConfigError::new(
                        join(path, k),
                        Some(v.clone()),
                        format!(
                            "unknown key; the valid keys are {}{}",
                            list(valid),
                            did_you_mean(k, keys.iter().copied())
                        ),
                    ));
                }
            }
        }
        Ok(Self { map, path, errors })
    }

    fn parse<T: DeserializeOwned>(&mut self, key: &str, ty: &str, v: &Value) -> Option<T> {
        match <T as Deserialize<'_>>::deserialize(v) {
            Ok(t) => Some(t),
            Err(e) => {
                self.errors.push(ConfigError::new(
                    join(self.path, key),
                    Some(v.clone()),
                    format!("must be a `{ty}` ({e})"),
                ));
                None
            }
        }
    }

    /// A key without a default: missing is an error.
    pub fn required<T: DeserializeOwned>(&mut self, key: &str, ty: &str) -> Option<T> {
        match self.map.get(key) {
            Some(v) => self.parse(key, ty, v),
            None => {
                self.errors.push(ConfigError::new(
                    join(self.path, key),
                    None,
                    format!("required key is missing: add `{key} = …` (a `{ty}`)"),
                ));
                None
            }
        }
    }

    /// A key with a default.
    pub fn or_default<T: DeserializeOwned>(&mut self, key: &str, ty: &str, default: impl FnOnce() -> T) -> Option<T> {
        match self.map.get(key) {
            Some(v) => self.parse(key, ty, v),
            None => Some(default()),
        }
    }

    /// The errors recorded (for when a field could not be read).
    pub fn into_errors(self) -> ConfigErrors {
        self.errors
    }

    /// `Ok(())` when nothing was recorded.
    pub fn finish(self) -> Result<(), ConfigErrors> {
        self.errors.into_result()
    }
}

/// Applies field rules, collecting every violation.
pub struct ConfigChecker<'a> {
    path: &'a str,
    errors: ConfigErrors,
}

fn render<T: Serialize>(value: &T) -> Option<Value> {
    serde_json::to_value(value).ok()
}

impl<'a> ConfigChecker<'a> {
    /// A checker for the table at `path`.
    pub fn new(path: &'a str) -> Self {
        Self {
            path,
            errors: ConfigErrors::new(),
        }
    }

    fn fail(&mut self, key: &str, value: Option<Value>, rule: String) {
        self.errors.push(ConfigError::new(join(self.path, key), value, rule));
    }

    /// `range = a..=b`.
    pub fn range<T: PartialOrd + Serialize>(&mut self, key: &str, value: &T, range: impl RangeBounds<T>, text: &str) {
        if !range.contains(value) {
            self.fail(key, render(value), format!("must be in {text}"));
        }
    }

    /// `finite`.
    pub fn finite<T: ConfigFloat>(&mut self, key: &str, value: &T) {
        if !value.finite() {
            self.fail(
                key,
                Some(value.render()),
                "must be a finite number (not NaN or infinite)".to_owned(),
            );
        }
    }

    /// `non_negative`.
    pub fn non_negative<T: PartialOrd + Default + Serialize>(&mut self, key: &str, value: &T) {
        // `!(v >= 0)` also refuses NaN
        if !matches!(
            value.partial_cmp(&T::default()),
            Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
        ) {
            self.fail(key, render(value), "must not be negative".to_owned());
        }
    }

    /// `one_of = [..]`.
    pub fn one_of<T: PartialEq<U> + Serialize, U>(&mut self, key: &str, value: &T, allowed: &[U], text: &str) {
        if !allowed.iter().any(|a| value == a) {
            self.fail(key, render(value), format!("must be one of {text}"));
        }
    }

    /// A violation returned by the config's `validate` fn.
    pub fn violation(&mut self, v: ConfigViolation) {
        self.fail(&v.key, v.value, v.rule);
    }

    /// Whether no rule failed so far (cross-field checks run only then).
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }

    /// `Ok(())` when every rule held.
    pub fn finish(self) -> Result<(), ConfigErrors> {
        self.errors.into_result()
    }
}

/// The float types `finite` applies to.
pub trait ConfigFloat {
    /// Whether the value is neither NaN nor infinite.
    fn finite(&self) -> bool;
    /// The value for an error message (NaN and infinities as text).
    fn render(&self) -> Value;
}

macro_rules! config_float {
    ($($t:ty),*) => {$(
        impl ConfigFloat for $t {
            fn finite(&self) -> bool {
                self.is_finite()
            }
            fn render(&self) -> Value {
                if self.is_finite() {
                    serde_json::json!(self)
                } else {
                    Value::String(self.to_string())
                }
            }
        }
    )*};
}

config_float!(f32, f64);
