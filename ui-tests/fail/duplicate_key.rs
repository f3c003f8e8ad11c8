use tinyagents::prelude::*;

#[before_model(name = "a", name = "b")]
async fn tag(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

fn main() {}
