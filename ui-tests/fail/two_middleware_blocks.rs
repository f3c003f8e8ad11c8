// One `#[middleware]` block per type: the second is refused.
use tinyagents::prelude::*;

struct Counter;

#[middleware]
impl Counter {
    #[before_model]
    fn before(&self) -> Result<()> {
        Ok(())
    }
}

#[middleware]
impl Counter {
    #[after_model]
    fn after(&self) -> Result<()> {
        Ok(())
    }
}

fn main() {}
