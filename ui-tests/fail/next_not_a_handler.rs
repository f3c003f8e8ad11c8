use tinyagents::prelude::*;

#[wrap_tool]
async fn around(call: ToolCall, next: fn(ToolCall) -> ToolResult) -> Result<ToolResult> {
    Ok(next(call))
}

fn main() {}
