use tinyagents::prelude::*;

#[before_tool]
fn inspect(call: ToolCall) -> Result<()> {
    let _ = call;
    Ok(())
}

fn main() {}
