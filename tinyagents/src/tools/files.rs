//! The built-in file tools: one [`FileTool`] per operation, each working
//! inside one [`WorkspaceRoot`], bounded in what it reads and returns.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::root::WorkspaceRoot;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::tool::{
    FileAccess, FileAccessMode, SideEffects, Tool, ToolContext, ToolOutput, ToolPolicy, ToolSchema,
};

/// The most bytes `read_tool` returns from one file.
pub const MAX_READ_BYTES: usize = 256 * 1024;
/// The most bytes `write_file` and `edit` write in one call.
pub const MAX_WRITE_BYTES: usize = 4 * 1024 * 1024;
/// The most entries `ls` and `glob` list, and the most matches `search_text` returns.
pub const MAX_ENTRIES: usize = 1000;
/// The most files `search_text` reads in one call.
pub const MAX_SEARCH_FILES: usize = 20_000;
/// The largest file `search_text` reads (larger ones are skipped).
pub const MAX_SEARCH_FILE_BYTES: u64 = 1024 * 1024;

/// What a [`FileTool`] does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileOp {
    /// `read_tool`: a file's text, optionally a range of lines.
    Read,
    /// `write_file`: writes a whole file (creating its directories).
    Write,
    /// `edit`: replaces one exact occurrence of a text in a file.
    Edit,
    /// `ls`: a directory's entries.
    List,
    /// `glob`: the files matching a pattern.
    Glob,
    /// `search_text`: the lines matching a regular expression.
    SearchText,
}

impl FileOp {
    /// Whether the operation changes files.
    pub const fn writes(self) -> bool {
        matches!(self, Self::Write | Self::Edit)
    }

    fn describe(self) -> (&'static str, Value) {
        match self {
            Self::Read => (
                "Reads a text file of the workspace. `offset` (first line, from 1) and `limit` (lines) read part of it.",
                json!({"type": "object", "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace."},
                    "offset": {"type": "integer", "minimum": 1},
                    "limit": {"type": "integer", "minimum": 1}
                }, "required": ["path"], "additionalProperties": false}),
            ),
            Self::Write => (
                "Writes a whole file of the workspace (creating it and its directories).",
                json!({"type": "object", "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"}
                }, "required": ["path", "content"], "additionalProperties": false}),
            ),
            Self::Edit => (
                "Replaces `old_string` with `new_string` in a file; `old_string` must occur exactly once unless `replace_all`.",
                json!({"type": "object", "properties": {
                    "path": {"type": "string"},
                    "old_string": {"type": "string"},
                    "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean"}
                }, "required": ["path", "old_string", "new_string"], "additionalProperties": false}),
            ),
            Self::List => (
                "Lists a directory of the workspace (default: its root); directories end with `/`.",
                json!({"type": "object", "properties": {
                    "path": {"type": "string"}
                }, "additionalProperties": false}),
            ),
            Self::Glob => (
                "The workspace files matching a glob pattern (`src/**/*.rs`).",
                json!({"type": "object", "properties": {
                    "pattern": {"type": "string"}
                }, "required": ["pattern"], "additionalProperties": false}),
            ),
            Self::SearchText => (
                "The lines of workspace files matching a regular expression, as `path:line: text`; `include` filters file names by a glob (`*.md`).",
                json!({"type": "object", "properties": {
                    "pattern": {"type": "string"},
                    "path": {"type": "string"},
                    "include": {"type": "string"}
                }, "required": ["pattern"], "additionalProperties": false}),
            ),
        }
    }
}

/// A built-in file tool: one [`FileOp`] inside one workspace root.
///
/// ```
/// use tinyagents::tools::{FileOp, FileTool, WorkspaceRoot};
/// use tinyagents::prelude::*;
///
/// let root = WorkspaceRoot::new(std::env::temp_dir()).unwrap();
/// let read = FileTool::new("read_tool", FileOp::Read, root);
/// assert_eq!(read.schema().name, "read_tool");
/// ```
#[derive(Debug, Clone)]
pub struct FileTool {
    op: FileOp,
    schema: ToolSchema,
    root: Arc<WorkspaceRoot>,
}

fn arg<'a>(tool: &str, arguments: &'a Value, key: &str) -> Result<&'a str> {
    arguments.get(key).and_then(Value::as_str).ok_or_else(|| {
        TinyAgentsError::validation(format!(
            "tool `{tool}` needs the string argument `{key}`; got {}",
            arguments.get(key).map_or("nothing".to_owned(), Value::to_string)
        ))
    })
}

fn io(tool: &str, path: &Path, e: std::io::Error) -> TinyAgentsError {
    TinyAgentsError::Tool {
        tool: tool.to_owned(),
        message: format!("`{}`: {e}", path.display()),
    }
}

impl FileTool {
    /// The tool `name` doing `op` inside `root`.
    pub fn new(name: impl Into<String>, op: FileOp, root: WorkspaceRoot) -> Self {
        let (description, parameters) = op.describe();
        Self {
            op,
            schema: ToolSchema::new(name, description).with_parameters(parameters),
            root: Arc::new(root),
        }
    }

    /// The operation.
    pub fn op(&self) -> FileOp {
        self.op
    }

    fn name(&self) -> &str {
        &self.schema.name
    }

    fn run(&self, arguments: &Value) -> Result<String> {
        let name = self.name();
        match self.op {
            FileOp::Read => {
                let path = self.root.resolve(arg(name, arguments, "path")?)?;
                let bytes = std::fs::read(&path).map_err(|e| io(name, &path, e))?;
                let text = String::from_utf8_lossy(&bytes);
                let offset = arguments.get("offset").and_then(Value::as_u64).unwrap_or(1).max(1) as usize;
                let limit = arguments.get("limit").and_then(Value::as_u64).map(|l| l as usize);
                let mut out = String::new();
                for line in text.lines().skip(offset - 1).take(limit.unwrap_or(usize::MAX)) {
                    if out.len() + line.len() + 1 > MAX_READ_BYTES {
                        out.push_str(&format!(
                            "[cut at {MAX_READ_BYTES} bytes: read the rest with `offset` and `limit`]\n"
                        ));
                        break;
                    }
                    out.push_str(line);
                    out.push('\n');
                }
                Ok(out)
            }
            FileOp::Write => {
                let path = self.root.resolve(arg(name, arguments, "path")?)?;
                let content = arg(name, arguments, "content")?;
                if content.len() > MAX_WRITE_BYTES {
                    return Err(TinyAgentsError::validation(format!(
                        "tool `{name}` writes at most {MAX_WRITE_BYTES} bytes; `content` has {}: split the file",
                        content.len()
                    )));
                }
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| io(name, dir, e))?;
                }
                std::fs::write(&path, content).map_err(|e| io(name, &path, e))?;
                Ok(format!("wrote {} bytes to {}", content.len(), self.root.display(&path)))
            }
            FileOp::Edit => {
                let path = self.root.resolve(arg(name, arguments, "path")?)?;
                let old = arg(name, arguments, "old_string")?;
                let new = arg(name, arguments, "new_string")?;
                let all = arguments.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
                if old.is_empty() {
                    return Err(TinyAgentsError::validation(format!(
                        "tool `{name}`: `old_string` is empty; give the exact text to replace"
                    )));
                }
                let text = std::fs::read_to_string(&path).map_err(|e| io(name, &path, e))?;
                let count = text.matches(old).count();
                let shown = self.root.display(&path);
                if count == 0 || (count > 1 && !all) {
                    return Err(TinyAgentsError::Tool {
                        tool: name.to_owned(),
                        message: format!(
                            "`old_string` occurs {count} times in `{shown}`; it must occur exactly once (add \
                             surrounding lines to make it unique, or set `replace_all`)"
                        ),
                    });
                }
                let edited = text.replace(old, new);
                if edited.len() > MAX_WRITE_BYTES {
                    return Err(TinyAgentsError::validation(format!(
                        "tool `{name}`: the edited `{shown}` would exceed {MAX_WRITE_BYTES} bytes"
                    )));
                }
                std::fs::write(&path, edited).map_err(|e| io(name, &path, e))?;
                Ok(format!("replaced {count} occurrence(s) in {shown}"))
            }
            FileOp::List => {
                let path = self
                    .root
                    .resolve(arguments.get("path").and_then(Value::as_str).unwrap_or("."))?;
                let mut names: Vec<String> = Vec::new();
                for entry in std::fs::read_dir(&path).map_err(|e| io(name, &path, e))? {
                    let entry = entry.map_err(|e| io(name, &path, e))?;
                    let mut n = entry.file_name().to_string_lossy().into_owned();
                    if entry.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        n.push('/');
                    }
                    names.push(n);
                    if names.len() > MAX_ENTRIES {
                        break;
                    }
                }
                names.sort();
                Ok(bounded(names))
            }
            FileOp::Glob => {
                let pattern = arg(name, arguments, "pattern")?;
                if Path::new(pattern).is_absolute() || pattern.split(['/', '\\']).any(|p| p == "..") {
                    return Err(TinyAgentsError::validation(format!(
                        "tool `{name}`: pattern `{pattern}` must be relative to the workspace, without `..`"
                    )));
                }
                let full = self.root.path().join(pattern);
                let matches = glob::glob(&full.to_string_lossy()).map_err(|e| {
                    TinyAgentsError::validation(format!("tool `{name}`: pattern `{pattern}` is not a glob: {e}"))
                })?;
                let mut found = Vec::new();
                for path in matches.flatten() {
                    // a symlink out of the workspace is not listed
                    if path.canonicalize().is_ok_and(|real| real.starts_with(self.root.path())) {
                        found.push(self.root.display(&path));
                        if found.len() > MAX_ENTRIES {
                            break;
                        }
                    }
                }
                Ok(bounded(found))
            }
            FileOp::SearchText => self.search(arguments),
        }
    }

    fn search(&self, arguments: &Value) -> Result<String> {
        let name = self.name();
        let pattern = arg(name, arguments, "pattern")?;
        let regex = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| TinyAgentsError::validation(format!("tool `{name}`: `pattern` is not a regex: {e}")))?;
        let include = match arguments.get("include").and_then(Value::as_str) {
            Some(g) => Some(glob::Pattern::new(g).map_err(|e| {
                TinyAgentsError::validation(format!("tool `{name}`: `include` = `{g}` is not a glob: {e}"))
            })?),
            None => None,
        };
        let start = self
            .root
            .resolve(arguments.get("path").and_then(Value::as_str).unwrap_or("."))?;
        let mut stack: Vec<PathBuf> = vec![start];
        let mut hits = Vec::new();
        let mut files = 0usize;
        while let Some(path) = stack.pop() {
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                if path.file_name().is_some_and(|n| n == ".git") {
                    continue;
                }
                let Ok(entries) = std::fs::read_dir(&path) else {
                    continue;
                };
                let mut children: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
                children.sort_by(|a, b| b.cmp(a));
                stack.extend(children);
                continue;
            }
            // symlinks are not followed: their target may be outside
            if !meta.is_file() || meta.len() > MAX_SEARCH_FILE_BYTES {
                continue;
            }
            let shown = self.root.display(&path);
            if let Some(include) = &include {
                let file_name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
                if !include.matches(&file_name) && !include.matches(&shown) {
                    continue;
                }
            }
            files += 1;
            if files > MAX_SEARCH_FILES {
                hits.push(format!(
                    "[stopped after {MAX_SEARCH_FILES} files: narrow `path` or `include`]"
                ));
                break;
            }
            let Ok(bytes) = std::fs::read(&path) else { continue };
            if bytes.contains(&0) {
                continue;
            }
            for (i, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
                if regex.is_match(line) {
                    hits.push(format!("{shown}:{}: {line}", i + 1));
                }
            }
            if hits.len() > MAX_ENTRIES {
                break;
            }
        }
        Ok(bounded(hits))
    }
}

/// The lines, at most [`MAX_ENTRIES`] of them (and a note when more were cut).
fn bounded(mut lines: Vec<String>) -> String {
    if lines.is_empty() {
        return "(nothing)".to_owned();
    }
    if lines.len() > MAX_ENTRIES {
        lines.truncate(MAX_ENTRIES);
        lines.push(format!("[more than {MAX_ENTRIES}: narrow the request]"));
    }
    lines.join("\n")
}

#[async_trait]
impl Tool for FileTool {
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    fn policy(&self) -> ToolPolicy {
        let effects = if self.op.writes() {
            SideEffects::READ | SideEffects::WRITE
        } else {
            SideEffects::READ
        };
        ToolPolicy::classified().with_side_effects(effects)
    }

    fn file_access(&self, arguments: &Value) -> Vec<FileAccess> {
        let mode = if self.op.writes() {
            FileAccessMode::Write
        } else {
            FileAccessMode::Read
        };
        let path = match self.op {
            FileOp::Glob => Some("."),
            FileOp::List | FileOp::SearchText => Some(arguments.get("path").and_then(Value::as_str).unwrap_or(".")),
            _ => arguments.get("path").and_then(Value::as_str),
        };
        path.map(|p| {
            let path = self
                .root
                .resolve(p)
                .map_or_else(|_| p.to_owned(), |abs| abs.to_string_lossy().into_owned());
            vec![FileAccess { path, mode }]
        })
        .unwrap_or_default()
    }

    async fn call(&self, _cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        let tool = self.clone();
        let out = tokio::task::spawn_blocking(move || tool.run(&arguments))
            .await
            .map_err(|e| TinyAgentsError::Tool {
                tool: self.schema.name.clone(),
                message: format!("the file operation stopped: {e}"),
            })??;
        Ok(ToolOutput::from(out))
    }
}
