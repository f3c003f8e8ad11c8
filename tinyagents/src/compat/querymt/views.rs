//! The values a driver's hooks receive, with QueryMT's field names, as views
//! over the native values: [`Request`] and [`Response`] hold the native
//! [`ModelRequest`]/[`ModelResponse`] (moved in and out, not copied);
//! [`ToolCall`] and [`ToolResult`] are copies the adapter writes back after
//! the hook (only what changed).

use std::ops::{Deref, DerefMut};

use crate::harness::error::{Result as NativeResult, TinyAgentsError};
use crate::harness::middleware::HookKind;
use crate::harness::model::{ModelRequest, ModelResponse};
use crate::harness::tool;

/// Where in a run a driver hook is called, and the native hook it runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutionState {
    /// [`process_request`](super::MiddlewareDriver::process_request): before each model call (`before_model`).
    Request,
    /// [`process_response`](super::MiddlewareDriver::process_response): after each model call (`after_model`).
    Response,
    /// [`process_tool_call`](super::MiddlewareDriver::process_tool_call): before each tool call (`before_tool`).
    ToolCall,
    /// [`on_prepared_tool_calls`](super::MiddlewareDriver::on_prepared_tool_calls):
    /// once per reply with tool calls, after every `process_tool_call` (and
    /// every native `before_tool`) and before any call runs, with each call's
    /// effective arguments and declared file access (`on_prepared_tool_calls`).
    PreparedToolCalls,
    /// [`process_tool_result`](super::MiddlewareDriver::process_tool_result): after each tool call (`after_tool`).
    ToolResult,
}

impl ExecutionState {
    /// Every state, in the order a turn passes them.
    pub const ALL: [ExecutionState; 5] = [
        Self::Request,
        Self::Response,
        Self::ToolCall,
        Self::PreparedToolCalls,
        Self::ToolResult,
    ];

    /// The native hook a driver's method runs in.
    pub const fn hook(self) -> HookKind {
        match self {
            Self::Request => HookKind::BeforeModel,
            Self::Response => HookKind::AfterModel,
            Self::PreparedToolCalls => HookKind::OnPreparedToolCalls,
            Self::ToolCall => HookKind::BeforeTool,
            Self::ToolResult => HookKind::AfterTool,
        }
    }

    /// The driver method called in this state.
    pub const fn method(self) -> &'static str {
        match self {
            Self::Request => "process_request",
            Self::Response => "process_response",
            Self::PreparedToolCalls => "on_prepared_tool_calls",
            Self::ToolCall => "process_tool_call",
            Self::ToolResult => "process_tool_result",
        }
    }
}

/// The model request about to be sent: the native [`ModelRequest`] itself
/// (`request.messages`, `request.system`, `request.tools`, `request.params`
/// through `Deref`), edited in place.
#[derive(Debug, Default)]
pub struct Request {
    inner: ModelRequest,
}

impl Request {
    /// A view of `request`.
    pub fn new(request: ModelRequest) -> Self {
        Self { inner: request }
    }

    /// The native request, with the driver's edits.
    pub fn into_inner(self) -> ModelRequest {
        self.inner
    }
}

impl Deref for Request {
    type Target = ModelRequest;
    fn deref(&self) -> &ModelRequest {
        &self.inner
    }
}

impl DerefMut for Request {
    fn deref_mut(&mut self) -> &mut ModelRequest {
        &mut self.inner
    }
}

/// The model's reply: `content` is its text (assign it to replace the
/// text), and the rest of the native [`ModelResponse`] (`message` with its
/// tool calls, `usage`, `finish_reason`) is reached through `Deref`.
#[derive(Debug)]
pub struct Response {
    /// The reply's text, as QueryMT names it. Written back when changed.
    pub content: String,
    original: String,
    inner: ModelResponse,
}

impl Response {
    /// A view of `response`.
    pub fn new(response: ModelResponse) -> Self {
        let content = response.message.text().into_owned();
        Self {
            original: content.clone(),
            content,
            inner: response,
        }
    }

    /// The native response, with the driver's edits (a changed `content`
    /// replaces the message's text).
    pub fn into_inner(mut self) -> ModelResponse {
        if self.content != self.original {
            self.inner.message.set_text(self.content);
        }
        self.inner
    }
}

impl Deref for Response {
    type Target = ModelResponse;
    fn deref(&self) -> &ModelResponse {
        &self.inner
    }
}

impl DerefMut for Response {
    fn deref_mut(&mut self) -> &mut ModelResponse {
        &mut self.inner
    }
}

/// The function a [`ToolCall`] names: the tool and its arguments as JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionCall {
    /// The tool's name.
    pub name: String,
    /// The arguments, as JSON text. Written back parsed: text that is not
    /// JSON refuses the call (a validation error naming the driver).
    pub arguments: String,
}

/// One tool call, about to run, with QueryMT's field names
/// (`tool_call.function.name`, `tool_call.function.arguments`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The call's id (its result echoes it; it cannot be changed).
    pub id: String,
    /// The tool and its arguments.
    pub function: FunctionCall,
}

impl ToolCall {
    /// A copy of the native call.
    pub fn from_native(call: &tool::ToolCall) -> Self {
        Self {
            id: call.id.clone(),
            function: FunctionCall {
                name: call.name.clone(),
                arguments: call.arguments.to_string(),
            },
        }
    }

    /// Writes what the driver `driver` changed back into `call`. Arguments
    /// that are not JSON, or a changed id, refuse the call.
    pub fn write_back(self, driver: &str, call: &mut tool::ToolCall) -> NativeResult<()> {
        if self.id != call.id {
            return Err(TinyAgentsError::middleware(
                driver,
                format!(
                    "`process_tool_call` changed the call id from `{}` to `{}`; the id pairs the call with its \
                     result and cannot change: leave `tool_call.id` as it is",
                    call.id, self.id
                ),
            ));
        }
        let original = call.arguments.to_string();
        if self.function.arguments != original {
            call.arguments = serde_json::from_str(&self.function.arguments).map_err(|e| {
                TinyAgentsError::validation(format!(
                    "middleware `{driver}` set the arguments of tool call `{}` to text that is not JSON ({e}): \
                     `tool_call.function.arguments` must hold a JSON object, such as `{{\"path\": \"a.txt\"}}`",
                    call.id
                ))
            })?;
        }
        if self.function.name != call.name {
            call.name = self.function.name;
        }
        Ok(())
    }
}

/// One tool call's result, with QueryMT's field names (`result.tool_name`, `result.result`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    /// The id of the call this answers (it cannot be changed).
    pub call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// What the model sees.
    pub result: String,
    /// Whether the call failed or was refused. Setting it makes `result`
    /// the error; clearing it makes the result a success.
    pub is_error: bool,
}

impl ToolResult {
    /// A copy of the native result.
    pub fn from_native(result: &tool::ToolResult) -> Self {
        Self {
            call_id: result.call_id.clone(),
            tool_name: result.name.clone(),
            result: result.content.clone(),
            is_error: result.is_error(),
        }
    }

    /// Writes what the driver `driver` changed back into `native` (its
    /// structured `data` is kept as it is).
    pub fn write_back(self, driver: &str, native: &mut tool::ToolResult) -> NativeResult<()> {
        if self.call_id != native.call_id || self.tool_name != native.name {
            return Err(TinyAgentsError::middleware(
                driver,
                format!(
                    "`process_tool_result` changed which call the result answers (`{}`/`{}` to `{}`/`{}`); \
                     a result answers its call only: leave `call_id` and `tool_name` as they are",
                    native.call_id, native.name, self.call_id, self.tool_name
                ),
            ));
        }
        let changed = self.result != native.content;
        if changed {
            native.content.clone_from(&self.result);
        }
        match (self.is_error, native.is_error()) {
            (true, false) => native.error = Some(self.result),
            (false, true) => native.error = None,
            (true, true) if changed => native.error = Some(self.result),
            _ => {}
        }
        Ok(())
    }
}
