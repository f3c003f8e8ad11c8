use tinyagents::prelude::*;

struct Tagger;

#[middleware]
impl Default for Tagger {
    fn default() -> Self {
        Tagger
    }
}

fn main() {}
