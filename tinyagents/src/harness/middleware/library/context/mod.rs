//! Context built-ins (trimming, editing, summarisation, compression, the
//! context monitor): see the table in [the library docs](super).

mod artifacts;
mod compression;
mod delta_compression;
mod editing;
mod monitor;
mod output_compression;
mod retrieval;
mod summarization;
mod summarizer;
mod transcript;
mod trimming;
mod window;

pub use artifacts::{ArtifactStore, ReadArtifactTool};
pub use compression::{ContextCompression, ContextCompressionConfig};
pub use delta_compression::{DeltaCompression, DeltaCompressionConfig};
pub use editing::{ContextEditing, ContextEditingConfig};
pub use monitor::{ContextConfig, ContextMiddleware};
pub use output_compression::{OutputCompression, OutputCompressionConfig};
pub use retrieval::{RetrievalCompression, RetrievalCompressionConfig};
pub use summarization::{Summarization, SummarizationConfig, SummaryTrigger};
pub use summarizer::{ConcatSummarizer, ModelSummarizer, Summarizer, Summary};
pub use transcript::{TranscriptCompression, TranscriptCompressionConfig};
pub use trimming::{MessageTrimming, MessageTrimmingConfig, TrimStrategy};

use crate::docs::MiddlewareMetadata;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of a DSL built-in (every built-in has one: `builtin` requires it).
const fn doc_of<M: MiddlewareMetadata>() -> &'static MiddlewareDoc {
    match M::DOC {
        Some(doc) => doc,
        None => panic!("a built-in always has a doc"),
    }
}

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<MessageTrimming>(),
    doc_of::<Summarization>(),
    doc_of::<ContextEditing>(),
    doc_of::<ContextCompression>(),
    doc_of::<ContextMiddleware>(),
    doc_of::<DeltaCompression>(),
    doc_of::<OutputCompression>(),
    doc_of::<TranscriptCompression>(),
    doc_of::<RetrievalCompression>(),
];
