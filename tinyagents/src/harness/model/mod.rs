//! Model calls: [`ModelRequest`], [`ModelResponse`], streamed [`ModelDelta`]s,
//! [`Usage`], the [`ChatModel`] trait and the [`ScriptedModel`] for tests and examples.

mod accumulate;
mod delta;
mod output_limits;
mod pricing;
mod request;
mod response;
mod scripted;
mod shared_list;

#[cfg(any(feature = "openai", feature = "anthropic"))]
pub mod providers;

pub use accumulate::ResponseAccumulator;
pub use delta::{DeltaContent, ModelDelta};
pub use output_limits::{known_output_limit, OUTPUT_LIMIT_TABLE};
pub(crate) use pricing::provider_of;
pub use pricing::{catalog_rates, TokenRates, Valuation, PRICE_TABLE};
pub use request::{
    ModelParams, ModelRequest, ModelRequestFields, ModelRoute, PromptSegment, ReasoningEffort, ResponseFormat,
    SegmentStability, ToolChoice,
};
pub use response::{FinishReason, ModelResponse, Usage};
pub use scripted::{ScriptedModel, ScriptedTurn};
pub use shared_list::{ListMark, SharedList};

use crate::harness::error::Result;

/// What a custom [`ChatModel`] needs, so it depends on `tinyagents` alone:
/// the attribute the trait is implemented with and the `futures` stream
/// types its [`ModelStream`] is built from.
///
/// ```
/// use tinyagents::harness::model::{async_trait, stream, ChatModel, ModelDelta, ModelRequest, ModelStream, StreamExt};
/// use tinyagents::prelude::*;
///
/// /// Answers every request with "pong".
/// struct Pong;
///
/// #[async_trait]
/// impl ChatModel for Pong {
///     fn id(&self) -> &str {
///         "pong"
///     }
///
///     async fn stream(&self, _request: &ModelRequest) -> Result<ModelStream> {
///         Ok(stream::iter([Ok(ModelDelta::text("pong"))]).boxed())
///     }
/// }
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let agent: Agent<()> = Agent::new(Pong);
/// let run = agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "ping").await?;
/// assert_eq!(run.final_text(), "pong");
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
pub use async_trait::async_trait;
pub use futures::stream::{self, BoxStream, Stream, StreamExt};

/// A stream of deltas from one model call.
pub type ModelStream = BoxStream<'static, Result<ModelDelta>>;

/// A chat model that streams its reply as [`ModelDelta`]s.
///
/// The agent loop passes every delta through the stack's `on_model_delta`
/// hooks, then to the event sink, then into a [`ResponseAccumulator`].
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// The model's identifier (`provider:model`, or `scripted`).
    fn id(&self) -> &str;

    /// Starts a call and returns its delta stream.
    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream>;
}

/// A shared model is a model (so a test can keep a handle to a [`ScriptedModel`]).
#[async_trait]
impl<T: ChatModel + ?Sized> ChatModel for std::sync::Arc<T> {
    fn id(&self) -> &str {
        (**self).id()
    }

    async fn stream(&self, request: &ModelRequest) -> Result<ModelStream> {
        (**self).stream(request).await
    }
}
