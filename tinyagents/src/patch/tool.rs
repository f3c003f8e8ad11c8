//! [`ApplyPatchTool`]: the library's patch tool, applying exactly the hunks
//! [`Patch::parse`] read (the reading the guard judged).

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::{json, Value};

use super::{apply, Patch};
use crate::harness::tool::{SideEffects, Tool, ToolContext, ToolOutput, ToolPolicy, ToolSchema};
use crate::{Result, TinyAgentsError};

/// A patch tool (name `apply_patch`, argument `patch`) that applies the
/// patch itself: the same parse as `shell_fs_guard`'s (no `patch` or
/// `git apply` reading it a second way), every change checked before any is
/// written, paths confined to the workspace root (no `..`, no symlink on the
/// way) and kept off the protected paths (by default the table of
/// [`crate::protected`]).
///
/// ```
/// use tinyagents::patch::ApplyPatchTool;
/// use tinyagents::prelude::*;
///
/// let dir = std::env::temp_dir().join(format!("ta-doc-apply-{}", std::process::id()));
/// std::fs::create_dir_all(&dir).unwrap();
/// let tool = ApplyPatchTool::new(&dir).unwrap();
/// assert_eq!(tool.schema().name, "apply_patch");
/// let patch = "*** Begin Patch\n*** Add File: notes.txt\n+hello\n*** End Patch\n";
/// tool.apply_text(patch).unwrap();
/// assert_eq!(std::fs::read_to_string(dir.join("notes.txt")).unwrap(), "hello\n");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct ApplyPatchTool {
    schema: ToolSchema,
    root: PathBuf,
    protected: Vec<String>,
}

impl ApplyPatchTool {
    /// A patch tool rooted at `root` (an existing directory).
    pub fn new(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().canonicalize().map_err(|e| {
            TinyAgentsError::config(format!(
                "apply_patch: root `{}` must be an existing directory: {e}",
                root.as_ref().display()
            ))
        })?;
        let mut schema = ToolSchema::new(
            "apply_patch",
            "Applies a patch to files in the workspace: the `*** Begin Patch` envelope (`*** Add File:`, \
             `*** Update File:` with `*** Move to:`, `*** Delete File:`) or unified/git diffs. Every hunk \
             must apply, or nothing is written.",
        );
        schema.parameters = json!({
            "type": "object",
            "properties": { "patch": { "type": "string", "description": "The patch text." } },
            "required": ["patch"],
            "additionalProperties": false
        });
        Ok(Self {
            schema,
            root,
            protected: crate::protected::PATTERNS.iter().map(|s| (*s).to_owned()).collect(),
        })
    }

    /// The same tool with these protected paths (an empty list: none).
    pub fn with_protected_paths<I: IntoIterator<Item = S>, S: Into<String>>(mut self, paths: I) -> Self {
        self.protected = paths.into_iter().map(Into::into).collect();
        self
    }

    /// Parses and applies `text` now; the summary the tool returns.
    pub fn apply_text(&self, text: &str) -> Result<String> {
        let patch = Patch::parse(text).map_err(|e| TinyAgentsError::validation(format!("apply_patch: {e}")))?;
        let done = apply(&patch, &self.root, &self.protected)?;
        let mut out = String::new();
        for p in &done.written {
            out.push_str(&format!("wrote {}\n", p.display()));
        }
        for p in &done.removed {
            out.push_str(&format!("removed {}\n", p.display()));
        }
        Ok(out)
    }
}

#[async_trait]
impl Tool for ApplyPatchTool {
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    fn policy(&self) -> ToolPolicy {
        ToolPolicy::classified().with_side_effects(SideEffects::READ | SideEffects::WRITE)
    }

    async fn call(&self, cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        let Some(args) = arguments.as_object() else {
            return Err(TinyAgentsError::validation(
                "apply_patch: arguments must be an object with `patch`",
            ));
        };
        if let Some(key) = args.keys().find(|k| k.as_str() != "patch") {
            return Err(TinyAgentsError::validation(format!(
                "apply_patch: unknown argument `{key}`; the one argument is `patch`"
            )));
        }
        let Some(Value::String(text)) = args.get("patch") else {
            return Err(TinyAgentsError::validation("apply_patch: `patch` must be a string"));
        };
        if let Some(ws) = &cx.parent().workspace {
            let root = ws.root.canonicalize().unwrap_or_else(|_| ws.root.clone());
            if root != self.root {
                return Err(TinyAgentsError::validation(format!(
                    "apply_patch is rooted at `{}` but the run's workspace is `{}`; build the tool with the run's \
                     workspace root",
                    self.root.display(),
                    ws.root.display()
                )));
            }
            if ws.read_only {
                return Err(TinyAgentsError::validation(
                    "apply_patch: the run's workspace is read-only",
                ));
            }
        }
        Ok(ToolOutput {
            content: self.apply_text(text)?,
            data: None,
            usage: None,
        })
    }
}
