//! One type cannot implement both `Middleware` and `ModelMiddleware`: its
//! wrap goes in `Middleware::wrap_model`, so it can never be left out of the
//! onion by a registration that only sees `Middleware`.

use tinyagents::harness::middleware::ModelMiddleware;
use tinyagents::prelude::*;

struct Both;

#[async_trait::async_trait]
impl Middleware<()> for Both {
    async fn before_model(&self, _: &mut RunContext, _: &(), _: &mut ModelRequest) -> Result<()> {
        Ok(())
    }
}

#[async_trait::async_trait]
impl ModelMiddleware<()> for Both {
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

fn main() {}
