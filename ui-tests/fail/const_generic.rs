use tinyagents::prelude::*;

#[before_model]
async fn limit<const N: usize>(request: &mut ModelRequest) -> Result<()> {
    request.messages.truncate(N);
    Ok(())
}

fn main() {}
