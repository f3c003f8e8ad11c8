use tinyagents::prelude::*;

/// Greets.
#[tool]
async fn greet(name: &str) -> Result<String> {
    Ok(format!("hi {name}"))
}

fn main() {}
