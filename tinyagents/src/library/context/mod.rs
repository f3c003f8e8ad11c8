//! Built-ins that manage what the model sees of the conversation (its
//! context window: trimming, editing, summarisation, clipping, the window
//! monitor): see the table in [the library docs](super).

mod artifacts;
mod context_clipping;
mod context_editing;
mod context_window;
mod delta_compression;
pub(super) mod message_trim;
mod output_compression;
mod retrieval_compression;
mod summarization;
mod summarizer;
mod transcript_compression;
mod window;

pub use artifacts::{ArtifactStore, ReadArtifactTool};
pub use context_clipping::{ContextClippingConfig, ContextClippingMiddleware};
pub use context_editing::{ContextEditingConfig, ContextEditingMiddleware};
pub use context_window::{ContextWindowConfig, ContextWindowMiddleware};
pub use delta_compression::{DeltaCompressionConfig, DeltaCompressionMiddleware};
pub use message_trim::{MessageTrimConfig, MessageTrimMiddleware, TrimKind, TrimStrategy};
pub use output_compression::{OutputCompressionConfig, OutputCompressionMiddleware};
pub use retrieval_compression::{RetrievalCompressionConfig, RetrievalCompressionMiddleware};
pub use summarization::{SummarizationConfig, SummarizationMiddleware, SummaryTrigger};
pub use summarizer::{ConcatSummarizer, ModelSummarizer, Summarizer, Summary};
pub use transcript_compression::{TranscriptCompressionConfig, TranscriptCompressionMiddleware};

/// The name the `harness::middleware` design uses for
/// [`SummarizationMiddleware`], the same middleware (config `type =
/// "summarization"`; `type = "context_compression"` is a deprecated alias): it
/// consults a [`SummarizationPolicy`] in `before_model` and does nothing below
/// it; above it, it condenses the older messages through a [`Summarizer`]
/// (default [`ConcatSummarizer`]) into one summary message, keeps the recent
/// window and the system messages verbatim, records a [`SummaryRecord`] and
/// emits `AgentEvent::Compressed`.
///
/// (The project's other context compressor, which clips older long messages
/// to head/tail excerpts instead of summarising, is [`ContextClippingMiddleware`].)
///
/// ```
/// use tinyagents::middleware::{ContextCompressionMiddleware, SummarizationPolicy};
/// use tinyagents::prelude::*;
///
/// let compress = ContextCompressionMiddleware::new(SummarizationPolicy::tokens(6_000));
/// let stack: MiddlewareStack<()> = MiddlewareStack::empty().with(compress).unwrap();
/// assert_eq!(stack.names(), ["summarization"]);
/// ```
pub type ContextCompressionMiddleware = SummarizationMiddleware;

/// The design's name for [`SummaryTrigger`]: when the summarising compression runs.
pub type SummarizationPolicy = SummaryTrigger;

/// The design's name for the record a compression leaves: the
/// [`CompressionProvenance`](crate::harness::provenance::CompressionProvenance)
/// carried by `AgentEvent::Compressed` and collected in `AgentRun::compressions`.
pub type SummaryRecord = crate::harness::provenance::CompressionProvenance;

/// The former name of [`ContextWindowMiddleware`] (and its name in the
/// QueryMT middleware documentation); config `type = "context"` is a
/// deprecated alias of `context_window`.
pub type ContextMiddleware = ContextWindowMiddleware;

/// The former name of [`ContextWindowConfig`].
pub type ContextConfig = ContextWindowConfig;

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<MessageTrimMiddleware>(),
    doc_of::<SummarizationMiddleware>(),
    doc_of::<ContextEditingMiddleware>(),
    doc_of::<ContextClippingMiddleware>(),
    doc_of::<ContextWindowMiddleware>(),
    doc_of::<DeltaCompressionMiddleware>(),
    doc_of::<OutputCompressionMiddleware>(),
    doc_of::<TranscriptCompressionMiddleware>(),
    doc_of::<RetrievalCompressionMiddleware>(),
];
