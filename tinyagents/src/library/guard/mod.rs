//! Security guard built-ins: see the table in [the library docs](super).

mod commands;
mod path_check;
#[cfg(feature = "pii")]
mod pii;
mod shell_check;
mod shell_fs_guard;

pub use commands::intrinsic_refusal;
pub use path_check::DEFAULT_PROTECTED_PATHS;
#[cfg(feature = "pii")]
pub use pii::{PiiConfig, PiiMiddleware, PiiStrategy};
pub use shell_fs_guard::{
    ShellFsGuardConfig, ShellFsGuardMiddleware, DEFAULT_ALLOW_COMMANDS, DEFAULT_CWD_KEYS, DEFAULT_DENY_COMMANDS,
    DEFAULT_FILE_TOOLS, DEFAULT_GLOB_KEYS, DEFAULT_PATCH_KEYS, DEFAULT_PATH_KEYS, DEFAULT_SHELL_EXTRA_KEYS,
    DEFAULT_SHELL_TOOLS, DEFAULT_TEXT_KEYS, DEFAULT_WRITE_TOOLS, GUARD_PROFILES,
};
#[cfg(feature = "pii")]
pub use tinyagents_pii::{PiiCounts, PHONE_KEY_WORDS, PII_TYPES};

use super::doc_of;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of this folder's built-ins, in the order the catalog lists them.
pub(super) const CATALOG: &[&MiddlewareDoc] = &[
    doc_of::<ShellFsGuardMiddleware>(),
    #[cfg(feature = "pii")]
    doc_of::<PiiMiddleware>(),
];
