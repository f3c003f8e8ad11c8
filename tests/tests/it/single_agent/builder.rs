//! `Agent::single()`: the built-in tools work inside `cwd`, middleware (native
//! and QueryMT drivers) run in the order added, and every mistake is a
//! located error naming the value and the fix.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use tinyagents::compat::querymt::{MiddlewareDriver, Request};
use tinyagents::prelude::*;

use crate::support::{tool_texts, unique};

fn workspace() -> PathBuf {
    let dir = std::env::temp_dir().join(unique("single-agent"));
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/a.rs"), "fn alpha() {}\n").unwrap();
    std::fs::write(dir.join("notes.md"), "alpha notes\n").unwrap();
    dir
}

fn calls(calls: &[(&str, serde_json::Value)]) -> ScriptedTurn {
    ScriptedTurn::tool_calls(
        calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| ToolCall::new(format!("c{i}"), *name, args.clone()))
            .collect(),
    )
}

/// Every file tool works in `cwd`: writes land there, reads, lists, globs
/// and searches see only it.
#[tokio::test]
async fn the_file_tools_work_inside_the_workspace() {
    let dir = workspace();
    let agent = Agent::single()
        .model(ScriptedModel::new([
            calls(&[("write_file", json!({"path": "src/b.rs", "content": "fn beta() {}\n"}))]),
            calls(&[(
                "edit",
                json!({"path": "src/b.rs", "old_string": "beta", "new_string": "gamma"}),
            )]),
            calls(&[
                ("read_tool", json!({"path": "src/b.rs"})),
                ("ls", json!({"path": "src"})),
                ("glob", json!({"pattern": "src/*.rs"})),
                ("search_text", json!({"pattern": "alpha", "include": "*.rs"})),
            ]),
            ScriptedTurn::text("done"),
        ]))
        .cwd(&dir)
        .tools(["read_tool", "write_file", "edit", "ls", "glob", "search_text"])
        .build()
        .await
        .unwrap();
    let run = agent.prompt("work").await.unwrap();
    assert_eq!(run.final_text(), "done");
    assert_eq!(
        std::fs::read_to_string(dir.join("src/b.rs")).unwrap(),
        "fn gamma() {}\n"
    );
    let texts = tool_texts(&run.messages);
    assert_eq!(texts[0], "wrote 13 bytes to src/b.rs");
    assert_eq!(texts[1], "replaced 1 occurrence(s) in src/b.rs");
    assert_eq!(texts[2], "fn gamma() {}\n");
    assert_eq!(texts[3], "a.rs\nb.rs");
    assert_eq!(texts[4], "src/a.rs\nsrc/b.rs");
    assert_eq!(
        texts[5], "src/a.rs:1: fn alpha() {}",
        "the include filter leaves notes.md out"
    );
    assert_eq!(agent.workspace().root, dir.canonicalize().unwrap());
    assert_eq!(agent.config().tools.len(), 6);
}

/// Paths leaving the workspace are refused, and nothing outside is read or written.
/// Runs an agent in `dir` whose model calls `read_tool`, `write_file` and
/// `glob` once each with these arguments; the three tool results' texts.
async fn read_write_glob(
    dir: &std::path::Path,
    read: serde_json::Value,
    write: serde_json::Value,
    glob: serde_json::Value,
) -> Vec<String> {
    let agent = Agent::single()
        .model(ScriptedModel::new([
            calls(&[("read_tool", read), ("write_file", write), ("glob", glob)]),
            ScriptedTurn::text("done"),
        ]))
        .cwd(dir)
        .tools(["read_tool", "write_file", "glob"])
        .build()
        .await
        .unwrap();
    let run = agent.prompt("escape").await.unwrap();
    tool_texts(&run.messages)
}

#[tokio::test]
async fn paths_outside_the_workspace_are_refused() {
    let dir = workspace();
    let outside = dir.parent().unwrap().join(unique("outside.txt"));
    let texts = read_write_glob(
        &dir,
        json!({"path": "../etc/passwd"}),
        json!({"path": outside.to_str().unwrap(), "content": "x"}),
        json!({"pattern": "../*"}),
    )
    .await;
    assert!(texts[0].contains("climbs above the root"), "{}", texts[0]);
    assert!(
        texts[1].contains("is absolute") && texts[1].contains("outside the workspace"),
        "{}",
        texts[1]
    );
    assert!(texts[2].contains("without `..`"), "{}", texts[2]);
    assert!(!outside.exists());
}

/// Records `name` in the log on each model request.
struct Mark(&'static str, Arc<Mutex<Vec<&'static str>>>);

impl MiddlewareDriver for Mark {
    fn name(&self) -> &str {
        self.0
    }
    fn process_request(&self, _request: &mut Request) -> tinyagents::compat::querymt::Result<()> {
        self.1.lock().unwrap().push(self.0);
        Ok(())
    }
}

struct NativeMark(Arc<Mutex<Vec<&'static str>>>);

#[async_trait]
impl Middleware<()> for NativeMark {
    fn name(&self) -> &str {
        "native_mark"
    }
    fn hooks(&self) -> HookSet {
        HookSet::BEFORE_MODEL
    }
    async fn before_model(&self, _: &mut RunContext, _: &(), _: &mut ModelRequest) -> Result<()> {
        self.0.lock().unwrap().push("native_mark");
        Ok(())
    }
}

/// `.middleware(m)` takes native middleware and drivers, run in the order added.
#[tokio::test]
async fn middleware_of_both_kinds_run_in_the_order_added() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let agent = Agent::single()
        .model(ScriptedModel::new([ScriptedTurn::text("hi")]))
        .cwd(workspace())
        .middleware(Mark("first", log.clone()))
        .middleware(NativeMark(log.clone()))
        .middleware(Mark("last", log.clone()))
        .build()
        .await
        .unwrap();
    agent.prompt("go").await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["first", "native_mark", "last"]);
}

async fn error_of(builder: tinyagents::single::SingleAgentBuilder) -> String {
    builder.build().await.unwrap_err().to_string()
}

fn scripted() -> tinyagents::single::SingleAgentBuilder {
    Agent::single().model(ScriptedModel::new([ScriptedTurn::text("hi")]))
}

/// Each mistake names the call, the value, and the valid names or the fix.
#[tokio::test]
async fn every_mistake_is_a_located_error() {
    let dir = workspace();
    let e = error_of(scripted().cwd(&dir).tools(["read_tool", "grep"])).await;
    assert!(e.contains("`Agent::single().tools[1] = \"grep\"`"), "{e}");
    assert!(
        e.contains("the built-in tools are `read_tool`, `write_file`, `edit`, `ls`, `glob`, `search_text`, `shell`"),
        "{e}"
    );

    let e = error_of(scripted().cwd(&dir).tools(["ls", "ls"])).await;
    assert!(e.contains("`Agent::single().tools[1] = \"ls\"`"), "{e}");

    let missing = dir.join("nope");
    let e = error_of(scripted().cwd(&missing)).await;
    assert!(e.contains("`Agent::single().cwd("), "{e}");
    assert!(e.contains("give an existing directory"), "{e}");

    let e = error_of(Agent::single().cwd(&dir)).await;
    assert!(e.contains("no model: call `.provider(name, model)`"), "{e}");

    let e = error_of(scripted().cwd(&dir).preset("codng")).await;
    assert!(e.contains("`Agent::single().preset(\"codng\")`"), "{e}");
    assert!(e.contains("did you mean `coding`?"), "{e}");
    assert!(e.contains("`coding`, `research`, `chat`"), "{e}");

    let log = Arc::new(Mutex::new(Vec::new()));
    let e = error_of(
        scripted()
            .cwd(&dir)
            .middleware(Mark("twice", log.clone()))
            .middleware(Mark("twice", log)),
    )
    .await;
    assert!(e.contains("`Agent::single().middleware[1] (`twice`)`"), "{e}");

    let e = error_of(Agent::single().provider("antropic", "claude").cwd(&dir)).await;
    assert!(
        e.contains("`Agent::single().provider(\"antropic\", \"claude\")`"),
        "{e}"
    );
}

/// A `CompositeDriver` given to `.middleware` is its links, in order (a
/// native link included).
#[tokio::test]
async fn a_composite_given_to_the_builder_adds_its_links_in_order() {
    use tinyagents::compat::querymt::CompositeDriver;
    let log = Arc::new(Mutex::new(Vec::new()));
    let chain: CompositeDriver = CompositeDriver::default()
        .with(Mark("a", log.clone()))
        .with_middleware(NativeMark(log.clone()))
        .with(Mark("b", log.clone()));
    let agent = scripted().cwd(workspace()).middleware(chain).build().await.unwrap();
    let names = agent.stack().names();
    assert!(names.ends_with(&["a", "native_mark", "b"]), "{names:?}");
    agent.prompt("go").await.unwrap();
    assert_eq!(*log.lock().unwrap(), ["a", "native_mark", "b"]);
}

/// A symbolic link pointing out of the workspace is not a way out: reading
/// or writing through it is refused, and `glob` does not list it.
#[cfg(unix)]
#[tokio::test]
async fn a_symlink_out_of_the_workspace_is_refused() {
    let dir = workspace();
    let outside = std::env::temp_dir().join(unique("outside-dir"));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("link")).unwrap();
    let texts = read_write_glob(
        &dir,
        json!({"path": "link/secret.txt"}),
        json!({"path": "link/new.txt", "content": "x"}),
        json!({"pattern": "link/*"}),
    )
    .await;
    assert!(texts[0].contains("symbolic link"), "{}", texts[0]);
    assert!(texts[1].contains("symbolic link"), "{}", texts[1]);
    assert_eq!(texts[2], "(nothing)");
    assert!(!outside.join("new.txt").exists());
}
