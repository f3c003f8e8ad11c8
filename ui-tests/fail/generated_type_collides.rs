// `fn budget` generates `Budget`, and a `struct Budget` already exists.
use tinyagents::prelude::*;

#[allow(dead_code)]
struct Budget {
    tokens: u32,
}

#[before_model]
async fn budget(request: &mut ModelRequest) -> Result<()> {
    request.set_volatile("budget", "100 tokens");
    Ok(())
}

fn main() {}
