use tinyagents::prelude::*;

#[wrap_model]
async fn cached(request: ModelRequest) -> Result<ModelResponse> {
    let _ = request;
    Ok(ModelResponse::text("cached"))
}

fn main() {}
