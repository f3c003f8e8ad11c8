//! Built-ins that review what a turn writes to the workspace's files (one
//! file written by several calls of one reply; code like code already
//! there): see the table in [the library docs](super).

mod dedup_check;
mod parallel_edit_guard;

pub use dedup_check::{DedupCheckConfig, DedupCheckMiddleware, SimilarPlace};
pub use parallel_edit_guard::{EditGuardMode, ParallelEditGuardConfig, ParallelEditGuardMiddleware};

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<ParallelEditGuardMiddleware>(),
    doc_of::<DedupCheckMiddleware>(),
];
