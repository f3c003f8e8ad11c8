//! Real commands that try to get out of the sandbox, run in a throw-away
//! workspace: each must be stopped, with nothing written outside the root.
//! `cargo test -p tinyagents-tests --test it sandbox::escapes -- --nocapture`
//! prints the figure ("sandbox escapes tried / stopped").

use crate::sandbox::support as sandbox_support;

use std::io::ErrorKind;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use sandbox_support::{marker, processes_with, sandbox_available, sh, Workspace};
use tinyagents::sandbox::{Sandbox, SandboxCommand, SandboxLimits, SandboxMode, SandboxPolicy, Termination};

/// One escape attempt of the corpus and how "stopped" is checked.
enum Check {
    /// No file may appear outside the root.
    NothingWrittenOutside,
    /// The output may not contain the planted secret (and the command must not succeed).
    SecretNotRead,
    /// The output may name no entry of these directories (hidden: they look empty).
    NothingListed(Vec<&'static str>),
}

/// `$HOME` (default `/root`), for the whole test run.
fn home_static() -> &'static str {
    static HOME: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOME.get_or_init(|| std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn escape_corpus_filesystem_is_stopped() {
    if !sandbox_available("escape_corpus_filesystem_is_stopped") {
        return;
    }
    let ws = Workspace::new("corpus");
    let sandbox = ws.sandbox();
    let out = ws.outside.display().to_string();
    let tmp_marker = std::env::temp_dir().join(format!("ta-sbx-escape-{}", std::process::id()));
    let tmp = tmp_marker.display().to_string();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".to_owned());
    let corpus: Vec<(String, Check)> = vec![
        (format!("echo x > {out}/written"), Check::NothingWrittenOutside),
        (format!("touch {out}/touched"), Check::NothingWrittenOutside),
        (format!("mkdir {out}/dir"), Check::NothingWrittenOutside),
        (format!("cp hello.txt {out}/copied"), Check::NothingWrittenOutside),
        (format!("ln hello.txt {out}/hardlink"), Check::NothingWrittenOutside),
        (format!("ln -s /etc/passwd {out}/symlink"), Check::NothingWrittenOutside),
        (format!("mv hello.txt {out}/moved"), Check::NothingWrittenOutside),
        (
            format!("ln -s {out} link && echo x > link/through-symlink"),
            Check::NothingWrittenOutside,
        ),
        (format!("cd {out} && echo x > relative"), Check::NothingWrittenOutside),
        (format!("echo x >> {out}/secret.txt"), Check::NothingWrittenOutside),
        (format!(": > {out}/secret.txt"), Check::NothingWrittenOutside),
        (format!("rm -f {out}/secret.txt"), Check::NothingWrittenOutside),
        (format!("mkfifo {out}/fifo"), Check::NothingWrittenOutside),
        (
            format!("perl -e 'open(F, \">\", \"{out}/perl\") or die \"$!\"; print F 1'"),
            Check::NothingWrittenOutside,
        ),
        (
            format!("dd if=/dev/zero of={out}/dd bs=1 count=1"),
            Check::NothingWrittenOutside,
        ),
        (format!("tar cf {out}/x.tar hello.txt"), Check::NothingWrittenOutside),
        (format!("git init -q {out}/repo"), Check::NothingWrittenOutside),
        (format!("echo x > {tmp}"), Check::NothingWrittenOutside),
        (format!("echo x > {home}/.ta-sbx-escape"), Check::NothingWrittenOutside),
        ("echo x > /etc/ta-sbx-escape".to_owned(), Check::NothingWrittenOutside),
        ("echo x > /usr/ta-sbx-escape".to_owned(), Check::NothingWrittenOutside),
        ("mknod dev c 1 3 && echo made".to_owned(), Check::NothingWrittenOutside),
        (format!("cat {out}/secret.txt"), Check::SecretNotRead),
        (format!("ln -s {out}/secret.txt leak && cat leak"), Check::SecretNotRead),
        (
            format!("ln -s {out} leakdir && cat leakdir/secret.txt"),
            Check::SecretNotRead,
        ),
        (format!("ln {out}/secret.txt hard && cat hard"), Check::SecretNotRead),
        (format!("cp {out}/secret.txt copy && cat copy"), Check::SecretNotRead),
        (format!("grep -r TOPSECRET {out}"), Check::SecretNotRead),
        (format!("ls -la {out}"), Check::SecretNotRead),
        (
            format!("perl -e 'open(F, \"<\", \"{out}/secret.txt\") or die \"$!\"; print <F>'"),
            Check::SecretNotRead,
        ),
        (format!("tar cf - {out} | tar xOf -"), Check::SecretNotRead),
        (format!("ls -la {home}"), Check::NothingListed(vec![home_static()])),
        (format!("cat {home}/.bashrc {home}/.profile"), Check::SecretNotRead),
        ("cat /etc/shadow".to_owned(), Check::SecretNotRead),
        ("cat /etc/hostname".to_owned(), Check::SecretNotRead),
        ("cat /proc/1/environ".to_owned(), Check::SecretNotRead),
        ("cat /proc/self/environ".to_owned(), Check::SecretNotRead),
        (
            "ls /root /home".to_owned(),
            Check::NothingListed(vec!["/root", "/home"]),
        ),
    ];
    let tried = corpus.len();
    let mut stopped = 0;
    for (line, check) in &corpus {
        let result = sh(&sandbox, line).await;
        let text = result.render();
        let ok = match check {
            Check::NothingWrittenOutside => {
                let outside = ws.outside_files();
                let secret_intact =
                    std::fs::read_to_string(ws.outside_path("secret.txt")).ok().as_deref() == Some(ws.secret.as_str());
                outside.is_empty()
                    && secret_intact
                    && !tmp_marker.exists()
                    && !std::path::Path::new(&format!("{home}/.ta-sbx-escape")).exists()
                    && !std::path::Path::new("/etc/ta-sbx-escape").exists()
                    && !std::path::Path::new("/usr/ta-sbx-escape").exists()
                    && !text.contains("made")
            }
            // A pipeline may exit 0 from its last stage: then the refusal must
            // show (a hidden directory does not exist, to the command).
            Check::SecretNotRead => {
                !text.contains(&ws.secret)
                    && (!result.success()
                        || ["Permission denied", "No such file", "Cannot open"]
                            .iter()
                            .any(|refusal| text.contains(refusal)))
            }
            Check::NothingListed(dirs) => dirs.iter().all(|d| {
                std::fs::read_dir(d).into_iter().flatten().flatten().all(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    name.len() < 3 || !text.contains(&name)
                })
            }),
        };
        assert!(ok, "escape not stopped: `{line}`\n{text}");
        stopped += 1;
    }
    println!("filesystem escapes tried: {tried}, stopped: {stopped}");
    assert_eq!(tried, stopped);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn network_is_refused_even_to_loopback() {
    if !sandbox_available("network_is_refused_even_to_loopback") {
        return;
    }
    let ws = Workspace::new("net");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let attempts = [
        format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}'"),
        format!("curl -sS --max-time 5 http://127.0.0.1:{port}/"),
        format!("perl -MIO::Socket::INET -e 'IO::Socket::INET->new(\"127.0.0.1:{port}\") or die \"connect: $!\"; print \"connected\"'"),
        format!("perl -MIO::Socket::INET -e 'IO::Socket::INET->new(PeerAddr => \"127.0.0.1:{port}\", Proto => \"udp\") or die \"udp: $!\"; print \"connected\"'"),
        "perl -MSocket -e 'socket(S, AF_INET6, SOCK_STREAM, 0) or die \"socket6: $!\"; print \"connected\"'".to_owned(),
        "perl -MSocket -e 'socket(S, AF_PACKET, SOCK_RAW, 0) or die \"raw: $!\"; print \"connected\"'".to_owned(),
        "perl -MSocket -e 'socket(S, AF_NETLINK, SOCK_RAW, 0) or die \"netlink: $!\"; print \"connected\"'".to_owned(),
    ];
    let sandbox = ws.sandbox();
    for line in &attempts {
        let out = sh(&sandbox, line).await;
        assert!(!out.success(), "network attempt succeeded: `{line}`\n{}", out.render());
        assert!(!out.stdout_text().contains("connected"), "{line}: {}", out.render());
        match listener.accept() {
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            other => panic!("`{line}` reached the loopback listener: {other:?}"),
        }
    }
    // A daemon's socket file (think /var/run/docker.sock, hidden by default
    // with `/var` and `/run`, but one may lie in a readable path): Landlock
    // does not govern connecting to it, so AF_UNIX sockets are refused by default.
    let sock_path = ws.root.join("daemon.sock");
    let unix = std::os::unix::net::UnixListener::bind(&sock_path).unwrap();
    unix.set_nonblocking(true).unwrap();
    let unix_line = format!(
        "perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => \"{}\") or die \"unix: $!\"; print \"connected\"'",
        sock_path.display()
    );
    let out = sh(&sandbox, &unix_line).await;
    assert!(
        !out.success() && !out.stdout_text().contains("connected"),
        "{}",
        out.render()
    );
    assert!(matches!(unix.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock));
    let with_unix = Sandbox::new(SandboxPolicy::new(&ws.root).with_unix_sockets(true)).unwrap();
    let out = sh(&with_unix, &unix_line).await;
    assert!(out.stdout_text().contains("connected"), "control: {}", out.render());
    let _ = unix.accept().unwrap();

    // Even with AF_UNIX allowed, an abstract socket outside the sandbox is
    // out of reach (Landlock scoping, ABI v6+); unconfined, it is reached.
    use std::os::linux::net::SocketAddrExt;
    let name = format!("ta-sbx-abstract-{}", std::process::id());
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let abstract_listener = std::os::unix::net::UnixListener::bind_addr(&addr).unwrap();
    abstract_listener.set_nonblocking(true).unwrap();
    let abstract_line = format!(
        "perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Peer => \"\\0{name}\") or die \"abstract: $!\"; print \"connected\"'"
    );
    let mut tried = attempts.len() + 1;
    if tinyagents_abi_at_least(6) {
        let out = sh(&with_unix, &abstract_line).await;
        assert!(!out.stdout_text().contains("connected"), "{}", out.render());
        assert!(matches!(abstract_listener.accept(), Err(e) if e.kind() == ErrorKind::WouldBlock));
        tried += 1;
        let off = Sandbox::new(SandboxPolicy::new(&ws.root).with_mode(SandboxMode::Off)).unwrap();
        let out = sh(&off, &abstract_line).await;
        assert!(out.stdout_text().contains("connected"), "control: {}", out.render());
    }
    println!("network escapes tried: {tried}, stopped: {tried}");

    // The control: with the network allowed, the same connection arrives,
    // so the refusals above are the sandbox's doing.
    let open = Sandbox::new(SandboxPolicy::new(&ws.root).with_network(true)).unwrap();
    let out = sh(&open, &attempts[2]).await;
    assert!(out.success(), "{}", out.render());
    listener.set_nonblocking(false).unwrap();
    assert!(listener.accept().is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_bomb_is_held_at_the_process_limit() {
    if !sandbox_available("fork_bomb_is_held_at_the_process_limit") {
        return;
    }
    let ws = Workspace::new("fork");
    let limits = SandboxLimits {
        processes: Some(16),
        wall_time: Duration::from_secs(20),
        ..SandboxLimits::default()
    };
    let sandbox = ws.sandbox_with(limits);
    // Each iteration records itself, then leaves a sleeper behind; the fork
    // that passes the limit fails, and the shell stops.
    let out = sh(
        &sandbox,
        &format!(
            "i=0; while [ $i -lt 200 ]; do i=$((i+1)); sleep {} & echo $i > count; done; echo all-forked",
            marker(11)
        ),
    )
    .await;
    let count: u32 = std::fs::read_to_string(ws.root.join("count"))
        .unwrap_or_default()
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(!out.stdout_text().contains("all-forked"), "{}", out.render());
    assert!(
        count < 16,
        "{count} sleepers started under a limit of 16\n{}",
        out.render()
    );
    assert!(out.stderr_text().to_lowercase().contains("fork"), "{}", out.render());
    assert!(processes_with(&marker(11)).is_empty(), "sleepers outlived the call");
    println!("process-limit escapes tried: 1, stopped: 1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setsid_cannot_outlive_the_timeout() {
    if !sandbox_available("setsid_cannot_outlive_the_timeout") {
        return;
    }
    let ws = Workspace::new("setsid");
    let limits = SandboxLimits {
        wall_time: Duration::from_secs(2),
        ..SandboxLimits::default()
    };
    let sandbox = ws.sandbox_with(limits);
    // setsid(2) itself is refused...
    let out = sh(
        &sandbox,
        "perl -MPOSIX -e 'my $r = POSIX::setsid(); print defined($r) && $r > 0 ? \"new session $r\" : \"refused: $!\"'",
    )
    .await;
    assert!(out.stdout_text().contains("refused"), "{}", out.render());
    let out = sh(
        &sandbox,
        "perl -e 'setpgrp(0, 0) ? print \"new group\" : print \"refused: $!\"'",
    )
    .await;
    assert!(out.stdout_text().contains("refused"), "{}", out.render());
    // ...and whatever tries to outlive the call dies with its tree.
    let started = Instant::now();
    let out = sh(
        &sandbox,
        &format!(
            "(setsid sleep {a} || sleep {a}) & nohup sleep {b} >/dev/null 2>&1 & \
             sh -c 'sleep {c} &' ; exec sleep {d}",
            a = marker(21),
            b = marker(22),
            c = marker(23),
            d = marker(24)
        ),
    )
    .await;
    assert_eq!(out.termination, Termination::TimedOut, "{}", out.render());
    assert!(started.elapsed() < Duration::from_secs(15));
    for marker in [marker(21), marker(22), marker(23), marker(24)] {
        assert!(
            processes_with(&marker).is_empty(),
            "`sleep {marker}` outlived the timeout"
        );
    }
    // A daemon left behind by a command that exits at once dies too.
    let out = sh(&sandbox, &format!("sh -c 'sleep {} &'; echo detached", marker(25))).await;
    assert!(out.success(), "{}", out.render());
    assert!(
        processes_with(&marker(25)).is_empty(),
        "a background process outlived its call"
    );
    // setsid(2), setpgid(2), four escapers past the timeout, one daemon after exit, a dropped call.
    // A caller that gives up (a timeout around the call) drops the run: the
    // tree is killed then too.
    let line = format!("sleep {} & sleep {}", marker(26), marker(27));
    let dropped = tokio::time::timeout(Duration::from_millis(500), sh(&sandbox, &line)).await;
    assert!(dropped.is_err());
    assert!(
        processes_with(&marker(26)).is_empty() && processes_with(&marker(27)).is_empty(),
        "a dropped call left processes"
    );
    println!("process-tree escapes tried: 8, stopped: 8");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flooding_output_is_cut_and_stopped() {
    if !sandbox_available("flooding_output_is_cut_and_stopped") {
        return;
    }
    let ws = Workspace::new("flood");
    let sandbox = ws.sandbox();
    let cap = sandbox.policy().limits.output_bytes;
    for line in ["head -c 200000000 /dev/zero", "yes", "yes 1>&2", "cat /dev/urandom"] {
        let started = Instant::now();
        let out = sh(&sandbox, line).await;
        assert_eq!(
            out.termination,
            Termination::OutputLimit,
            "`{line}`: {}",
            out.status_line()
        );
        assert!(
            out.stdout.len() <= cap && out.stderr.len() <= cap,
            "`{line}` read past the cap"
        );
        assert!(out.stdout_truncated || out.stderr_truncated);
        assert!(out.render().contains("truncated: more than"));
        assert!(
            started.elapsed() < sandbox.policy().limits.wall_time,
            "`{line}` ran to the wall time"
        );
    }
    println!("output floods tried: 4, stopped: 4");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_and_cpu_limits_hold() {
    if !sandbox_available("memory_and_cpu_limits_hold") {
        return;
    }
    let ws = Workspace::new("rlimits");
    let limits = SandboxLimits {
        memory_bytes: Some(256 << 20),
        cpu_seconds: Some(1),
        wall_time: Duration::from_secs(30),
        file_size_bytes: Some(1 << 20),
        ..SandboxLimits::default()
    };
    let sandbox = ws.sandbox_with(limits);
    let out = sh(&sandbox, "perl -e '$x = \"a\" x (1024*1024*1024); print \"allocated\"'").await;
    assert!(
        !out.success() && !out.stdout_text().contains("allocated"),
        "{}",
        out.render()
    );
    let started = Instant::now();
    let out = sandbox
        .run(SandboxCommand::new(["perl", "-e", "1 while 1"]))
        .await
        .unwrap();
    assert!(
        matches!(out.termination, Termination::Signaled(_)),
        "a CPU spinner was not stopped by RLIMIT_CPU: {}",
        out.status_line()
    );
    assert!(started.elapsed() < Duration::from_secs(25));
    let out = sh(&sandbox, "head -c 5000000 /dev/zero > big; echo done").await;
    let size = std::fs::metadata(ws.root.join("big")).map(|m| m.len()).unwrap_or(0);
    assert!(
        size <= 1 << 20,
        "RLIMIT_FSIZE let a {size}-byte file through: {}",
        out.render()
    );
    println!("resource escapes tried: 3, stopped: 3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signals_and_privileges_stay_inside() {
    if !sandbox_available("signals_and_privileges_stay_inside") {
        return;
    }
    let ws = Workspace::new("signals");
    let sandbox = ws.sandbox();
    let mut victim = std::process::Command::new("sleep").arg("987031").spawn().unwrap();
    let out = sh(&sandbox, &format!("kill -9 {}", victim.id())).await;
    assert!(!out.success(), "{}", out.render());
    assert!(
        victim.try_wait().unwrap().is_none(),
        "the sandbox killed a process outside it"
    );
    victim.kill().unwrap();
    victim.wait().unwrap();
    // No capabilities, even as root: owner changes, chroot and device
    // nodes need them.
    for line in ["chown 65534 hello.txt", "chroot . /bin/true", "mknod null c 1 3"] {
        let out = sh(&sandbox, line).await;
        assert!(!out.success(), "`{line}` succeeded: {}", out.render());
    }
    use std::os::unix::fs::MetadataExt;
    assert_ne!(std::fs::metadata(ws.root.join("hello.txt")).unwrap().uid(), 65534);
    // TIOCSTI (typing into a terminal) and io_uring (sockets behind seccomp's
    // back) are refused with EPERM, not the ENOTTY / EFAULT they would give.
    let out = sh(
        &sandbox,
        "perl -e 'my $c = \"x\"; ioctl(STDIN, 0x5412, $c) or print \"errno=\", $!+0'",
    )
    .await;
    assert_eq!(out.stdout_text(), "errno=1", "{}", out.render());
    if std::env::consts::ARCH == "x86_64" {
        let out = sh(
            &sandbox,
            "perl -e 'syscall(425, 1, 0) == -1 and print \"errno=\", $!+0'",
        )
        .await;
        assert_eq!(out.stdout_text(), "errno=1", "{}", out.render());
    }
    // No new user namespaces: `unshare` and `clone(CLONE_NEWUSER)` are refused.
    let out = sh(&sandbox, "unshare -U -r id -u").await;
    assert!(!out.success(), "{}", out.render());
    if std::env::consts::ARCH == "x86_64" {
        let out = sh(
            &sandbox,
            "perl -e 'my $r = syscall(56, 0x10000011, 0, 0, 0, 0); exit 0 if $r == 0; print \"r=$r errno=\", $!+0'",
        )
        .await;
        assert_eq!(out.stdout_text(), "r=-1 errno=1", "{}", out.render());
    }
    // Other processes of the same user (here: the victim, as the agent
    // would be) keep their resource limits; the session keyring is out of reach.
    let mut victim = std::process::Command::new("sleep").arg("987032").spawn().unwrap();
    let limits_before = std::fs::read_to_string(format!("/proc/{}/limits", victim.id())).unwrap();
    let out = sh(&sandbox, &format!("prlimit --pid {} --nofile=1:1", victim.id())).await;
    assert!(!out.success(), "{}", out.render());
    let limits_after = std::fs::read_to_string(format!("/proc/{}/limits", victim.id())).unwrap();
    victim.kill().unwrap();
    victim.wait().unwrap();
    assert_eq!(limits_before, limits_after);
    // Raising or lowering one's own limits still works (prlimit64 on pid 0).
    let out = sh(&sandbox, "ulimit -n 64 && ulimit -n").await;
    assert_eq!(out.stdout_text(), "64\n", "{}", out.render());
    if std::env::consts::ARCH == "x86_64" {
        // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)
        let out = sh(
            &sandbox,
            "perl -e 'syscall(250, 0, -3, 0) == -1 and print \"errno=\", $!+0'",
        )
        .await;
        assert_eq!(out.stdout_text(), "errno=1", "{}", out.render());
    }
    println!("signal and privilege escapes tried: 10, stopped: 10");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn working_directory_outside_the_root_is_refused() {
    if !sandbox_available("working_directory_outside_the_root_is_refused") {
        return;
    }
    let ws = Workspace::new("cwd");
    std::os::unix::fs::symlink(&ws.outside, ws.root.join("out-link")).unwrap();
    let sandbox = ws.sandbox();
    for cwd in ["..", "../outside", "/", "out-link", "missing"] {
        let err = sandbox
            .run(SandboxCommand::new(["ls"]).with_cwd(cwd))
            .await
            .expect_err(cwd);
        assert!(err.to_string().contains("working directory"), "{err}");
    }
    let err = sandbox
        .run(SandboxCommand::new(Vec::<String>::new()))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("argv is empty"), "{err}");
    println!("working-directory escapes tried: 5, stopped: 5");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_root_refuses_writes() {
    if !sandbox_available("read_only_root_refuses_writes") {
        return;
    }
    let ws = Workspace::new("ro");
    let sandbox = Sandbox::new(ws.policy().with_root_writable(false)).unwrap();
    let out = sh(&sandbox, "cat hello.txt && echo x > new.txt").await;
    assert!(out.stdout_text().contains("hello sandbox"), "{}", out.render());
    assert!(!out.success());
    assert!(!ws.root.join("new.txt").exists());
    println!("read-only escapes tried: 1, stopped: 1");
}

#[test]
fn off_is_the_explicit_opt_out() {
    let policy = SandboxPolicy::new("/tmp").with_mode(SandboxMode::Off);
    assert_eq!(policy.mode, SandboxMode::Off);
    assert_eq!(SandboxPolicy::new("/tmp").mode, SandboxMode::Required);
}

/// Whether the kernel's Landlock ABI is at least `v` (scoping needs v6).
fn tinyagents_abi_at_least(v: i32) -> bool {
    tinyagents::sandbox::landlock_abi() >= v
}

/// Landlock does not govern chmod(2), utimensat(2), chown(2) or setxattr(2):
/// they need no open file. The child's read-only mount namespace does, so a
/// sandboxed command changes neither the mode nor the times of a file outside
/// the root, although its user owns it (as root: every system file, where
/// `chmod u+s /usr/bin/find` or `chmod 666 /etc/shadow` would hand out root).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_and_times_outside_the_root_stay_as_they_were() {
    if !sandbox_available("sandbox_cannot_change_modes_or_times_outside_the_root") {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let ws = Workspace::new("rt-chmod");
    let secret = ws.outside_path("secret.txt");
    let before = std::fs::metadata(&secret).unwrap();
    let sandbox = ws.sandbox();
    let out = sh(
        &sandbox,
        &format!("chmod 0777 {0}; touch -m -d '2001-02-03 04:05' {0}", secret.display()),
    )
    .await;
    let after = std::fs::metadata(&secret).unwrap();
    assert_eq!(
        (before.mode(), before.mtime()),
        (after.mode(), after.mtime()),
        "a sandboxed command changed a file outside the root: mode {:o} -> {:o}, mtime {} -> {}\n{}",
        before.mode(),
        after.mode(),
        before.mtime(),
        after.mtime(),
        out.render()
    );
}

/// Inside the root, metadata changes are the command's own business: the
/// read-only mounts leave the writable paths writable in every way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_and_times_inside_the_root_can_change() {
    if !sandbox_available("modes_and_times_inside_the_root_can_change") {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let ws = Workspace::new("chmod-in");
    let sandbox = ws.sandbox();
    let out = sh(
        &sandbox,
        "printf x > mine.txt && chmod 0600 mine.txt && touch -m -d '2001-02-03 04:05' mine.txt && mkdir -p d/e && echo ok",
    )
    .await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok"), "{}", out.render());
    let meta = std::fs::metadata(ws.root.join("mine.txt")).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600, "{}", out.render());
    assert!(meta.mtime() < 1_000_000_000, "the mtime was set: {}", meta.mtime());
}

/// No setuid file comes out of the sandbox: a copy of a shell with the bit
/// set (as root, a root shell for whoever runs it later, outside the
/// sandbox) is refused however it is made — `chmod`, `install -m`, `mknod`
/// of a regular file, or Python's `os.open` with the mode — and neither is a
/// new setgid file (`chmod` may keep a group-shared directory's setgid bit:
/// seccomp cannot tell a directory from a file); an ordinary mode works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_setuid_or_setgid_file_is_made() {
    if !sandbox_available("no_setuid_or_setgid_file_is_made") {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let ws = Workspace::new("setid");
    let sandbox = ws.sandbox();
    let attempts = [
        "cp /bin/sh a && chmod u+s a",
        "cp /bin/sh b && chmod 4711 b",
        "install -m 4755 /bin/sh c",
        "python3 -c \"import os; os.close(os.open('d', os.O_CREAT | os.O_WRONLY, 0o4755))\"",
        "python3 -c \"import os; os.mknod('e', 0o104755)\"",
        "cp /bin/sh f && python3 -c \"import os; os.chmod('f', 0o6755)\"",
    ];
    for attempt in attempts {
        let out = sh(&sandbox, attempt).await;
        for name in ["a", "b", "c", "d", "e", "f"] {
            if let Ok(meta) = std::fs::metadata(ws.root.join(name)) {
                assert_eq!(
                    meta.mode() & 0o6000,
                    0,
                    "`{attempt}` made `{name}` setuid or setgid: {:o}\n{}",
                    meta.mode(),
                    out.render()
                );
            }
        }
    }
    let out = sh(&sandbox, "cp /bin/sh g && chmod 0755 g && echo ok").await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("ok"), "{}", out.render());
    // an unnamed file (`O_TMPFILE`, which `linkat` can name later): refused
    // with a set-id mode, made with an ordinary one
    let tmpfile = |mode: &str| {
        format!("python3 -c \"import os; os.open('.', os.O_TMPFILE | os.O_WRONLY, {mode})\" && echo opened")
    };
    let setuid = sh(&sandbox, &tmpfile("0o4755")).await;
    assert!(
        !String::from_utf8_lossy(&setuid.stdout).contains("opened"),
        "an O_TMPFILE with a setuid mode was made: {}",
        setuid.render()
    );
    let plain = sh(&sandbox, &tmpfile("0o755")).await;
    if String::from_utf8_lossy(&plain.stderr).contains("not found") {
        println!("SKIPPED the O_TMPFILE half of no_setuid_or_setgid_file_is_made: no python3");
    } else {
        assert!(
            String::from_utf8_lossy(&plain.stdout).contains("opened"),
            "{}",
            plain.render()
        );
    }
}

/// Ordinary work in a workspace whose directories are setgid (a group
/// share: `chmod g+s`, inherited by every new subdirectory) must still
/// work: GNU `chmod` keeps a directory's setgid bit and `cp -a` restores
/// it, and the seccomp rule (linux.rs, `set_id` on `fchmodat`) refuses
/// every mode with S_ISGID, whatever the file type.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setgid_directories_in_the_workspace_still_work() {
    if !sandbox_available("setgid_directories_in_the_workspace_still_work") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let ws = Workspace::new("rt2-setgid-dir");
    let shared = ws.root.join("shared");
    std::fs::create_dir_all(shared.join("src")).unwrap();
    std::fs::write(shared.join("src/a.txt"), "a\n").unwrap();
    for d in [&shared, &shared.join("src")] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o2775)).unwrap();
    }
    let sandbox = ws.sandbox();
    let mut failed = Vec::new();
    for line in [
        "cd shared && cp -a src src2 && echo ok",
        "cd shared && chmod 755 src && echo ok",
        "cd shared && mkdir -m 700 priv && echo ok",
        "cd shared && mkdir -p -m 750 a/b && echo ok",
    ] {
        // each line succeeds unconfined
        let out = sh(&sandbox, line).await;
        if !out.stdout_text().contains("ok") {
            failed.push(format!("`{line}`: {}", out.render()));
        }
    }
    assert!(
        failed.is_empty(),
        "ordinary commands failed in the sandbox:\n{}",
        failed.join("\n")
    );
}
