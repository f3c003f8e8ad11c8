use tinyagents::prelude::*;

/// Tags requests.
#[before_model(builtin, doc(mutation = "Adds a segment."))]
async fn tag(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

fn main() {}
