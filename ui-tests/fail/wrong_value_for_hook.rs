use tinyagents::prelude::*;

#[after_model]
async fn edit(request: &mut ModelRequest) -> Result<()> {
    let _ = request;
    Ok(())
}

fn main() {}
