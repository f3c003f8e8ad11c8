use tinyagents::prelude::*;

struct Tagger {
    count: u32,
}

#[middleware]
impl Tagger {
    #[before_model]
    async fn tag(&mut self, request: &mut ModelRequest) -> Result<()> {
        let _ = request;
        self.count += 1;
        Ok(())
    }
}

fn main() {}
