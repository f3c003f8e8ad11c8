//! The output-token limits of known models: [`OUTPUT_LIMIT_TABLE`] and
//! [`known_output_limit`]. `output_limit_recovery` starts below and
//! escalates to this limit; a configured `model_output_limit` overrides it,
//! and an unknown model gets 32,000.

use super::pricing::bare;

/// The most output tokens one reply of a known model may have, as its
/// provider documents it, matched by the longest prefix of the model name (a
/// `provider:` prefix is ignored, so `anthropic:claude-sonnet-4-5` matches
/// `claude-sonnet-4`). Override it with `model_output_limit` (config) or
/// [`OutputLimitRecoveryMiddleware::with_output_limit`](crate::middleware::OutputLimitRecoveryMiddleware::with_output_limit).
pub const OUTPUT_LIMIT_TABLE: &[(&str, u32)] = &[
    ("gpt-4o-mini", 16_384),
    ("gpt-4o", 16_384),
    ("gpt-4.1", 32_768),
    ("o3", 100_000),
    ("o4-mini", 100_000),
    ("claude-opus-4", 32_000),
    ("claude-opus-4-5", 64_000),
    ("claude-sonnet-4", 64_000),
    ("claude-haiku-4", 64_000),
    ("claude-3-7-sonnet", 64_000),
    ("claude-3-5-sonnet", 8_192),
    ("claude-3-5-haiku", 8_192),
];

/// The output-token limit of `model` in [`OUTPUT_LIMIT_TABLE`], when it is known.
///
/// ```
/// use tinyagents::harness::model::known_output_limit;
///
/// assert_eq!(known_output_limit("anthropic:claude-sonnet-4-5"), Some(64_000));
/// assert_eq!(known_output_limit("claude-opus-4-1"), Some(32_000));
/// assert_eq!(known_output_limit("claude-opus-4-5-20251101"), Some(64_000), "the longest prefix wins");
/// assert_eq!(known_output_limit("my-local-model"), None);
/// ```
pub fn known_output_limit(model: &str) -> Option<u32> {
    let name = bare(model);
    OUTPUT_LIMIT_TABLE
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, limit)| *limit)
}
