//! Agent files: parsing, bounds, legacy keys, and defaults that agree between config and code.

mod file;
mod file_bounds;
mod legacy_context_keys;
mod names;
mod names_defaults;
