//! The built-in tools an agent can name: file tools working inside one
//! workspace root ([`FileTool`], [`WorkspaceRoot`]) and the sandboxed shell
//! (`ShellTool`, with the `commands` feature). [`BUILTIN_TOOLS`] lists
//! them; [`builtin_tool`] builds one by name (what
//! [`Agent::single().tools([...])`](crate::single::SingleAgentBuilder::tools) does).
//!
//! Every path a file tool takes is resolved inside the root (`..`, absolute
//! paths elsewhere and symbolic links pointing out are refused), what it
//! reads and returns is bounded ([`MAX_READ_BYTES`], [`MAX_ENTRIES`], …),
//! and each declares the files a call touches, so guards and the scheduler
//! judge it.

mod beneath;
mod files;
mod root;

use std::sync::Arc;

pub use files::{
    FileOp, FileTool, MAX_ENTRIES, MAX_READ_BYTES, MAX_SEARCH_FILES, MAX_SEARCH_FILE_BYTES, MAX_WALK_ENTRIES,
    MAX_WRITE_BYTES,
};
pub use root::{WorkspaceRoot, MAX_PATH_BYTES};

use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::tool::Tool;

/// One built-in tool: its name, what it does, and whether it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinTool {
    /// The name an agent gives (`read_tool`).
    pub name: &'static str,
    /// The file operation, or `None` for the sandboxed shell.
    pub op: Option<FileOp>,
    /// One line of documentation.
    pub summary: &'static str,
}

/// Every built-in tool, by name (QueryMT's names).
pub const BUILTIN_TOOLS: &[BuiltinTool] = &[
    BuiltinTool {
        name: "read_tool",
        op: Some(FileOp::Read),
        summary: "reads a text file (or a range of its lines)",
    },
    BuiltinTool {
        name: "write_file",
        op: Some(FileOp::Write),
        summary: "writes a whole file",
    },
    BuiltinTool {
        name: "edit",
        op: Some(FileOp::Edit),
        summary: "replaces one exact text in a file",
    },
    BuiltinTool {
        name: "ls",
        op: Some(FileOp::List),
        summary: "lists a directory",
    },
    BuiltinTool {
        name: "glob",
        op: Some(FileOp::Glob),
        summary: "finds files by a glob pattern",
    },
    BuiltinTool {
        name: "search_text",
        op: Some(FileOp::SearchText),
        summary: "finds lines by a regular expression (grep)",
    },
    BuiltinTool {
        name: "shell",
        op: None,
        summary: "runs a command line in the OS sandbox, rooted at the workspace",
    },
];

/// The built-in tool `name`, working in `root`. An unknown name is a
/// `Config` error listing the valid ones.
pub fn builtin_tool(name: &str, root: &WorkspaceRoot) -> Result<Arc<dyn Tool>> {
    let Some(tool) = BUILTIN_TOOLS.iter().find(|t| t.name == name) else {
        let valid: Vec<&str> = BUILTIN_TOOLS.iter().map(|t| t.name).collect();
        return Err(TinyAgentsError::config(format!(
            "there is no built-in tool named `{name}`{}; the built-in tools are {}",
            crate::config::suggest::did_you_mean(name, valid.iter().copied()),
            crate::config::suggest::list(valid.iter().copied())
        )));
    };
    match tool.op {
        Some(op) => Ok(Arc::new(FileTool::new(tool.name, op, root.clone()))),
        None => shell(root),
    }
}

#[cfg(all(unix, feature = "commands"))]
fn shell(root: &WorkspaceRoot) -> Result<Arc<dyn Tool>> {
    use crate::sandbox::{SandboxPolicy, ShellTool};
    Ok(Arc::new(ShellTool::new(SandboxPolicy::new(root.path()))?))
}

#[cfg(all(unix, not(feature = "commands")))]
fn shell(_root: &WorkspaceRoot) -> Result<Arc<dyn Tool>> {
    Err(TinyAgentsError::config(
        "the built-in `shell` tool runs on the command engine, which this build left out: turn on the \
         `commands` feature of tinyagents, or leave the tool out",
    ))
}

#[cfg(not(unix))]
fn shell(_root: &WorkspaceRoot) -> Result<Arc<dyn Tool>> {
    Err(TinyAgentsError::config(
        "the built-in `shell` tool runs in the OS sandbox, which this platform does not have; leave it out",
    ))
}
