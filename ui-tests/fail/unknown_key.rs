use tinyagents::prelude::*;

#[before_model(nmae = "tagger")]
async fn tag(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

fn main() {}
