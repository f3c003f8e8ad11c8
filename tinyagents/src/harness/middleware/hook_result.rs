//! [`HookResult`]: what a DSL hook fn's return value must be, checked where
//! the generated code reads it, so that a `Result` of another crate in scope
//! is reported on the fn's return type with the rule and the fix.

use crate::harness::error::Result;

/// The return value of a hook fn written with the DSL: tinyagents's
/// [`Result<T>`](crate::harness::error::Result), whose `Ok` converts into
/// what the stack expects (`()` for a lifecycle hook, the outcome for a
/// wrap, the text for a dynamic prompt).
///
/// The DSL compares a hook's return type by its shape, so `anyhow::Result<()>`
/// is refused when written out; this trait catches the case the shape cannot
/// show, a bare `Result<()>` that means another crate's `Result` because of
/// a `use anyhow::Result;`.
///
/// ```
/// use tinyagents::harness::middleware::HookResult;
/// use tinyagents::prelude::*;
///
/// let answered: Result<ModelResponse> = Ok(ModelResponse::text("hi"));
/// let outcome: Result<tinyagents::harness::middleware::MiddlewareModelOutcome> = answered.into_result();
/// assert!(outcome.is_ok());
/// ```
#[diagnostic::on_unimplemented(
    message = "a hook must return tinyagents's `Result<{T}>`, not `{Self}`",
    label = "not tinyagents's `Result`: its error type is not `TinyAgentsError`",
    note = "a `use anyhow::Result;` (or another crate's `Result`) in scope shadows tinyagents's: write `-> tinyagents::Result<…>`, or drop that import",
    note = "turn another error into a `TinyAgentsError` inside the hook: `.map_err(|e| TinyAgentsError::middleware(\"my_hook\", e.to_string()))?`"
)]
pub trait HookResult<T> {
    /// The value as tinyagents's `Result<T>`.
    fn into_result(self) -> Result<T>;
}

impl<T, U: From<T>> HookResult<U> for Result<T> {
    #[inline(always)]
    fn into_result(self) -> Result<U> {
        self.map(U::from)
    }
}
