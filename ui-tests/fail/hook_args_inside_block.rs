use tinyagents::prelude::*;

struct Tagger;

#[middleware]
impl Tagger {
    #[before_model(name = "tagger")]
    async fn tag(&self, request: &mut ModelRequest) -> Result<()> {
        let _ = request;
        Ok(())
    }
}

fn main() {}
