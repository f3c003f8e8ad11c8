//! Token pricing: [`TokenRates`] (USD per million tokens per class), the
//! small built-in [`PRICE_TABLE`], and [`Valuation`].

use crate::harness::model::Usage;

/// USD per million tokens, per token class. `None` is *no rate* (usage in
/// that class cannot be priced); `Some(0.0)` is a known zero. A rate is never
/// derived from another: cache reads are not priced at the input rate, and
/// one-hour cache writes are not priced at the base write rate.
///
/// ```
/// use tinyagents::harness::model::TokenRates;
/// use tinyagents::prelude::*;
///
/// let rates = TokenRates { input: Some(3.0), output: Some(15.0), ..TokenRates::default() };
/// let v = rates.value(&Usage::new(1_000_000, 100_000), false);
/// assert_eq!(v.usd, 4.5);
/// assert!(v.unpriced.is_empty());
/// let v = rates.value(&Usage { cache_read_tokens: 10, ..Usage::new(0, 0) }, false);
/// assert_eq!((v.usd, v.unpriced), (0.0, vec!["cache_read"]));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TokenRates {
    /// Uncached input tokens.
    pub input: Option<f64>,
    /// Output tokens, reasoning included.
    pub output: Option<f64>,
    /// Tokens read from the prompt cache.
    pub cache_read: Option<f64>,
    /// Tokens written to the prompt cache (the base, short-lived write).
    pub cache_write: Option<f64>,
    /// Tokens written to the prompt cache with a one-hour lifetime.
    pub cache_write_1h: Option<f64>,
}

/// The value of some usage under some rates: the known subtotal and the
/// classes with usage but no rate (which make it partial).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Valuation {
    /// The priced subtotal, in USD.
    pub usd: f64,
    /// Token classes with non-zero usage and no rate.
    pub unpriced: Vec<&'static str>,
}

impl TokenRates {
    const fn rate(input: f64, output: f64, cache_read: f64, cache_write: f64, cache_write_1h: Option<f64>) -> Self {
        Self {
            input: Some(input),
            output: Some(output),
            cache_read: Some(cache_read),
            cache_write: Some(cache_write),
            cache_write_1h,
        }
    }

    /// Whether no rate is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The rates by class name, in a fixed order.
    pub fn classes(&self) -> [(&'static str, Option<f64>); 5] {
        [
            ("input", self.input),
            ("output", self.output),
            ("cache_read", self.cache_read),
            ("cache_write", self.cache_write),
            ("cache_write_1h", self.cache_write_1h),
        ]
    }

    /// Values `usage`; cache writes are one-hour writes when `one_hour_writes`.
    pub fn value(&self, usage: &Usage, one_hour_writes: bool) -> Valuation {
        let (write_5m, write_1h) = if one_hour_writes {
            (0, usage.cache_write_tokens)
        } else {
            (usage.cache_write_tokens, 0)
        };
        let tokens = [
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            write_5m,
            write_1h,
        ];
        let mut v = Valuation::default();
        for ((class, rate), n) in self.classes().into_iter().zip(tokens) {
            if n == 0 {
                continue;
            }
            match rate {
                Some(r) => v.usd += n as f64 * r / 1_000_000.0,
                None => v.unpriced.push(class),
            }
        }
        v
    }
}

/// Catalog prices (USD per million tokens) of a handful of common models,
/// matched by the longest prefix of the model name (a `provider:` prefix is
/// ignored, so `openai:gpt-4o-mini-2024-07-18` matches `gpt-4o-mini`). Manual
/// rates on [`LimitsMiddleware`](crate::middleware::LimitsMiddleware) replace it.
pub const PRICE_TABLE: &[(&str, TokenRates)] = &[
    ("gpt-4o-mini", TokenRates::rate(0.15, 0.60, 0.075, 0.0, None)),
    ("gpt-4o", TokenRates::rate(2.50, 10.00, 1.25, 0.0, None)),
    ("gpt-4.1-mini", TokenRates::rate(0.40, 1.60, 0.10, 0.0, None)),
    ("gpt-4.1", TokenRates::rate(2.00, 8.00, 0.50, 0.0, None)),
    (
        "claude-opus-4",
        TokenRates::rate(15.00, 75.00, 1.50, 18.75, Some(30.00)),
    ),
    ("claude-sonnet-4", TokenRates::rate(3.00, 15.00, 0.30, 3.75, Some(6.00))),
    (
        "claude-3-7-sonnet",
        TokenRates::rate(3.00, 15.00, 0.30, 3.75, Some(6.00)),
    ),
    ("claude-3-5-haiku", TokenRates::rate(0.80, 4.00, 0.08, 1.00, Some(1.60))),
];

/// The model name without its `provider:` prefix.
pub(super) fn bare(model: &str) -> &str {
    model.split_once(':').map_or(model, |(_, m)| m)
}

/// The catalog rates of `model`, when the table knows it.
///
/// ```
/// use tinyagents::harness::model::catalog_rates;
/// assert_eq!(catalog_rates("openai:gpt-4o-mini-2024-07-18").unwrap().input, Some(0.15));
/// assert_eq!(catalog_rates("gpt-4o").unwrap().input, Some(2.5));
/// assert!(catalog_rates("my-local-model").is_none());
/// ```
pub fn catalog_rates(model: &str) -> Option<TokenRates> {
    let name = bare(model);
    PRICE_TABLE
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, rates)| *rates)
}

/// The provider part of a `provider:model` id (the whole id without one).
pub(crate) fn provider_of(model: &str) -> &str {
    model.split_once(':').map_or(model, |(p, _)| p)
}
