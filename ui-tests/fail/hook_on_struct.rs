use tinyagents::prelude::*;

#[before_model]
struct NotAFn;

fn main() {}
