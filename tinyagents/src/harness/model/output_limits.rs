//! The output-token limits of known models: [`OUTPUT_LIMIT_TABLE`] and
//! [`known_output_limit`]. `output_limit_recovery` starts below and
//! escalates to this limit; a configured `model_output_limit` overrides it,
//! and an unknown model gets 32,000.

use super::pricing::bare;

/// The most output tokens one reply of a known model may have, as its
/// provider documents it, matched by the longest prefix of the model name (a
/// `provider:` prefix is ignored, so `anthropic:claude-sonnet-4-5-20250929`
/// matches `claude-sonnet-4-5`). A row names one model (its alias and, where
/// the dated id differs, the id's stem), never a whole family, so a newer
/// model of a family is unknown until it has a row of its own: it gets the
/// 32,000 default, not a neighbour's limit. Override it with
/// `model_output_limit` (config) or
/// [`OutputLimitRecoveryMiddleware::with_output_limit`](crate::middleware::OutputLimitRecoveryMiddleware::with_output_limit).
///
/// Each row's source is the provider's model page named beside it
/// (OpenAI: "Max output tokens" on the model's page; Anthropic: "Max output"
/// in the models overview's comparison tables), checked on 2026-12-05.
pub const OUTPUT_LIMIT_TABLE: &[(&str, u32)] = &[
    // https://platform.openai.com/docs/models/gpt-4o-mini
    ("gpt-4o-mini", 16_384),
    // https://platform.openai.com/docs/models/gpt-4o
    ("gpt-4o", 16_384),
    // https://platform.openai.com/docs/models/gpt-4.1
    ("gpt-4.1", 32_768),
    // https://platform.openai.com/docs/models/o3
    ("o3", 100_000),
    // https://platform.openai.com/docs/models/o4-mini
    ("o4-mini", 100_000),
    // Anthropic, every row below: https://docs.anthropic.com/en/docs/about-claude/models/overview
    // Claude Opus 4 (`claude-opus-4-0`, `claude-opus-4-20250514`)
    ("claude-opus-4-0", 32_000),
    ("claude-opus-4-2025", 32_000),
    // Claude Opus 4.1
    ("claude-opus-4-1", 32_000),
    // Claude Opus 4.5
    ("claude-opus-4-5", 64_000),
    // Claude Sonnet 4 (`claude-sonnet-4-0`, `claude-sonnet-4-20250514`)
    ("claude-sonnet-4-0", 64_000),
    ("claude-sonnet-4-2025", 64_000),
    // Claude Sonnet 4.5
    ("claude-sonnet-4-5", 64_000),
    // Claude Haiku 4.5
    ("claude-haiku-4-5", 64_000),
    // Claude Sonnet 3.7 (64,000; 128,000 only with a beta header this crate does not send)
    ("claude-3-7-sonnet", 64_000),
    // Claude Sonnet 3.5
    ("claude-3-5-sonnet", 8_192),
    // Claude Haiku 3.5
    ("claude-3-5-haiku", 8_192),
];

/// The output-token limit of `model` in [`OUTPUT_LIMIT_TABLE`], when it is known.
///
/// ```
/// use tinyagents::harness::model::known_output_limit;
///
/// assert_eq!(known_output_limit("anthropic:claude-sonnet-4-5"), Some(64_000));
/// assert_eq!(known_output_limit("claude-opus-4-20250514"), Some(32_000));
/// assert_eq!(known_output_limit("claude-opus-4-5-20251101"), Some(64_000));
/// assert_eq!(known_output_limit("gpt-4o-mini-2024-07-18"), Some(16_384), "the longest prefix wins");
/// // a model with no row of its own is unknown, whatever its family
/// assert_eq!(known_output_limit("claude-opus-4-7"), None);
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
