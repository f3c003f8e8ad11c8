use tinyagents::prelude::*;

struct Tagger;

#[middleware]
impl Tagger {
    #[before_model]
    async fn tag(request: &mut ModelRequest) -> Result<()> {
        let _ = request;
        Ok(())
    }
}

fn main() {}
