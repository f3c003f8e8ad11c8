//! The documentation table: `docs/middleware.md` is generated from
//! `tinyagents::middleware::catalog()` and must not go stale.

use std::path::PathBuf;

use tinyagents::docs::{render_markdown, MiddlewareMetadata, MIDDLEWARE_MD, REGENERATE};
use tinyagents::prelude::*;
use tinyagents::MiddlewareConfig;

fn committed_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(MIDDLEWARE_MD)
}

#[test]
fn committed_middleware_md_is_up_to_date() {
    let generated = tinyagents::docs::render_builtin_docs();
    let path = committed_path();
    if std::env::var_os("TINYAGENTS_BLESS").is_some() {
        std::fs::write(&path, &generated).expect("write docs/middleware.md");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{MIDDLEWARE_MD} is stale (it differs from what `catalog()` generates); regenerate it with:\n    {REGENERATE}"
    );
}

#[allow(dead_code)] // only its field table is used here
#[derive(Debug, MiddlewareConfig)]
#[config(type = "shout")]
struct ShoutConfig {
    /// How loud | how much.
    #[config(default = 2, range = 1..=3)]
    level: u8,
    /// Who hears it.
    audience: Option<String>,
}

/// Upper-cases every reply.
#[after_model(
    builtin,
    name = "shout",
    config = ShoutConfig,
    doc(
        mutation = "Rewrites the reply text.",
        events = "None.",
        failure = "Cannot fail.",
        streaming = "Sees the accumulated reply, not deltas.",
        cache = "None.",
        retries = "Runs once per attempt that succeeds."
    )
)]
fn shout(response: &mut ModelResponse) -> Result<()> {
    let loud = response.message.text().to_uppercase();
    response.message.set_text(loud);
    Ok(())
}

#[test]
fn the_table_lists_each_middleware_then_a_section_with_its_config() {
    let text = render_markdown(&[Shout::DOC.unwrap()]);
    let expected = "# Built-in middleware

<!-- Generated from `tinyagents::middleware::catalog()`; do not edit. Regenerate with:
     TINYAGENTS_BLESS=1 cargo test -p tinyagents-tests --test it dsl::docs -->

| Middleware | Summary | Hooks |
| --- | --- | --- |
| [`shout`](#shout) | Upper-cases every reply. | `after_model` |

## `shout`

Upper-cases every reply.

- **Hook points:** `after_model`
- **Config:** `type = \"shout\"`
- **Mutation:** Rewrites the reply text.
- **Events:** None.
- **Failure mode:** Cannot fail.
- **Streaming:** Sees the accumulated reply, not deltas.
- **Prompt / KV cache:** None.
- **Retries and fallbacks:** Runs once per attempt that succeeds.

| Key | Type | Default | Rules | Description |
| --- | --- | --- | --- | --- |
| `level` | `u8` | `2` | `range = 1..=3` | How loud \\| how much. |
| `audience` | `Option<String>` | `None` | — | Who hears it. |
";
    assert_eq!(text, expected);
}
