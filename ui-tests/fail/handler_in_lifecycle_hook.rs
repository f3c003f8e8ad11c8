use tinyagents::prelude::*;

#[before_model]
async fn peek(request: &mut ModelRequest, next: ModelHandler<'_, ()>) -> Result<()> {
    let _ = (request, next);
    Ok(())
}

fn main() {}
