use tinyagents::prelude::*;

#[before_model(nmae = "x", can_jump_to = [start])]
async fn tag(request: &mut ModelRequest, n: u32) -> Result<String> {
    let _ = (request, n);
    Ok(String::new())
}

fn main() {}
