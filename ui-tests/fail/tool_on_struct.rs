use tinyagents::prelude::*;

#[tool]
struct Search;

fn main() {}
