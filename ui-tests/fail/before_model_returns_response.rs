// `#[before_model]` edits the request; replacing the response is `#[wrap_model]`.
use tinyagents::prelude::*;

#[before_model]
async fn cached(request: &mut ModelRequest) -> Result<ModelResponse> {
    let _ = request;
    todo!()
}

fn main() {}
