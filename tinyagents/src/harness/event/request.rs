//! The model request as the model saw it, recorded as deltas: each
//! [`AgentEvent::ModelRequest`] carries a [`RequestDelta`] against the
//! previous request of the same run, so a log of a long run grows with what
//! each call adds, not with the whole conversation at every call.
//!
//! Rebuilding request *n*: its messages are the first
//! [`kept`](RequestDelta::kept) messages of request *n − 1* followed by
//! [`messages`](RequestDelta::messages); its system prompt and tools are the
//! delta's when present (`Some`), else request *n − 1*'s. The first request
//! of a run keeps nothing and carries its system prompt and tools.

use std::sync::Arc;

use super::AgentEvent;
use crate::harness::message::Message;
use crate::harness::model::{
    ListMark, ModelParams, ModelRequest, PromptSegment, ResponseFormat, SharedList, ToolChoice,
};
use crate::harness::tool::ToolSchema;

/// One model request as a change to the run's previous request (see the
/// [module docs](self) for how to rebuild the whole request).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct RequestDelta {
    /// How many leading messages of the previous request this one keeps
    /// unchanged (0 for the first request of a run; fewer than before when a
    /// hook rewrote or dropped an earlier message, as a compression does).
    pub kept: usize,
    /// The messages after those, in order.
    pub messages: Vec<Message>,
    /// The system prompt's segments, when they differ from the previous
    /// request's (JSON `null`: unchanged).
    pub system: Option<SharedList<PromptSegment>>,
    /// The tools offered, when they differ from the previous request's
    /// (JSON `null`: unchanged).
    pub tools: Option<SharedList<ToolSchema>>,
    /// Sampling and output parameters (every request).
    pub params: ModelParams,
    /// The reply's required shape, if any (every request).
    pub response_format: Option<ResponseFormat>,
    /// The tool the model must call, if any (every request).
    pub tool_choice: Option<ToolChoice>,
}

/// The previous request of a run, kept only while a sink wants
/// [`AgentEvent::ModelRequest`] (messages are shared, not copied).
#[derive(Debug, Clone, Default)]
pub(crate) struct RequestLog {
    previous: Option<Previous>,
}

#[derive(Debug, Clone)]
struct Previous {
    /// The previous request's messages (each a reference count).
    messages: Vec<Message>,
    /// Its list: a request whose list is that one appended to keeps every
    /// message of it, known without comparing them (a turn costs what it
    /// added, however long the run).
    mark: ListMark,
    system: SharedList<PromptSegment>,
    tools: SharedList<ToolSchema>,
}

impl RequestLog {
    /// The event for `request`, a delta against the previous one; `request`
    /// becomes the previous one.
    pub(crate) fn event(&mut self, run_id: Arc<str>, step: u32, attempt: u32, request: &ModelRequest) -> AgentEvent {
        let (kept, system, tools) = match &self.previous {
            Some(p) => (
                match request.messages.appended_since(&p.mark) {
                    Some(n) if n == p.messages.len() => n,
                    _ => p
                        .messages
                        .iter()
                        .zip(request.messages.iter())
                        .take_while(|(a, b)| a == b)
                        .count(),
                },
                (p.system != request.system).then(|| request.system.clone()),
                (p.tools != request.tools).then(|| request.tools.clone()),
            ),
            None => (0, Some(request.system.clone()), Some(request.tools.clone())),
        };
        let delta = RequestDelta {
            kept,
            messages: request.messages[kept..].to_vec(),
            system,
            tools,
            params: request.params.clone(),
            response_format: request.response_format.clone(),
            tool_choice: request.tool_choice.clone(),
        };
        match &mut self.previous {
            Some(p) => {
                p.messages.truncate(kept);
                p.messages.extend(request.messages[kept..].iter().cloned());
                p.mark = request.messages.mark();
                if let Some(s) = &delta.system {
                    p.system.clone_from(s);
                }
                if let Some(t) = &delta.tools {
                    p.tools.clone_from(t);
                }
            }
            None => {
                self.previous = Some(Previous {
                    messages: request.messages.to_vec(),
                    mark: request.messages.mark(),
                    system: request.system.clone(),
                    tools: request.tools.clone(),
                });
            }
        }
        AgentEvent::ModelRequest {
            run_id,
            step,
            attempt,
            request: Box::new(delta),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::model::PromptSegment;

    fn delta(e: AgentEvent) -> RequestDelta {
        match e {
            AgentEvent::ModelRequest { request, .. } => *request,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn each_request_carries_what_changed_and_rebuilds_whole() {
        let mut log = RequestLog::default();
        let run: Arc<str> = Arc::from("r");
        let a = Message::user("a");
        let first = ModelRequest::new(vec![a.clone()]).with_system(PromptSegment::stable("p", "terse"));
        let d = delta(log.event(run.clone(), 1, 1, &first));
        assert_eq!((d.kept, d.messages.len()), (0, 1));
        assert!(d.system.is_some() && d.tools.is_some());
        // an appended message: only it travels; the system prompt is unchanged
        let b = Message::assistant("b");
        let mut second = first.clone();
        second.messages.push(b.clone());
        let d = delta(log.event(run.clone(), 2, 1, &second));
        assert_eq!((d.kept, d.messages.clone()), (1, vec![b.clone()]));
        assert!(d.system.is_none() && d.tools.is_none());
        // a rewritten first message (a compression): nothing is kept
        let mut third = second.clone();
        third.messages[0] = Message::user("summary");
        third.set_volatile("date", "Monday");
        let d = delta(log.event(run, 3, 1, &third));
        assert_eq!(d.kept, 0);
        assert_eq!(d.messages, third.messages);
        assert_eq!(d.system.as_ref().map(|s| &s[..]), Some(&third.system[..]));
    }

    #[test]
    fn a_history_appended_in_place_keeps_its_messages_and_a_change_is_seen() {
        let mut log = RequestLog::default();
        let run: Arc<str> = Arc::from("r");
        let mut history: SharedList<Message> = vec![Message::user("a"), Message::assistant("b")].into();
        let request = |h: &SharedList<Message>| {
            let mut r = ModelRequest::default();
            r.messages = h.clone();
            r
        };
        let d = delta(log.event(run.clone(), 1, 1, &request(&history)));
        assert_eq!((d.kept, d.messages.len()), (0, 2));
        // the run's history grows in place (no request holds it any more)
        history.push(Message::user("c"));
        let d = delta(log.event(run.clone(), 2, 1, &request(&history)));
        assert_eq!((d.kept, d.messages.clone()), (2, vec![history[2].clone()]));
        // an earlier message changed in place: the log compares and sends from there
        history[1] = Message::assistant("B");
        history.push(Message::user("d"));
        let d = delta(log.event(run, 3, 1, &request(&history)));
        assert_eq!(d.kept, 1);
        assert_eq!(d.messages, history[1..].to_vec());
    }
}
