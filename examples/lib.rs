//! Helpers shared by the runnable examples.
