use tinyagents::prelude::*;

struct A;
struct B;

#[wrap_model]
async fn around(state: &A, request: ModelRequest, next: ModelHandler<'_, B>) -> Result<ModelResponse> {
    let _ = (state, request, next);
    todo!()
}

fn main() {}
