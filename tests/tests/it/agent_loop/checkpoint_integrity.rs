//! Issue 14, class 6: checkpoint integrity. A damaged, foreign or newer
//! checkpoint is an error naming the file (never skipped for an older one,
//! never "no checkpoint"); a checkpoint is never replaced; thread ids never
//! share a directory, whatever their case; storage grows linearly.

use std::path::{Path, PathBuf};

use serde_json::json;
use tinyagents::graph::{
    node_fn, update, Checkpoint, Checkpointer, Command, FileCheckpointer, GraphState, MemoryCheckpointer, Reducer,
    StateGraph, CHECKPOINT_FORMAT_VERSION, END,
};
use tinyagents::prelude::*;

use crate::support::{asking, run_graph_durably};

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("tinyagents-integrity-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Self(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn cp(thread: &str, seq: u64, n: u64) -> Checkpoint {
    Checkpoint {
        thread_id: thread.into(),
        seq,
        steps: seq as u32,
        next: Some("work".into()),
        state: GraphState::from_update(update([("n", json!(n))])),
        interrupt: None,
        updates: vec![],
    }
}

fn file(store: &FileCheckpointer, thread: &str, seq: u64) -> PathBuf {
    store.thread_dir(thread).join(format!("{seq:020}.ckpt"))
}

async fn store_with_three(dir: &Path, thread: &str) -> FileCheckpointer {
    let store = FileCheckpointer::open(dir).unwrap();
    for seq in 1..=3 {
        store.put(&cp(thread, seq, seq * 10)).await.unwrap();
    }
    store
}

fn assert_names(err: &TinyAgentsError, path: &Path, what: &str) {
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "names the file: {text}");
    assert!(text.contains(what), "says {what:?}: {text}");
}

/// A counting graph: `steps` nodes, each adding 1 to `n`.
fn counting_graph(steps: i64) -> tinyagents::graph::CompiledGraph<()> {
    StateGraph::<()>::new()
        .node(
            "inc",
            node_fn(|_| async { Ok(Command::Update(update([("n", json!(1))]))) }),
        )
        .entry("inc")
        .reducer("n", Reducer::Sum)
        .conditional_edge("inc", move |s| {
            if s.get("n") == Some(&json!(steps)) {
                END.into()
            } else {
                "inc".into()
            }
        })
        .max_steps(10_000)
        .compile()
        .unwrap()
}

#[tokio::test]
async fn a_damaged_latest_checkpoint_is_an_error_naming_it_never_the_one_before() {
    let dir = TempDir::new("damaged");
    let store = store_with_three(&dir.0, "t").await;
    let latest = file(&store, "t", 3);
    let good = std::fs::read(&latest).unwrap();

    // One flipped bit in the state: the JSON still parses, the digest does not match.
    let mut flipped = good.clone();
    let at = flipped.len() - 3;
    flipped[at] ^= 0x01;
    std::fs::write(&latest, &flipped).unwrap();
    let err = store.latest("t").await.unwrap_err();
    assert_names(&err, &latest, "does not match its SHA-256");
    assert!(err.to_string().contains("no older checkpoint is used"), "{err}");

    // Truncated, or emptied.
    for cut in [&good[..good.len() / 2], &good[..20], &[][..]] {
        std::fs::write(&latest, cut).unwrap();
        let err = store.latest("t").await.unwrap_err();
        assert_names(&err, &latest, "damaged");
    }
    std::fs::write(&latest, &flipped).unwrap();

    // A resume or a new durable run on the thread refuses too: nothing re-runs.
    let graph = counting_graph(5);
    let err = graph.resume(&mut (), "t", &store, None).await.unwrap_err();
    assert_names(&err, &latest, "damaged");
    let err = graph
        .run_durable(&mut (), GraphState::new(), "t", &store)
        .await
        .unwrap_err();
    assert_names(&err, &latest, "damaged");
    let err = store.history("t").await.unwrap_err();
    assert_names(&err, &latest, "damaged");

    // Restoring the file restores the thread: nothing was lost.
    std::fs::write(&latest, &good).unwrap();
    assert_eq!(store.latest("t").await.unwrap(), Some(cp("t", 3, 30)));
}

#[tokio::test]
async fn a_thread_whose_checkpoints_are_all_damaged_is_not_a_new_thread() {
    let dir = TempDir::new("all-damaged");
    let store = store_with_three(&dir.0, "t").await;
    for seq in 1..=3 {
        std::fs::write(file(&store, "t", seq), b"garbage").unwrap();
    }
    let err = store.latest("t").await.unwrap_err();
    assert_names(&err, &file(&store, "t", 3), "damaged");
}

#[tokio::test]
async fn a_newer_format_is_an_error_naming_both_versions_and_the_file_is_left_alone() {
    let dir = TempDir::new("newer");
    let store = store_with_three(&dir.0, "t").await;
    let latest = file(&store, "t", 3);
    let good = String::from_utf8(std::fs::read(&latest).unwrap()).unwrap();
    let newer_version = CHECKPOINT_FORMAT_VERSION + 1;
    let newer = good.replacen(
        &format!("v{CHECKPOINT_FORMAT_VERSION} "),
        &format!("v{newer_version} "),
        1,
    );
    std::fs::write(&latest, &newer).unwrap();
    let err = store.latest("t").await.unwrap_err();
    assert_names(&err, &latest, &format!("format version {newer_version}"));
    assert!(
        err.to_string()
            .contains(&format!("version {CHECKPOINT_FORMAT_VERSION}, the newest")),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&latest).unwrap(), newer, "untouched");
}

#[tokio::test]
async fn fields_this_version_does_not_know_are_refused_not_dropped() {
    use sha2_free_digest::digest_hex;
    let dir = TempDir::new("unknown-field");
    let store = store_with_three(&dir.0, "t").await;
    let latest = file(&store, "t", 3);
    let mut value = serde_json::to_value(cp("t", 3, 30)).unwrap();
    value["budget_left"] = json!(7);
    let body = serde_json::to_vec(&value).unwrap();
    let mut bytes = format!(
        "tinyagents-checkpoint v{CHECKPOINT_FORMAT_VERSION} bytes={} sha256={}\n",
        body.len(),
        digest_hex(&body)
    )
    .into_bytes();
    bytes.extend_from_slice(&body);
    std::fs::write(&latest, &bytes).unwrap();
    let err = store.latest("t").await.unwrap_err();
    assert_names(&err, &latest, "fields this version does not know: budget_left");
}

/// The same digest the store writes, computed by the system's `sha256sum`
/// when it exists (so the test does not depend on the store's own code).
mod sha2_free_digest {
    pub fn digest_hex(bytes: &[u8]) -> String {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let mut child = Command::new("sha256sum")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sha256sum (coreutils) is on the machine");
        child.stdin.take().unwrap().write_all(bytes).unwrap();
        let out = child.wait_with_output().unwrap();
        String::from_utf8(out.stdout).unwrap()[..64].to_owned()
    }
}

#[tokio::test]
async fn a_file_of_another_thread_or_sequence_is_refused() {
    let dir = TempDir::new("foreign");
    let store = store_with_three(&dir.0, "a").await;
    store.put(&cp("b", 1, 1)).await.unwrap();
    // Thread a's checkpoint 3 copied into thread b's directory as its 2.
    let planted = file(&store, "b", 2);
    std::fs::copy(file(&store, "a", 3), &planted).unwrap();
    let err = store.latest("b").await.unwrap_err();
    assert_names(&err, &planted, "belongs to thread \"a\"");
    std::fs::remove_file(&planted).unwrap();
    // Thread a's checkpoint 3 renamed to 4.
    let renamed = file(&store, "a", 4);
    std::fs::copy(file(&store, "a", 3), &renamed).unwrap();
    let err = store.latest("a").await.unwrap_err();
    assert_names(&err, &renamed, "holds checkpoint 3, its name says 4");
}

#[tokio::test]
async fn a_second_put_of_a_sequence_is_refused_and_the_first_is_kept() {
    let dir = TempDir::new("replace");
    let store = store_with_three(&dir.0, "t").await;
    let err = store.put(&cp("t", 2, 999)).await.unwrap_err();
    assert!(
        err.to_string().contains("checkpoint 2 of thread \"t\" already exists"),
        "{err}"
    );
    assert!(err.to_string().contains("never replaced"), "{err}");
    assert_eq!(err.kind(), ErrorKind::Conflict, "a lost write is a conflict: {err}");
    let history = store.history("t").await.unwrap();
    assert_eq!(
        history,
        vec![cp("t", 1, 10), cp("t", 2, 20), cp("t", 3, 30)],
        "nothing lost"
    );
    let leftovers: Vec<_> = std::fs::read_dir(store.thread_dir("t"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "no temporary file left: {leftovers:?}");

    let memory = MemoryCheckpointer::new();
    for seq in 1..=3 {
        memory.put(&cp("t", seq, seq * 10)).await.unwrap();
    }
    for seq in [3, 2] {
        let err = memory.put(&cp("t", seq, 999)).await.unwrap_err();
        assert!(err.to_string().contains("already has checkpoint 3"), "{err}");
        assert_eq!(err.kind(), ErrorKind::Conflict, "{err}");
    }
    assert_eq!(
        memory.history("t"),
        vec![cp("t", 1, 10), cp("t", 2, 20), cp("t", 3, 30)]
    );
}

#[tokio::test]
async fn two_durable_runs_of_one_thread_cannot_overwrite_each_other() {
    let dir = TempDir::new("two-runs");
    let store = FileCheckpointer::open(&dir.0).unwrap();
    let graph = counting_graph(3);
    graph
        .run_durable(&mut (), GraphState::new(), "t", &store)
        .await
        .unwrap();
    let before = store.history("t").await.unwrap();
    // A stale writer that still believes the thread is at checkpoint 1.
    let err = store.put(&cp("t", 2, 0)).await.unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    assert_eq!(store.history("t").await.unwrap(), before);
}

#[tokio::test]
async fn thread_ids_differing_in_case_or_in_odd_characters_never_share_a_directory() {
    let dir = TempDir::new("case");
    let store = FileCheckpointer::open(&dir.0).unwrap();
    let long = "L".repeat(5_000);
    let ids = [
        "Thread",
        "thread",
        "THREAD",
        "a/b",
        "a%2fb",
        "..",
        "",
        "é",
        long.as_str(),
    ];
    for (i, id) in ids.iter().enumerate() {
        store.put(&cp(id, 1, i as u64)).await.unwrap();
    }
    let mut names = std::collections::HashSet::new();
    for (i, id) in ids.iter().enumerate() {
        let name = store.thread_dir(id).file_name().unwrap().to_str().unwrap().to_owned();
        assert!(name.len() <= 97, "bounded: {} bytes", name.len());
        assert_eq!(name, name.to_lowercase(), "no case to fold");
        assert!(names.insert(name), "{id:?} has its own directory");
        assert_eq!(store.latest(id).await.unwrap(), Some(cp(id, 1, i as u64)), "{id:?}");
    }
    assert_eq!(std::fs::read_dir(&dir.0).unwrap().count(), ids.len());
}

#[tokio::test]
async fn checkpoints_of_earlier_releases_are_read_or_refused_never_missed() {
    let dir = TempDir::new("legacy");
    let store = FileCheckpointer::open(&dir.0).unwrap();
    // A version 1 file (bare JSON) in the new layout is read.
    store.put(&cp("t", 1, 1)).await.unwrap();
    let v1 = store.thread_dir("t").join(format!("{:020}.json", 2));
    std::fs::write(&v1, serde_json::to_vec(&cp("t", 2, 2)).unwrap()).unwrap();
    assert_eq!(store.latest("t").await.unwrap(), Some(cp("t", 2, 2)));
    assert!(store.put(&cp("t", 2, 5)).await.is_err(), "not replaced either");
    // A thread in the version 1 directory layout is refused with the fix.
    let old = dir.0.join("old-thread");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(
        old.join(format!("{:020}.json", 1)),
        serde_json::to_vec(&cp("old-thread", 1, 1)).unwrap(),
    )
    .unwrap();
    let err = store.latest("old-thread").await.unwrap_err();
    assert_names(&err, &old, "directory layout of format version 1");
    assert!(
        err.to_string()
            .contains(&store.thread_dir("old-thread").display().to_string()),
        "names where to move it: {err}"
    );
    std::fs::rename(&old, store.thread_dir("old-thread")).unwrap();
    assert_eq!(store.latest("old-thread").await.unwrap(), Some(cp("old-thread", 1, 1)));
}

#[tokio::test]
async fn storage_grows_linearly_and_the_update_record_is_complete() {
    let dir = TempDir::new("linear");
    let store = FileCheckpointer::open(&dir.0).unwrap();
    let steps = 300;
    let run = counting_graph(steps)
        .run_durable(&mut (), GraphState::new(), "t", &store)
        .await
        .unwrap();
    assert_eq!(run.state.get("n"), Some(&json!(steps)));
    let sizes: Vec<u64> = std::fs::read_dir(store.thread_dir("t"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .collect();
    assert_eq!(sizes.len() as i64, steps + 1);
    let (min, max) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
    assert!(
        *max < 2 * *min,
        "every checkpoint is about the same size ({min}..{max} bytes): no cumulative log"
    );
    // Nothing lost: the record over the checkpoints is the run's record.
    let history = store.history("t").await.unwrap();
    let record: Vec<_> = history.iter().flat_map(|c| c.updates.clone()).collect();
    assert_eq!(record, run.updates);
    assert_eq!(record.len() as i64, steps);
}

#[tokio::test]
async fn a_resumed_run_records_only_its_own_updates_and_the_thread_record_stays_whole() {
    let graph = StateGraph::<()>::new()
        .node("ask", asking("ok?"))
        .node(
            "first",
            node_fn(|_| async { Ok(Command::Update(update([("a", json!(1))]))) }),
        )
        .entry("first")
        .edge("first", "ask")
        .edge("ask", END)
        .compile()
        .unwrap();
    let (paused, store) = run_graph_durably(&graph).await;
    assert_eq!(paused.updates.len(), 1);
    let done = graph.resume(&mut (), "t", &store, Some(json!("yes"))).await.unwrap();
    assert_eq!(done.state.get("a"), Some(&json!(1)), "state carried over");
    assert_eq!(done.updates.len(), 1, "this call's own update");
    let record: Vec<String> = store
        .history("t")
        .iter()
        .flat_map(|c| c.updates.iter().map(|u| u.node.clone()))
        .collect();
    assert_eq!(record, ["first", "ask"], "each update stored once, none lost");
}

/// A sequence number at the end of its range and an unknown nested field are
/// refused, not a panic and not dropped.
mod sequence_and_unknown_fields {
    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tinyagents-integrity-seq-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::canonicalize(dir).unwrap()
    }

    use futures::FutureExt;
    use serde_json::{json, Value};
    use tinyagents::graph::{
        node_fn, update, Checkpoint, Checkpointer, Command, FileCheckpointer, GraphState, InterruptRecord, StateGraph,
        END,
    };

    fn graph() -> tinyagents::graph::CompiledGraph<()> {
        StateGraph::<()>::new()
            .node(
                "inc",
                node_fn(|_| async { Ok(Command::Update(update([("n", json!(1))]))) }),
            )
            .entry("inc")
            .edge("inc", END)
            .compile()
            .unwrap()
    }

    fn cp(seq: u64, interrupt: Option<InterruptRecord>) -> Checkpoint {
        Checkpoint {
            thread_id: "t".into(),
            seq,
            steps: 0,
            next: Some("inc".into()),
            state: GraphState::new(),
            interrupt,
            updates: vec![],
        }
    }

    /// A stored checkpoint whose sequence number is `u64::MAX` (a damaged or
    /// hostile store; the file store accepts and reads it, its name is 20
    /// digits): resuming the thread panics with an arithmetic overflow
    /// (`d.seq += 1` in `CompiledGraph::save`) instead of refusing it.
    /// (In a release build it wraps to 0 and the file store writes
    /// checkpoint 0 while `latest` keeps returning the old one.)
    #[tokio::test]
    async fn a_checkpoint_at_the_last_sequence_number_is_refused_not_a_panic() {
        let dir = temp_dir("seq-max");
        let store = FileCheckpointer::open(&dir).unwrap();
        // a number past what any store keeps is refused when stored
        let refused = store.put(&cp(u64::MAX, None)).await.unwrap_err();
        assert_eq!(refused.kind(), tinyagents::prelude::ErrorKind::Validation, "{refused}");
        // the last one a store keeps is stored; the thread cannot go past it
        store
            .put(&cp(tinyagents::graph::MAX_CHECKPOINT_SEQ, None))
            .await
            .unwrap();
        let outcome = std::panic::AssertUnwindSafe(graph().resume(&mut (), "t", &store, None))
            .catch_unwind()
            .await;
        match outcome {
            Err(_) => panic!("resuming a thread at checkpoint u64::MAX panicked"),
            Ok(result) => assert!(
                result.is_err(),
                "a resume past the last sequence number must be refused"
            ),
        }
    }

    /// "A field this version does not know is refused, not dropped": the
    /// check only looks at the top-level keys, so an unknown field inside
    /// `interrupt` (or inside `updates[]`) written by a newer release is
    /// silently dropped, and the thread resumes without it.
    #[tokio::test]
    async fn an_unknown_nested_field_of_a_checkpoint_is_refused_not_dropped() {
        let dir = temp_dir("nested-field");
        let store = FileCheckpointer::open(&dir).unwrap();
        let interrupt = InterruptRecord {
            node: "inc".into(),
            message: "approve?".into(),
        };
        store.put(&cp(1, Some(interrupt))).await.unwrap();
        let path = store.thread_dir("t").join(format!("{:020}.ckpt", 1));
        let bytes = std::fs::read(&path).unwrap();
        let nl = bytes.iter().position(|&b| b == b'\n').unwrap();
        let mut body: Value = serde_json::from_slice(&bytes[nl + 1..]).unwrap();
        body["interrupt"]["requires"] = json!("two_person_approval");
        let body = serde_json::to_vec(&body).unwrap();
        let sum_path = dir.join("body");
        std::fs::write(&sum_path, &body).unwrap();
        let sum = std::process::Command::new("sha256sum").arg(&sum_path).output().unwrap();
        let sum = String::from_utf8(sum.stdout).unwrap();
        let sum = sum.split_whitespace().next().unwrap();
        let mut file = format!("tinyagents-checkpoint v2 bytes={} sha256={sum}\n", body.len()).into_bytes();
        file.extend_from_slice(&body);
        std::fs::write(&path, file).unwrap();
        let read = store.latest("t").await;
        assert!(
            read.is_err(),
            "a checkpoint with an unknown nested field was read, the field dropped: {:?}",
            read.map(|c| c.map(|c| c.interrupt))
        );
    }
}
