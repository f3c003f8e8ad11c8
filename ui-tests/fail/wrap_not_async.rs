use tinyagents::prelude::*;

#[wrap_model]
fn retry(ctx: &mut RunContext, state: &(), request: ModelRequest, next: ModelHandler<'_, ()>) -> Result<ModelResponse> {
    let _ = (ctx, state, request, next);
    todo!()
}

fn main() {}
