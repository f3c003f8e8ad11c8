//! [`ModelFallbackMiddleware`]: on a retryable failure, the same request goes to the next model.

use std::sync::Arc;

use super::backoff::default_classifier;
use super::timeout::is_run_deadline;
use super::ErrorClassifier;
use crate::harness::context::RunContext;
use crate::harness::error::{Result, TinyAgentsError};
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::middleware::{MiddlewareModelOutcome, ModelHandler};
use crate::harness::model::{ChatModel, ModelRequest, ModelRoute};
use tinyagents_macros::middleware;

/// Tries an ordered list of fallback models when a model call fails with an
/// error its classifier accepts (default: [`TinyAgentsError::is_retryable`]):
/// the same request is sent again with
/// [`request.route`](crate::harness::model::ModelRequestFields::route) set to the next model, and an
/// [`AgentEvent::Fallback`] names the model that failed and the one tried.
/// Interrupts and cancellations are never swallowed: they end the chain at
/// once, as does any error the classifier rejects. When every model failed,
/// the last error is returned.
///
/// ```
/// use std::sync::Arc;
/// use tinyagents::middleware::ModelFallbackMiddleware;
/// use tinyagents::prelude::*;
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
/// let primary = ScriptedModel::new([ScriptedTurn::Fail(TinyAgentsError::model("overloaded", true))]).with_id("big");
/// let backup = ScriptedModel::new([ScriptedTurn::text("from the backup")]).with_id("small");
/// let fallback = ModelFallbackMiddleware::new([Arc::new(backup) as Arc<dyn ChatModel>]);
/// let agent: Agent<()> = Agent::new(primary).with_stack(MiddlewareStack::new().with(fallback)?);
/// let run = agent.run(&mut RunContext::new(RunConfig::new("r"), ()), &(), "hi").await?;
/// assert_eq!(run.final_text(), "from the backup");
/// # Ok::<(), TinyAgentsError>(()) }).unwrap();
/// ```
#[derive(Clone)]
pub struct ModelFallbackMiddleware {
    models: Vec<Arc<dyn ChatModel>>,
    fallback_on: ErrorClassifier,
}

impl std::fmt::Debug for ModelFallbackMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.models.iter().map(|m| m.id()).collect();
        f.debug_struct("ModelFallbackMiddleware")
            .field("models", &ids)
            .finish_non_exhaustive()
    }
}

impl ModelFallbackMiddleware {
    /// Falls back to `models`, in order.
    pub fn new(models: impl IntoIterator<Item = Arc<dyn ChatModel>>) -> Self {
        Self {
            models: models.into_iter().collect(),
            fallback_on: default_classifier(),
        }
    }

    /// The same middleware falling back on the errors `classify` accepts
    /// (interrupts and cancellations still never fall back).
    pub fn fallback_on(mut self, classify: impl Fn(&TinyAgentsError) -> bool + Send + Sync + 'static) -> Self {
        self.fallback_on = Arc::new(classify);
        self
    }

    /// The fallback models' ids, in order.
    pub fn model_ids(&self) -> Vec<&str> {
        self.models.iter().map(|m| m.id()).collect()
    }
}

/// The name of the model a request goes to, as far as a middleware can tell.
fn target_of(request: &ModelRequest) -> Arc<str> {
    match (&request.route, &request.model) {
        (Some(route), _) => route.0.id().into(),
        (None, Some(model)) => model.as_str().into(),
        (None, None) => "primary".into(),
    }
}

/// Sends a failed model call to the next model of an ordered fallback list; interrupts and cancellations are never swallowed.
#[middleware(
    builtin,
    name = "model_fallback",
    doc(
        mutation = "Sets `request.route` to the fallback model for the calls it makes after a failure; the caller's request is otherwise unchanged.",
        events = "`Fallback { from, to, error }` before each fallback call (`from` is the failed model's id, or the requested model, or `primary`); the model call emits `ModelCallStarted` naming the routed model, and `AttemptDiscarded` for the failed attempt.",
        failure = "Fails clearly: an error its classifier rejects, and every interrupt, cancellation or run deadline (`Timeout { what: \"run\" }`), is returned at once; when the last model fails too, its error is returned.",
        streaming = "Each model streams anew; the failed attempt's deltas are marked by `AttemptDiscarded`, so a client drops them before the fallback's deltas arrive.",
        cache = "A fallback model has its own provider cache: the first fallback call pays a cold prefix. The request (and its stable prefix) is sent unchanged.",
        retries = "Place it outside `model_retry` so each model is retried before the next is tried, and outside `timeout`; limits and rate limiters inside it see every fallback call as a new attempt."
    )
)]
impl ModelFallbackMiddleware {
    #[wrap_model]
    async fn fall_back<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        request: ModelRequest,
        next: ModelHandler<'_, S, C>,
    ) -> Result<MiddlewareModelOutcome> {
        let mut from = target_of(&request);
        let mut error = match next.run(ctx, state, request.clone()).await {
            Ok(outcome) => return Ok(outcome),
            Err(e) => e,
        };
        for model in &self.models {
            if error.is_control_flow() || is_run_deadline(&error) || !(self.fallback_on)(&error) {
                return Err(error);
            }
            let to: Arc<str> = model.id().into();
            ctx.events().emit_with(EventKind::Fallback, || AgentEvent::Fallback {
                run_id: ctx.run_id().clone(),
                from: from.clone(),
                to: to.clone(),
                error: error.kind(),
            });
            let mut routed = request.clone();
            routed.route = Some(ModelRoute(model.clone()));
            match next.run(ctx, state, routed).await {
                Ok(outcome) => return Ok(outcome),
                Err(e) => {
                    error = e;
                    from = to;
                }
            }
        }
        Err(error)
    }
}
