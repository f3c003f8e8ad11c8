//! Documentation of middleware: the static metadata every DSL-declared
//! middleware carries ([`MiddlewareMetadata`]) and the generator of the
//! documentation table ([`render_markdown`], which writes `docs/middleware.md`).

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::harness::context::JumpSet;
use crate::harness::middleware::{HookSet, MiddlewareDoc, MiddlewareInfo};

/// What the DSL knows about a middleware type without an instance, a state
/// type or a context type: implemented by every type the hook attributes
/// and `#[middleware]` generate or annotate.
///
/// ```
/// use tinyagents::docs::MiddlewareMetadata;
/// use tinyagents::prelude::*;
///
/// #[before_model(name = "add_date", can_jump_to = [end])]
/// async fn add_date(request: &mut ModelRequest) -> Result<()> {
///     request.set_volatile("date", "Today is Monday.");
///     Ok(())
/// }
///
/// assert_eq!(AddDate::NAME, "add_date");
/// assert_eq!(AddDate::HOOKS, HookSet::BEFORE_MODEL);
/// assert_eq!(AddDate::JUMPS, JumpSet::END);
/// ```
pub trait MiddlewareMetadata {
    /// The declared name.
    const NAME: &'static str;
    /// The hooks it implements (wraps and sync fast paths included).
    const HOOKS: HookSet;
    /// The jumps it declared with `can_jump_to`.
    const JUMPS: JumpSet;
    /// The names it must run before.
    const BEFORE: &'static [&'static str];
    /// The names it must run after.
    const AFTER: &'static [&'static str];
    /// The names it runs before when they are registered (`before_if_present`).
    const BEFORE_IF_PRESENT: &'static [&'static str] = &[];
    /// The names it runs after when they are registered (`after_if_present`).
    const AFTER_IF_PRESENT: &'static [&'static str] = &[];
    /// Its documentation record, when it has one (`doc(...)` or `builtin`).
    const DOC: Option<&'static MiddlewareDoc>;
}

/// The [`MiddlewareInfo`] of a DSL middleware type, from its metadata.
pub fn info_of<M: MiddlewareMetadata + ?Sized>() -> MiddlewareInfo {
    MiddlewareInfo {
        name: Cow::Borrowed(M::NAME),
        hooks: M::HOOKS,
        before: M::BEFORE.iter().map(|s| Cow::Borrowed(*s)).collect(),
        after: M::AFTER.iter().map(|s| Cow::Borrowed(*s)).collect(),
        before_if_present: M::BEFORE_IF_PRESENT.iter().map(|s| Cow::Borrowed(*s)).collect(),
        after_if_present: M::AFTER_IF_PRESENT.iter().map(|s| Cow::Borrowed(*s)).collect(),
        jumps: M::JUMPS,
        doc: M::DOC,
    }
}

/// Where the documentation table lives, relative to the workspace root.
pub const MIDDLEWARE_MD: &str = "docs/middleware.md";

/// The command that regenerates [`MIDDLEWARE_MD`].
pub const REGENERATE: &str = "TINYAGENTS_BLESS=1 cargo test -p tinyagents-tests --test it dsl_docs";

/// Renders the documentation table of `docs` (normally
/// [`catalog()`](crate::middleware::catalog)): one table of every middleware
/// (name, summary, hooks), then a section per middleware with its seven
/// documented aspects and its config fields.
///
/// ```
/// let text = tinyagents::docs::render_markdown(&tinyagents::middleware::catalog());
/// assert!(text.starts_with("# Built-in middleware"));
/// ```
pub fn render_markdown(docs: &[&MiddlewareDoc]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Built-in middleware\n");
    let _ = writeln!(
        out,
        "<!-- Generated from `tinyagents::middleware::catalog()`; do not edit. Regenerate with:\n     {REGENERATE} -->\n"
    );
    if docs.is_empty() {
        let _ = writeln!(out, "No built-in middleware yet.");
        return out;
    }
    let _ = writeln!(out, "| Middleware | Summary | Hooks |");
    let _ = writeln!(out, "| --- | --- | --- |");
    for d in docs {
        let _ = writeln!(
            out,
            "| [`{}`](#{}) | {} | {} |",
            d.name,
            anchor(d.name),
            cell(d.summary),
            hooks(d)
        );
    }
    for d in docs {
        let _ = writeln!(out, "\n## `{}`\n", d.name);
        let _ = writeln!(out, "{}\n", d.summary.trim());
        let config = d
            .config_type
            .map_or_else(|| "—".to_owned(), |t| format!("`type = \"{t}\"`"));
        for (label, text) in [
            ("Hook points", hooks(d)),
            ("Config", config),
            ("Mutation", d.mutation.trim().to_owned()),
            ("Events", d.events.trim().to_owned()),
            ("Failure mode", d.failure.trim().to_owned()),
            ("Streaming", d.streaming.trim().to_owned()),
            ("Prompt / KV cache", d.cache.trim().to_owned()),
            ("Retries and fallbacks", d.retries.trim().to_owned()),
        ] {
            let _ = writeln!(out, "- **{label}:** {}", if text.is_empty() { "—" } else { &text });
        }
        if !d.config.is_empty() {
            let _ = writeln!(out, "\n| Key | Type | Default | Rules | Description |");
            let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
            for f in d.config {
                let _ = writeln!(
                    out,
                    "| `{}` | `{}` | {} | {} | {} |",
                    f.name,
                    f.ty,
                    code_or_dash(f.default),
                    rules(f),
                    cell(f.doc)
                );
            }
        }
    }
    out
}

fn hooks(d: &MiddlewareDoc) -> String {
    d.hooks.iter().map(|h| format!("`{h}`")).collect::<Vec<_>>().join(", ")
}

/// The text of [`MIDDLEWARE_MD`]: [`render_markdown`] of every built-in
/// ([`catalog()`](crate::middleware::catalog)), with the naming rule, the
/// renamed config types and the [seed names](SEED_NAMES) after the table.
///
/// ```
/// let text = tinyagents::docs::render_builtin_docs();
/// assert!(text.contains("### Names in the seed documents"));
/// assert!(text.contains("| `ContextCompressionMiddleware` |"));
/// ```
pub fn render_builtin_docs() -> String {
    let table = render_markdown(&crate::middleware::catalog());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nEvery built-in type is named `…Middleware` and built from `…Config`; its config `type`, its \
         catalog name and its name in a stack are one name (below). Renamed config types are still read, \
         with a deprecation notice: {}.",
        crate::config::DEPRECATED_TYPES
            .iter()
            .map(|(old, new, _)| format!("`{old}` → `{new}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(out, "\n### Names in the seed documents\n");
    let _ = writeln!(out, "| Seed name | Here | How |");
    let _ = writeln!(out, "| --- | --- | --- |");
    for (seed, here, how) in SEED_NAMES {
        let _ = writeln!(out, "| `{seed}` | {here} | {} |", cell(how));
    }
    // after the summary table, before the first section
    match table.find("\n## ") {
        Some(i) => format!("{}{out}{}", &table[..i], &table[i..]),
        None => format!("{table}{out}"),
    }
}

/// A field's rules cell: the names a [`ConfigEnum`](crate::config::ConfigEnum) field takes, then its rules.
fn rules(f: &crate::harness::middleware::ConfigFieldDoc) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !f.choices.is_empty() {
        let names = f.choices.iter().map(|c| format!("`{c}`")).collect::<Vec<_>>();
        parts.push(format!("one of {}", names.join(", ")));
    }
    if !f.rules.is_empty() {
        parts.push(code_or_dash(f.rules));
    }
    if parts.is_empty() {
        "—".to_owned()
    } else {
        parts.join("; ")
    }
}

/// The public names the seed documents use for items this crate names
/// otherwise: `(seed name, what it is here, how)`. Every seed name is usable
/// as written (a type alias or a re-export at the path shown), so code
/// written from the seeds compiles.
pub const SEED_NAMES: &[(&str, &str, &str)] = &[
    (
        "MessageTrimMiddleware",
        "`tinyagents::middleware::MessageTrimMiddleware` (`message_trim`)",
        "the type",
    ),
    (
        "ContextCompressionMiddleware",
        "`tinyagents::middleware::SummarizationMiddleware` (`summarization`)",
        "type alias: the same summarising compression (a policy, a `Summarizer`, a summary message, provenance, `Compressed`)",
    ),
    (
        "PromptCacheGuardMiddleware",
        "`tinyagents::middleware::PromptCacheGuardMiddleware` (`prompt_cache_guard`)",
        "the type",
    ),
    (
        "SummarizationPolicy",
        "`tinyagents::middleware::SummaryTrigger`",
        "type alias: when the summarising compression runs",
    ),
    (
        "SummaryRecord",
        "`tinyagents::harness::provenance::CompressionProvenance`",
        "type alias: the record of one compression (`AgentEvent::Compressed`, `AgentRun::compressions`)",
    ),
    (
        "summarization::trim_messages",
        "`tinyagents::middleware::summarization::trim_messages`",
        "the function `MessageTrimMiddleware` applies",
    ),
    (
        "ParallelEditGuard",
        "`tinyagents::middleware::ParallelEditGuardMiddleware` (`parallel_edit_guard`)",
        "renamed (seed 002's name): every built-in type ends in `Middleware`",
    ),
    (
        "ContextCompression",
        "`tinyagents::middleware::ContextClippingMiddleware` (`context_clipping`)",
        "renamed (this crate's clipping compressor, not seed 004's): it clips older long messages to head/tail excerpts; config `type = \"context_compression\"` is a deprecated alias",
    ),
];

fn anchor(name: &str) -> String {
    name.chars()
        .filter_map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' => Some(c),
            'A'..='Z' => Some(c.to_ascii_lowercase()),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}

fn cell(text: &str) -> String {
    text.trim().replace('|', "\\|").replace('\n', " ")
}

fn code_or_dash(text: &str) -> String {
    if text.is_empty() {
        "—".to_owned()
    } else {
        format!("`{}`", text.replace('|', "\\|"))
    }
}
