use tinyagents::prelude::*;

/// Forgets.
#[tool]
async fn forget(what: String) {
    let _ = what;
}

fn main() {}
