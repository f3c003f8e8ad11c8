use tinyagents::prelude::*;

#[before_model(doc(sumary = "Tags requests."))]
async fn tag(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

fn main() {}
