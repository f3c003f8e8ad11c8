use tinyagents::prelude::*;

struct Calculator;

impl Calculator {
    /// Adds.
    #[tool]
    async fn add(&self, a: i64, b: i64) -> Result<i64> {
        Ok(a + b)
    }
}

fn main() {}
