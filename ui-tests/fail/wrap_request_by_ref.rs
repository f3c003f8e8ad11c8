use tinyagents::prelude::*;

#[wrap_model]
async fn around(request: &mut ModelRequest, next: ModelHandler<'_, ()>) -> Result<ModelResponse> {
    let _ = (request, next);
    todo!()
}

fn main() {}
