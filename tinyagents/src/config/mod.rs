//! Config-driven middleware: typed config structs (`#[derive(MiddlewareConfig)]`)
//! and the registry that builds stacks from TOML.
