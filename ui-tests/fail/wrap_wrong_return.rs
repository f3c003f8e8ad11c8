use tinyagents::prelude::*;

#[wrap_tool]
async fn around(call: ToolCall, next: ToolHandler<'_, ()>) -> Result<()> {
    let _ = (call, next);
    Ok(())
}

fn main() {}
