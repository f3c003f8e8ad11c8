use tinyagents::prelude::*;

#[dynamic_prompt]
fn prompt() -> &'static str {
    "Be brief."
}

fn main() {}
