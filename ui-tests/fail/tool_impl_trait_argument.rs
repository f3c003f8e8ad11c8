use tinyagents::prelude::*;

/// Shows.
#[tool]
async fn show(value: impl std::fmt::Display) -> Result<String> {
    Ok(value.to_string())
}

fn main() {}
