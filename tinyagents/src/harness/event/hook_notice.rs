//! [`HookNotice`]: QueryMT's name and shape for a notice, as a view of
//! [`AgentEvent::Notice`].
//!
//! The runtime has one notice event, [`AgentEvent::Notice`] (`source`,
//! `message`, `is_error`, serialised with `"type": "notice"`). Code written
//! against the QueryMT middleware docs reads a `HookNotice` whose
//! `event_name` says what raised it (`"price_limit"`,
//! `"parallel_edit_guard"`, `"dedup_check"`): the mapping is
//! `event_name` = `source`, and the view serialises as those docs write it,
//! `{"type": "hook_notice", "event_name": …, "message": …, "is_error": …}`.

use serde::{Deserialize, Serialize};

use super::AgentEvent;

/// A notice for people (a warning that needs no acknowledgement), under the
/// QueryMT name: a view of [`AgentEvent::Notice`].
///
/// ```
/// use tinyagents::harness::event::{AgentEvent, HookNotice};
///
/// let event = AgentEvent::Notice { source: "price_limit".into(), message: "no cache-write rate".into(), is_error: false };
/// let notice = HookNotice::of(&event).unwrap();
/// assert_eq!(notice.event_name, "price_limit");
/// assert_eq!(
///     serde_json::to_value(&notice).unwrap(),
///     serde_json::json!({"type": "hook_notice", "event_name": "price_limit", "message": "no cache-write rate", "is_error": false}),
/// );
/// assert_eq!(AgentEvent::from(notice), event);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename = "hook_notice")]
pub struct HookNotice {
    /// What raised it: the `source` of the [`AgentEvent::Notice`].
    pub event_name: String,
    /// The text.
    pub message: String,
    /// Whether it reports an error.
    pub is_error: bool,
}

impl HookNotice {
    /// The notice `event` is, when it is an [`AgentEvent::Notice`].
    pub fn of(event: &AgentEvent) -> Option<Self> {
        match event {
            AgentEvent::Notice {
                source,
                message,
                is_error,
            } => Some(Self {
                event_name: source.to_string(),
                message: message.clone(),
                is_error: *is_error,
            }),
            _ => None,
        }
    }
}

impl From<HookNotice> for AgentEvent {
    fn from(notice: HookNotice) -> Self {
        AgentEvent::Notice {
            source: notice.event_name.into(),
            message: notice.message,
            is_error: notice.is_error,
        }
    }
}
