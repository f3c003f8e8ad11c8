//! The built-in file tools: one [`FileTool`] per operation, each working
//! inside one [`WorkspaceRoot`], bounded in what it reads and returns.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::beneath::Beneath;
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
/// The most directory entries `glob` and `search_text` visit in one call
/// (a walk over a larger tree stops with a note).
pub const MAX_WALK_ENTRIES: usize = 200_000;

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
                let given = arg(name, arguments, "path")?;
                let path = self.root.resolve_existing(given)?;
                let (file, _) = open_regular(name, self.root.path(), given, &path)?;
                let offset = arguments.get("offset").and_then(Value::as_u64).unwrap_or(1).max(1);
                let limit = arguments.get("limit").and_then(Value::as_u64).unwrap_or(u64::MAX);
                // streamed line by line: memory stays bounded whatever the file's size
                let mut reader = BufReader::new(file);
                let mut out = String::new();
                let mut buf = Vec::new();
                let (mut number, mut taken) = (0u64, 0u64);
                while taken < limit
                    && next_line(&mut reader, &mut buf, MAX_READ_BYTES + 1).map_err(|e| io(name, &path, e))?
                {
                    number += 1;
                    if number < offset {
                        continue;
                    }
                    while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                        buf.pop();
                    }
                    let line = String::from_utf8_lossy(&buf);
                    if out.len() + line.len() + 1 > MAX_READ_BYTES {
                        out.push_str(&format!(
                            "[cut at {MAX_READ_BYTES} bytes: read the rest with `offset` and `limit`]\n"
                        ));
                        break;
                    }
                    out.push_str(&line);
                    out.push('\n');
                    taken += 1;
                }
                Ok(out)
            }
            FileOp::Write => {
                let given = arg(name, arguments, "path")?;
                let path = self.root.resolve_write(given)?;
                let content = arg(name, arguments, "content")?;
                if content.len() > MAX_WRITE_BYTES {
                    return Err(TinyAgentsError::validation(format!(
                        "tool `{name}` writes at most {MAX_WRITE_BYTES} bytes; `content` has {}: split the file",
                        content.len()
                    )));
                }
                write_replacing(name, self.root.path(), given, &path, content.as_bytes())?;
                Ok(format!("wrote {} bytes to {}", content.len(), self.root.display(&path)))
            }
            FileOp::Edit => {
                let given = arg(name, arguments, "path")?;
                let path = self.root.resolve_write(given)?;
                let old = arg(name, arguments, "old_string")?;
                let new = arg(name, arguments, "new_string")?;
                let all = arguments.get("replace_all").and_then(Value::as_bool).unwrap_or(false);
                if old.is_empty() {
                    return Err(TinyAgentsError::validation(format!(
                        "tool `{name}`: `old_string` is empty; give the exact text to replace"
                    )));
                }
                let (file, meta) = open_regular(name, self.root.path(), given, &path)?;
                if meta.len() > MAX_WRITE_BYTES as u64 {
                    return Err(TinyAgentsError::validation(format!(
                        "tool `{name}`: `{given}` has {} bytes, over the {MAX_WRITE_BYTES} an edit rewrites \
                         (rule: MAX_WRITE_BYTES); edit it with the shell tool",
                        meta.len()
                    )));
                }
                let mut bytes = Vec::new();
                file.take(MAX_WRITE_BYTES as u64 + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|e| io(name, &path, e))?;
                let text = String::from_utf8(bytes).map_err(|_| TinyAgentsError::Tool {
                    tool: name.to_owned(),
                    message: format!("`{given}` is not UTF-8 text (rule: `edit` changes text files only)"),
                })?;
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
                write_replacing(name, self.root.path(), given, &path, edited.as_bytes())?;
                Ok(format!("replaced {count} occurrence(s) in {shown}"))
            }
            FileOp::List => {
                let given = arguments.get("path").and_then(Value::as_str).unwrap_or(".");
                let path = self.root.resolve_existing(given)?;
                let dir = Beneath::open(self.root.path(), &path, false).map_err(|e| unanchored(name, given, e))?;
                let mut names: Vec<String> = Vec::new();
                for entry in std::fs::read_dir(dir.path()).map_err(|e| io(name, &path, e))? {
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
                let glob = glob::Pattern::new(pattern).map_err(|e| {
                    TinyAgentsError::validation(format!("tool `{name}`: pattern `{pattern}` is not a glob: {e}"))
                })?;
                let options = glob::MatchOptions {
                    case_sensitive: true,
                    require_literal_separator: true,
                    require_literal_leading_dot: false,
                };
                let mut found = Vec::new();
                let note = walk(self.root.path().to_path_buf(), false, |path, meta| {
                    let shown = self.root.display(path);
                    // a symlink is listed when it points inside, never followed
                    let inside = !meta.file_type().is_symlink()
                        || path.canonicalize().is_ok_and(|real| real.starts_with(self.root.path()));
                    if shown != "." && inside && glob.matches_with(&shown, options) {
                        found.push(shown);
                    }
                    found.len() <= MAX_ENTRIES
                });
                found.sort();
                let mut out = bounded(found);
                if let Some(note) = note {
                    out.push_str(&note);
                }
                Ok(out)
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
            .resolve_existing(arguments.get("path").and_then(Value::as_str).unwrap_or("."))?;
        let mut hits = Vec::new();
        let mut files = 0usize;
        let mut stopped = None;
        let note = walk(start, true, |path, meta| {
            // symlinks, FIFOs and devices are not read: a link's target may be outside, a FIFO blocks
            if !meta.is_file() || meta.len() > MAX_SEARCH_FILE_BYTES {
                return true;
            }
            let shown = self.root.display(path);
            if let Some(include) = &include {
                let file_name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
                if !include.matches(&file_name) && !include.matches(&shown) {
                    return true;
                }
            }
            files += 1;
            if files > MAX_SEARCH_FILES {
                stopped = Some(format!(
                    "[stopped after {MAX_SEARCH_FILES} files: narrow `path` or `include`]"
                ));
                return false;
            }
            // opened without following a link or blocking, checked regular on the open file
            let Ok((file, _)) = open_regular(name, self.root.path(), &shown, path) else {
                return true;
            };
            let mut bytes = Vec::new();
            if file.take(MAX_SEARCH_FILE_BYTES).read_to_end(&mut bytes).is_err() || bytes.contains(&0) {
                return true;
            }
            for (i, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
                if regex.is_match(line) {
                    hits.push(format!("{shown}:{}: {line}", i + 1));
                }
            }
            hits.len() <= MAX_ENTRIES
        });
        let mut out = bounded(hits);
        if let Some(note) = stopped.or(note) {
            out.push('\n');
            out.push_str(&note);
        }
        Ok(out)
    }
}

/// Walks the tree under `start` depth-first in name order, never following a
/// symbolic link, calling `visit` on each entry until it returns `false`;
/// `skip_git` leaves `.git` directories out. At most [`MAX_WALK_ENTRIES`]
/// entries are visited: past that, the walk stops and the note is returned.
fn walk(start: PathBuf, skip_git: bool, mut visit: impl FnMut(&Path, &std::fs::Metadata) -> bool) -> Option<String> {
    let mut stack: Vec<PathBuf> = vec![start];
    let mut visited = 0usize;
    while let Some(path) = stack.pop() {
        visited += 1;
        if visited > MAX_WALK_ENTRIES {
            return Some(format!(
                "[stopped after visiting {MAX_WALK_ENTRIES} entries (rule: MAX_WALK_ENTRIES): narrow the pattern \
                 or `path`]"
            ));
        }
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !visit(&path, &meta) {
            return None;
        }
        if meta.is_dir() {
            if skip_git && path.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(&path) else {
                continue;
            };
            let mut children = Vec::new();
            for entry in entries.flatten() {
                children.push(entry.path());
                // a directory larger than the budget is not listed whole
                if visited + children.len() > MAX_WALK_ENTRIES {
                    break;
                }
            }
            children.sort_by(|a, b| b.cmp(a));
            stack.extend(children);
        }
    }
    None
}

/// Opens `path` (`given` as the model named it) for reading: never through a
/// symbolic link at its last component (`O_NOFOLLOW`: a link swapped in after
/// the path was checked is refused), never waiting on a FIFO
/// (`O_NONBLOCK`), and refused unless the opened file is a regular one
/// (checked on the open descriptor, not the name).
fn open_regular(tool: &str, root: &Path, given: &str, path: &Path) -> Result<(std::fs::File, std::fs::Metadata)> {
    let (_dir, entry) = Beneath::parent_of(root, path, false).map_err(|e| unanchored(tool, given, e))?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    let file = options.open(&entry).map_err(|e| TinyAgentsError::Tool {
        tool: tool.to_owned(),
        message: format!(
            "`{given}` cannot be opened ({e}); the file tools open regular files of the workspace, never \
             through a symbolic link swapped in: check the path"
        ),
    })?;
    let meta = file.metadata().map_err(|e| io(tool, path, e))?;
    if !meta.is_file() {
        return Err(not_regular(tool, given, &meta));
    }
    Ok((file, meta))
}

/// The refusal of a path whose directories could not be opened beneath the root.
fn unanchored(tool: &str, given: &str, e: std::io::Error) -> TinyAgentsError {
    TinyAgentsError::Tool {
        tool: tool.to_owned(),
        message: format!(
            "`{given}` cannot be reached ({e}): one of its directories is missing, is not a directory, or is a \
             symbolic link (rule: the file tools open a path beneath the workspace one directory at a time, \
             never through a link, even one swapped in after the check); check the path"
        ),
    }
}

/// The refusal of a path that is not a regular file (a directory, FIFO, socket or device).
fn not_regular(tool: &str, given: &str, meta: &std::fs::Metadata) -> TinyAgentsError {
    let kind = if meta.is_dir() {
        "a directory"
    } else if meta.file_type().is_symlink() {
        "a symbolic link"
    } else {
        "a FIFO, socket or device"
    };
    TinyAgentsError::Tool {
        tool: tool.to_owned(),
        message: format!(
            "`{given}` is {kind}, not a regular file (rule: the file tools read and write regular files only, \
             so a FIFO cannot block them nor a device feed them endlessly); name a regular file"
        ),
    }
}

/// One line of `reader` into `buf` (its newline kept), at most `cap` bytes of
/// it kept (the rest of a longer line is consumed and dropped); `false` at
/// the end of the file.
fn next_line(reader: &mut impl BufRead, buf: &mut Vec<u8>, cap: usize) -> std::io::Result<bool> {
    buf.clear();
    let mut any = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(any);
        }
        any = true;
        let (used, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = cap.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..used.min(room)]);
        reader.consume(used);
        if done {
            return Ok(true);
        }
    }
}

/// Writes `content` as the file at `path` by replacing it: a new file made
/// beside it (`create_new`: never through an existing name or link) then
/// renamed over it. A symbolic link or hard link at `path` is replaced, never
/// written through, so a file elsewhere sharing it is left as it was; the
/// file keeps its permissions.
fn write_replacing(tool: &str, root: &Path, given: &str, path: &Path, content: &[u8]) -> Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    // the directories are opened (made where missing) beneath the root, never through a link
    let (dir, target) = Beneath::parent_of(root, path, true).map_err(|e| unanchored(tool, given, e))?;
    let stem = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let old = match std::fs::symlink_metadata(&target) {
        Ok(meta) if meta.is_file() => Some(meta),
        Ok(meta) => return Err(not_regular(tool, given, &meta)),
        Err(_) => None,
    };
    let (tmp, mut file) = loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.path().join(format!(".{stem}.{}.{n}.write", std::process::id()));
        match std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(file) => break (tmp, file),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < u64::MAX => continue,
            Err(e) => return Err(io(tool, path, e)),
        }
    };
    let written = file
        .write_all(content)
        .and_then(|()| file.sync_all())
        .and_then(|()| match &old {
            Some(meta) => std::fs::set_permissions(&tmp, meta.permissions()),
            None => Ok(()),
        })
        .and_then(|()| std::fs::rename(&tmp, &target));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(tool, path, e));
    }
    Ok(())
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A workspace and a directory outside it, removed on drop.
    struct Dirs(PathBuf);

    impl Drop for Dirs {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dirs(tag: &str) -> (Dirs, WorkspaceRoot, PathBuf) {
        let base = std::env::temp_dir().join(format!("ta-files-unit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(base.join("ws/d")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        std::fs::write(base.join("ws/d/f.txt"), "inside\n").unwrap();
        std::fs::write(base.join("outside/f.txt"), "outside\n").unwrap();
        let base = base.canonicalize().unwrap();
        let root = WorkspaceRoot::new(base.join("ws")).unwrap();
        (Dirs(base.clone()), root, base.join("outside"))
    }

    /// `d` swapped for a link to `outside` after the path was checked.
    fn swap(root: &WorkspaceRoot, outside: &Path) {
        std::fs::rename(root.path().join("d"), root.path().join("real")).unwrap();
        std::os::unix::fs::symlink(outside, root.path().join("d")).unwrap();
    }

    #[test]
    fn a_read_after_the_swap_is_refused_not_followed() {
        let (_d, root, outside) = dirs("read");
        let path = root.resolve_existing("d/f.txt").unwrap();
        swap(&root, &outside);
        let e = open_regular("read_tool", root.path(), "d/f.txt", &path)
            .unwrap_err()
            .to_string();
        assert!(e.contains("d/f.txt") && e.contains("symbolic link"), "{e}");
    }

    #[test]
    fn a_write_after_the_swap_is_refused_and_nothing_lands_outside() {
        let (_d, root, outside) = dirs("write");
        let path = root.resolve_write("d/f.txt").unwrap();
        let new = root.resolve_write("d/new.txt").unwrap();
        swap(&root, &outside);
        assert!(write_replacing("write_file", root.path(), "d/f.txt", &path, b"owned").is_err());
        assert!(write_replacing("write_file", root.path(), "d/new.txt", &new, b"owned").is_err());
        assert_eq!(std::fs::read_to_string(outside.join("f.txt")).unwrap(), "outside\n");
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
    }
}
