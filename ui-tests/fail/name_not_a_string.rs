use tinyagents::prelude::*;

#[before_model(name = tagger)]
async fn tag(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

fn main() {}
