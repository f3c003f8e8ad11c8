use tinyagents::prelude::*;

#[middleware]
struct Tagger;

fn main() {}
