// A type with a separate `ModelMiddleware` impl registered with `add` (or
// `push`, or `Agent::single().middleware`): its wrap would never run (the
// stack dispatches the `Middleware` impl), so it does not compile;
// `add_with_model_wrap` (or `add_layers`) registers both.
use std::sync::Arc;

use tinyagents::harness::middleware::ModelMiddleware;
use tinyagents::prelude::*;

struct Timed;

#[async_trait::async_trait]
impl Middleware<()> for Timed {}

#[async_trait::async_trait]
impl ModelMiddleware<()> for Timed {
    async fn wrap_model(
        &self,
        ctx: &mut RunContext,
        state: &(),
        request: ModelRequest,
        next: ModelHandler<'_, ()>,
    ) -> Result<MiddlewareModelOutcome> {
        next.run(ctx, state, request).await
    }
}

fn main() {
    let mut stack: MiddlewareStack<()> = MiddlewareStack::empty();
    let _ = stack.add(Timed);
    stack.push(Arc::new(Timed));
    // a generic forwarder keeps the check
    let _ = Agent::single().middleware(Timed);
    // the registration that runs the wrap compiles
    let _ = stack.add_with_model_wrap(Timed);
}
