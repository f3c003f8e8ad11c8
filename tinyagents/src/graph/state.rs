//! [`GraphState`], state updates and per-field [`Reducer`]s.

use std::collections::HashMap;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::harness::error::{Result, TinyAgentsError};

/// A state update: new values by field, merged into the state through each
/// field's [`Reducer`].
pub type Update = Map<String, Value>;

/// An [`Update`] from `(field, value)` pairs.
///
/// ```
/// use serde_json::json;
/// use tinyagents::graph::update;
/// let u = update([("count", json!(1)), ("log", json!(["started"]))]);
/// assert_eq!(u["count"], json!(1));
/// ```
pub fn update<K: Into<String>>(pairs: impl IntoIterator<Item = (K, Value)>) -> Update {
    pairs.into_iter().map(|(k, v)| (k.into(), v)).collect()
}

/// A custom merge: the current value (if any) and the update's value give the new value.
pub type MergeFn = Arc<dyn Fn(Option<&Value>, Value) -> Value + Send + Sync>;

/// How an update to one field is merged into the state.
#[derive(Clone, Default)]
#[non_exhaustive]
pub enum Reducer {
    /// The update replaces the value (the default).
    #[default]
    Replace,
    /// Arrays concatenate (a non-array update is appended as one element).
    Append,
    /// Numbers add up.
    Sum,
    /// The larger number wins.
    Max,
    /// The smaller number wins.
    Min,
    /// Objects merge key by key (the update's keys win).
    Merge,
    /// A function of your own.
    Custom(MergeFn),
}

impl std::fmt::Debug for Reducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Replace => "Replace",
            Self::Append => "Append",
            Self::Sum => "Sum",
            Self::Max => "Max",
            Self::Min => "Min",
            Self::Merge => "Merge",
            Self::Custom(_) => "Custom",
        })
    }
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64()
}

fn sum(a: &Value, b: &Value) -> Value {
    match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) => Value::from(x.saturating_add(y)),
        _ => Value::from(number(a).unwrap_or(0.0) + number(b).unwrap_or(0.0)),
    }
}

impl Reducer {
    /// The merged value of `current` and `update`.
    pub fn reduce(&self, current: Option<&Value>, update: Value) -> Value {
        let cur = match (self, current) {
            (Self::Custom(f), cur) => return f(cur, update),
            (Self::Append, None | Some(Value::Null)) if !update.is_array() => return Value::Array(vec![update]),
            (_, None | Some(Value::Null)) | (Self::Replace, _) => return update,
            (_, Some(cur)) => cur,
        };
        match self {
            Self::Append => {
                let mut items = match cur {
                    Value::Array(items) => items.clone(),
                    other => vec![other.clone()],
                };
                match update {
                    Value::Array(more) => items.extend(more),
                    one => items.push(one),
                }
                Value::Array(items)
            }
            Self::Sum => sum(cur, &update),
            Self::Max if number(&update) > number(cur) => update,
            Self::Min if number(&update) < number(cur) => update,
            Self::Max | Self::Min => cur.clone(),
            Self::Merge => match (cur, update) {
                (Value::Object(cur), Value::Object(more)) => {
                    let mut merged = cur.clone();
                    merged.extend(more);
                    Value::Object(merged)
                }
                (_, other) => other,
            },
            Self::Replace | Self::Custom(_) => unreachable!("handled above"),
        }
    }
}

/// The state of a graph run: named JSON fields, plus the value a resumed
/// run was given for the node that interrupted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphState {
    values: Map<String, Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resume: Option<Value>,
}

impl GraphState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// A state with these fields.
    pub fn from_update(values: Update) -> Self {
        Self { values, resume: None }
    }

    /// The field `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// The field `key`, deserialised; a field of the wrong shape is a `Validation` error.
    pub fn get_as<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        self.values
            .get(key)
            .map(|v| {
                serde_json::from_value(v.clone()).map_err(|e| {
                    TinyAgentsError::validation(format!("graph state field `{key}` has an unexpected shape: {e}"))
                })
            })
            .transpose()
    }

    /// Every field.
    pub fn values(&self) -> &Map<String, Value> {
        &self.values
    }

    /// The value given to [`resume`](crate::graph::CompiledGraph::resume), while the
    /// interrupted node runs again.
    pub fn resume_value(&self) -> Option<&Value> {
        self.resume.as_ref()
    }

    pub(crate) fn set_resume(&mut self, value: Option<Value>) {
        self.resume = value;
    }

    /// Merges an update through the reducers (fields without one are replaced).
    pub fn apply(&mut self, update: Update, reducers: &HashMap<String, Reducer>) {
        for (key, value) in update {
            let reducer = reducers.get(&key).cloned().unwrap_or_default();
            let merged = reducer.reduce(self.values.get(&key), value);
            self.values.insert(key, merged);
        }
    }
}
