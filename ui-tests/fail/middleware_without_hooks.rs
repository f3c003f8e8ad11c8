use tinyagents::prelude::*;

struct Tagger;

#[middleware]
impl Tagger {
    fn helper(&self) {}
}

fn main() {}
