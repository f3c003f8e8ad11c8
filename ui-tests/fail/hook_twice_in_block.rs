use tinyagents::prelude::*;

struct Tagger;

#[middleware]
impl Tagger {
    #[before_model]
    async fn first(&self, request: &mut ModelRequest) -> Result<()> {
        let _ = request;
        Ok(())
    }

    #[before_model]
    async fn second(&self, request: &mut ModelRequest) -> Result<()> {
        let _ = request;
        Ok(())
    }
}

fn main() {}
