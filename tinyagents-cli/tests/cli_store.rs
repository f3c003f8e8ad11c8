//! `tinyagents check` on an agent file naming a `[store]`: the store is
//! opened, and a server that does not answer (or a build without the
//! scheme's feature) is an error naming the URL, password hidden, and the
//! feature.

use std::path::{Path, PathBuf};
use std::process::Command;

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tinyagents-cli-store-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn check(path: &Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tinyagents"))
        .args(["check", path.to_str().unwrap()])
        .output()
        .expect("the binary runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn an_unreachable_postgres_store_fails_the_check_naming_url_and_feature() {
    // Port 1 on loopback: nothing listens there.
    let file = temp_file(
        "pg.toml",
        "[store]\nurl = \"postgres://agent:s3cret@127.0.0.1:1/agents\"\n",
    );
    let (ok, out, err) = check(&file);
    assert!(!ok, "{out}");
    assert!(err.contains("postgres://agent:***@127.0.0.1:1/agents"), "{err}");
    assert!(err.contains("`postgres`"), "{err}");
    assert!(!err.contains("s3cret") && !out.contains("s3cret"), "{err}");
    let why = if cfg!(feature = "postgres") {
        "cannot reach the PostgreSQL server"
    } else {
        "needs the `postgres` feature"
    };
    assert!(err.contains(why), "{err}");
}

#[test]
fn a_sqlite_store_is_opened_or_its_feature_named() {
    let db = std::env::temp_dir().join(format!("tinyagents-cli-store-{}.db", std::process::id()));
    let file = temp_file(
        "sqlite.toml",
        &format!(
            "[store]\nurl = \"sqlite:{}\"\n\n[[middleware]]\ntype = \"model_call_limit\"\nthread_limit = 2\n\n\
             [[middleware]]\ntype = \"rate_limiter\"\n",
            db.display()
        ),
    );
    let (ok, out, err) = check(&file);
    if cfg!(feature = "sqlite") {
        assert!(ok, "{out}{err}");
        assert!(
            out.contains(&format!("store: sqlite:{} (feature `sqlite`): reachable", db.display())),
            "{out}"
        );
        assert!(db.exists());
        // What the file's middleware keep in the store, and what stays in process.
        assert!(
            out.contains("  model_call_limit: each thread's call count, when `thread_limit` is set"),
            "{out}"
        );
        assert!(
            out.contains("  rate_limiter: its buckets stay in this process"),
            "{out}"
        );
    } else {
        assert!(!ok, "{out}");
        assert!(
            err.contains("needs the `sqlite` feature") && err.contains("--features sqlite"),
            "{err}"
        );
    }
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", db.display()));
    }
}
