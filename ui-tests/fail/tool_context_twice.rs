use tinyagents::harness::tool::ToolContext;
use tinyagents::prelude::*;

/// Reports.
#[tool]
async fn report(cx: &ToolContext, again: &ToolContext) -> Result<String> {
    Ok(format!("{} {}", cx.call_id(), again.call_id()))
}

fn main() {}
