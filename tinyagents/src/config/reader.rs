//! The runtime half of `#[derive(MiddlewareConfig)]`: [`ConfigReader`] reads
//! a table field by field and [`ConfigChecker`] applies the rules, both
//! collecting every error. Generated code calls them through
//! `tinyagents::__private`; they are not a public API.

use std::ops::RangeBounds;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use serde_json::{Map, Value};

use super::choice::ConfigEnum;
use super::error::{ConfigError, ConfigErrors, ConfigViolation};
use super::suggest::{did_you_mean, list};
use super::{join, RESERVED_KEYS};

/// A type a config field of `#[derive(MiddlewareConfig)]` can have: any
/// type `serde` can deserialize (implemented for all of them). The derive
/// reads each field through it, so a field of another type is one error
/// saying what a config field needs.
#[diagnostic::on_unimplemented(
    message = "the config field type `{Self}` cannot be read from a config table: it does not implement `serde::Deserialize`",
    label = "`{Self}` is not `Deserialize`",
    note = "derive it (`#[derive(serde::Deserialize)]` on `{Self}`), or use a type serde reads: a number, `bool`, `String`, `Vec<T>`, `Option<T>`, an enum declared with `config_enum!`"
)]
pub trait ConfigValue: Sized {
    /// Reads a key without a default (the derive's call; not a public API).
    #[doc(hidden)]
    fn read_required(reader: &mut ConfigReader<'_>, key: &str, ty: &str) -> Option<Self>;

    /// Reads a key with a default (the derive's call; not a public API).
    #[doc(hidden)]
    fn read_or_default<F: FnOnce() -> Self>(
        reader: &mut ConfigReader<'_>,
        key: &str,
        ty: &str,
        default: F,
    ) -> Option<Self>;
}

#[diagnostic::do_not_recommend]
impl<T: DeserializeOwned> ConfigValue for T {
    fn read_required(reader: &mut ConfigReader<'_>, key: &str, ty: &str) -> Option<Self> {
        reader.required(key, ty)
    }

    fn read_or_default<F: FnOnce() -> Self>(
        reader: &mut ConfigReader<'_>,
        key: &str,
        ty: &str,
        default: F,
    ) -> Option<Self> {
        reader.or_default(key, ty, default)
    }
}

/// Reads the keys of one table. Its errors and those of the rules checked
/// through [`checker`](Self::checker) form one list, in the order found.
pub struct ConfigReader<'a> {
    map: &'a Map<String, Value>,
    path: &'a str,
    checker: ConfigChecker<'a>,
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
        Ok(Self {
            map,
            path,
            checker: ConfigChecker { path, errors },
        })
    }

    fn parse<T: DeserializeOwned>(&mut self, key: &str, ty: &str, v: &Value) -> Option<T> {
        match <T as Deserialize<'_>>::deserialize(v) {
            Ok(t) => Some(t),
            // TOML's `nan` and `inf` reach float fields (JSON cannot carry them), for `finite` to judge
            Err(_) if non_finite(v).is_some_and(|f| T::deserialize(NonFinite(f)).is_ok()) => {
                T::deserialize(NonFinite(non_finite(v)?)).ok()
            }
            Err(e) => {
                self.checker.errors.push(ConfigError::new(
                    join(self.path, key),
                    Some(v.clone()),
                    // serde's message quotes the value: bounded like every echo.
                    format!(
                        "must be a `{ty}` ({})",
                        crate::harness::shorten::shorten(&e.to_string(), 200)
                    ),
                ));
                None
            }
        }
    }

    /// The key a field with `#[serde(alias = "…")]` names is read under:
    /// `key`, or the one of its `aliases` the table writes. Two of them in
    /// one table is an error (the first is read).
    pub fn aliased<'k>(&mut self, key: &'k str, aliases: &[&'k str]) -> &'k str {
        let mut given = std::iter::once(key)
            .chain(aliases.iter().copied())
            .filter(|k| self.map.contains_key(*k));
        let Some(first) = given.next() else { return key };
        for other in given {
            self.checker.errors.push(ConfigError::new(
                join(self.path, other),
                self.map.get(other).cloned(),
                format!("`{other}` and `{first}` name the same key (`{key}`): keep one"),
            ));
        }
        first
    }

    /// A key without a default: missing is an error.
    pub fn required<T: DeserializeOwned>(&mut self, key: &str, ty: &str) -> Option<T> {
        match self.map.get(key) {
            Some(v) => self.parse(key, ty, v),
            None => {
                self.checker.errors.push(ConfigError::new(
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

    /// A [`ConfigEnum`] key with a default: a name that is not a variant is
    /// an error listing the names (with a did-you-mean).
    pub fn choice<T: ConfigEnum>(&mut self, key: &str, default: T) -> Option<T> {
        let v = match self.map.get(key) {
            None => return Some(default),
            Some(v) => v,
        };
        let found = v.as_str().and_then(T::from_name);
        if found.is_none() {
            let rule = match v.as_str() {
                Some(s) => T::rule(&crate::harness::shorten::shorten(s, 200)),
                None => T::rule(""),
            };
            self.checker
                .errors
                .push(ConfigError::new(join(self.path, key), Some(v.clone()), rule));
        }
        found
    }

    /// The checker for the rules of the fields read so far.
    pub fn checker(&mut self) -> &mut ConfigChecker<'a> {
        &mut self.checker
    }

    /// Whether nothing was recorded so far.
    pub fn is_clean(&self) -> bool {
        self.checker.is_clean()
    }

    /// The errors recorded (for when a field could not be read).
    pub fn into_errors(self) -> ConfigErrors {
        self.checker.errors
    }

    /// `Ok(())` when nothing was recorded.
    pub fn finish(self) -> Result<(), ConfigErrors> {
        self.checker.finish()
    }
}

/// The non-finite float a TOML `nan`/`inf` was carried as (see `toml_to_value`).
fn non_finite(v: &Value) -> Option<f64> {
    match v.as_str()? {
        NAN => Some(f64::NAN),
        INF => Some(f64::INFINITY),
        NEG_INF => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

/// A non-finite float handed to a float field, plain or optional (`Option<f64>`).
struct NonFinite(f64);

impl<'de> serde::Deserializer<'de> for NonFinite {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_f64(self.0)
    }

    fn deserialize_option<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        visitor.visit_some(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// How a TOML `nan` is carried in JSON.
pub(crate) const NAN: &str = "nan";
/// How a TOML `inf` is carried in JSON.
pub(crate) const INF: &str = "inf";
/// How a TOML `-inf` is carried in JSON.
pub(crate) const NEG_INF: &str = "-inf";

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
    pub fn range<T: ConfigNumber>(&mut self, key: &str, value: &T, range: impl RangeBounds<T>, text: &str) {
        if !range.contains(value) {
            self.fail(key, Some(value.render()), format!("must be in {text}"));
        }
    }

    /// `finite`.
    pub fn finite<T: ConfigNumber>(&mut self, key: &str, value: &T) {
        if !value.is_finite() {
            self.fail(
                key,
                Some(value.render()),
                "must be a finite number (not NaN or infinite)".to_owned(),
            );
        }
    }

    /// `non_negative` (NaN is refused too).
    pub fn non_negative<T: ConfigNumber>(&mut self, key: &str, value: &T) {
        if !matches!(
            value.partial_cmp(&T::ZERO),
            Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
        ) {
            self.fail(key, Some(value.render()), "must not be negative".to_owned());
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

/// The numeric types `range`, `finite` and `non_negative` apply to.
pub trait ConfigNumber: PartialOrd + Copy {
    /// Zero.
    const ZERO: Self;
    /// Whether the value is neither NaN nor infinite (always, for integers).
    fn is_finite(&self) -> bool;
    /// The value for an error message (NaN and infinities as text).
    fn render(&self) -> Value;
}

macro_rules! config_int {
    ($($t:ty),*) => {$(
        impl ConfigNumber for $t {
            const ZERO: Self = 0;
            fn is_finite(&self) -> bool {
                true
            }
            fn render(&self) -> Value {
                serde_json::json!(self)
            }
        }
    )*};
}

macro_rules! config_float {
    ($($t:ty),*) => {$(
        impl ConfigNumber for $t {
            const ZERO: Self = 0.0;
            fn is_finite(&self) -> bool {
                <$t>::is_finite(*self)
            }
            fn render(&self) -> Value {
                if <$t>::is_finite(*self) {
                    serde_json::json!(self)
                } else {
                    Value::String(self.to_string())
                }
            }
        }
    )*};
}

config_int!(i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize);
config_float!(f32, f64);
