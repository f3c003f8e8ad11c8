//! Pausing a run and resuming it: the protocol a middleware that asks
//! someone outside the run (a person, another service) implements, and the
//! only thing the agent loop, the graph runtime and sub-agent tools know
//! about such a pause.
//!
//! - A middleware that pauses fails its hook with
//!   [`TinyAgentsError::Interrupted`],
//!   and [records](Interrupts::record) an [`Interrupt`]: its name (the
//!   owner) and a JSON payload saying what was asked. It also writes what a
//!   resume is checked against with
//!   [`FlowMut::update_state`](crate::harness::context::FlowMut::update_state)
//!   under its [`Resume::interrupt_key`], so a durable run keeps it in its
//!   checkpoint.
//! - While it holds a pause, a [`PauseHolder`] it [installed](Interrupts::hold)
//!   says so: the loop then leaves the results of the batch's finished calls
//!   to it instead of writing them into the conversation.
//! - The answer is a [`Resume`]: serialisable, single-use (its
//!   [tokens](Resume::tokens)), bound to the reply the run paused on.
//!   [Attached](Interrupts::attach) to a new run's context, the middleware
//!   [claims](Interrupts::claim) it when the run starts;
//!   [`AgentGraph::resume_with`](crate::graph::AgentGraph::resume_with)
//!   first checks it against the checkpoint (the store is the authority on
//!   what was asked) and spends its tokens there.
//!
//! The run's [`Interrupts`] are at
//! [`Locals::interrupts`](crate::harness::context::Locals::interrupts).
//! `human_in_the_loop` is one implementation; an approval middleware of your
//! own uses the same protocol (the repository's `examples/custom_approval.rs`
//! is one, whose durable run another process resumes).
//!
//! ```
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::sync::Arc;
//! use serde_json::{json, Value};
//! use tinyagents::harness::interrupt::{Interrupt, PauseHolder, Resume};
//! use tinyagents::prelude::*;
//!
//! /// A pause flag a gate sets when it pauses.
//! #[derive(Default)]
//! struct Paused(AtomicBool);
//! impl PauseHolder for Paused {
//!     fn holds_pause(&self) -> bool {
//!         self.0.load(Ordering::Relaxed)
//!     }
//! }
//!
//! /// The answer to the gate's pause.
//! struct Yes { token: String, reply: Message }
//! impl Resume for Yes {
//!     fn owner(&self) -> &str { "gate" }
//!     fn interrupt_key(&self) -> &str { "gate_asked" }
//!     fn spent_key(&self) -> &str { "gate_spent" }
//!     fn tokens(&self) -> Vec<String> { vec![self.token.clone()] }
//!     fn paused_reply(&self) -> &Message { &self.reply }
//!     fn rebind(self: Box<Self>, recorded: Option<Value>, thread: &str) -> Result<Box<dyn Resume>> {
//!         match recorded {
//!             Some(asked) if asked["token"] == self.token => Ok(self),
//!             _ => Err(TinyAgentsError::validation(format!("not what thread `{thread}` asked"))),
//!         }
//!     }
//!     fn into_any(self: Box<Self>) -> Box<dyn std::any::Any + Send> { self }
//! }
//!
//! // The run that pauses: the gate holds the pause and records what it asked.
//! let ctx: RunContext = RunContext::new(RunConfig::new("r1"), ());
//! let paused = Arc::new(Paused::default());
//! ctx.locals().interrupts().hold(paused.clone());
//! paused.0.store(true, Ordering::Relaxed);
//! assert!(ctx.locals().interrupts().pause_pending()); // what the agent loop asks
//! ctx.locals().interrupts().record(Interrupt::new("gate", json!({"token": "t1"})));
//! let asked = ctx.locals().interrupts().take("gate").unwrap();
//! assert_eq!(serde_json::to_string(&asked).unwrap(), r#"{"owner":"gate","payload":{"token":"t1"}}"#);
//!
//! // The run that resumes: the answer is attached, and the gate claims it as its own type.
//! let ctx2: RunContext = RunContext::new(RunConfig::new("r2"), ());
//! let token = asked.payload["token"].as_str().unwrap().to_owned();
//! ctx2.locals().interrupts().attach(Box::new(Yes { token, reply: Message::assistant("") }), true);
//! let (answer, replay) = ctx2.locals().interrupts().claim::<Yes>("gate").unwrap();
//! assert!(replay);
//! // a single-use token, spent once
//! assert!(!ctx2.locals().interrupts().is_spent("gate", &answer.token));
//! ctx2.locals().interrupts().spend("gate", answer.tokens());
//! assert!(ctx2.locals().interrupts().is_spent("gate", "t1"));
//! ```

use std::any::Any;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::message::Message;

/// What a pausing middleware asked: its name and a JSON payload only it
/// reads. It serialises, so the process that paused can store or show it and
/// another one can answer it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)] // a field this version does not know is refused, never dropped
pub struct Interrupt {
    /// The middleware that paused the run (its stack name).
    pub owner: String,
    /// What it asked, in its own form.
    pub payload: Value,
}

impl Interrupt {
    /// The interrupt of `owner` with `payload`.
    pub fn new(owner: impl Into<String>, payload: Value) -> Self {
        Self {
            owner: owner.into(),
            payload,
        }
    }

    /// The payload read as `T`: a payload that is not a `T` is a
    /// `Validation` error naming the owner.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.payload.clone()).map_err(|e| {
            TinyAgentsError::validation(format!(
                "the interrupt of `{}` cannot be read as {}: {e}; give it as the run recorded it",
                self.owner,
                std::any::type_name::<T>()
            ))
        })
    }
}

/// Says whether a middleware holds a pause of the run (set when it pauses,
/// cleared when the run's `after_agent` hands the interrupt over).
pub trait PauseHolder: Send + Sync + 'static {
    /// Whether the pause is held now.
    fn holds_pause(&self) -> bool;
}

/// The answer to an [`Interrupt`], given to a new run to resume the paused
/// one. Implemented by the middleware that paused (`HitlResume` for
/// `human_in_the_loop`); the runtime only calls these methods.
pub trait Resume: Any + Send + Sync {
    /// The middleware whose pause it answers.
    fn owner(&self) -> &str;

    /// The state key under which the owner recorded, when it paused, what a
    /// resume is checked against (a durable run keeps it in its checkpoint).
    fn interrupt_key(&self) -> &str;

    /// The state key under which the owner records the tokens already spent.
    fn spent_key(&self) -> &str;

    /// This answer's single-use tokens: once spent, another resume carrying
    /// any of them is refused before anything runs.
    fn tokens(&self) -> Vec<String>;

    /// The reply the run paused on: a checkpoint resumed with this answer
    /// must end with it.
    fn paused_reply(&self) -> &Message;

    /// The same answer rebuilt from what the paused run `recorded` under
    /// [`interrupt_key`](Self::interrupt_key) (`None`: nothing was), the
    /// authority on what was asked: only the caller's decisions are kept.
    /// An answer to anything else is a `Validation` error naming
    /// `thread_id`.
    fn rebind(self: Box<Self>, recorded: Option<Value>, thread_id: &str) -> Result<Box<dyn Resume>>;

    /// The answer as `Any`, for the owner to take back its own type.
    fn into_any(self: Box<Self>) -> Box<dyn Any + Send>;
}

/// A resume attached to a run, not claimed yet.
struct Attached {
    resume: Box<dyn Resume>,
    /// Whether the run starts before the paused reply (its first model turn
    /// replays it) rather than at the paused batch (a checkpoint).
    replay: bool,
}

/// One run's pauses: what a pausing middleware recorded, who holds a pause,
/// the resume given to the run, and the tokens already spent. Per run (a
/// run-local value), shared by every part of the run.
#[derive(Default)]
pub struct Interrupts {
    holders: Mutex<Vec<Arc<dyn PauseHolder>>>,
    attached: Mutex<Option<Attached>>,
    recorded: Mutex<Vec<Interrupt>>,
    spent: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl std::fmt::Debug for Interrupts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupts")
            .field("pause_pending", &self.pause_pending())
            .field("recorded", &*self.recorded.lock().expect("interrupts lock"))
            .finish_non_exhaustive()
    }
}

impl Interrupts {
    /// Installs `holder` (once: the same `Arc` again is not repeated).
    pub fn hold(&self, holder: Arc<dyn PauseHolder>) {
        let mut holders = self.holders.lock().expect("interrupts lock");
        if !holders.iter().any(|h| Arc::ptr_eq(h, &holder)) {
            holders.push(holder);
        }
    }

    /// Whether any middleware holds a pause of the run now.
    pub fn pause_pending(&self) -> bool {
        self.holders
            .lock()
            .expect("interrupts lock")
            .iter()
            .any(|h| h.holds_pause())
    }

    /// Gives `resume` to the run. `replay`: the run starts from the
    /// conversation before the paused reply, which its first model turn
    /// replays; otherwise it starts at the paused batch (a checkpoint).
    pub fn attach(&self, resume: Box<dyn Resume>, replay: bool) {
        *self.attached.lock().expect("interrupts lock") = Some(Attached { resume, replay });
    }

    /// Takes a resume attached to start before the paused reply and not
    /// claimed yet: a graph resume checks it against its checkpoint first.
    pub fn take_attached(&self) -> Option<Box<dyn Resume>> {
        let mut attached = self.attached.lock().expect("interrupts lock");
        match &*attached {
            Some(a) if a.replay => attached.take().map(|a| a.resume),
            _ => None,
        }
    }

    /// The owner `owner` takes the resume attached to the run, as its own
    /// type `R`, with whether the run replays the paused reply. A resume of
    /// another owner or type stays attached.
    pub fn claim<R: Resume>(&self, owner: &str) -> Option<(R, bool)> {
        let mut attached = self.attached.lock().expect("interrupts lock");
        let mine = attached
            .as_ref()
            .is_some_and(|a| a.resume.owner() == owner && (a.resume.as_ref() as &dyn Any).is::<R>());
        if !mine {
            return None;
        }
        let a = attached.take()?;
        let resume = a.resume.into_any().downcast::<R>().ok()?;
        Some((*resume, a.replay))
    }

    /// Records what a pausing middleware asked (taken by whoever resumes).
    pub fn record(&self, interrupt: Interrupt) {
        let mut recorded = self.recorded.lock().expect("interrupts lock");
        recorded.retain(|i| i.owner != interrupt.owner);
        recorded.push(interrupt);
    }

    /// Takes the interrupt `owner` recorded (a second call gives `None`).
    pub fn take(&self, owner: &str) -> Option<Interrupt> {
        let mut recorded = self.recorded.lock().expect("interrupts lock");
        let i = recorded.iter().position(|i| i.owner == owner)?;
        Some(recorded.remove(i))
    }

    /// Takes the interrupt recorded last, whoever recorded it.
    pub fn take_any(&self) -> Option<Interrupt> {
        self.recorded.lock().expect("interrupts lock").pop()
    }

    /// Whether `owner` already spent `token` in this run.
    pub fn is_spent(&self, owner: &str, token: &str) -> bool {
        self.spent
            .lock()
            .expect("interrupts lock")
            .get(owner)
            .is_some_and(|s| s.contains(token))
    }

    /// Records `tokens` as spent by `owner`; gives every token it spent in the run.
    pub fn spend(&self, owner: &str, tokens: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut spent = self.spent.lock().expect("interrupts lock");
        let set = spent.entry(owner.to_owned()).or_default();
        set.extend(tokens);
        set.iter().cloned().collect()
    }
}
