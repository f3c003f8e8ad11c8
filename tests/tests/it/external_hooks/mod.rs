//! External command hooks: the JSON protocol, fail-closed policy events, hooks run in the sandbox, and what their answers may do.

mod answers;
mod fail_closed;
mod protocol;
mod sandboxed;
pub mod support;
