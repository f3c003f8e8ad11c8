//! [`ContextWindowMiddleware`] (`ContextMiddleware` in the QueryMT middleware docs): watches how full the context window is,
//! warns once, then compacts through a summariser.

use std::sync::Arc;

use super::summarizer::{ConcatSummarizer, Summarizer};
use super::window::{compact, Summary};
use crate::config::ConfigViolation;
use crate::harness::context::RunContext;
use crate::harness::error::Result;
use crate::harness::event::{AgentEvent, EventKind};
use crate::harness::model::{ModelRequest, ModelResponse};
use crate::harness::tokens::{default_counter, TokenCounter};
use tinyagents_macros::{middleware, MiddlewareConfig};

/// Options of [`ContextWindowMiddleware`] (`type = "context_window"`); `warn_at_percent`
/// must be below `compact_at_percent`.
///
/// ```
/// use tinyagents::config::from_toml_str;
/// use tinyagents::middleware::ContextWindowConfig;
///
/// let c: ContextWindowConfig = from_toml_str("warn_at_percent = 80\ncompact_at_percent = 90\nfallback_max_tokens = 128000").unwrap();
/// assert_eq!(c.compact_at_percent, 90);
/// let err = from_toml_str::<ContextWindowConfig>("warn_at_percent = 95\ncompact_at_percent = 90").unwrap_err();
/// assert!(err.to_string().contains("warn_at_percent"));
/// ```
#[derive(Debug, Clone, PartialEq, MiddlewareConfig)]
#[config(type = "context_window", builds = ContextWindowMiddleware, validate = check_context)]
pub struct ContextWindowConfig {
    /// Warn (once per run) when the request fills this percentage of the context window.
    #[config(default = 80, range = 1..=100)]
    pub warn_at_percent: u8,
    /// Compact when the request fills this percentage of the context window.
    #[config(default = 90, range = 1..=100)]
    pub compact_at_percent: u8,
    /// The context window, in tokens, when the model's is not known.
    #[config(default = 128000, range = 1..)]
    pub fallback_max_tokens: u64,
    /// The newest messages a compaction keeps verbatim.
    #[config(default = 20, range = 1..)]
    pub keep_messages: u32,
    /// Deprecated (the legacy `ContextFactory` key): the context window in
    /// tokens; write `fallback_max_tokens` instead. When given it is used as
    /// `fallback_max_tokens`, and each run reports a deprecation notice.
    #[config(range = 1..)]
    pub max_tokens: Option<u64>,
    /// Deprecated (the legacy `ContextFactory` key): `true` compacts when the
    /// window fills (at `compact_at_percent`), `false` never compacts (it only
    /// warns); write `compact_at_percent` instead (or leave the middleware out).
    /// Each run reports a deprecation notice.
    pub compact_on_overflow: Option<bool>,
}

impl ContextWindowConfig {
    /// The deprecation notices of the legacy keys this config uses, each
    /// naming the key and what to write instead.
    pub fn deprecations(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(tokens) = self.max_tokens {
            out.push(format!(
                "`context_window` option `max_tokens` is deprecated: write `fallback_max_tokens = {tokens}` instead"
            ));
        }
        if let Some(on) = self.compact_on_overflow {
            out.push(if on {
                "`context_window` option `compact_on_overflow` is deprecated: compaction is on by default; set \
                 `compact_at_percent` (and `warn_at_percent`) instead"
                    .to_owned()
            } else {
                "`context_window` option `compact_on_overflow` is deprecated: the new keys cannot turn compaction off; \
                 set `compact_at_percent = 100` to compact only when the window is full, or remove the `context_window` \
                 middleware"
                    .to_owned()
            });
        }
        out
    }
}

fn check_context(c: &ContextWindowConfig) -> std::result::Result<(), ConfigViolation> {
    if c.warn_at_percent >= c.compact_at_percent {
        return Err(ConfigViolation::new(
            "warn_at_percent",
            format!(
                "must be below `compact_at_percent` ({}), or the warning could never come first",
                c.compact_at_percent
            ),
        )
        .with_value(c.warn_at_percent));
    }
    Ok(())
}

impl From<ContextWindowConfig> for ContextWindowMiddleware {
    fn from(c: ContextWindowConfig) -> Self {
        let deprecations = c.deprecations();
        for notice in &deprecations {
            tracing::warn!(target: "tinyagents::config", "{notice}");
        }
        Self {
            warn_at_percent: c.warn_at_percent,
            compact_at_percent: c.compact_at_percent,
            compact: c.compact_on_overflow.unwrap_or(true),
            deprecations: deprecations.into(),
            max_tokens: c.max_tokens.unwrap_or(c.fallback_max_tokens),
            keep_messages: c.keep_messages as usize,
            summarizer: Arc::new(ConcatSummarizer::default()),
            counter: default_counter(),
        }
    }
}

/// What one registration keeps in a run (its run state).
#[derive(Debug, Default)]
struct ContextRun {
    /// It already warned.
    warned: bool,
    /// It already reported its deprecated keys.
    deprecated: bool,
    /// The context the provider reported for the latest call (input, cache included, plus output).
    reported: u64,
    /// Its summary.
    summary: Summary,
}

/// Monitors how full the context window is (the request's estimate, or the
/// context the provider reported for the previous call when larger): one warning notice per run at
/// `warn_at_percent`, then a compaction through the summariser at
/// `compact_at_percent` (the older conversation replaced by a summary, the
/// newest `keep_messages` and every system message kept, tool calls kept with
/// their results).
///
/// ```
/// use std::sync::Arc;
/// use tinyagents::config::{from_toml_str, BuildMiddleware};
/// use tinyagents::middleware::{ConcatSummarizer, ContextWindowConfig, ContextWindowMiddleware};
/// use tinyagents::prelude::*;
///
/// let context: ContextWindowMiddleware = from_toml_str::<ContextWindowConfig>("fallback_max_tokens = 32000")
///     .unwrap()
///     .build()
///     .with_context_window(200_000)
///     .with_summarizer(Arc::new(ConcatSummarizer::default()));
/// assert_eq!(context.context_window(), 200_000);
/// let _stack: MiddlewareStack<()> = MiddlewareStack::new().with(context).unwrap();
/// ```
#[derive(educe::Educe)]
#[educe(Debug)]
pub struct ContextWindowMiddleware {
    warn_at_percent: u8,
    compact_at_percent: u8,
    /// `false` only from the legacy `compact_on_overflow = false`: warn, never compact.
    #[educe(Debug(ignore))]
    compact: bool,
    /// Deprecation notices of the legacy keys it was built from, reported once per run.
    #[educe(Debug(ignore))]
    deprecations: Arc<[String]>,
    max_tokens: u64,
    #[educe(Debug(ignore))]
    keep_messages: usize,
    #[educe(Debug(ignore))]
    summarizer: Arc<dyn Summarizer>,
    #[educe(Debug(ignore))]
    counter: Arc<dyn TokenCounter>,
}

impl ContextWindowMiddleware {
    /// The provenance policy version (the summariser's id is appended).
    pub const POLICY: &'static str = "context/1";

    /// The same middleware for a model whose context window is known (replacing `fallback_max_tokens`).
    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.max_tokens = tokens.max(1);
        self
    }

    /// The same middleware compacting with `summarizer`.
    pub fn with_summarizer(mut self, summarizer: Arc<dyn Summarizer>) -> Self {
        self.summarizer = summarizer;
        self
    }

    /// The same middleware measuring with `counter`.
    pub fn with_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = counter;
        self
    }

    /// The context window it measures against, in tokens.
    pub fn context_window(&self) -> u64 {
        self.max_tokens
    }

    fn notice<C>(ctx: &RunContext<C>, message: impl FnOnce() -> String, is_error: bool) {
        ctx.events().emit_with(EventKind::Notice, || AgentEvent::Notice {
            source: "context_window".into(),
            message: message(),
            is_error,
        });
    }
}

/// Watches context usage: warns once, then compacts through the summariser.
#[middleware(
    builtin,
    name = "context_window",
    config = ContextWindowConfig,
    run_state = ContextRun,
    doc(
        mutation = "At `compact_at_percent`, replaces the older non-system messages of `request.messages` (a copy; stored history untouched) with one summary user message, keeping the newest `keep_messages` and tool calls with their results. The agent attaches the provenance to `AgentRun::compressions` when the run ends.",
        events = "`Notice { source: \"context_window\" }` once per run at `warn_at_percent`, on each compaction, and (`is_error: true`) when nothing can be compacted; `Compressed` with provenance for each new or extended summary. Built from the legacy keys `max_tokens` / `compact_on_overflow`, once per run a `Notice` naming each deprecated key and the key to write instead (`fallback_max_tokens`, `compact_at_percent`), plus a `tracing` warning when built.",
        failure = "Fails clearly: a summariser error ends the run with that error. When the window is full but everything is in the kept window, it warns and sends the request unchanged (the provider then decides).",
        streaming = "None on deltas; it acts before the stream starts.",
        cache = "Keeps the stable prefix (system segments, tools, leading system messages): the summary is a user message after them; provenance records the fingerprints. The conversation cache restarts at the summary when it is made or extended.",
        retries = "Runs in `before_model`, outside the model onion: retries and fallbacks reuse the compacted request; measured against `fallback_max_tokens` or `with_context_window`, not the fallback model's window. `after_model` notes the usage the provider reported for the call that succeeded."
    )
)]
impl ContextWindowMiddleware {
    #[before_model]
    async fn watch<S, C>(
        &self,
        ctx: &mut RunContext<C>,
        state: &S,
        run: &mut ContextRun,
        request: &mut ModelRequest,
    ) -> Result<()> {
        if !self.deprecations.is_empty() && !std::mem::replace(&mut run.deprecated, true) {
            for notice in self.deprecations.iter() {
                Self::notice(ctx, || notice.clone(), false);
            }
        }
        // The estimate of this request, or what the provider reported for the
        // previous call when that is larger (the estimate is approximate).
        let tokens = self.counter.count_request(request).max(run.reported);
        let percent = tokens as f64 * 100.0 / self.max_tokens as f64;
        if self.compact && percent >= f64::from(self.compact_at_percent) {
            let done = compact(
                ctx,
                state,
                request,
                &mut run.summary,
                self.keep_messages,
                &*self.summarizer,
                &*self.counter,
                "context_window",
                Self::POLICY,
            )
            .await?;
            match done {
                Some(c) => Self::notice(
                    ctx,
                    || {
                        format!(
                            "the request filled {percent:.0}% of the {}-token context window; {} older messages {}",
                            self.max_tokens,
                            c.replaced,
                            if c.fresh { "were summarised" } else { "stay summarised" }
                        )
                    },
                    false,
                ),
                None => Self::notice(
                    ctx,
                    || {
                        format!(
                            "the request fills {percent:.0}% of the {}-token context window but every message is \
                             within the {} kept newest: nothing could be compacted",
                            self.max_tokens, self.keep_messages
                        )
                    },
                    true,
                ),
            }
        } else if percent >= f64::from(self.warn_at_percent) && !std::mem::replace(&mut run.warned, true) {
            Self::notice(
                ctx,
                || {
                    if self.compact {
                        format!(
                            "the request fills {percent:.0}% of the {}-token context window; it will be compacted at {}%",
                            self.max_tokens, self.compact_at_percent
                        )
                    } else {
                        format!(
                            "the request fills {percent:.0}% of the {}-token context window; compaction is off \
                             (`compact_on_overflow = false`)",
                            self.max_tokens
                        )
                    }
                },
                false,
            );
        }
        Ok(())
    }

    #[after_model]
    fn measure(&self, run: &mut ContextRun, response: &mut ModelResponse) -> Result<()> {
        let used = response.usage.total_input() + response.usage.output_tokens;
        if used > 0 {
            run.reported = used;
        }
        Ok(())
    }
}
