//! Crash safety of the file checkpoint store: a writer process is killed
//! between (and during) writes, and the store still opens at the last
//! complete checkpoint.
//!
//! `harness = false`: this binary is both the test and, when
//! `TINYAGENTS_CRASH_WRITER` names a directory, the writer it kills.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::json;
use tinyagents::graph::{update, Checkpoint, Checkpointer, FileCheckpointer, GraphState};

const WRITER_ENV: &str = "TINYAGENTS_CRASH_WRITER";

fn checkpoint(seq: u64) -> Checkpoint {
    // A large payload, so a kill often lands in the middle of a write.
    let payload = format!("{seq}:").repeat(20_000);
    Checkpoint {
        thread_id: "crash".into(),
        seq,
        steps: seq as u32,
        next: Some("work".into()),
        state: GraphState::from_update(update([("n", json!(seq)), ("payload", json!(payload))])),
        interrupt: None,
        updates: Vec::new(),
    }
}

fn check(cp: &Checkpoint) -> Result<(), String> {
    let n = cp.state.get("n").and_then(|v| v.as_u64()).ok_or("no n")?;
    let payload = cp.state.get("payload").and_then(|v| v.as_str()).ok_or("no payload")?;
    if n != cp.seq || payload != format!("{n}:").repeat(20_000) {
        return Err(format!(
            "checkpoint {} is not whole (n = {n}, payload {} bytes)",
            cp.seq,
            payload.len()
        ));
    }
    Ok(())
}

fn writer(dir: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = FileCheckpointer::open(dir).unwrap();
        let mut out = std::io::stdout();
        for seq in 1..=100_000 {
            store.put(&checkpoint(seq)).await.unwrap();
            writeln!(out, "wrote {seq}").unwrap();
            out.flush().unwrap();
        }
    });
}

fn main() {
    if let Ok(dir) = std::env::var(WRITER_ENV) {
        writer(&dir);
        return;
    }
    let dir = std::env::temp_dir().join(format!("tinyagents-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut failures = Vec::new();

    // 1. Kill a real writer while it is writing.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .env(WRITER_ENV, &dir)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the writer");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut confirmed = 0;
    for line in lines.by_ref() {
        confirmed = line.unwrap().trim_start_matches("wrote ").parse::<u64>().unwrap();
        if confirmed >= 25 {
            break;
        }
    }
    child.kill().expect("kill the writer");
    child.wait().unwrap();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = FileCheckpointer::open(&dir).unwrap();
        match store.latest("crash").await {
            Ok(Some(cp)) if cp.seq >= confirmed => {
                if let Err(e) = check(&cp) {
                    failures.push(e);
                }
            }
            other => failures.push(format!(
                "after the kill the store opened at {other:?}, expected ≥ {confirmed}"
            )),
        }

        // 2. A write torn at any byte (a temporary file) is never read.
        let thread_dir = std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path();
        let before = store.latest("crash").await.unwrap().unwrap().seq;
        let torn = serde_json::to_vec(&checkpoint(before + 1)).unwrap();
        std::fs::write(
            thread_dir.join(format!(".tmp-{:020}-1", before + 1)),
            &torn[..torn.len() / 2],
        )
        .unwrap();
        match store.latest("crash").await {
            Ok(Some(cp)) if cp.seq == before => {}
            other => failures.push(format!(
                "a torn temporary file changed the latest checkpoint: {other:?}"
            )),
        }

        // 3. A damaged complete file (a disk fault) is an error naming it: an
        //    older checkpoint is never used in its place (a resume would run
        //    finished steps again).
        let damaged = thread_dir.join(format!("{:020}.ckpt", before + 2));
        std::fs::write(&damaged, b"{\"thread_id\": \"cr").unwrap();
        match store.latest("crash").await {
            Err(e) if e.to_string().contains(&damaged.display().to_string()) && e.to_string().contains("damaged") => {}
            other => failures.push(format!("a damaged file was not reported: {other:?}")),
        }
    });
    let _ = std::fs::remove_dir_all(&dir);

    if failures.is_empty() {
        println!("test result: ok. 3 passed; 0 failed");
    } else {
        for f in &failures {
            eprintln!("FAILED: {f}");
        }
        println!(
            "test result: FAILED. {} passed; {} failed",
            3 - failures.len().min(3),
            failures.len()
        );
        std::process::exit(1);
    }
}
