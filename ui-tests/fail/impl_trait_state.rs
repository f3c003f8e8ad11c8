use tinyagents::prelude::*;

#[before_model]
async fn show(state: &impl std::fmt::Debug, request: &mut ModelRequest) -> Result<()> {
    let _ = (state, request);
    Ok(())
}

fn main() {}
