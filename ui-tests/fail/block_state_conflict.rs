use tinyagents::prelude::*;

struct A;
struct B;
struct Tagger;

#[middleware]
impl Tagger {
    #[before_model]
    async fn tag(&self, state: &A) -> Result<()> {
        let _ = state;
        Ok(())
    }

    #[after_model]
    async fn check(&self, state: &B) -> Result<()> {
        let _ = state;
        Ok(())
    }
}

fn main() {}
