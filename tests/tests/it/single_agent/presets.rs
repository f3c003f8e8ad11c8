//! The presets: each builds from its one declaration, in code (by value or
//! name) and from an agent file, where the file's entries override or
//! extend it.

use tinyagents::config::{ConfigFile, MiddlewareRegistry};
use tinyagents::harness::tool::SandboxMode;
use tinyagents::prelude::*;
use tinyagents::presets::{Preset, PRESETS};

fn registry() -> MiddlewareRegistry<()> {
    MiddlewareRegistry::with_builtins()
}

/// The stack a preset gives is its declaration's tables (and the built-ins
/// on by default): what `preset = "…"` alone builds, and what the builder
/// starts from.
#[tokio::test]
async fn each_preset_builds_its_declared_stack_in_code_and_from_a_file() {
    for decl in PRESETS {
        let from_file = registry()
            .build_file(&ConfigFile::parse("agent.toml", format!("preset = \"{}\"\n", decl.name)).unwrap())
            .unwrap();
        let from_tables = registry().stack_from_toml(decl.toml).unwrap();
        assert_eq!(from_file.names(), from_tables.names(), "{}", decl.name);
        assert_eq!(
            decl.preset.stack().unwrap().names(),
            from_tables.names(),
            "{}",
            decl.name
        );

        let dir = std::env::temp_dir();
        let by_name = Agent::single()
            .model(ScriptedModel::new([ScriptedTurn::text("hi")]))
            .cwd(&dir)
            .preset(decl.name)
            .build()
            .await
            .unwrap();
        let by_value = Agent::single()
            .model(ScriptedModel::new([ScriptedTurn::text("hi")]))
            .cwd(&dir)
            .preset(decl.preset)
            .build()
            .await
            .unwrap();
        assert_eq!(by_name.stack().names(), from_tables.names(), "{}", decl.name);
        assert_eq!(by_value.stack().names(), from_tables.names(), "{}", decl.name);
        assert_eq!(by_name.workspace().sandbox, decl.sandbox, "{}", decl.name);
        assert_eq!(by_name.workspace().read_only, decl.read_only, "{}", decl.name);
    }
}

/// What each preset promises, by its stack's middleware.
#[test]
fn each_preset_holds_what_it_promises() {
    let types = |p: Preset| -> Vec<String> {
        p.entries()
            .iter()
            .map(|t| t["type"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        types(Preset::Coding),
        [
            "shell_fs_guard",
            "human_in_the_loop",
            "limits",
            "pii",
            "output_limit_recovery"
        ]
    );
    let coding = &Preset::Coding.entries();
    assert_eq!(coding[0]["profile"], "workspace");
    assert!(coding[1]["interrupt_on"]["write_file"].is_array());
    assert_eq!(Preset::Coding.decl().sandbox, SandboxMode::Required);

    assert_eq!(types(Preset::Research), ["tool_policy", "shell_fs_guard", "limits"]);
    let research = &Preset::Research.entries();
    assert_eq!(research[1]["read_only"], true);
    assert!(research[0]["deny_side_effects"]
        .as_array()
        .unwrap()
        .contains(&"write".into()));
    assert!(Preset::Research.decl().read_only);

    assert_eq!(
        types(Preset::Chat),
        ["tracing", "rate_limiter", "model_retry", "timeout", "limits"]
    );
    assert_eq!(Preset::Chat.entries()[4]["max_price_usd"], 1.0);
}

/// In a file, an entry of a type the preset has changes it in place
/// (`enabled = false` removes it); other entries come after the preset's.
#[test]
fn a_files_entries_override_or_extend_its_preset() {
    let text = "preset = \"coding\"\n\n[[middleware]]\ntype = \"logging\"\n\n[[middleware]]\ntype = \"limits\"\nmax_steps = 0\n\n[[middleware]]\ntype = \"pii\"\nenabled = false\n";
    let err = registry()
        .build_file(&ConfigFile::parse("agent.toml", text).unwrap())
        .unwrap_err()
        .to_string();
    // the override is checked at the file's entry
    assert!(err.contains("agent.toml:8:13: `middleware[1].max_steps` = 0"), "{err}");

    let text = text.replace("max_steps = 0", "max_steps = 10");
    let stack = registry()
        .build_file(&ConfigFile::parse("agent.toml", &text).unwrap())
        .unwrap();
    let plain = registry()
        .build_file(&ConfigFile::parse("agent.toml", "preset = \"coding\"").unwrap())
        .unwrap();
    let names = stack.names();
    assert_eq!(names.len(), plain.len(), "logging added, pii removed");
    assert!(names.iter().any(|n| n.to_lowercase().contains("logging")), "{names:?}");
    assert!(!names.iter().any(|n| n.to_lowercase().contains("pii")), "{names:?}");

    let err = registry()
        .build_file(&ConfigFile::parse("agent.toml", "preset = \"safe\"").unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("agent.toml:1:10: `preset` = \"safe\": unknown preset `safe`"),
        "{err}"
    );
    assert!(err.contains("the presets are `coding`, `research`, `chat`"), "{err}");
}

/// The research preset in an agent: the built-in tools' own declarations
/// decide, so reads run and writes are refused (and nothing is written).
#[tokio::test]
async fn the_research_preset_reads_and_refuses_writes() {
    let dir = std::env::temp_dir().join(crate::support::unique("research"));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("a.md"), "alpha\n").unwrap();
    let agent = Agent::single()
        .model(ScriptedModel::new([
            ScriptedTurn::tool_calls(vec![
                ToolCall::new("c1", "read_tool", serde_json::json!({"path": "a.md"})),
                ToolCall::new("c2", "write_file", serde_json::json!({"path": "b.md", "content": "x"})),
            ]),
            ScriptedTurn::text("done"),
        ]))
        .cwd(&dir)
        .tools(["read_tool", "write_file"])
        .preset(Preset::Research)
        .build()
        .await
        .unwrap();
    let run = agent.prompt("look").await.unwrap();
    let texts = crate::support::tool_texts(&run.messages);
    assert_eq!(texts[0], "alpha\n");
    assert!(texts[1].contains("write"), "{}", texts[1]);
    assert!(!dir.join("b.md").exists());
}

/// `docs/querymt.md`'s table names each preset's middleware, and its agent
/// file example builds.
#[test]
fn the_docs_table_and_example_match_the_declarations() {
    let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/querymt.md")).unwrap();
    for decl in PRESETS {
        let row = docs
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", decl.name)))
            .unwrap_or_else(|| panic!("no row for {}", decl.name));
        for table in decl.preset.entries() {
            let kind = table["type"].as_str().unwrap();
            assert!(
                row.contains(&format!("`{kind}`")),
                "the {} row leaves out `{kind}`",
                decl.name
            );
        }
    }
    let example = docs.split("```toml\n").nth(1).unwrap().split("```").next().unwrap();
    let stack = registry()
        .build_file(&ConfigFile::parse("querymt.md", example).unwrap())
        .unwrap();
    assert!(!stack.is_empty());
}

/// The coding preset asks before a write: the run pauses for approval and
/// nothing is written; a read runs.
#[tokio::test]
async fn the_coding_preset_pauses_a_write_for_approval() {
    let dir = std::env::temp_dir().join(crate::support::unique("coding"));
    std::fs::create_dir_all(&dir).unwrap();
    let agent = Agent::single()
        .model(ScriptedModel::new([
            ScriptedTurn::tool_calls(vec![ToolCall::new(
                "c1",
                "write_file",
                serde_json::json!({"path": "b.md", "content": "x"}),
            )]),
            ScriptedTurn::text("done"),
        ]))
        .cwd(&dir)
        .tools(["read_tool", "write_file"])
        .preset(Preset::Coding)
        .build()
        .await
        .unwrap();
    let err = agent.prompt("write").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Interrupted, "{err}");
    assert!(!dir.join("b.md").exists());
}
