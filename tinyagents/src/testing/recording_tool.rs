//! A fake tool that records every call it gets.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::Value;

use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::tool::{Tool, ToolContext, ToolOutput, ToolPolicy, ToolSchema};

/// A fake tool that records every call's arguments and answers with a fixed
/// output (or a fixed error).
///
/// ```
/// use tinyagents::testing::RecordingTool;
/// let search = RecordingTool::new("search").returning("3 results");
/// assert_eq!(search.calls().len(), 0);
/// ```
#[derive(Clone)]
pub struct RecordingTool {
    schema: ToolSchema,
    policy: ToolPolicy,
    output: std::result::Result<String, String>,
    progress: Vec<String>,
    calls: Arc<Mutex<Vec<Value>>>,
}

impl std::fmt::Debug for RecordingTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordingTool")
            .field("name", &self.schema.name)
            .finish_non_exhaustive()
    }
}

impl RecordingTool {
    /// A tool named `name` answering `"ok"`.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        Self {
            schema: ToolSchema::new(name.clone(), format!("The fake tool `{name}`.")),
            policy: ToolPolicy::default(),
            output: Ok("ok".to_owned()),
            progress: Vec::new(),
            calls: Arc::default(),
        }
    }

    /// The same tool answering `output`.
    pub fn returning(mut self, output: impl Into<String>) -> Self {
        self.output = Ok(output.into());
        self
    }

    /// The same tool failing with a `Tool` error carrying `message`.
    pub fn failing(mut self, message: impl Into<String>) -> Self {
        self.output = Err(message.into());
        self
    }

    /// The same tool reporting these progress texts before it answers.
    pub fn with_progress(mut self, progress: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.progress = progress.into_iter().map(Into::into).collect();
        self
    }

    /// The same tool with a policy.
    pub fn with_policy(mut self, policy: ToolPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The arguments of every call so far (shared by clones of this tool).
    pub fn calls(&self) -> Vec<Value> {
        self.calls.lock().expect("recording tool lock").clone()
    }
}

#[async_trait]
impl Tool for RecordingTool {
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    fn policy(&self) -> ToolPolicy {
        self.policy.clone()
    }

    async fn call(&self, cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        self.calls.lock().expect("recording tool lock").push(arguments);
        for p in &self.progress {
            cx.progress(p.clone());
        }
        match &self.output {
            Ok(out) => Ok(out.as_str().into()),
            Err(msg) => Err(TinyAgentsError::tool(&self.schema.name, msg.clone())),
        }
    }
}
