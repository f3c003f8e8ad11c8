//! `DedupCheckMiddleware`: written code resembling an existing file gets one
//! review message naming the place; different, short, failed or unwritten
//! code gets none; and configuration.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{json, Value};
use tinyagents::config::from_toml_str;
use tinyagents::harness::tool::{FileAccess, ToolContext, ToolOutput};
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::*;
use tinyagents::prelude::*;

const EXISTING: &str = "use std::collections::HashMap;

/// Counts words.
pub fn count_words(text: &str) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for word in text.split_whitespace() {
        let word = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
        if word.is_empty() {
            continue;
        }
        *counts.entry(word).or_insert(0) += 1;
    }
    counts
}

pub fn unrelated() -> u32 {
    42
}
";

/// The same function, re-indented and renamed only in a comment.
const DUPLICATE: &str = "// word frequencies
pub fn count_words(text: &str) -> HashMap<String, usize> {
  let mut counts = HashMap::new();
  for word in text.split_whitespace()  {
      let word = word.trim_matches(|c: char| !c.is_alphanumeric()).to_lowercase();
      if word.is_empty() {
          continue;
      }
      *counts.entry(word).or_insert(0) += 1;
  }
  counts
}
";

const DIFFERENT: &str = "pub fn parse_config(path: &Path) -> Result<Config> {
    let text = std::fs::read_to_string(path)?;
    let mut config = Config::default();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once('=') {
            config.set(k.trim(), v.trim())?;
        }
    }
    config.validate()?;
    Ok(config)
}
";

struct Workspace(PathBuf);

impl Workspace {
    fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!("tinyagents-dedup-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::write(root.join("src/words.rs"), EXISTING).unwrap();
        // build output is never compared
        std::fs::write(root.join("target/copy.rs"), EXISTING).unwrap();
        Self(root)
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Writes `content` to `path` under the root, declaring the write.
struct WriteFile(PathBuf, ToolSchema);

#[async_trait]
impl Tool for WriteFile {
    fn schema(&self) -> &ToolSchema {
        &self.1
    }

    fn file_access(&self, arguments: &Value) -> Vec<FileAccess> {
        crate::support::writes_path(arguments)
    }

    async fn call(&self, _cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        let path = self.0.join(arguments["path"].as_str().unwrap_or_default());
        if arguments["fail"].as_bool() == Some(true) {
            return Err(TinyAgentsError::tool("write_file", "disk full"));
        }
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, arguments["content"].as_str().unwrap_or_default()).unwrap();
        Ok("written".into())
    }
}

async fn turn(root: &Path, args: Value, dedup: DedupCheckMiddleware) -> (Vec<String>, Vec<AgentEvent>) {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::tool_call("write_file", args),
        ScriptedTurn::text("done"),
    ]));
    let tool = WriteFile(root.to_path_buf(), ToolSchema::new("write_file", "Writes a file."));
    let agent: Agent<()> = Agent::new(model.clone())
        .with_tools(ToolRegistry::new().with(tool).unwrap())
        .with_stack(MiddlewareStack::new().with(dedup).unwrap());
    let sink = Arc::new(CollectingSink::new());
    let mut ctx = RunContext::new(RunConfig::new("r"), ())
        .with_sink(sink.clone())
        .with_workspace(WorkspaceDescriptor::new(root));
    agent.run(&mut ctx, &(), "write it").await.unwrap();
    let reviews = model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.text().starts_with("[dedup_check]"))
        .map(|m| m.text().into_owned())
        .collect();
    (reviews, sink.events())
}

#[tokio::test]
async fn duplicated_code_gets_one_review_message_naming_the_place() {
    let ws = Workspace::new("dup");
    let (reviews, events) = turn(
        &ws.0,
        json!({ "path": "src/stats.rs", "content": DUPLICATE }),
        DedupCheckMiddleware::new(0.85, 10),
    )
    .await;
    assert_eq!(reviews.len(), 1, "one review message");
    let text = &reviews[0];
    assert!(text.contains("`src/words.rs` lines 4-13"), "{text}");
    assert!(text.contains("`src/stats.rs`"), "{text}");
    assert!(!text.contains("target/"), "build output is not compared: {text}");
    assert!(events
        .iter()
        .any(|e| matches!(e, AgentEvent::Notice { source, .. } if source == "dedup_check")));
}

#[tokio::test]
async fn different_short_or_failed_writes_get_no_review() {
    let ws = Workspace::new("none");
    for args in [
        json!({ "path": "src/config.rs", "content": DIFFERENT }),
        // the same code, but shorter than `min_lines`
        json!({ "path": "src/short.rs", "content": DUPLICATE.lines().take(6).collect::<Vec<_>>().join("\n") }),
        // the write failed: nothing was written
        json!({ "path": "src/failed.rs", "content": DUPLICATE, "fail": true }),
        // rewriting the same file is not duplication
        json!({ "path": "src/words.rs", "content": EXISTING }),
    ] {
        let (reviews, _) = turn(&ws.0, args.clone(), DedupCheckMiddleware::new(0.85, 10)).await;
        assert!(reviews.is_empty(), "{args}: {reviews:?}");
    }
}

#[tokio::test]
async fn the_threshold_decides() {
    let ws = Workspace::new("threshold");
    // half duplicated, half new
    let half = format!("{}{}", DUPLICATE, DIFFERENT);
    let (strict, _) = turn(
        &ws.0,
        json!({ "path": "src/half.rs", "content": half }),
        DedupCheckMiddleware::new(0.85, 10),
    )
    .await;
    assert!(strict.is_empty(), "{strict:?}");
    let (loose, _) = turn(
        &ws.0,
        json!({ "path": "src/half2.rs", "content": half }),
        DedupCheckMiddleware::new(0.4, 10),
    )
    .await;
    assert_eq!(loose.len(), 1);
}

#[test]
fn similar_places_is_usable_directly() {
    let ws = Workspace::new("direct");
    let places = DedupCheckMiddleware::new(0.85, 10).similar_places(&ws.0, "src/new.rs", DUPLICATE);
    assert_eq!(places.len(), 1);
    assert_eq!(places[0].path, "src/words.rs");
    assert!(
        (0.85..1.0).contains(&places[0].similarity),
        "6 of 7 shingles: {}",
        places[0].similarity
    );
}

#[test]
fn bad_configuration_is_rejected_naming_field_value_and_rule() {
    let err = from_toml_str::<DedupCheckConfig>("threshold = 1.5").unwrap_err();
    assert_eq!(err.errors()[0].path, "threshold");
    assert_eq!(err.errors()[0].value, Some(json!(1.5)));
    assert_eq!(err.errors()[0].rule, "must be in 0.0..=1.0");
    let err = from_toml_str::<DedupCheckConfig>("threshold = nan").unwrap_err();
    assert!(err.to_string().contains("finite"), "{err}");
    let err = from_toml_str::<DedupCheckConfig>("min_lines = 0").unwrap_err();
    assert_eq!(err.errors()[0].path, "min_lines");
    let err = from_toml_str::<DedupCheckConfig>("min_lines = 2\nshingle_lines = 3").unwrap_err();
    assert_eq!(err.errors()[0].path, "shingle_lines");
    assert_eq!(err.errors()[0].rule, "must not exceed `min_lines`");
}

/// Writes like `WriteFile`, first noting whether the check had already warned.
struct WatchedWrite {
    root: PathBuf,
    schema: ToolSchema,
    sink: Arc<CollectingSink>,
    warned_before: Arc<std::sync::Mutex<Option<bool>>>,
}

#[async_trait]
impl Tool for WatchedWrite {
    fn schema(&self) -> &ToolSchema {
        &self.schema
    }

    fn file_access(&self, arguments: &Value) -> Vec<FileAccess> {
        crate::support::writes_path(arguments)
    }

    async fn call(&self, _cx: ToolContext, arguments: Value) -> Result<ToolOutput> {
        let warned = self
            .sink
            .events()
            .iter()
            .any(|e| matches!(e, AgentEvent::Notice { source, .. } if source == "dedup_check"));
        *self.warned_before.lock().unwrap() = Some(warned);
        let path = self.root.join(arguments["path"].as_str().unwrap_or_default());
        std::fs::write(&path, arguments["content"].as_str().unwrap_or_default()).unwrap();
        Ok("written".into())
    }
}

#[tokio::test]
async fn the_warning_comes_before_the_write_runs() {
    let ws = Workspace::new("before");
    let sink = Arc::new(CollectingSink::new());
    let warned_before = Arc::default();
    let tool = WatchedWrite {
        root: ws.0.clone(),
        schema: ToolSchema::new("write_file", "Writes a file."),
        sink: sink.clone(),
        warned_before: Arc::clone(&warned_before),
    };
    let agent: Agent<()> = Agent::new(ScriptedModel::new([
        ScriptedTurn::tool_call("write_file", json!({ "path": "src/stats.rs", "content": DUPLICATE })),
        ScriptedTurn::text("done"),
    ]))
    .with_tools(ToolRegistry::new().with(tool).unwrap())
    .with_stack(
        MiddlewareStack::new()
            .with(DedupCheckMiddleware::new(0.85, 10))
            .unwrap(),
    );
    let mut ctx = RunContext::new(RunConfig::new("r"), ())
        .with_sink(sink.clone())
        .with_workspace(WorkspaceDescriptor::new(&ws.0));
    agent.run(&mut ctx, &(), "write it").await.unwrap();
    assert_eq!(
        *warned_before.lock().unwrap(),
        Some(true),
        "the dedup notice was published before the tool wrote"
    );
}
