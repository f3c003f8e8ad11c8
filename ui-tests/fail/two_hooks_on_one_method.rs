use tinyagents::prelude::*;

struct Tagger;

#[middleware]
impl Tagger {
    #[before_model]
    #[after_model]
    async fn both(&self) -> Result<()> {
        Ok(())
    }
}

fn main() {}
