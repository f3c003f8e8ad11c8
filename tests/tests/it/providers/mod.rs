//! The model providers against loopback servers (and fakellm): wire formats, bounds, secrets, redirects, typed output;
//! and the scripted model's replay.

mod anthropic;
mod bounds;
mod client;
mod fakellm;
mod openai;
mod redirects;
mod scripted;
mod secrets;
mod stack;
#[cfg(feature = "providers")]
pub(crate) mod support;
mod typed;
