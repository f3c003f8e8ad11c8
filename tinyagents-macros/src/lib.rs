//! The tinyagents middleware DSL. Use it through `tinyagents` (feature `macros`).
