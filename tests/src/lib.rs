//! Shared helpers for the behaviour tests in `tests/tests/`.
