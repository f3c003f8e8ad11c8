use tinyagents::prelude::*;

/// Adds a pair.
#[tool]
async fn add((a, b): (i64, i64)) -> Result<i64> {
    Ok(a + b)
}

fn main() {}
