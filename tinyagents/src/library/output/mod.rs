//! Output built-ins (output-limit recovery, structured output validation):
//! see the table in [the library docs](super).

mod output_limit_recovery;
mod structured_output;

pub use output_limit_recovery::{
    OutputLimitRecoveryConfig, OutputLimitRecoveryMiddleware, DEFAULT_CONTINUATION_INSTRUCTION,
};
pub use structured_output::{StructuredOutputConfig, StructuredOutputMiddleware, STRUCTURED_OUTPUT_SEGMENT};

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<OutputLimitRecoveryMiddleware>(),
    doc_of::<StructuredOutputMiddleware>(),
];
