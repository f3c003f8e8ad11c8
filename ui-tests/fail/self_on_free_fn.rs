use tinyagents::prelude::*;

struct Tagger;

impl Tagger {
    #[before_model]
    async fn tag(&self, request: &mut ModelRequest) -> Result<()> {
        let _ = request;
        Ok(())
    }
}

fn main() {}
