//! The values that flow through a tool call: schema, call, delta, result.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the model is told about a tool: its name, description and JSON Schema of arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The tool's name, unique in a registry.
    pub name: String,
    /// What the tool does, for the model.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

impl ToolSchema {
    /// A schema with an empty-object parameter schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters: serde_json::json!({"type": "object", "properties": {}}),
        }
    }

    /// The same schema with a given parameter schema.
    pub fn with_parameters(mut self, parameters: Value) -> Self {
        self.parameters = parameters;
        self
    }
}

/// A call the model asked for.
///
/// ```
/// use tinyagents::harness::tool::ToolCall;
/// let call = ToolCall::new("c1", "search", serde_json::json!({"q": "rust"}));
/// assert_eq!(call.name, "search");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, echoed by its result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The effective arguments (after any middleware rewrote them).
    pub arguments: Value,
}

impl ToolCall {
    /// A call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
        }
    }
}

/// Incremental output of a running tool, passed through `on_tool_delta` hooks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDelta {
    /// The call this progress belongs to.
    pub call_id: String,
    /// The progress text.
    pub content: String,
    #[serde(skip)]
    suppressed: bool,
}

impl ToolDelta {
    /// A delta for `call_id`.
    pub fn new(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            call_id: call_id.into(),
            content: content.into(),
            suppressed: false,
        }
    }

    /// Drops this delta: it is not forwarded to the sink (the suppression is recorded).
    pub fn suppress(&mut self) {
        self.suppressed = true;
    }

    /// Whether a hook suppressed this delta.
    pub fn is_suppressed(&self) -> bool {
        self.suppressed
    }
}

/// The one result of one [`ToolCall`].
///
/// A result with `error: Some(..)` is an error result: the model sees the
/// content and learns the call failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The id of the call this answers.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// What the model sees.
    pub content: String,
    /// Set when the call failed or was refused: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Structured output, when the tool produced any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ToolResult {
    /// A successful result for `call`.
    pub fn ok(call: &ToolCall, content: impl Into<String>) -> Self {
        Self {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: content.into(),
            error: None,
            data: None,
        }
    }

    /// An error result for `call`: the model sees `message`.
    pub fn error(call: &ToolCall, message: impl Into<String>) -> Self {
        Self::error_for(call.id.clone(), call.name.clone(), message.into())
    }

    /// An error result for the call `call_id` to `name`, taking them as
    /// they are (for the loop, which holds them owned).
    pub(crate) fn error_for(call_id: String, name: String, message: String) -> Self {
        Self {
            call_id,
            name,
            content: message.clone(),
            error: Some(message),
            data: None,
        }
    }

    /// Whether this is an error result.
    pub fn is_error(&self) -> bool {
        self.error.is_some()
    }
}

/// How a call touches a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileAccessMode {
    /// Reads the file.
    Read,
    /// Writes, edits or deletes the file.
    Write,
}

/// One file a prepared call declares it will touch, derived from its effective arguments.
///
/// `path` is a file, a directory (a read of it touches every file under it:
/// the call waits for earlier writes there) or a glob pattern
/// ([`FileAccess::matching`]: a read of the files it matches, waiting only
/// for writes the pattern could see).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FileAccess {
    /// The path, as the tool will use it.
    pub path: String,
    /// Read or write.
    pub mode: FileAccessMode,
}

impl FileAccess {
    /// A read of the files under `dir` whose path matches `filter` (a glob:
    /// `*.md` at any depth, `src/**/*.rs`), as a `glob` or `search_text`
    /// call declares it. A filter without `/` matches file names at any
    /// depth below `dir`; an empty filter reads all of `dir`.
    ///
    /// ```
    /// use tinyagents::harness::tool::{FileAccess, FileAccessMode};
    ///
    /// let search = FileAccess::matching(".", "*.md");
    /// assert_eq!(search.path, "./**/*.md");
    /// assert_eq!(search.mode, FileAccessMode::Read);
    /// assert_eq!(FileAccess::matching("docs", "").path, "docs");
    /// ```
    pub fn matching(dir: &str, filter: &str) -> Self {
        let dir = dir.trim_end_matches('/');
        let dir = if dir.is_empty() { "." } else { dir };
        let path = match filter {
            "" => dir.to_owned(),
            f if f.contains('/') => format!("{dir}/{}", f.trim_start_matches("./")),
            f => format!("{dir}/**/{f}"),
        };
        Self {
            path,
            mode: FileAccessMode::Read,
        }
    }

    /// Whether a declared path is a glob pattern (holds `*`, `?` or `[`).
    pub fn is_pattern(path: &str) -> bool {
        path.contains(['*', '?', '['])
    }
}
