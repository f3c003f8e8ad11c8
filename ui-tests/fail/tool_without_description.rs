use tinyagents::prelude::*;

#[tool]
async fn add(a: i64, b: i64) -> Result<i64> {
    Ok(a + b)
}

fn main() {}
