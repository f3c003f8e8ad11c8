//! The compressions of a run (a compacting middleware asks the run's
//! `pre_compact` hooks first, through
//! [`middleware::pre_compact`](crate::harness::middleware::pre_compact)):
//! [`record`] one (event + run log), read them
//! ([`CompressionLog`]), and [`attach`] them to the run's record (the agent
//! does, when the run ends).

use std::sync::{Arc, Mutex};

use crate::harness::context::RunContext;
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::provenance::CompressionProvenance;
use crate::harness::run::AgentRun;

/// The compressions of one run, in order (a run local: `ctx.local::<CompressionLog>()`).
#[derive(Debug, Default)]
pub struct CompressionLog {
    entries: Mutex<Vec<CompressionProvenance>>,
    attached: Mutex<usize>,
}

impl CompressionLog {
    /// Every compression recorded so far in the run.
    pub fn entries(&self) -> Vec<CompressionProvenance> {
        self.entries.lock().expect("compression log lock").clone()
    }

    /// How many compressions were recorded so far in the run.
    pub fn len(&self) -> usize {
        self.entries.lock().expect("compression log lock").len()
    }

    /// Whether none was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The compressions recorded after the first `from` (a reader that keeps
    /// its place copies only what is new, not the whole log each time).
    pub fn since(&self, from: usize) -> Vec<CompressionProvenance> {
        let entries = self.entries.lock().expect("compression log lock");
        entries.get(from..).map(<[_]>::to_vec).unwrap_or_default()
    }

    fn push(&self, p: CompressionProvenance) {
        self.entries.lock().expect("compression log lock").push(p);
    }
}

/// Records a compression: emits [`AgentEvent::Compressed`] and appends it to
/// the run's [`CompressionLog`]. The step is filled from the run's counters.
pub fn record<C>(ctx: &RunContext<C>, mut provenance: CompressionProvenance) {
    provenance.step = ctx.counters().steps;
    ctx.emit_with(EventKind::Compressed, || AgentEvent::Compressed {
        run_id: ctx.run_id().clone(),
        provenance: Box::new(provenance.clone()),
    });
    ctx.local::<CompressionLog>().push(provenance);
}

/// Copies the compressions not yet attached onto `run.compressions`
/// (idempotent). The agent calls it when a run ends, before and after the
/// `after_agent` hooks, so compression middleware need not.
pub fn attach<C>(ctx: &RunContext<C>, run: &mut AgentRun) {
    let log: Arc<CompressionLog> = ctx.local::<CompressionLog>();
    let entries = log.entries.lock().expect("compression log lock");
    let mut attached = log.attached.lock().expect("compression log lock");
    run.compressions.extend(entries[*attached..].iter().cloned());
    *attached = entries.len();
}
