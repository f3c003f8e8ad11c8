//! [`OpenAiModel`]: the Chat Completions wire format, at OpenAI or on an
//! OpenAI-compatible server.

use std::collections::VecDeque;
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
    ResponseFormat, ToolChoice, Usage,
};

/// A chat model speaking OpenAI's Chat Completions API (`POST {base}/chat/completions`).
///
/// [`ProviderKind::OpenAi`] sends the output limit as `max_completion_tokens`
/// (what OpenAI's reasoning models require); [`ProviderKind::OpenAiCompatible`]
/// sends `max_tokens` (what vLLM, llama.cpp's server and Ollama read). Both
/// send `reasoning_effort`, ask for usage in the stream
/// (`stream_options.include_usage`), and read reasoning text from
/// `reasoning_content` or `reasoning` deltas (the fields compatible servers use).
///
/// Usage: OpenAI's `prompt_tokens` include the cached ones, so
/// `input_tokens = prompt_tokens - cached_tokens` and `cache_read_tokens =
/// cached_tokens`; OpenAI reports no cache writes.
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct OpenAiModel {
    #[educe(Debug(ignore))]
    config: ProviderConfig,
    id: String,
    #[educe(Debug(method(debug_url)))]
    url: String,
    #[educe(Debug(ignore))]
    http: HttpClient,
}

impl OpenAiModel {
    /// A model from a configuration of kind [`ProviderKind::OpenAi`] or
    /// [`ProviderKind::OpenAiCompatible`].
    ///
    /// # Errors
    /// A [`Config`](TinyAgentsError::Config) error when the configuration is
    /// of another kind or does not [`validate`](ProviderConfig::validate).
    pub fn new(config: ProviderConfig) -> Result<Self> {
        if !matches!(config.kind(), ProviderKind::OpenAi | ProviderKind::OpenAiCompatible) {
            return Err(TinyAgentsError::config(format!(
                "model `{}` does not speak the Chat Completions format; build it with `ProviderConfig::build`",
                config.id()
            )));
        }
        config.validate()?;
        let auth = config
            .api_key()
            .map(|key| vec![("authorization", format!("Bearer {key}"))])
            .unwrap_or_default();
        let http = HttpClient::new(&config, auth)?;
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

    /// The JSON body this model sends for `request` (streaming or not).
    ///
    /// # Errors
    /// A [`Config`](TinyAgentsError::Config) error when the request asks for
    /// another provider's model.
    pub fn request_body(&self, request: &ModelRequest, stream: bool) -> Result<Value> {
        let model = self.config.requested_model(request.model.as_deref())?;
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        let mut system = String::new();
        for (i, seg) in ordered_segments(&request.system).enumerate() {
            if i > 0 {
                system.push_str("\n\n");
            }
            system.push_str(&seg.text);
        }
        if !request.system.is_empty() {
            messages.push(json!({"role": "system", "content": system}));
        }
        messages.extend(request.messages.iter().map(wire_message));
        let mut body = json!({"model": model, "messages": messages, "stream": stream});
        if stream {
            body["stream_options"] = json!({"include_usage": true});
        }
        if !request.tools.is_empty() {
            body["tools"] = request
                .tools
                .iter()
                .map(|t| {
                    json!({"type": "function", "function": {
                        "name": t.name, "description": t.description, "parameters": t.parameters,
                    }})
                })
                .collect();
        }
        if let Some(choice) = checked_tool_choice(request)? {
            body["tool_choice"] = match choice {
                ToolChoice::None => json!("none"),
                ToolChoice::Required => json!("required"),
                ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
                // `Auto`, and any choice a later version adds, leaves the server's default.
                _ => json!("auto"),
            };
        }
        if let Some(ResponseFormat::JsonSchema { name, schema, strict }) = &request.response_format {
            body["response_format"] = json!({"type": "json_schema", "json_schema": {
                "name": name, "schema": schema, "strict": strict,
            }});
        }
        let params = &request.params;
        if let Some(max) = params.max_tokens {
            let field = match self.config.kind() {
                ProviderKind::OpenAi => "max_completion_tokens",
                _ => "max_tokens",
            };
            body[field] = json!(max);
        }
        if let Some(t) = params.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(effort) = params.reasoning_effort {
            body["reasoning_effort"] = json!(match effort {
                ReasoningEffort::Low => "low",
                ReasoningEffort::Medium => "medium",
                ReasoningEffort::High => "high",
            });
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
        let completion: Completion = parse_json(&self.id, text)?;
        if completion.error.is_some() {
            return Err(stream_error(&self.id, text));
        }
        completion_deltas(&self.id, completion)
    }
}

#[async_trait]
impl ChatModel for OpenAiModel {
    fn id(&self) -> &str {
        &self.id
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream> {
        self.open_stream(request).await.map_err(redacted)
    }
}

impl OpenAiModel {
    /// [`ChatModel::stream`] before its error passes the redactor (the
    /// stream's own errors pass it in [`sse_stream`]).
    async fn open_stream(&self, request: &ModelRequest) -> Result<ModelStream> {
        if !self.config.streaming() {
            return Ok(replay(self.complete_deltas(request).await?));
        }
        let body = serde_json::to_vec(&self.request_body(request, true)?).expect("a JSON value serialises");
        let response = self.http.post_json(&self.url, body, true).await?;
        let decoder = StreamDecoder::new(self.http.label.clone());
        Ok(sse_stream(self.http.clone(), response, decoder))
    }
}

fn wire_message(m: &Message) -> Value {
    let text = m.text();
    match m.role {
        Role::System => json!({"role": "system", "content": text}),
        Role::User => {
            let has_images = m.content.iter().any(|p| matches!(p, ContentPart::Image { .. }));
            if has_images {
                let parts: Vec<Value> = m
                    .content
                    .iter()
                    .filter_map(|p| match p {
                        ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
                        ContentPart::Image { url } => Some(json!({"type": "image_url", "image_url": {"url": url}})),
                        _ => None,
                    })
                    .collect();
                json!({"role": "user", "content": parts})
            } else {
                json!({"role": "user", "content": text})
            }
        }
        Role::Assistant => {
            let mut out = json!({"role": "assistant"});
            // Reasoning is not sent back: the Chat Completions format has no place for it.
            out["content"] = if text.is_empty() && !m.tool_calls.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            if !m.tool_calls.is_empty() {
                out["tool_calls"] = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function", "function": {
                            "name": c.name, "arguments": c.arguments.to_string(),
                        }})
                    })
                    .collect();
            }
            out
        }
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": m.tool_call_id.as_deref().unwrap_or_default(),
            "content": text,
        }),
    }
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" | "end_turn" | "eos" => FinishReason::Stop,
        "length" | "max_tokens" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        other => other_reason(other),
    }
}

#[derive(Deserialize, Default)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
    /// DeepSeek's name for cached prompt tokens.
    prompt_cache_hit_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct PromptDetails {
    cached_tokens: Option<u64>,
}

#[derive(Deserialize, Default)]
struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    /// The usage, every count checked (negative and fractional counts are
    /// already refused by the JSON types; absurd ones here).
    fn usage(&self, label: &str) -> Result<Usage> {
        let cached = check_tokens(
            label,
            "cached_tokens",
            self.prompt_tokens_details
                .as_ref()
                .and_then(|d| d.cached_tokens)
                .or(self.prompt_cache_hit_tokens),
        )?
        .unwrap_or(0);
        let prompt = check_tokens(label, "prompt_tokens", self.prompt_tokens)?.unwrap_or(0);
        let reasoning = self.completion_tokens_details.as_ref().and_then(|d| d.reasoning_tokens);
        Ok(Usage {
            input_tokens: prompt.saturating_sub(cached),
            output_tokens: check_tokens(label, "completion_tokens", self.completion_tokens)?.unwrap_or(0),
            reasoning_tokens: check_tokens(label, "reasoning_tokens", reasoning)?.unwrap_or(0),
            cache_read_tokens: cached,
            cache_write_tokens: 0,
        })
    }
}

/// Reasoning text, wherever a server puts it.
fn reasoning_text(reasoning_content: Option<String>, reasoning: Option<Value>) -> Option<String> {
    let reasoning = match reasoning {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    reasoning_content.or(reasoning).filter(|s| !s.is_empty())
}

#[derive(Deserialize)]
struct Chunk {
    choices: Option<Vec<ChunkChoice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    index: Option<u32>,
    delta: Option<WireDelta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireDelta {
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<Value>,
    tool_calls: Option<Vec<ToolCallPiece>>,
}

#[derive(Deserialize)]
struct ToolCallPiece {
    index: Option<u32>,
    id: Option<String>,
    function: Option<FunctionPiece>,
}

#[derive(Deserialize)]
struct FunctionPiece {
    name: Option<String>,
    arguments: Option<String>,
}

/// The Chat Completions stream: `data: {chunk}` events, then `data: [DONE]`.
#[derive(Default)]
pub(super) struct StreamDecoder {
    label: Arc<str>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    calls: u32,
    last_call: Option<(u32, Option<String>)>,
    /// The index of every call id seen: an id names one call only.
    ids: std::collections::HashMap<String, u32>,
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
        self.ids.len().max(self.calls as usize)
    }

    /// Usage, then the finish delta: the end of the reply.
    fn flush(&mut self, out: &mut VecDeque<ModelDelta>) {
        if let Some(usage) = self.usage.take() {
            out.push_back(ModelDelta::usage(usage));
        }
        let reason = self.finish.take().unwrap_or(if self.calls > 0 {
            FinishReason::ToolCalls
        } else {
            FinishReason::Stop
        });
        out.push_back(ModelDelta::finish(reason));
        self.done = true;
    }

    /// The call index of a piece: the server's, or (for servers that send
    /// none) a new one per new id. Checked before anything is allocated: an
    /// index may be at most one past the calls seen and below
    /// [`MAX_TOOL_CALLS`]; an id already used by another call is refused.
    fn call_index(&mut self, piece: &ToolCallPiece) -> Result<u32> {
        let index = match (piece.index, &piece.id, &self.last_call) {
            (Some(i), _, _) => i,
            (None, Some(id), Some((_, Some(last)))) if id != last => self.calls,
            (None, Some(_), None) => self.calls,
            (None, _, Some((i, _))) => *i,
            (None, None, None) => 0,
        };
        if index >= MAX_TOOL_CALLS || index > self.calls.saturating_add(1) {
            return Err(violation(
                &self.label,
                format_args!(
                    "tool-call index {index} is out of range (at most one past the {} call(s) seen, and below {MAX_TOOL_CALLS})",
                    self.calls
                ),
            ));
        }
        if let Some(id) = &piece.id {
            match self.ids.get(id) {
                Some(&first) if first != index => {
                    return Err(violation(
                        &self.label,
                        format_args!(
                            "tool calls {first} and {index} share the id \"{}\"; results could not be told apart",
                            crate::harness::shorten::shorten(id, 80)
                        ),
                    ))
                }
                Some(_) => {}
                None if self.ids.values().any(|&i| i == index) => {
                    return Err(violation(
                        &self.label,
                        format_args!(
                            "tool call {index} changed its id to \"{}\" mid-stream",
                            crate::harness::shorten::shorten(id, 80)
                        ),
                    ))
                }
                None => {
                    self.ids.insert(id.clone(), index);
                }
            }
        }
        self.calls = self.calls.max(index + 1);
        if piece.id.is_some() || self.last_call.as_ref().is_none_or(|(i, _)| *i != index) {
            self.last_call = Some((index, piece.id.clone()));
        }
        Ok(index)
    }
}

impl Decoder for StreamDecoder {
    fn event(&mut self, event: SseEvent, out: &mut VecDeque<ModelDelta>) -> Result<()> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.flush(out);
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk: Chunk = parse_json(&self.label, data)?;
        if chunk.error.is_some() || event.event == "error" {
            return Err(stream_error(&self.label, data));
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue; // one reply per call: `n` is never set
            }
            if let Some(delta) = choice.delta {
                if let Some(text) = reasoning_text(delta.reasoning_content, delta.reasoning) {
                    out.push_back(ModelDelta::reasoning(text));
                }
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    out.push_back(ModelDelta::text(text));
                }
                for piece in delta.tool_calls.unwrap_or_default() {
                    let index = self.call_index(&piece)?;
                    let (name, arguments) = piece
                        .function
                        .map(|f| (f.name, f.arguments.unwrap_or_default()))
                        .unwrap_or_default();
                    if piece.id.is_none() && name.is_none() && arguments.is_empty() {
                        continue;
                    }
                    out.push_back(ModelDelta::new(DeltaContent::ToolCall {
                        index,
                        id: piece.id,
                        name,
                        arguments,
                    }));
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish = Some(finish_reason(&reason));
            }
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.usage(&self.label)?);
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.done
    }

    fn end(&mut self, out: &mut VecDeque<ModelDelta>) -> Result<()> {
        // A server that ends the body after the finish reason but without
        // `[DONE]` said everything that matters.
        if self.finish.is_some() {
            self.flush(out);
            Ok(())
        } else {
            Err(truncated(&self.label, "finish reason and no `data: [DONE]`"))
        }
    }
}

#[derive(Deserialize)]
struct Completion {
    choices: Option<Vec<CompletionChoice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct CompletionChoice {
    message: Option<CompletionMessage>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct CompletionMessage {
    content: Option<Value>,
    reasoning_content: Option<String>,
    reasoning: Option<Value>,
    tool_calls: Option<Vec<CompletionToolCall>>,
}

#[derive(Deserialize)]
struct CompletionToolCall {
    id: Option<String>,
    function: Option<FunctionPiece>,
}

/// The deltas a non-streamed completion amounts to (at most
/// [`MAX_TOOL_CALLS`] calls, usage checked).
fn completion_deltas(label: &str, completion: Completion) -> Result<Vec<ModelDelta>> {
    let mut out = Vec::new();
    let choice = completion.choices.unwrap_or_default().into_iter().next();
    let mut finish = None;
    let mut calls = 0;
    if let Some(choice) = choice {
        finish = choice.finish_reason.as_deref().map(finish_reason);
        if let Some(message) = choice.message {
            if let Some(text) = reasoning_text(message.reasoning_content, message.reasoning) {
                out.push(ModelDelta::reasoning(text));
            }
            let text = match message.content {
                Some(Value::String(s)) => s,
                // Content as parts: the text parts, in order.
                Some(Value::Array(parts)) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect(),
                _ => String::new(),
            };
            if !text.is_empty() {
                out.push(ModelDelta::text(text));
            }
            let tool_calls = message.tool_calls.unwrap_or_default();
            if tool_calls.len() > MAX_TOOL_CALLS as usize {
                return Err(violation(
                    label,
                    format_args!(
                        "the reply holds {} tool calls, above the {MAX_TOOL_CALLS} one reply may hold",
                        tool_calls.len()
                    ),
                ));
            }
            for (i, call) in tool_calls.into_iter().enumerate() {
                let (name, arguments) = call
                    .function
                    .map(|f| (f.name, f.arguments.unwrap_or_default()))
                    .unwrap_or_default();
                out.push(ModelDelta::new(DeltaContent::ToolCall {
                    index: i as u32,
                    id: call.id,
                    name,
                    arguments,
                }));
                calls += 1;
            }
        }
    }
    if let Some(usage) = completion.usage {
        out.push(ModelDelta::usage(usage.usage(label)?));
    }
    out.push(ModelDelta::finish(finish.unwrap_or(if calls > 0 {
        FinishReason::ToolCalls
    } else {
        FinishReason::Stop
    })));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(events: &[&str]) -> (Vec<ModelDelta>, Result<()>) {
        let mut d = StreamDecoder {
            label: Arc::from("openai:m"),
            ..StreamDecoder::default()
        };
        let mut out = VecDeque::new();
        for data in events {
            let r = d.event(
                SseEvent {
                    event: String::new(),
                    data: (*data).to_owned(),
                },
                &mut out,
            );
            if r.is_err() {
                return (out.into(), r);
            }
        }
        let r = if d.done() { Ok(()) } else { d.end(&mut out) };
        (out.into(), r)
    }

    #[test]
    fn tool_calls_without_indices_get_one_per_id() {
        let (deltas, r) = run(&[
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"g","arguments":"{"}}]}}]}"#,
            r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"}"}}]}}]}"#,
            r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
            "[DONE]",
        ]);
        r.unwrap();
        let indices: Vec<u32> = deltas
            .iter()
            .filter_map(|d| match &d.content {
                DeltaContent::ToolCall { index, .. } => Some(*index),
                _ => None,
            })
            .collect();
        assert_eq!(indices, [0, 1, 1]);
        assert_eq!(deltas.last(), Some(&ModelDelta::finish(FinishReason::ToolCalls)));
    }

    #[test]
    fn a_body_ending_after_the_finish_reason_is_complete_and_before_it_is_not() {
        let (deltas, r) = run(&[r#"{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}"#]);
        r.unwrap();
        assert_eq!(deltas, [ModelDelta::text("hi"), ModelDelta::finish(FinishReason::Stop)]);
        let (_, r) = run(&[r#"{"choices":[{"delta":{"content":"hi"}}]}"#]);
        assert!(r.unwrap_err().is_retryable());
    }
}
