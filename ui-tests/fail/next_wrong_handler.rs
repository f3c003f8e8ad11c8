use tinyagents::prelude::*;

#[wrap_model]
async fn around(ctx: &mut RunContext, request: ModelRequest, next: ToolHandler<'_, ()>) -> Result<ModelResponse> {
    let _ = (ctx, request, next);
    todo!()
}

fn main() {}
