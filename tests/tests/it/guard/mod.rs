//! The guards: `shell_fs_guard` (its corpus, the attacks that once got through, the one-parse plan), `pii`, the protected-path table and the patch tool.

mod copy_landing;
mod corpus;
mod escapes;
mod file_tools;
mod one_parse;
mod one_parse_attacks;
mod patch_tool;
mod pii;
mod pii_corpus;
mod pii_hostile;
mod pii_keyed;
mod pii_scan;
mod pii_streams;
mod pii_support;
mod protected_table;
mod shell_fs_guard;
mod workspace;
