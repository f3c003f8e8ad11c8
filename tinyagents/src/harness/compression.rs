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

/// The compressions of one run, in order (a run local: `ctx.locals().local::<CompressionLog>()`).
///
/// When the run ends the agent moves the records onto the run's record
/// ([`attach`]), so a long run keeps each record once: after that,
/// [`entries`](Self::entries) holds only what was recorded later, while
/// [`len`](Self::len) and the positions [`since`](Self::since) takes keep
/// counting every compression of the run. During the run (every hook
/// before the agent's end) the log holds them all.
///
/// ```
/// use tinyagents::harness::compression::{attach, record, CompressionLog};
/// use tinyagents::harness::provenance::CompressionProvenance;
/// use tinyagents::harness::run::AgentRun;
/// use tinyagents::prelude::*;
///
/// let ctx: RunContext = RunContext::new(RunConfig::new("r"), ());
/// record(&ctx, CompressionProvenance::new("summarization", "summarization/1"));
/// assert_eq!(ctx.locals().local::<CompressionLog>().entries().len(), 1);
/// let mut run = AgentRun::new("r".into());
/// attach(&ctx, &mut run);
/// assert_eq!(run.compressions.len(), 1);
/// let log = ctx.locals().local::<CompressionLog>();
/// assert_eq!((log.len(), log.entries().len()), (1, 0), "moved, still counted");
/// ```
#[derive(Debug, Default)]
pub struct CompressionLog {
    log: Mutex<Log>,
}

#[derive(Debug, Default)]
struct Log {
    /// The compressions not yet moved onto the run's record.
    entries: Vec<CompressionProvenance>,
    /// How many were moved (the position of `entries[0]` in the run).
    attached: usize,
}

impl CompressionLog {
    /// The compressions recorded in the run and not yet moved onto its
    /// record: every one so far, until the run ends.
    pub fn entries(&self) -> Vec<CompressionProvenance> {
        self.log.lock().expect("compression log lock").entries.clone()
    }

    /// How many compressions were recorded so far in the run (moved ones included).
    pub fn len(&self) -> usize {
        let log = self.log.lock().expect("compression log lock");
        log.attached + log.entries.len()
    }

    /// Whether none was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The compressions recorded after the first `from` of the run (a
    /// reader that keeps its place copies only what is new, not the whole
    /// log each time); those already moved onto the run's record are not
    /// returned.
    pub fn since(&self, from: usize) -> Vec<CompressionProvenance> {
        let log = self.log.lock().expect("compression log lock");
        let start = from.saturating_sub(log.attached);
        log.entries.get(start..).map(<[_]>::to_vec).unwrap_or_default()
    }

    fn push(&self, p: CompressionProvenance) {
        self.log.lock().expect("compression log lock").entries.push(p);
    }
}

/// Records a compression: emits [`AgentEvent::Compressed`] and appends it to
/// the run's [`CompressionLog`]. The step is filled from the run's counters.
pub fn record<C>(ctx: &RunContext<C>, mut provenance: CompressionProvenance) {
    provenance.step = ctx.counters().steps;
    // The run keeps every record until it ends (one or two per turn in a
    // long run): no spare capacity from the lists' growth.
    provenance.source_message_ids.shrink_to_fit();
    provenance.source_artifact_ids.shrink_to_fit();
    provenance.prompt_segment_ids.shrink_to_fit();
    ctx.events()
        .emit_with(EventKind::Compressed, || AgentEvent::Compressed {
            run_id: ctx.run_id().clone(),
            provenance: Box::new(provenance.clone()),
        });
    ctx.locals().local::<CompressionLog>().push(provenance);
}

/// Puts compressions recorded by an earlier segment of the run (kept in its
/// checkpoint, read back by the middleware that made them when a durable
/// run resumes) back in the run's [`CompressionLog`], without new events:
/// the resumed run's record holds them once, in order.
pub(crate) fn restore<C>(ctx: &RunContext<C>, earlier: Vec<CompressionProvenance>) {
    for p in earlier {
        ctx.locals().local::<CompressionLog>().push(p);
    }
}

/// Moves the compressions not yet attached onto `run.compressions`
/// (idempotent: a second call moves only what was recorded since). The
/// agent calls it when a run ends, before and after the `after_agent`
/// hooks, so compression middleware need not. Moved, not copied: a long
/// run's records are kept once.
pub fn attach<C>(ctx: &RunContext<C>, run: &mut AgentRun) {
    // a run that compressed nothing has no log, and gets none made here
    let Some(log): Option<Arc<CompressionLog>> = ctx.locals().try_local::<CompressionLog>() else {
        return;
    };
    let mut log = log.log.lock().expect("compression log lock");
    let moved = std::mem::take(&mut log.entries);
    log.attached += moved.len();
    if run.compressions.is_empty() {
        run.compressions = moved;
    } else {
        run.compressions.extend(moved);
    }
}
