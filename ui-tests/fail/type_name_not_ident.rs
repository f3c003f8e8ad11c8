use tinyagents::prelude::*;

#[before_model(type_name = "Tagger")]
async fn tag(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

fn main() {}
