//! Real chat models behind [`ChatModel`]: OpenAI, OpenAI-compatible servers
//! (vLLM, llama.cpp's server, Ollama) and Anthropic, over HTTP with streaming.
//!
//! Compiled in by the cargo features `openai`, `anthropic`, or `providers`
//! (both); the default features pull in no HTTP stack.
//!
//! ```no_run
//! use tinyagents::prelude::*;
//! use tinyagents::harness::model::providers::{model_from_env, ProviderConfig};
//!
//! # async fn demo() -> Result<()> {
//! // One line picks the provider: the key comes from `OPENAI_API_KEY`.
//! let model = model_from_env("openai:gpt-4o-mini")?;
//! // or `anthropic:claude-sonnet-4-5`, `ollama:llama3.2`, `vllm:Qwen/Qwen3-8B`, …
//! // or, from code:
//! let _local = ProviderConfig::parse("openai-compatible:qwen3")?
//!     .with_base_url("http://127.0.0.1:8000/v1")
//!     .build()?;
//! let agent: Agent<()> = Agent::from_shared(model);
//! let run = agent.run(&mut RunContext::new(RunConfig::new("run-1"), ()), &(), "Hello").await?;
//! println!("{}", run.final_text());
//! # Ok(()) }
//! ```
//!
//! What every provider does, faithfully to what the server sent:
//!
//! * **Deltas.** Text and reasoning pieces become [`DeltaContent::Text`] and
//!   [`DeltaContent::Reasoning`] deltas as they arrive; tool calls become
//!   [`DeltaContent::ToolCall`] pieces (the first with id and name, then the
//!   argument text as streamed, assembled by the
//!   [`ResponseAccumulator`]); then
//!   one [`DeltaContent::Usage`] and, last, [`DeltaContent::Finish`].
//! * **Finish reasons.** A reply cut off by the output limit (`length`,
//!   `max_tokens`) finishes with [`FinishReason::Length`].
//! * **Usage.** `input_tokens` counts uncached input only; `cache_read_tokens`
//!   and `cache_write_tokens` the prompt-cache reads and writes;
//!   `reasoning_tokens` the part of `output_tokens` spent reasoning.
//! * **System prompt.** The [`PromptSegment`]s go out stable first, then
//!   volatile, each group in its own order, so the provider's prefix cache
//!   (and a local server's KV cache) keeps hitting. OpenAI gets one system
//!   message (the segments joined by a blank line, as
//!   [`ModelRequest::system_prompt`]); Anthropic gets one system block per
//!   segment, the last stable one marked with `cache_control`.
//! * **Reply shape and tool choice.** [`ModelRequest::response_format`](crate::harness::model::ModelRequestFields::response_format)
//!   goes to OpenAI-compatible servers as `response_format` (`json_schema`),
//!   and to Anthropic the tool way (a forced answer tool whose input is the
//!   reply, turned back into text; see `AnthropicModel`); the middleware
//!   that asked validates the reply either way. [`ModelRequest::tool_choice`](crate::harness::model::ModelRequestFields::tool_choice) goes as
//!   `tool_choice` to both (`auto`/`none`/`required`/a function for OpenAI;
//!   `auto`/`none`/`any`/`tool` for Anthropic), only when the request offers
//!   tools; forcing a tool the request does not offer is a `Config` error.
//! * **Parameters.** `max_tokens`, `temperature` and `reasoning_effort` are
//!   sent where the provider honours them; [`ModelParams::extra`] keys are
//!   merged into the request body last (so they can override anything).
//! * **Errors.** HTTP 429 is [`TinyAgentsError::RateLimited`] with the
//!   `retry-after`/`retry-after-ms` hint kept; 408, 409 and 5xx are retryable
//!   [`TinyAgentsError::Model`] errors; 401 and 403 are not retryable and name
//!   the key variable; other 4xx are not retryable; a stream that drops before
//!   the provider's end marker, and a malformed chunk, are retryable model
//!   errors. Nothing panics on bad input.
//! * **Secrets.** No error names a secret: the key, the configured header
//!   values and the base URL's password and secret query values are learnt
//!   by the process's [`Redactor`](crate::harness::secrets::Redactor), every
//!   error passes it (a server quoting the key back has it masked), and the
//!   HTTP client's error is kept without its URL.
//! * **Bounds.** Every read and every number off the wire is checked; a
//!   breach is a model error that is *not* retryable (the reply is refused):
//!   an SSE line or event above 4 MiB, a stream above 128 MiB, a non-streamed
//!   body above 32 MiB (refused unread when its length says so); a tool-call
//!   index above 127 or more than one past the calls seen, a duplicate call
//!   id, a token count above 2^40, an Anthropic content block or delta of a
//!   kind this version does not know (refused, not dropped). Only the first
//!   64 KiB of an error body are read, and a provider's error message is
//!   shown cut to 2000 characters with control characters escaped. A
//!   `retry-after`/`retry-after-ms` hint above one hour counts as one hour.
//! * **Cancellation.** Dropping the delta stream drops the HTTP body and
//!   closes the connection: a cancelled run stops the generation on the wire.
//!
//! The client is `reqwest` (rustls, no system OpenSSL) with a small SSE parser
//! of our own; see [`ProviderConfig`] for `provider:model` strings, base
//! URLs and key variables.

mod config;
mod http;
mod sse;

#[cfg(feature = "anthropic")]
mod anthropic;
#[cfg(feature = "openai")]
mod openai;

#[cfg(all(test, feature = "openai", feature = "anthropic"))]
mod fuzz;

#[cfg(feature = "anthropic")]
pub use anthropic::AnthropicModel;
pub use config::{model_from_default_env, model_from_env, ProviderConfig, ProviderKind, MODEL_ENV, PROVIDER_NAMES};
#[cfg(feature = "openai")]
pub use openai::OpenAiModel;

use crate::harness::error::Result;
use crate::harness::model::{
    ModelDelta, ModelRequest, ModelResponse, ModelStream, PromptSegment, ResponseAccumulator, SegmentStability,
    ToolChoice,
};
#[cfg(doc)]
use crate::harness::{
    error::TinyAgentsError,
    model::{ChatModel, DeltaContent, FinishReason, ModelParams},
};

/// The request's `tool_choice`, checked against its tools: `None` when
/// nothing need be sent (no choice, or a non-forcing choice without tools);
/// a `Config` error when it forces a tool the request does not offer.
pub(crate) fn checked_tool_choice(request: &ModelRequest) -> Result<Option<&ToolChoice>> {
    let Some(choice) = &request.tool_choice else {
        return Ok(None);
    };
    let offered = || {
        let names: Vec<String> = request.tools.iter().map(|t| format!("`{}`", t.name)).collect();
        if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        }
    };
    match choice {
        ToolChoice::Tool(name) if !request.tools.iter().any(|t| &t.name == name) => {
            Err(crate::harness::error::TinyAgentsError::config(format!(
                "`tool_choice` forces the tool `{name}`, which this request does not offer (its tools: {}); offer                  the tool or drop `tool_choice`",
                offered()
            )))
        }
        ToolChoice::Required if request.tools.is_empty() => Err(crate::harness::error::TinyAgentsError::config(
            "`tool_choice` requires a tool call, but this request offers no tools; offer tools or drop `tool_choice`",
        )),
        _ if request.tools.is_empty() => Ok(None),
        _ => Ok(Some(choice)),
    }
}

/// The system segments in sending order: stable ones first, then volatile
/// ones, each group in the request's order.
pub(crate) fn ordered_segments(system: &[PromptSegment]) -> impl Iterator<Item = &PromptSegment> {
    let stable = system.iter().filter(|s| s.stability == SegmentStability::Stable);
    let volatile = system.iter().filter(|s| s.stability == SegmentStability::Volatile);
    stable.chain(volatile)
}

/// A whole reply (from a non-streaming call) replayed as a delta stream.
pub(crate) fn replay(deltas: Vec<ModelDelta>) -> ModelStream {
    use futures::StreamExt;
    futures::stream::iter(deltas.into_iter().map(Ok)).boxed()
}

/// Folds the deltas of a whole reply into the response.
pub(crate) fn fold(deltas: &[ModelDelta], model: &str) -> Result<ModelResponse> {
    let mut acc = ResponseAccumulator::new();
    for d in deltas {
        acc.push(d);
    }
    let mut response = acc.finish()?;
    response.model = Some(model.to_owned());
    Ok(response)
}
