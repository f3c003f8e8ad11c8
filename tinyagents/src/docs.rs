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
    /// Whether it keeps typed per-run state (`run_state = T`).
    const RUN_STATE: bool = false;
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
        run_state: M::RUN_STATE,
    }
}

/// Where the documentation table lives, relative to the workspace root.
pub const MIDDLEWARE_MD: &str = "docs/middleware.md";

/// The command that regenerates [`MIDDLEWARE_MD`].
pub const REGENERATE: &str = "TINYAGENTS_BLESS=1 cargo test -p tinyagents-tests --test it dsl::docs";

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
/// ([`catalog()`](crate::middleware::catalog)), with the naming rule and the
/// renamed config types after the table (every alias is on [`NAMES_MD`]).
///
/// ```
/// let text = tinyagents::docs::render_builtin_docs();
/// assert!(text.contains("[names.md](names.md)"));
/// assert!(text.contains("`context` → `context_window`"));
/// ```
pub fn render_builtin_docs() -> String {
    let table = render_markdown(&crate::config::builtin_docs());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\nEvery built-in type is named `…Middleware` and built from `…Config`; its config `type`, its \
         catalog name, its name in a stack and its file are one name (below). Renamed config types are still \
         read, with a deprecation notice: {}. The names the design documents use, and every other alias, are \
         listed in [names.md](names.md).",
        crate::config::DEPRECATED_TYPES
            .iter()
            .map(|(old, new, _)| format!("`{old}` → `{new}`"))
            .collect::<Vec<_>>()
            .join(", ")
    );
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

/// Where the page of names and aliases lives, relative to the workspace root.
pub const NAMES_MD: &str = "docs/names.md";

/// The command that regenerates [`NAMES_MD`].
pub const REGENERATE_NAMES: &str = "TINYAGENTS_BLESS=1 cargo test -p tinyagents-tests --test it -- names::";

/// A second name for an item: a name the design documents use, or a former
/// name, kept so that code written with it compiles. Listed by [`aliases`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameAlias {
    /// The alias, as a path a user writes.
    pub alias: &'static str,
    /// The item it names, by its path (the one path of a built-in is
    /// `tinyagents::middleware::…`).
    pub is: String,
    /// Why it exists.
    pub why: &'static str,
}

/// Every alias of a Rust path the crate keeps: the design documents' names
/// and paths (`tinyagents::harness::middleware::ToolPolicyMiddleware`, …),
/// and former names. Config `type` aliases are
/// [`DEPRECATED_TYPES`](crate::config::DEPRECATED_TYPES).
///
/// ```
/// let aliases = tinyagents::docs::aliases();
/// let a = aliases.iter().find(|a| a.alias.ends_with("harness::middleware::ContextCompressionMiddleware")).unwrap();
/// assert_eq!(a.is, "tinyagents::middleware::SummarizationMiddleware");
/// ```
pub fn aliases() -> Vec<NameAlias> {
    crate::harness::middleware::design_aliases()
}

/// Every name the design documents use, at the path that resolves:
/// `(document, path)`. The compiler resolves each path where the list is declared.
///
/// ```
/// assert!(tinyagents::docs::design_paths().iter().any(|(_, p)| *p == "tinyagents::harness::middleware::ModelMiddleware"));
/// ```
pub fn design_paths() -> &'static [(&'static str, &'static str)] {
    crate::library::design_names::DESIGN_PATHS
}

/// Aliases that are not types (a module, a function): `(alias, what it is, why)`.
/// A test compiles each path.
pub const OTHER_ALIASES: &[(&str, &str, &str)] = &[(
    "tinyagents::harness::middleware::summarization::trim_messages",
    "`tinyagents::middleware::summarization::trim_messages`",
    "the path the `harness::middleware` design writes: the function `MessageTrimMiddleware` applies",
)];

/// The text of [`NAMES_MD`]: every built-in's one name (config `type`, stack
/// name, file) with its type, every alias ([`aliases`], [`OTHER_ALIASES`])
/// and every renamed config `type`
/// ([`DEPRECATED_TYPES`](crate::config::DEPRECATED_TYPES)).
///
/// ```
/// let text = tinyagents::docs::render_names();
/// assert!(text.contains("| `context_window` | `ContextWindowMiddleware` |"));
/// ```
pub fn render_names() -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Names\n");
    let _ = writeln!(
        out,
        "<!-- Generated by `tinyagents::docs::render_names()`; do not edit. Regenerate with:\n     {REGENERATE_NAMES} -->\n"
    );
    let _ = writeln!(
        out,
        "One name per concept. A built-in's config `type`, its name in a stack, its catalog name and its \
         file are one word, and its type is that word in CamelCase followed by `Middleware` (a test holds \
         every built-in to it). \"Context\" alone means a run's `RunContext` (`tinyagents::harness::context`); \
         the model's context window is always called that. External command hooks are \
         `tinyagents::external_hooks`; `tinyagents::harness::hooks` is the hook table.\n"
    );
    let _ = writeln!(out, "## Built-ins\n");
    let _ = writeln!(
        out,
        "| Name (config `type`) | Type (`tinyagents::middleware::…`) | File (`library/…`) |"
    );
    let _ = writeln!(out, "| --- | --- | --- |");
    for d in crate::config::builtin_docs() {
        let file = d.file.replace('\\', "/");
        let file = file.rsplit_once("/library/").map_or(file.as_str(), |(_, f)| f);
        let name = match d.config_type {
            Some(_) => format!("`{}`", d.name),
            None => format!("`{}` (built in code only)", d.name),
        };
        let _ = writeln!(out, "| {name} | `{}` | `{file}` |", d.type_name);
    }
    let _ = writeln!(out, "\n## Aliases\n");
    let _ = writeln!(
        out,
        "Each resolves to the item shown, so code written with it compiles; new code uses the name it points to.\n"
    );
    let _ = writeln!(out, "| Alias | Is | Why |");
    let _ = writeln!(out, "| --- | --- | --- |");
    for a in aliases() {
        let _ = writeln!(out, "| `{}` | `{}` | {} |", a.alias, a.is, cell(a.why));
    }
    for (alias, is, why) in OTHER_ALIASES {
        let _ = writeln!(out, "| `{alias}` | {is} | {} |", cell(why));
    }
    let _ = writeln!(out, "\n## Names the design documents use\n");
    let _ = writeln!(
        out,
        "Every type, trait and function the middleware design, the `harness::middleware` module description and \
         QueryMT's middleware documentation name, at a path that resolves (the compiler checks each one). A \
         QueryMT path `querymt_agent::X` is `tinyagents::compat::querymt::X`; names its examples define \
         themselves (`MyMiddleware`, `RateLimitMiddleware`, …) are not listed.\n"
    );
    let _ = writeln!(out, "| Document | Path |");
    let _ = writeln!(out, "| --- | --- |");
    for (doc, path) in design_paths() {
        let _ = writeln!(out, "| {doc} | `{path}` |");
    }
    let _ = writeln!(out, "\n## Renamed config types\n");
    let _ = writeln!(
        out,
        "An entry of an old `type` builds the new one, with a deprecation notice (a `tracing` warning, target \
         `tinyagents::config`) naming the entry, the new key and the fix.\n"
    );
    let _ = writeln!(out, "| Old `type` | New `type` | Note |");
    let _ = writeln!(out, "| --- | --- | --- |");
    for (old, new, note) in crate::config::DEPRECATED_TYPES {
        let note = note.trim().trim_start_matches('(').trim_end_matches(')');
        let _ = writeln!(
            out,
            "| `{old}` | `{new}` | {} |",
            if note.is_empty() { "—".to_owned() } else { cell(note) }
        );
    }
    out
}

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
