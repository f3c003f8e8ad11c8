//! Every form `#[tool]` accepts.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tinyagents::harness::tool::{ToolContext, ToolOutput, ToolPolicy};
use tinyagents::prelude::*;

#[derive(Serialize, Deserialize, schemars::JsonSchema)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

/// Plain typed parameters, one documented, one optional.
#[tool]
async fn plain(
    /// A word.
    word: String,
    times: Option<u8>,
) -> Result<String> {
    Ok(word.repeat(usize::from(times.unwrap_or(1))))
}

/// A serialisable result, the context by value, a named tool with a policy.
#[tool(name = "mid-point", type_name = MidPointTool, policy = ToolPolicy::classified())]
pub async fn mid(cx: ToolContext, a: Point, b: Point) -> Result<Point> {
    cx.progress("computing");
    Ok(Point { x: (a.x + b.x) / 2.0, y: (a.y + b.y) / 2.0 })
}

/// A foreign error type, a plain value, no arguments.
#[tool]
async fn now() -> std::result::Result<String, std::io::Error> {
    Ok("noon".into())
}

/// An infallible tool.
#[tool(allow_unknown_args)]
async fn constant() -> ToolOutput {
    ToolOutput::from("42")
}

/// The whole object as one type.
#[tool]
async fn distance(#[args] p: Point) -> f64 {
    (p.x * p.x + p.y * p.y).sqrt()
}

/// Files read and written.
#[tool(description = "Copies files.")]
async fn copy(#[file(read)] from: Vec<PathBuf>, #[file(write)] to: Option<String>, cx: &ToolContext) -> Result<String> {
    Ok(format!("{} {:?} {}", from.len(), to, cx.call_id()))
}

fn main() {
    let _tools = ToolRegistry::new()
        .with(Plain)
        .and_then(|r| r.with(MidPointTool))
        .and_then(|r| r.with(Now))
        .and_then(|r| r.with(Constant))
        .and_then(|r| r.with(Distance))
        .and_then(|r| r.with(Copy))
        .unwrap();
}
