//! [`AnthropicModel`]: Anthropic's Messages API.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{json, Value};

use super::http::{
    body_text, check_tokens, debug_url, merge_extra, other_reason, parse_json, redacted, sse_stream, stream_error,
    truncated, violation, Decoder, HttpClient, MAX_TOOL_CALLS,
};
use super::sse::SseEvent;
use super::{checked_tool_choice, fold, ordered_segments, replay, ProviderConfig, ProviderKind};
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::message::{ContentPart, Message, Role};
use crate::harness::model::{
    ChatModel, DeltaContent, FinishReason, ModelDelta, ModelRequest, ModelResponse, ModelStream, ReasoningEffort,
    ResponseFormat, SegmentStability, ToolChoice, Usage,
};
use crate::harness::shorten::shorten;

/// The API version header every call sends.
const API_VERSION: &str = "2023-06-01";

/// A chat model speaking Anthropic's Messages API (`POST {base}/v1/messages`).
///
/// * **System prompt**: one `system` text block per segment, stable ones
///   first; with prompt caching on (the default) the last stable block carries
///   `cache_control: {"type": "ephemeral"}`, which caches the tools and the
///   whole stable prefix. Conversation messages with the system role are
///   appended as further system blocks.
/// * **Output limit**: `max_tokens` is required by the API; a request without
///   one sends [`ProviderConfig::default_max_tokens`].
/// * **Reasoning effort** turns on extended thinking with a budget of 1024
///   (low), 4096 (medium) or 16384 (high) tokens; since Anthropic counts
///   thinking inside `max_tokens`, the budget is added to it, so the answer
///   keeps the limit you set. Set `thinking` in [`ModelParams::extra`](crate::harness::model::ModelParams::extra) to choose yourself.
///   Anthropic refuses a `temperature` together with thinking (HTTP 400, not
///   retryable): leave it unset when you set a reasoning effort.
/// * **Usage**: `input_tokens` (uncached), `cache_read_input_tokens` and
///   `cache_creation_input_tokens` map one to one; Anthropic does not report
///   reasoning tokens apart.
/// * **Tool choice** goes as `tool_choice` (`auto`, `none`, `any` for
///   [`ToolChoice::Required`], `tool`); a forced choice with a reasoning
///   effort is a `Config` error, since the API refuses the pair.
/// * **Response format** (a JSON Schema for an object) goes the tool way:
///   the request offers one more tool, named after the format, whose input
///   schema is the format's, and forces it (`tool_choice` `tool`, or `any`
///   when the request has tools of its own, so the model can still call
///   them); the decoder turns that call's input back into the reply's text,
///   and a reply that only called it finishes as a final answer. It is not
///   used when the caller set a tool choice, with extended thinking (the API
///   refuses a forced tool with it), for a non-object schema, or when a tool
///   already has the name: then the schema stays in the prompt only. The
///   middleware that asked validates the reply either way.
/// * Tool results of one batch go back in one user message, as the API requires.
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct AnthropicModel {
    #[educe(Debug(ignore))]
    config: ProviderConfig,
    id: String,
    #[educe(Debug(method(debug_url)))]
    url: String,
    #[educe(Debug(ignore))]
    http: HttpClient,
}

impl AnthropicModel {
    /// A model from a configuration of kind [`ProviderKind::Anthropic`].
    ///
    /// # Errors
    /// A [`Config`](TinyAgentsError::Config) error when the configuration is
    /// of another kind or does not [`validate`](ProviderConfig::validate).
    pub fn new(config: ProviderConfig) -> Result<Self> {
        if config.kind() != ProviderKind::Anthropic {
            return Err(TinyAgentsError::config(format!(
                "model `{}` does not speak Anthropic's Messages format; build it with `ProviderConfig::build`",
                config.id()
            )));
        }
        config.validate()?;
        let mut headers = vec![("anthropic-version", API_VERSION.to_owned())];
        if let Some(key) = config.api_key() {
            headers.push(("x-api-key", key.to_owned()));
        }
        let http = HttpClient::new(&config, headers)?;
        Ok(Self {
            id: config.id(),
            url: config.endpoint(),
            http,
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The thinking budget for a reasoning effort.
    pub const fn thinking_budget(effort: ReasoningEffort) -> u32 {
        match effort {
            ReasoningEffort::Low => 1024,
            ReasoningEffort::Medium => 4096,
            ReasoningEffort::High => 16384,
        }
    }

    /// The JSON body this model sends for `request` (streaming or not).
    ///
    /// # Errors
    /// A [`Config`](TinyAgentsError::Config) error when the request asks for
    /// another provider's model.
    pub fn request_body(&self, request: &ModelRequest, stream: bool) -> Result<Value> {
        let model = self.config.requested_model(request.model.as_deref())?;
        let segments: Vec<_> = ordered_segments(&request.system).collect();
        let last_stable = segments
            .iter()
            .rposition(|s| s.stability == SegmentStability::Stable)
            .filter(|_| self.config.prompt_caching());
        let mut system: Vec<Value> = segments
            .iter()
            .enumerate()
            .map(|(i, seg)| {
                let mut block = json!({"type": "text", "text": seg.text});
                if Some(i) == last_stable {
                    block["cache_control"] = json!({"type": "ephemeral"});
                }
                block
            })
            .collect();
        let mut messages: Vec<Value> = Vec::with_capacity(request.messages.len());
        for m in &request.messages {
            if m.role == Role::System {
                system.push(json!({"type": "text", "text": m.text()}));
                continue;
            }
            let (role, blocks) = wire_blocks(m);
            if blocks.is_empty() {
                continue;
            }
            // Consecutive turns of one role become one message (tool results
            // of a batch must share one user message).
            match messages.last_mut() {
                Some(last) if last["role"] == role => {
                    if let Some(content) = last["content"].as_array_mut() {
                        content.extend(blocks);
                    }
                }
                _ => messages.push(json!({"role": role, "content": blocks})),
            }
        }
        let params = &request.params;
        let mut max_tokens = params.max_tokens.unwrap_or(self.config.default_max_tokens());
        let mut body = json!({"model": model, "messages": messages, "stream": stream});
        if !system.is_empty() {
            body["system"] = Value::Array(system);
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
        }
        if let Some((name, schema)) = answer_tool(request) {
            // Structured output, the tool way: the answer is the input of a
            // tool the model must call; the decoder turns it back into text.
            let tool = json!({"name": name, "description": ANSWER_TOOL_DESCRIPTION, "input_schema": schema});
            match body["tools"].as_array_mut() {
                Some(tools) => tools.push(tool),
                None => body["tools"] = json!([tool]),
            }
            body["tool_choice"] = if request.tools.is_empty() {
                json!({"type": "tool", "name": name})
            } else {
                json!({"type": "any"})
            };
        }
        if let Some(choice) = checked_tool_choice(request)? {
            if params.reasoning_effort.is_some() && matches!(choice, ToolChoice::Required | ToolChoice::Tool(_)) {
                return Err(TinyAgentsError::config(
                    "Anthropic refuses a forced tool choice (`required` or one tool) together with extended \
                     thinking (`reasoning_effort`): drop one of them",
                ));
            }
            body["tool_choice"] = match choice {
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
                _ => json!({"type": "auto"}),
            };
        }
        if let Some(effort) = params.reasoning_effort {
            let budget = Self::thinking_budget(effort);
            max_tokens = max_tokens.saturating_add(budget);
            body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
        }
        body["max_tokens"] = json!(max_tokens);
        if let Some(t) = params.temperature {
            body["temperature"] = json!(t);
        }
        merge_extra(&mut body, &params.extra);
        Ok(body)
    }

    /// One non-streaming call (`"stream": false`): the whole reply at once.
    ///
    /// # Errors
    /// As [`ChatModel::stream`].
    pub async fn complete(&self, request: &ModelRequest) -> Result<ModelResponse> {
        let deltas = self.complete_deltas(request).await.map_err(redacted)?;
        fold(&deltas, &self.id).map_err(redacted)
    }

    async fn complete_deltas(&self, request: &ModelRequest) -> Result<Vec<ModelDelta>> {
        let body = serde_json::to_vec(&self.request_body(request, false)?).expect("a JSON value serialises");
        let response = self.http.post_json(&self.url, body, false).await?;
        let bytes = self.http.read_body(response).await?;
        let text = body_text(&self.id, &bytes)?;
        let message: WireMessage = parse_json(&self.id, text)?;
        if message.kind.as_deref() == Some("error") {
            return Err(stream_error(&self.id, text));
        }
        message_deltas(&self.id, message, answer_tool(request).map(|(name, _)| name))
    }
}

#[async_trait]
impl ChatModel for AnthropicModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream> {
        self.open_stream(request).await.map_err(redacted)
    }
}

impl AnthropicModel {
    /// [`ChatModel::stream`] before its error passes the redactor (the
    /// stream's own errors pass it in [`sse_stream`]).
    async fn open_stream(&self, request: &ModelRequest) -> Result<ModelStream> {
        if !self.config.streaming() {
            return Ok(replay(self.complete_deltas(request).await?));
        }
        let body = serde_json::to_vec(&self.request_body(request, true)?).expect("a JSON value serialises");
        let response = self.http.post_json(&self.url, body, true).await?;
        let mut decoder = StreamDecoder::new(self.http.label.clone());
        decoder.answer = answer_tool(request).map(|(name, _)| name.to_owned());
        Ok(sse_stream(self.http.clone(), response, decoder))
    }
}

/// What the answer tool tells the model.
const ANSWER_TOOL_DESCRIPTION: &str =
    "Give your final answer by calling this tool: its input is the answer, matching the schema exactly.";

/// The answer tool of a request asking for structured output: its name and
/// input schema, when the tool way applies — a JSON Schema response format
/// for an object, no tool choice of the caller's, no extended thinking
/// (Anthropic refuses a forced tool with it), and no tool of that name.
fn answer_tool(request: &ModelRequest) -> Option<(&str, &Value)> {
    let Some(ResponseFormat::JsonSchema { name, schema, .. }) = &request.response_format else {
        return None;
    };
    let object = schema.get("type").and_then(Value::as_str) == Some("object");
    let free = !request.tools.iter().any(|t| &t.name == name);
    (object && free && request.tool_choice.is_none() && request.params.reasoning_effort.is_none())
        .then_some((name.as_str(), schema))
}

/// A message's role and content blocks.
fn wire_blocks(m: &Message) -> (&'static str, Vec<Value>) {
    let mut blocks = Vec::new();
    if m.role == Role::Tool {
        blocks.push(json!({
            "type": "tool_result",
            "tool_use_id": m.tool_call_id.as_deref().unwrap_or_default(),
            "content": m.text(),
        }));
        return ("user", blocks);
    }
    for part in &m.content {
        match part {
            ContentPart::Text { text } if !text.is_empty() => blocks.push(json!({"type": "text", "text": text})),
            ContentPart::Image { url } => blocks.push(image_block(url)),
            // Reasoning is not sent back: a thinking block needs the signature it was streamed with.
            _ => {}
        }
    }
    if m.role == Role::Assistant {
        for call in &m.tool_calls {
            blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}));
        }
        return ("assistant", blocks);
    }
    ("user", blocks)
}

fn image_block(url: &str) -> Value {
    if let Some((meta, data)) = url.strip_prefix("data:").and_then(|r| r.split_once(','))
        && let Some(media_type) = meta.strip_suffix(";base64")
    {
        return json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}});
    }
    json!({"type": "image", "source": {"type": "url", "url": url}})
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::ContentFilter,
        other => other_reason(other),
    }
}

#[derive(Deserialize, Default)]
struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// Updates `usage` with the counts this report carries (later reports are
    /// cumulative), each checked first: nothing is applied from a bad report.
    fn apply(&self, label: &str, usage: &mut Usage) -> Result<()> {
        let input = check_tokens(label, "input_tokens", self.input_tokens)?;
        let output = check_tokens(label, "output_tokens", self.output_tokens)?;
        let write = check_tokens(label, "cache_creation_input_tokens", self.cache_creation_input_tokens)?;
        let read = check_tokens(label, "cache_read_input_tokens", self.cache_read_input_tokens)?;
        if let Some(n) = input {
            usage.input_tokens = n;
        }
        if let Some(n) = output {
            usage.output_tokens = n;
        }
        if let Some(n) = write {
            usage.cache_write_tokens = n;
        }
        if let Some(n) = read {
            usage.cache_read_tokens = n;
        }
        Ok(())
    }
}

/// Content block kinds that carry nothing for the agent to act on: server
/// tools run by Anthropic, their results, redacted thinking. Any kind not
/// known (here or as text, thinking, tool use) is refused rather than
/// dropped: it may hold part of the reply.
const IGNORED_BLOCKS: &[&str] = &[
    "redacted_thinking",
    "server_tool_use",
    "web_search_tool_result",
    "web_fetch_tool_result",
    "code_execution_tool_result",
    "bash_code_execution_tool_result",
    "text_editor_code_execution_tool_result",
    "mcp_tool_use",
    "mcp_tool_result",
    "container_upload",
];

/// Delta kinds that are not part of the reply's content.
const IGNORED_DELTAS: &[&str] = &["signature_delta", "citations_delta"];

/// An unknown block or delta kind: refused, naming it.
fn unknown_kind(label: &str, what: &str, kind: Option<&str>) -> TinyAgentsError {
    violation(
        label,
        format_args!(
            "{what} of unknown type \"{}\" (this version knows text, thinking, tool_use and server-tool kinds); \
             dropping it could lose part of the reply",
            shorten(kind.unwrap_or("<none>"), 64)
        ),
    )
}

#[derive(Deserialize)]
struct StreamEvent {
    #[serde(rename = "type")]
    kind: String,
    message: Option<WireMessage>,
    index: Option<u32>,
    content_block: Option<Value>,
    delta: Option<Value>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(rename = "type")]
    kind: Option<String>,
    content: Option<Vec<Value>>,
    stop_reason: Option<String>,
    usage: Option<WireUsage>,
}

/// The Messages stream: `message_start`, content blocks (`content_block_start`,
/// `content_block_delta`…, `content_block_stop`), `message_delta` with the stop
/// reason and final usage, then `message_stop`.
#[derive(Default)]
pub(super) struct StreamDecoder {
    label: Arc<str>,
    /// Content block index → tool call index, for `tool_use` blocks.
    tool_blocks: HashMap<u32, u32>,
    /// The ids of the tool calls so far.
    ids: std::collections::HashSet<String>,
    /// The answer tool's name, when the request asked for structured output the tool way.
    pub(super) answer: Option<String>,
    /// Content blocks that are calls of the answer tool: their input is the reply's text.
    answer_blocks: std::collections::HashSet<u32>,
    /// The reply's usage so far (Anthropic reports running totals).
    usage: Usage,
    /// What of it was already emitted as usage deltas (which add up).
    emitted: Usage,
    /// Whether a usage delta was emitted at all.
    reported: bool,
    stop: Option<FinishReason>,
    done: bool,
}

impl StreamDecoder {
    /// A decoder at the start of a reply from the model `label`.
    pub(super) fn new(label: Arc<str>) -> Self {
        Self {
            label,
            ..Self::default()
        }
    }

    /// How many tool calls (and ids) the decoder tracks: bounded by
    /// [`MAX_TOOL_CALLS`] whatever the stream says.
    #[cfg(test)]
    pub(super) fn tracked(&self) -> usize {
        self.tool_blocks.len().max(self.ids.len())
    }

    /// Emits what the usage grew by since the last report, as soon as it is
    /// reported: the input counted in `message_start` reaches the run (and
    /// its price budget) even when the stream fails before `message_stop`.
    /// A running total never shrinks: a field that does is kept at its
    /// highest.
    fn report_usage(&mut self, usage: &WireUsage, out: &mut VecDeque<ModelDelta>) -> Result<()> {
        usage.apply(&self.label, &mut self.usage)?;
        let grown = |now: u64, before: u64| now.saturating_sub(before);
        let increase = Usage {
            input_tokens: grown(self.usage.input_tokens, self.emitted.input_tokens),
            output_tokens: grown(self.usage.output_tokens, self.emitted.output_tokens),
            reasoning_tokens: grown(self.usage.reasoning_tokens, self.emitted.reasoning_tokens),
            cache_read_tokens: grown(self.usage.cache_read_tokens, self.emitted.cache_read_tokens),
            cache_write_tokens: grown(self.usage.cache_write_tokens, self.emitted.cache_write_tokens),
        };
        // the first report is emitted even when it is all zeros: the reply reported its usage
        if !increase.is_zero() || !self.reported {
            out.push_back(ModelDelta::usage(increase));
            self.emitted += increase;
            self.reported = true;
        }
        Ok(())
    }

    fn flush(&mut self, out: &mut VecDeque<ModelDelta>) {
        let reason = match self.stop.take() {
            // Only the answer tool was called: the reply is a final answer.
            Some(FinishReason::ToolCalls) if self.tool_blocks.is_empty() && !self.answer_blocks.is_empty() => {
                FinishReason::Stop
            }
            Some(reason) => reason,
            None if self.tool_blocks.is_empty() => FinishReason::Stop,
            None => FinishReason::ToolCalls,
        };
        out.push_back(ModelDelta::finish(reason));
        self.done = true;
    }

    fn text_of<'a>(value: &'a Value, field: &str) -> Option<&'a str> {
        value.get(field).and_then(Value::as_str).filter(|s| !s.is_empty())
    }
}

impl Decoder for StreamDecoder {
    fn event(&mut self, event: SseEvent, out: &mut VecDeque<ModelDelta>) -> Result<()> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        let ev: StreamEvent = parse_json(&self.label, data)?;
        match ev.kind.as_str() {
            "message_start" => {
                if let Some(usage) = ev.message.and_then(|m| m.usage) {
                    self.report_usage(&usage, out)?;
                }
            }
            "content_block_start" => {
                let block = ev.content_block.unwrap_or_default();
                let index = ev.index.unwrap_or(0);
                match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        if let Some(t) = Self::text_of(&block, "text") {
                            out.push_back(ModelDelta::text(t));
                        }
                    }
                    Some("thinking") => {
                        if let Some(t) = Self::text_of(&block, "thinking") {
                            out.push_back(ModelDelta::reasoning(t));
                        }
                    }
                    Some("tool_use")
                        if self.answer.is_some()
                            && block.get("name").and_then(Value::as_str) == self.answer.as_deref() =>
                    {
                        if self.answer_blocks.len() >= MAX_TOOL_CALLS as usize {
                            return Err(violation(
                                &self.label,
                                format_args!("more than {MAX_TOOL_CALLS} tool calls in one reply"),
                            ));
                        }
                        self.answer_blocks.insert(index);
                        if let Some(Value::Object(o)) = block.get("input")
                            && !o.is_empty()
                        {
                            out.push_back(ModelDelta::text(Value::Object(o.clone()).to_string()));
                        }
                    }
                    Some("tool_use") => {
                        let call = self.tool_blocks.len() as u32;
                        if call >= MAX_TOOL_CALLS {
                            return Err(violation(
                                &self.label,
                                format_args!("more than {MAX_TOOL_CALLS} tool calls in one reply"),
                            ));
                        }
                        if self.tool_blocks.contains_key(&index) {
                            return Err(violation(
                                &self.label,
                                format_args!("content block {index} was started twice as a tool call"),
                            ));
                        }
                        if let Some(id) = block.get("id").and_then(Value::as_str)
                            && !self.ids.insert(id.to_owned())
                        {
                            return Err(violation(
                                &self.label,
                                format_args!(
                                    "two tool calls share the id \"{}\"; results could not be told apart",
                                    shorten(id, 80)
                                ),
                            ));
                        }
                        self.tool_blocks.insert(index, call);
                        // The input arrives as `input_json_delta`s; a start
                        // block carrying a whole non-empty input is sent as is.
                        let arguments = match block.get("input") {
                            Some(Value::Object(o)) if !o.is_empty() => Value::Object(o.clone()).to_string(),
                            _ => String::new(),
                        };
                        out.push_back(ModelDelta::new(DeltaContent::ToolCall {
                            index: call,
                            id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                            name: block.get("name").and_then(Value::as_str).map(str::to_owned),
                            arguments,
                        }));
                    }
                    Some(kind) if IGNORED_BLOCKS.contains(&kind) => {}
                    kind => return Err(unknown_kind(&self.label, "a content block", kind)),
                }
            }
            "content_block_delta" => {
                let delta = ev.delta.unwrap_or_default();
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        if let Some(t) = Self::text_of(&delta, "text") {
                            out.push_back(ModelDelta::text(t));
                        }
                    }
                    Some("thinking_delta") => {
                        if let Some(t) = Self::text_of(&delta, "thinking") {
                            out.push_back(ModelDelta::reasoning(t));
                        }
                    }
                    Some("input_json_delta") if self.answer_blocks.contains(&ev.index.unwrap_or(0)) => {
                        if let Some(json) = Self::text_of(&delta, "partial_json") {
                            out.push_back(ModelDelta::text(json));
                        }
                    }
                    Some("input_json_delta") => {
                        let block = ev.index.unwrap_or(0);
                        let Some(&call) = self.tool_blocks.get(&block) else {
                            // Never dropped: these are a call's arguments.
                            return Err(violation(
                                &self.label,
                                format_args!("tool input for content block {block}, which is not a started tool call"),
                            ));
                        };
                        if let Some(json) = Self::text_of(&delta, "partial_json") {
                            out.push_back(ModelDelta::new(DeltaContent::ToolCall {
                                index: call,
                                id: None,
                                name: None,
                                arguments: json.to_owned(),
                            }));
                        }
                    }
                    Some(kind) if IGNORED_DELTAS.contains(&kind) => {}
                    kind => return Err(unknown_kind(&self.label, "a content delta", kind)),
                }
            }
            "message_delta" => {
                if let Some(reason) = ev
                    .delta
                    .as_ref()
                    .and_then(|d| d.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop = Some(finish_reason(reason));
                }
                if let Some(usage) = ev.usage {
                    self.report_usage(&usage, out)?;
                }
            }
            "message_stop" => self.flush(out),
            "error" => return Err(stream_error(&self.label, data)),
            // ping, content_block_stop, and event kinds added later: Anthropic's
            // versioning policy adds event kinds that carry no content, and
            // asks clients to skip them. Their size is bounded by the parser.
            _ => {}
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.done
    }

    fn end(&mut self, out: &mut VecDeque<ModelDelta>) -> Result<()> {
        if self.stop.is_some() {
            self.flush(out);
            Ok(())
        } else {
            Err(truncated(&self.label, "stop reason and no `message_stop`"))
        }
    }
}

/// The deltas a non-streamed message amounts to (content kinds, call count
/// and usage checked as in a stream).
fn message_deltas(label: &str, message: WireMessage, answer: Option<&str>) -> Result<Vec<ModelDelta>> {
    let mut out = Vec::new();
    let mut calls = 0u32;
    let mut answered = false;
    for block in message.content.unwrap_or_default() {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") if answer.is_some() && block.get("name").and_then(Value::as_str) == answer => {
                answered = true;
                if let Some(input) = block
                    .get("input")
                    .filter(|i| i.as_object().is_some_and(|o| !o.is_empty()))
                {
                    out.push(ModelDelta::text(input.to_string()));
                }
            }
            Some("text") => {
                if let Some(t) = StreamDecoder::text_of(&block, "text") {
                    out.push(ModelDelta::text(t));
                }
            }
            Some("thinking") => {
                if let Some(t) = StreamDecoder::text_of(&block, "thinking") {
                    out.push(ModelDelta::reasoning(t));
                }
            }
            Some("tool_use") => {
                if calls >= MAX_TOOL_CALLS {
                    return Err(violation(
                        label,
                        format_args!("more than {MAX_TOOL_CALLS} tool calls in one reply"),
                    ));
                }
                out.push(ModelDelta::new(DeltaContent::ToolCall {
                    index: calls,
                    id: block.get("id").and_then(Value::as_str).map(str::to_owned),
                    name: block.get("name").and_then(Value::as_str).map(str::to_owned),
                    arguments: block.get("input").map(Value::to_string).unwrap_or_default(),
                }));
                calls += 1;
            }
            Some(kind) if IGNORED_BLOCKS.contains(&kind) => {}
            kind => return Err(unknown_kind(label, "a content block", kind)),
        }
    }
    if let Some(wire) = message.usage {
        let mut usage = Usage::default();
        wire.apply(label, &mut usage)?;
        out.push(ModelDelta::usage(usage));
    }
    let reason = match message.stop_reason.as_deref().map(finish_reason) {
        Some(FinishReason::ToolCalls) if calls == 0 && answered => FinishReason::Stop,
        Some(reason) => reason,
        None if calls > 0 => FinishReason::ToolCalls,
        None => FinishReason::Stop,
    };
    out.push(ModelDelta::finish(reason));
    Ok(out)
}
