//! Helpers shared by the runnable examples (and their tests).

#[cfg(feature = "otlp")]
#[path = "support/otlp.rs"]
pub mod otlp;

#[cfg(feature = "http")]
#[path = "support/http.rs"]
pub mod http;
