//! [`ArtifactStore`]: where output compression keeps the originals it
//! replaced, and [`ReadArtifactTool`], the tool a model uses to read them back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{json, Value};

use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::tool::{SideEffects, Tool, ToolContext, ToolOutput, ToolPolicy, ToolSchema};

/// Originals replaced in the model-visible context, by artifact id
/// (`artifact://<run id>/<message id>`). Shared: give the same store to the
/// compressing middleware and to a [`ReadArtifactTool`]. In memory; remove a
/// run's artifacts with [`remove_run`](Self::remove_run) when it is done.
///
/// ```
/// use tinyagents::middleware::ArtifactStore;
///
/// let store = ArtifactStore::new();
/// store.put("artifact://r/m1", "a long output");
/// assert_eq!(store.get("artifact://r/m1").as_deref(), Some("a long output"));
/// store.remove_run("r");
/// assert!(store.get("artifact://r/m1").is_none());
/// ```
#[derive(Debug, Default)]
pub struct ArtifactStore {
    items: Mutex<HashMap<String, Arc<str>>>,
}

impl ArtifactStore {
    /// An empty, shareable store.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// The id of a run's artifact made from a message.
    pub fn id_for(run_id: &str, message_id: &str) -> String {
        format!("artifact://{run_id}/{message_id}")
    }

    /// Keeps `content` under `id` (an existing artifact is kept as it was).
    pub fn put(&self, id: &str, content: &str) {
        self.items
            .lock()
            .expect("artifact store lock")
            .entry(id.to_owned())
            .or_insert_with(|| Arc::from(content));
    }

    /// The artifact `id`.
    pub fn get(&self, id: &str) -> Option<Arc<str>> {
        self.items.lock().expect("artifact store lock").get(id).cloned()
    }

    /// How many artifacts the store holds.
    pub fn len(&self) -> usize {
        self.items.lock().expect("artifact store lock").len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every artifact of run `run_id`.
    pub fn remove_run(&self, run_id: &str) {
        let prefix = format!("artifact://{run_id}/");
        self.items
            .lock()
            .expect("artifact store lock")
            .retain(|id, _| !id.starts_with(&prefix));
    }
}

/// The `read_artifact` tool: reads a window of an artifact by id
/// (`{"id": "...", "offset": 0, "limit": 4000}`, in characters). Read-only.
///
/// ```
/// use tinyagents::middleware::{ArtifactStore, ReadArtifactTool};
/// use tinyagents::prelude::*;
///
/// let store = ArtifactStore::new();
/// let tools = ToolRegistry::new().with(ReadArtifactTool::new(store.clone())).unwrap();
/// assert_eq!(tools.schemas()[0].name, "read_artifact");
/// ```
#[derive(Debug)]
pub struct ReadArtifactTool {
    store: Arc<ArtifactStore>,
    schema: ToolSchema,
}

impl ReadArtifactTool {
    /// The most characters one read returns.
    pub const MAX_LIMIT: usize = 16_000;

    /// A reader of `store`.
    pub fn new(store: Arc<ArtifactStore>) -> Self {
        let schema = ToolSchema::new(
            "read_artifact",
            "Reads part of a stored artifact (the full text of an output that was compressed in the \
             conversation), by its id, from a character offset.",
        )
        .with_parameters(json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The artifact id, `artifact://…`."},
                "offset": {"type": "integer", "minimum": 0, "description": "First character to read (default 0)."},
                "limit": {"type": "integer", "minimum": 1, "description": "Characters to read (default and maximum 16000)."}
            },
            "required": ["id"]
        }));
        Self { store, schema }
    }
}

#[async_trait]
impl Tool for ReadArtifactTool {
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    fn policy(&self) -> ToolPolicy {
        ToolPolicy::classified()
            .with_side_effects(SideEffects::READ)
            .background_safe(true)
    }

    async fn call(&self, _cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        let id = arguments["id"]
            .as_str()
            .ok_or_else(|| TinyAgentsError::tool("read_artifact", "`id` (a string) is required"))?;
        let offset = arguments["offset"].as_u64().unwrap_or(0) as usize;
        let limit = (arguments["limit"].as_u64().unwrap_or(Self::MAX_LIMIT as u64) as usize).clamp(1, Self::MAX_LIMIT);
        let text = self
            .store
            .get(id)
            .ok_or_else(|| TinyAgentsError::tool("read_artifact", format!("there is no artifact `{id}`")))?;
        let total = text.chars().count();
        let window: String = text.chars().skip(offset).take(limit).collect();
        let end = (offset + window.chars().count()).min(total);
        Ok(ToolOutput::from(format!(
            "[{id}: characters {offset}..{end} of {total}]\n{window}"
        )))
    }
}
