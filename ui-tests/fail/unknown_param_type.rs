use tinyagents::prelude::*;

#[before_model]
async fn limit(request: &mut ModelRequest, max: u32) -> Result<()> {
    let _ = (request, max);
    Ok(())
}

fn main() {}
