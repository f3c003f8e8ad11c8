//! The engine on its own, no agent runtime: command lines judged against a
//! policy, and an admitted plan run.

use std::path::PathBuf;

use tinyagents_commands::{
    judge, CommandPolicy, RedirectTarget, RefusalKind, Sandbox, SandboxMode, SandboxPolicy, Verdict,
};

/// A throw-away workspace root, removed on drop.
struct Root(PathBuf);

impl Root {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("ta-commands-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("notes.txt"), "b\na\nb\n").unwrap();
        std::fs::write(dir.join("src/lib.rs"), "fn main() {}\n").unwrap();
        Self(dir)
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn refusal(command: &str, policy: &CommandPolicy) -> (RefusalKind, String) {
    match judge(command, policy) {
        Verdict::Refused(r) => (r.kind, r.reason),
        Verdict::Admitted(plan) => panic!("`{command}` was admitted: {plan:?}"),
    }
}

#[test]
fn reading_commands_are_admitted_as_plans() {
    let root = Root::new("admit");
    let policy = CommandPolicy::new(&root.0);
    let plan = judge("sort notes.txt | uniq -c > counts.txt", &policy)
        .into_result()
        .unwrap();
    assert_eq!(plan.stages().len(), 2);
    assert_eq!(plan.stages()[0].argv(), ["sort", "notes.txt"]);
    let out = &plan.stages()[1].redirects()[0];
    assert_eq!(out.fd(), 1);
    let canonical = root.0.canonicalize().unwrap();
    assert_eq!(out.target(), &RedirectTarget::Write(canonical.join("counts.txt")));
    // globs are expanded once, here: the program gets the matches as words
    let plan = judge("wc -l src/*.rs", &policy).into_result().unwrap();
    assert_eq!(plan.stages()[0].argv(), ["wc", "-l", "src/lib.rs"]);
    // the working directory is confined and becomes the plan's
    let plan = judge("ls", &policy.clone().with_cwd("src")).into_result().unwrap();
    assert_eq!(plan.cwd(), canonical.join("src"));
    let plan = judge("ls", &policy.clone().with_cwd(canonical.join("src")))
        .into_result()
        .unwrap();
    assert_eq!(plan.cwd(), canonical.join("src"));
}

#[test]
fn refusals_are_classified() {
    let root = Root::new("refuse");
    let policy = CommandPolicy::new(&root.0);
    assert_eq!(refusal("ls && rm -rf /", &policy).0, RefusalKind::Syntax);
    assert_eq!(refusal("echo $(id)", &policy).0, RefusalKind::Syntax);
    assert_eq!(refusal("", &policy).0, RefusalKind::Syntax);
    let (kind, reason) = refusal("cat ../../etc/passwd", &policy);
    assert_eq!(kind, RefusalKind::Command);
    assert!(reason.contains("etc/passwd"), "{reason}");
    let (kind, reason) = refusal("bash -c ls", &policy);
    assert_eq!(kind, RefusalKind::Command);
    assert!(reason.contains("bash"), "{reason}");
    // writes to configuration programs execute, and writes when read-only
    assert_eq!(refusal("touch .envrc", &policy).0, RefusalKind::Command);
    assert_eq!(
        refusal("sort notes.txt > out", &policy.clone().read_only(true)).0,
        RefusalKind::Command
    );
    // a policy that confines nothing refuses everything
    let (kind, reason) = refusal("ls", &CommandPolicy::new("/"));
    assert_eq!(kind, RefusalKind::Policy);
    assert!(reason.contains("file-system root"), "{reason}");
    assert_eq!(
        refusal("ls", &CommandPolicy::new(root.0.join("missing"))).0,
        RefusalKind::Policy
    );
    assert_eq!(refusal("ls", &policy.clone().with_cwd("../")).0, RefusalKind::Policy);
    assert_eq!(refusal("ls", &policy.clone().with_cwd("/")).0, RefusalKind::Policy);
    assert_eq!(
        refusal("ls", &policy.clone().with_cwd("notes.txt")).0,
        RefusalKind::Policy
    );
    // the workspace profile's programs need a required OS sandbox
    let (_, reason) = refusal("make test", &policy.clone().workspace_profile(false));
    assert!(reason.contains("requires the OS sandbox"), "{reason}");
    assert!(judge("make test", &policy.clone().workspace_profile(true)).is_admitted());
}

#[tokio::test]
async fn an_admitted_plan_runs_without_a_shell() {
    let root = Root::new("run");
    let plan = judge("sort notes.txt | uniq -c", &CommandPolicy::new(&root.0))
        .into_result()
        .unwrap();
    // Confined where the machine can; else the explicit opt-out (same
    // plan, same runner, no OS confinement), unless CI demands the sandbox.
    let sandbox = match Sandbox::new(SandboxPolicy::new(&root.0)) {
        Ok(sandbox) => sandbox,
        Err(missing) => {
            assert_ne!(
                std::env::var("TINYAGENTS_REQUIRE_SANDBOX").as_deref(),
                Ok("1"),
                "the sandbox is required here: {missing}"
            );
            Sandbox::new(SandboxPolicy::new(&root.0).with_mode(SandboxMode::Off)).unwrap()
        }
    };
    let out = sandbox.run_plan(&plan).await.unwrap();
    assert!(out.success(), "{}", out.render());
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(lines, ["1 a", "2 b"]);
}
