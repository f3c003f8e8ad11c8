//! trybuild cases for the tinyagents DSL live in `pass/` and `fail/`.
