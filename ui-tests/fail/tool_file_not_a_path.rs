use tinyagents::prelude::*;

/// Reads a file by number.
#[tool]
async fn read(#[file(read)] fd: u32) -> Result<String> {
    Ok(fd.to_string())
}

fn main() {}
