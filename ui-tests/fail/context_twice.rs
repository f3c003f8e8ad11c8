use tinyagents::prelude::*;

#[after_tool]
fn twice(a: &mut RunContext, result: &mut ToolResult, b: &RunContext) -> Result<()> {
    let _ = (a, result, b);
    Ok(())
}

fn main() {}
