use tinyagents::prelude::*;

/// Writes a file.
#[tool]
async fn write(#[file(rw)] path: String) -> Result<String> {
    Ok(path)
}

fn main() {}
