//! The built-in middleware library. Every built-in is declared with the DSL
//! as a documented built-in (`builtin` makes the seven doc fields
//! mandatory) and listed by [`catalog`], from which `docs/middleware.md` is
//! generated.
//!
//! One folder per concern, one file per built-in:
//!
//! | folder | built-ins |
//! | --- | --- |
//! | `observe` | tracing, logging, usage accounting |
//! | `resilience` | timeout, retry, model fallback, rate limiter |
//! | `limits` | model-call limit, tool-call limit, limits (steps, turns, price) |
//! | `policy` | tool policy, contextual tool selection, tool allowlist, dynamic tool selection, human-in-the-loop |
//! | `guard` | shell/filesystem guard, PII redaction |
//! | `modes` | agent modes |
//! | `edits` | parallel edit guard, dedup check |
//! | `prompt` | dynamic prompt, prompt-cache layout guard |
//! | `context` | message trim, context editing, context clipping, summarisation, transcript, retrieval, delta and output compression, context window |
//! | `output` | output-limit recovery, structured output validation |
//! | `external_hooks` | external command hooks (public at `tinyagents::external_hooks`) |

mod context;
pub(crate) mod design_names;
mod edits;
pub mod external_hooks;
mod guard;
mod limits;
mod modes;
mod observe;
mod output;
mod policy;
mod prompt;
mod resilience;

// A folder whose built-ins have not landed yet re-exports nothing.
#[allow(unused_imports)]
pub use context::*;
#[allow(unused_imports)]
pub use edits::*;
#[allow(unused_imports)]
pub use guard::*;
#[allow(unused_imports)]
pub use limits::*;
#[allow(unused_imports)]
pub use modes::*;
#[allow(unused_imports)]
pub use observe::*;
#[allow(unused_imports)]
pub use output::*;
#[allow(unused_imports)]
pub use policy::*;
#[allow(unused_imports)]
pub use prompt::*;
#[allow(unused_imports)]
pub use resilience::*;

/// The message helpers the `harness::middleware` design names under `summarization::`.
pub mod summarization {
    pub use super::context::message_trim::trim_messages;
}

use crate::docs::MiddlewareMetadata;
use crate::harness::middleware::MiddlewareDoc;

/// The docs of a DSL built-in (every built-in has one: `builtin` requires it),
/// for the concern folders' `CATALOG` lists.
const fn doc_of<M: MiddlewareMetadata>() -> &'static MiddlewareDoc {
    match M::DOC {
        Some(doc) => doc,
        None => panic!("a built-in always has a doc"),
    }
}

/// The documentation of every built-in middleware, in a stable order (by concern, then as each concern lists them).
pub fn catalog() -> Vec<&'static MiddlewareDoc> {
    [
        observe::CATALOG,
        resilience::CATALOG,
        limits::CATALOG,
        policy::CATALOG,
        guard::CATALOG,
        modes::CATALOG,
        edits::CATALOG,
        prompt::CATALOG,
        context::CATALOG,
        output::CATALOG,
        external_hooks::CATALOG,
    ]
    .concat()
}
