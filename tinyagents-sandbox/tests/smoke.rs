//! Smoke test of the raw confinement (the behaviour tests are in `tests/tests/sandbox_*.rs`).
use tinyagents_sandbox::{availability, Confinement, ConfinementSpec};

#[test]
fn confined_shell_runs_and_is_confined() {
    if let Err(e) = availability().check() {
        assert_ne!(
            std::env::var("TINYAGENTS_REQUIRE_SANDBOX").as_deref(),
            Ok("1"),
            "TINYAGENTS_REQUIRE_SANDBOX=1 but the sandbox is unavailable: {e}"
        );
        println!("SKIPPED: {e}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("tas-smoke-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = ConfinementSpec::new()
        .read_only(["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache"])
        .devices(["/dev/null"])
        .writable([dir.clone()])
        .max_processes(Some(16));
    let c = Confinement::prepare(&spec).unwrap();
    let mut cmd = std::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg("echo ok > ok.txt; cat /etc/hostname; echo bad > /tmp/tas-smoke-outside; setsid true; echo done")
        .current_dir(&dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin");
    c.install(&mut cmd);
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stderr}");
    assert_eq!(std::fs::read_to_string(dir.join("ok.txt")).unwrap(), "ok\n");
    assert!(!std::path::Path::new("/tmp/tas-smoke-outside").exists());
    assert!(String::from_utf8_lossy(&out.stdout).contains("done"));
    assert!(
        stderr.contains("Permission denied") || stderr.contains("not permitted"),
        "{stderr}"
    );
    assert!(c.kill_all());
    drop(c);
    std::fs::remove_dir_all(&dir).unwrap();
}
