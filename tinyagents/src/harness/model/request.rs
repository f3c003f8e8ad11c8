//! [`ModelRequest`]: what is sent to the model.

use serde::{Deserialize, Serialize};

use super::SharedList;
use crate::harness::message::Message;
use crate::harness::tool::ToolSchema;

/// Whether a system prompt segment belongs to the cacheable prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentStability {
    /// Part of the stable prefix: the same from call to call, so provider
    /// prompt caches (and KV caches) can reuse it. Changing it costs a cache miss.
    Stable,
    /// Part of the volatile tail: may change every call without harming the cache.
    Volatile,
}

/// One segment of the system prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptSegment {
    /// The segment's id (used in provenance and cache-layout events).
    pub id: String,
    /// The segment's text.
    pub text: String,
    /// Stable prefix or volatile tail.
    pub stability: SegmentStability,
}

impl PromptSegment {
    /// A stable segment.
    pub fn stable(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            text: text.into(),
            stability: SegmentStability::Stable,
        }
    }

    /// A volatile segment.
    pub fn volatile(id: impl Into<String>, text: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            text: text.into(),
            stability: SegmentStability::Volatile,
        }
    }
}

/// How hard a reasoning model should think.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    /// Least effort.
    Low,
    /// Medium effort.
    Medium,
    /// Most effort.
    High,
}

/// Sampling and output parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    /// The output-token limit for this call.
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Reasoning effort, where the provider honours it.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Provider-specific parameters, passed through.
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// How the model must shape its reply, where the provider can enforce it
/// (OpenAI-compatible servers: `response_format`). A provider that cannot
/// ignores it; the middleware that set it (`StructuredOutputMiddleware`) still
/// validates every reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResponseFormat {
    /// A single JSON value matching `schema`.
    JsonSchema {
        /// The format's name (1 to 64 ASCII letters, digits, `_`, `-`).
        name: String,
        /// The JSON Schema.
        schema: serde_json::Value,
        /// Ask the provider to enforce the schema exactly (OpenAI's strict
        /// mode, which accepts only a subset of JSON Schema: every property
        /// required, `additionalProperties: false`).
        strict: bool,
    },
}

/// Whether, and which, tool the model must call.
///
/// ```
/// use tinyagents::harness::model::{ModelRequest, ToolChoice};
///
/// let mut request = ModelRequest::default();
/// request.tool_choice = Some(ToolChoice::Tool("search".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides (the providers' default).
    Auto,
    /// The model must not call a tool.
    None,
    /// The model must call some tool.
    Required,
    /// The model must call this tool.
    Tool(String),
}

/// A request to a chat model.
///
/// The system prompt is a list of ordered segments, each stable or volatile:
/// providers send the stable ones first so their prompt cache keeps working.
///
/// A request is a handle on one boxed [`ModelRequestFields`]: its fields read
/// and write as fields (`request.messages`, `request.tools = …`, through
/// `Deref`), and passing it on — into each wrap layer of the onion, into the
/// model — moves one pointer, not the fields. Build one with
/// [`ModelRequest::new`] or [`ModelRequest::default`] and set fields, or from
/// a [`ModelRequestFields`] literal; take the fields out whole with
/// [`ModelRequest::into_fields`].
///
/// ```
/// use tinyagents::harness::message::Message;
/// use tinyagents::harness::model::{ModelRequest, PromptSegment};
///
/// let mut req = ModelRequest::new(vec![Message::user("hi")])
///     .with_system(PromptSegment::stable("persona", "You are terse."));
/// req.set_volatile("date", "Today is Monday.");
/// assert_eq!(req.system_prompt(), "You are terse.\n\nToday is Monday.");
/// ```
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ModelRequest(Box<ModelRequestFields>);

/// The fields of a [`ModelRequest`] (which derefs to them).
///
/// ```
/// use tinyagents::harness::message::Message;
/// use tinyagents::harness::model::{ModelRequest, ModelRequestFields};
///
/// let request: ModelRequest = ModelRequestFields {
///     messages: vec![Message::user("hi")].into(),
///     model: Some("small".into()),
///     ..ModelRequestFields::default()
/// }
/// .into();
/// assert_eq!(request.model.as_deref(), Some("small"));
/// assert_eq!(request.into_fields().messages.len(), 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequestFields {
    /// The conversation, oldest first (shared with the run's history until
    /// changed: see [`SharedList`]).
    pub messages: SharedList<Message>,
    /// The system prompt, as ordered segments (shared with the agent's until
    /// changed).
    pub system: SharedList<PromptSegment>,
    /// The tools the model may call (shared with the agent's until changed).
    pub tools: SharedList<ToolSchema>,
    /// The model to use, when the run asks for one.
    pub model: Option<String>,
    /// Sampling and output parameters.
    pub params: ModelParams,
    /// The reply's required shape, sent natively where the provider supports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// Whether, and which, tool the model must call (sent where the provider
    /// supports it; a request forcing a tool it does not offer is refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// A model to use instead of the agent's own for this call (set by
    /// fallback middleware). Not serialised.
    #[serde(skip)]
    pub route: Option<ModelRoute>,
}

/// A model chosen for one call, overriding the agent's model.
#[derive(Clone)]
pub struct ModelRoute(pub std::sync::Arc<dyn super::ChatModel>);

impl std::fmt::Debug for ModelRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ModelRoute({})", self.0.id())
    }
}

impl PartialEq for ModelRoute {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for ModelRequest {
    type Target = ModelRequestFields;

    #[inline(always)]
    fn deref(&self) -> &ModelRequestFields {
        &self.0
    }
}

impl std::ops::DerefMut for ModelRequest {
    #[inline(always)]
    fn deref_mut(&mut self) -> &mut ModelRequestFields {
        &mut self.0
    }
}

impl std::fmt::Debug for ModelRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ModelRequestFields {
            messages,
            system,
            tools,
            model,
            params,
            response_format,
            tool_choice,
            route,
        } = &*self.0;
        f.debug_struct("ModelRequest")
            .field("messages", messages)
            .field("system", system)
            .field("tools", tools)
            .field("model", model)
            .field("params", params)
            .field("response_format", response_format)
            .field("tool_choice", tool_choice)
            .field("route", route)
            .finish()
    }
}

impl From<ModelRequestFields> for ModelRequest {
    fn from(fields: ModelRequestFields) -> Self {
        Self(Box::new(fields))
    }
}

impl From<ModelRequest> for ModelRequestFields {
    fn from(request: ModelRequest) -> Self {
        request.into_fields()
    }
}

impl ModelRequest {
    /// A request with these messages.
    pub fn new(messages: Vec<Message>) -> Self {
        ModelRequestFields {
            messages: messages.into(),
            ..ModelRequestFields::default()
        }
        .into()
    }

    /// The fields, taken out whole (to move several of them out at once).
    pub fn into_fields(self) -> ModelRequestFields {
        *self.0
    }

    /// The same request with one more system segment.
    pub fn with_system(mut self, segment: PromptSegment) -> Self {
        self.system.push(segment);
        self
    }

    /// The same request with these tools.
    pub fn with_tools(mut self, tools: Vec<ToolSchema>) -> Self {
        self.tools = tools.into();
        self
    }

    /// The full system prompt: segments joined by a blank line.
    pub fn system_prompt(&self) -> String {
        let mut out = String::new();
        for (i, seg) in self.system.iter().enumerate() {
            if i > 0 {
                out.push_str("\n\n");
            }
            out.push_str(&seg.text);
        }
        out
    }

    /// Sets the volatile segment `id` (replacing it, or appending it at the end).
    pub fn set_volatile(&mut self, id: &str, text: impl Into<String>) {
        let text = text.into();
        match self.system.iter_mut().find(|s| s.id == id) {
            Some(seg) => {
                seg.text = text;
                seg.stability = super::SegmentStability::Volatile;
            }
            None => self.system.push(PromptSegment::volatile(id, text)),
        }
    }

    /// The segment called `id`.
    pub fn segment(&self, id: &str) -> Option<&PromptSegment> {
        self.system.iter().find(|s| s.id == id)
    }
}
