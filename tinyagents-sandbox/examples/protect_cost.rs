//! Measures what the protected tree costs: a workspace of N files (default
//! 20,000) in directories of 50, with a few protected entries at depth; the
//! time of `Confinement::prepare` (the walk before the run), of
//! `restore_protected` (the walk after it), and of a whole confined
//! `/bin/true` with and without the protected tree.
//!
//! ```text
//! cargo run --release -p tinyagents-sandbox --example protect_cost -- 20000
//! ```

use std::time::{Duration, Instant};

use tinyagents_sandbox::{Confinement, ConfinementSpec, Protection};

const PATTERNS: &[&str] = &[".envrc", ".cargo", ".git/config", ".git/hooks", ".github", ".vscode"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(20_000);
    let root = std::env::temp_dir().join(format!("ta-protect-cost-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    for i in 0..files {
        let dir = root.join(format!("d{}/e{}", i / 2500, (i / 50) % 50));
        if i % 50 == 0 {
            std::fs::create_dir_all(&dir)?;
        }
        std::fs::write(dir.join(format!("f{i}.rs")), "fn main() {}\n")?;
    }
    for sub in ["d0", "d1/e3", "d2/e7"] {
        std::fs::create_dir_all(root.join(sub).join(".git/hooks"))?;
        std::fs::write(root.join(sub).join(".git/config"), "[core]\n")?;
        std::fs::write(root.join(sub).join(".envrc"), "export A=1\n")?;
    }
    let root = std::fs::canonicalize(&root)?;
    let base = ConfinementSpec::new()
        .read_only(["/usr", "/bin", "/lib", "/lib64", "/etc/ld.so.cache"])
        .writable([root.clone()]);
    let protected = base.clone().protect(
        Protection::new(&root)
            .read_only(PATTERNS.iter().copied())
            .pinned([".git"]),
    );
    let runs = 30;
    let time = |spec: &ConfinementSpec| -> Result<(Duration, Duration, Duration), Box<dyn std::error::Error>> {
        let (mut prep, mut restore, mut total) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        for _ in 0..runs {
            let start = Instant::now();
            let c = Confinement::prepare(spec)?;
            prep += start.elapsed();
            let mut cmd = std::process::Command::new("/bin/true");
            cmd.current_dir(&root);
            c.install(&mut cmd);
            let status = cmd.status()?;
            assert!(status.success(), "the confined /bin/true failed");
            c.kill_all();
            let r = Instant::now();
            assert!(c.restore_protected().is_empty());
            restore += r.elapsed();
            total += start.elapsed();
        }
        Ok((prep / runs, restore / runs, total / runs))
    };
    let (p0, r0, t0) = time(&base)?;
    let (p1, r1, t1) = time(&protected)?;
    println!("{files} files, {runs} runs each, means:");
    println!("  without the protected tree: prepare {p0:?}, restore {r0:?}, whole run {t0:?}");
    println!("  with the protected tree:    prepare {p1:?}, restore {r1:?}, whole run {t1:?}");
    std::fs::remove_dir_all(&root)?;
    Ok(())
}
