use tinyagents::prelude::*;

#[before_model(before = [1])]
async fn tag(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

fn main() {}
