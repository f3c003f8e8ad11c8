//! Security guard built-ins: see the table in [the library docs](super).

#[cfg(feature = "pii")]
mod pii;
#[cfg(feature = "commands")]
mod shell_fs_guard;

#[cfg(feature = "pii")]
pub use pii::{PiiConfig, PiiMiddleware, PiiStrategy};
#[cfg(feature = "commands")]
pub use shell_fs_guard::{
    ShellFsGuardConfig, ShellFsGuardMiddleware, DEFAULT_CWD_KEYS, DEFAULT_FILE_TOOLS, DEFAULT_GLOB_KEYS,
    DEFAULT_PATCH_KEYS, DEFAULT_PATH_KEYS, DEFAULT_SHELL_EXTRA_KEYS, DEFAULT_SHELL_TOOLS, DEFAULT_TEXT_KEYS,
    DEFAULT_WRITE_TOOLS, GUARD_PROFILES,
};
#[cfg(feature = "commands")]
pub use tinyagents_commands::{
    intrinsic_refusal, DEFAULT_ALLOW_COMMANDS, DEFAULT_DENY_COMMANDS, DEFAULT_PROTECTED_PATHS,
};
#[cfg(feature = "pii")]
pub use tinyagents_pii::{PiiCounts, PHONE_KEY_WORDS, PII_TYPES};

#[cfg(any(feature = "pii", feature = "commands"))]
use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    #[cfg(feature = "commands")]
    doc_of::<ShellFsGuardMiddleware>(),
    #[cfg(feature = "pii")]
    doc_of::<PiiMiddleware>(),
];
