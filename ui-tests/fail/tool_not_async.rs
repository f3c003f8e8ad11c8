use tinyagents::prelude::*;

/// Adds.
#[tool]
fn add(a: i64, b: i64) -> Result<i64> {
    Ok(a + b)
}

fn main() {}
