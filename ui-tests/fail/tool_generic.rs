use tinyagents::prelude::*;

/// Echoes.
#[tool]
async fn echo<T: serde::Serialize>(value: T) -> Result<T> {
    Ok(value)
}

fn main() {}
