//! A lost race is a `Conflict`: a checkpoint write another writer made first
//! (each checkpointer's compare-and-set) and a resume whose decisions another
//! resume spent, never `Config` or `Validation`.

use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;
use serde_json::json;
use tinyagents::graph::{AgentGraph, Checkpoint, Checkpointer, FileCheckpointer, MemoryCheckpointer};
use tinyagents::middleware::{Decision, HumanInTheLoopMiddleware, InterruptOn};
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

/// Lets the first two `latest` reads meet before either returns, so two
/// resumes both load the paused checkpoint and then race to write.
struct Meeting<'a> {
    inner: &'a dyn Checkpointer,
    barrier: tokio::sync::Barrier,
    reads: AtomicU32,
}

#[async_trait]
impl Checkpointer for Meeting<'_> {
    async fn put(&self, checkpoint: &Checkpoint) -> tinyagents::Result<()> {
        self.inner.put(checkpoint).await
    }
    async fn latest(&self, thread_id: &str) -> tinyagents::Result<Option<Checkpoint>> {
        let latest = self.inner.latest(thread_id).await;
        if self.reads.fetch_add(1, Ordering::SeqCst) < 2 {
            self.barrier.wait().await;
        }
        latest
    }
}

fn agent(delete: &RecordingTool) -> Agent<()> {
    let turns = vec![
        ScriptedTurn::tool_calls(vec![ToolCall::new("d1", "delete", json!({"path": "a.txt"}))]),
        ScriptedTurn::text("done"),
        ScriptedTurn::text("done again"),
    ];
    Agent::new(ScriptedModel::new(turns))
        .with_tools(ToolRegistry::new().with(delete.clone()).unwrap())
        .with_stack(
            MiddlewareStack::new()
                .with(HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new()))
                .unwrap(),
        )
}

async fn approval_race(store: &dyn Checkpointer) {
    let delete = RecordingTool::new("delete").returning("deleted");
    let a = agent(&delete);
    let graph = AgentGraph::new(&a);
    let mut ctx = RunContext::new(RunConfig::new("r1"), ());
    graph.run_durable(&mut ctx, &(), "tidy", "t", store).await.unwrap_err();
    let decided = HumanInTheLoopMiddleware::take_interrupt(&ctx)
        .unwrap()
        .decide([("d1", Decision::Approve)])
        .unwrap();
    let meeting = Meeting {
        inner: store,
        barrier: tokio::sync::Barrier::new(2),
        reads: AtomicU32::new(0),
    };
    let (mut c1, mut c2) = (
        RunContext::new(RunConfig::new("r2"), ()),
        RunContext::new(RunConfig::new("r3"), ()),
    );
    let (first, second) = tokio::join!(
        graph.resume_with(&mut c1, &(), "t", &meeting, decided.clone()),
        graph.resume_with(&mut c2, &(), "t", &meeting, decided.clone()),
    );
    let (won, lost): (Vec<_>, Vec<_>) = [first, second].into_iter().partition(Result::is_ok);
    assert_eq!((won.len(), lost.len()), (1, 1), "exactly one resume wins");
    let err = lost.into_iter().next().unwrap().unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "the loser gets a conflict: {err}");
    assert!(!err.is_retryable(), "{err}");
    assert!(
        err.to_string().contains("cannot be stored") || err.to_string().contains("already"),
        "{err}"
    );
    assert_eq!(delete.calls().len(), 1, "the approved call ran exactly once");

    // Afterwards, a replay of the same decisions is the same conflict.
    let mut c4 = RunContext::new(RunConfig::new("r4"), ());
    let err = graph.resume_with(&mut c4, &(), "t", store, decided).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(err.to_string().contains("already used"), "{err}");
    assert_eq!(delete.calls().len(), 1);
}

#[tokio::test]
async fn conflict_the_loser_of_an_approval_race_gets_a_conflict_on_every_local_store() {
    approval_race(&MemoryCheckpointer::new()).await;
    let dir = std::env::temp_dir().join(format!("tinyagents-conflict-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    approval_race(&FileCheckpointer::open(&dir).unwrap()).await;
    let _ = std::fs::remove_dir_all(&dir);
    #[cfg(feature = "sqlite")]
    {
        let path = std::env::temp_dir().join(format!("tinyagents-conflict-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = tinyagents::store::SqliteStore::open(&path).await.unwrap();
        approval_race(&store).await;
        let _ = std::fs::remove_file(&path);
    }
}

fn cp() -> Checkpoint {
    Checkpoint {
        thread_id: "w".into(),
        seq: 1,
        steps: 1,
        next: Some("n".into()),
        state: tinyagents::graph::GraphState::new(),
        interrupt: None,
        updates: vec![],
    }
}

async fn second_put_conflicts(store: &dyn Checkpointer) {
    let mut cp = cp();
    store.put(&cp).await.unwrap();
    let err = store.put(&cp).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    assert!(
        err.to_string().contains("Reload the thread's latest checkpoint"),
        "{err}"
    );
    cp.seq = 0;
    let err = store.put(&cp).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "an older sequence number too: {err}");
}

#[tokio::test]
async fn conflict_a_checkpoint_written_first_by_another_writer_is_a_conflict() {
    second_put_conflicts(&MemoryCheckpointer::new()).await;
    #[cfg(feature = "sqlite")]
    {
        let path = std::env::temp_dir().join(format!("tinyagents-cas-{}.db", std::process::id()));
        let _ = std::fs::remove_file(&path);
        second_put_conflicts(&tinyagents::store::SqliteStore::open(&path).await.unwrap()).await;
        let _ = std::fs::remove_file(&path);
    }
    let dir = std::env::temp_dir().join(format!("tinyagents-cas-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let file = FileCheckpointer::open(&dir).unwrap();
    let cp = cp();
    file.put(&cp).await.unwrap();
    let err = file.put(&cp).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
