use tinyagents::prelude::*;

#[before_model(builtin = true)]
async fn tag(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

fn main() {}
