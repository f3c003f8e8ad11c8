//! The `shell_fs_guard` corpus (issue 13): hostile inputs by class, each
//! asserted refused under the DEFAULT configuration (and, where it writes,
//! in read-only mode; interpreters also with an empty allow list); ordinary
//! developer commands asserted admitted, every command of the default
//! allow list among them, and then really run in the throw-away workspace
//! (`bash -c`) to show the specifications match the real programs.
//!
//! The workspace is real: a git repository with two commits, symlinks that
//! leave the root (`escape -> /etc`, `linkdir/out -> /etc`), a dangling
//! one, a symlink to `.git`, a directory git would take for a bare
//! repository, and a nested repository. Figures are printed with
//! `cargo test -p tinyagents-tests --test it guard::corpus -- --nocapture`.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::{json, Value};
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::middleware::*;
use tinyagents::prelude::*;

use super::workspace::Workspace;

use crate::support::tool_texts;

fn have(program: &str) -> bool {
    Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {program}"))
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The test `name`'s workspace, filled with what the cases expect.
fn workspace(name: &str) -> Workspace {
    let root = Workspace::fresh_dir("corpus", name);
    for dir in [
        "src",
        "docs",
        "linkdir",
        "fakebare/objects",
        "fakebare/refs",
        "vendored/.git",
        "sub",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    let files = [
        ("src/main.rs", "fn main() {}\n"),
        ("src/lib.rs", "pub fn lib() {}\n"),
        ("docs/readme.md", "# docs\n"),
        ("notes.txt", "b 2\na 1\nprice: $5\nc 3\na 1\n"),
        ("data.json", "{\"name\": \"x\", \"items\": [1, 2]}\n"),
        ("fakebare/HEAD", "ref: refs/heads/main\n"),
        ("fakebare/config", "[core]\n\tpager = touch /tmp/pwned\n"),
        ("vendored/.git/config", "[core]\n"),
    ];
    for (path, text) in files {
        std::fs::write(root.join(path), text).unwrap();
    }
    let git = |args: &[&str]| {
        let ok = Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@e",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .current_dir(&root)
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(ok, "git {args:?} failed while building the workspace");
    };
    if have("git") {
        git(&["init", "-q"]);
        git(&["add", "src", "docs", "notes.txt", "data.json"]);
        git(&["commit", "-q", "-m", "one"]);
        std::fs::write(root.join("src/main.rs"), "fn main() { println!(\"two\"); }\n").unwrap();
        git(&["commit", "-q", "-am", "two https://example.com/issue/1"]);
    } else {
        std::fs::create_dir_all(root.join(".git")).unwrap();
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::symlink;
        symlink("/etc", root.join("escape")).unwrap();
        symlink("/nonexistent/tinyagents/zzz", root.join("dangling")).unwrap();
        symlink("..", root.join("up")).unwrap();
        symlink(root.join("src"), root.join("inner")).unwrap();
        symlink("/etc", root.join("linkdir/out")).unwrap();
        symlink("../src", root.join("linkdir/ok")).unwrap();
        symlink(".git", root.join("gitlink")).unwrap();
        // a file name that is not UTF-8
        use std::os::unix::ffi::OsStrExt;
        std::fs::create_dir_all(root.join("weird")).unwrap();
        let name = std::ffi::OsStr::from_bytes(b"bad\xff");
        std::fs::write(root.join("weird").join(name), "x").unwrap();
    }
    Workspace::at(root)
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall::new("c", name, args)
}

fn sh(command: &str) -> ToolCall {
    call("shell", json!({ "command": command }))
}

fn sh_in(cwd: &str, command: &str) -> ToolCall {
    call("shell", json!({ "command": command, "cwd": cwd }))
}

fn shells(class: &'static str, commands: &[&str]) -> Vec<(&'static str, ToolCall)> {
    commands.iter().map(|c| (class, sh(c))).collect()
}

/// Hostile inputs by class: each must be refused under the default config.
fn hostile() -> Vec<(&'static str, ToolCall)> {
    let mut all = Vec::new();
    all.extend(shells(
        "git runs programs",
        &[
            "git grep --open-files-in-pager=sh main",
            "git grep -Osh main",
            "git grep -O sh main",
            "git grep -nOsh main",
            "git -c core.pager=sh log",
            "git -ccore.pager=sh log",
            "git -c alias.x=!sh x",
            "git --config-env=core.pager=EDITOR log",
            "git ls-remote --upload-pac=evil origin",
            "git ls-remote --upload-pack=evil origin",
            "git push --exec=evil origin",
            "git push --receive-pack=evil",
            "git rebase -x id HEAD~1",
            "git rebase --exec=id HEAD~1",
            "git difftool -x evil",
            "git difftool --extcmd=evil",
            "git mergetool --tool=evil",
            "git bisect run id",
            "git submodule foreach id",
            "git filter-branch --tree-filter id",
            "git archive --exec=evil --remote=x HEAD",
            "git archive HEAD",
            "git clone -u evil x y",
            "git clone --upload-pack=evil x",
            "git fetch --upload-pack=evil",
            "git pull",
            "git help log",
            "git log --ext-diff",
            "git diff --ext-diff",
            "git show --textconv HEAD",
            "git log -p --textconv",
            "git cat-file --textconv HEAD:src/main.rs",
            "git cat-file --filters HEAD:src/main.rs",
            "git --exec-path=/tmp log",
            "git -C /tmp log",
            "git -C.. log",
            "git --git-dir=fakebare log",
            "git --work-tree=/ status",
            "git -p log",
            "git --paginate log",
            "git log --show-signature",
            "git hook run pre-commit",
            "git instaweb",
            "git send-email x",
            "git daemon",
            "git credential fill",
            "git maintenance run",
            "git log --outp=x",
            "git diff --output=/tmp/x",
            "git diff --output=out.patch",
            "git diff --no-index /etc/passwd notes.txt",
            "git grep --no-index root /etc",
            "git diff -O/etc/passwd",
            "git log -L1,2:/etc/passwd",
            "git log --no-pagr",
            "git log --onelin",
            "git evil-plugin",
        ],
    ));
    all.extend(shells(
        "git writes",
        &[
            "git commit -m x",
            "git add .",
            "git checkout .",
            "git reset --hard",
            "git clean -fdx",
            "git stash",
            "git stash push",
            "git stash pop",
            "git branch evil",
            "git branch -D main",
            "git tag v1",
            "git tag -d v1",
            "git remote add x https://evil.example/x",
            "git remote show origin",
            "git notes add -m x",
            "git apply x.patch",
            "git am x",
            "git merge x",
            "git worktree add /tmp/x",
            "git update-ref HEAD HEAD~1",
            "git gc",
            "git init",
            "git restore .",
            "git switch -c x",
            "git revert HEAD",
            "git cherry-pick HEAD",
            "git replace HEAD HEAD~1",
            "git",
        ],
    ));
    all.extend(shells(
        "git discloses configuration",
        &[
            "git config --list",
            "git config -l",
            "git config --global user.name",
            "git config --global core.pager evil",
            "git config --system -l",
            "git config core.fsmonitor",
            "git config --get-regexp .",
            "git var -l",
            "git var GIT_EDITOR",
        ],
    ));
    all.extend(shells(
        "git reads outside the root",
        &[
            "git show HEAD:../../etc/passwd",
            "git log -- /etc/passwd",
            "git show :/etc",
            "git log -- ':(top)x'",
            "git diff HEAD -- ../outside",
            "git log -- escape/passwd",
            "git blame --contents=/etc/passwd src/main.rs",
            "git grep -f /etc/passwd",
        ],
    ));
    all.extend([
        ("git in a bare-looking directory", sh_in("fakebare", "git log")),
        ("git in a bare-looking directory", sh_in("fakebare", "git status")),
        ("git in a bare-looking directory", sh_in("fakebare/refs", "git show")),
    ]);
    // Configuration that admitted programs execute, written by file tools.
    let cfg = "configuration writes (file tools)";
    for path in [
        ".git/config",
        ".git/hooks/pre-commit",
        ".GIT/config",
        ".Git/hooks/post-checkout",
        "gitlink/config",
        "src/../.git/config",
        "vendored/.git/config",
        ".cargo/config.toml",
        ".github/workflows/ci.yml",
        ".husky/pre-commit",
        ".githooks/pre-push",
        ".vscode/tasks.json",
        ".idea/workspace.xml",
        ".devcontainer/devcontainer.json",
        ".envrc",
        ".gitattributes",
        ".gitmodules",
        "rust-toolchain.toml",
        "rust-toolchain",
        ".pre-commit-config.yaml",
        ".gitlab-ci.yml",
        ".circleci/config.yml",
        ".npmrc",
        "Jenkinsfile",
        ".gitconfig",
        ".config/git/config",
        ".config/nextest.toml",
        ".ssh/config",
        ".bashrc",
        ".profile",
        ".mise.toml",
    ] {
        all.push((
            cfg,
            call(
                "write_file",
                json!({ "path": path, "content": "[core]\n\tfsmonitor = sh" }),
            ),
        ));
    }
    all.extend([
        (cfg, call("edit", json!({ "file_path": ".git/config", "old_string": "a", "new_string": "b" }))),
        (cfg, call("create_directory", json!({ "path": ".git/hooks" }))),
        (cfg, call("move_file", json!({ "from": "notes.txt", "to": ".git/hooks/pre-commit" }))),
        (cfg, call("move_file", json!({ "from": ".git/config", "dest": "old-config" }))),
        (cfg, call("copy_file", json!({ "source": "notes.txt", "destination": ".cargo/config.toml" }))),
        (cfg, call("delete_file", json!({ "path": ".git/index" }))),
        (
            cfg,
            call(
                "multiedit",
                json!({ "path": "src/main.rs", "edits": [{ "path": ".git/config", "old_string": "a", "new_string": "b" }] }),
            ),
        ),
        (
            cfg,
            call(
                "apply_patch",
                json!({ "input": "*** Begin Patch\n*** Update File: .git/config\n@@\n+[core]\n*** End Patch" }),
            ),
        ),
        (
            cfg,
            call(
                "apply_patch",
                json!({ "input": "*** Begin Patch\n*** Add File: .github/workflows/x.yml\n+on: push\n*** End Patch" }),
            ),
        ),
        (
            cfg,
            call(
                "apply_patch",
                json!({ "input": "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: .envrc\n*** End Patch" }),
            ),
        ),
        (
            cfg,
            call(
                "apply_patch",
                json!({ "patch": "--- a/.git/config\n+++ b/.git/config\n@@ -1 +1 @@\n-a\n+b\n" }),
            ),
        ),
        (
            cfg,
            call(
                "apply_patch",
                json!({ "diff": "diff --git a/.cargo/config.toml b/.cargo/config.toml\nnew file mode 100644\n" }),
            ),
        ),
    ]);
    all.extend(shells(
        "configuration writes (shell)",
        &[
            "touch .git/hooks/post-checkout",
            "cp notes.txt .git/config",
            "cp -t .git/hooks notes.txt",
            "cp -t.git/hooks notes.txt",
            "cp --target-directory=.cargo notes.txt",
            "mv notes.txt .git/config",
            "mv .git/config x",
            "mv gitlink x",
            "mkdir .husky",
            "mkdir -p .github/workflows",
            "echo x > .git/config",
            "echo x >> .envrc",
            "echo x > .GIT/config",
            "echo x 2> .vscode/tasks.json",
            "ls &> .gitattributes",
            "sort -o .git/config notes.txt",
            "sort -o.cargo/config.toml notes.txt",
            "sort --output=.git/hooks/pre-commit notes.txt",
            "uniq notes.txt .git/config",
            "touch gitlink/hooks/x",
            "cp -r vendored copy",
            "cp -a vendored copy",
            "mkdir .git/hooks",
        ],
    ));
    all.extend(shells(
        "escapes through globs",
        &[
            "cat */passwd",
            "cat escape/*",
            "head */shadow",
            "ls e*/",
            "cat /etc/*",
            "echo /etc/*",
            "echo ../*",
            "wc -l ../*",
            "ls *",
            "grep root */passwd",
            "cat l*/out/passwd",
            "cat ?scape/passwd",
            "cat [e]scape/passwd",
            "ls /*",
            "cat escape/pass*",
            "cat weird/*",
            "ls .*",
            "cat .*/escape/passwd",
            "ls ********************x",
            "cat **/passwd",
            "cat /e*/passwd",
            "ls ../*/",
            "echo x > *.txt",
        ],
    ));
    all.extend(shells(
        "symlink-following options",
        &[
            "grep -R root .",
            "grep -R root linkdir",
            "grep --dereference-recursive root linkdir",
            "grep -rR root linkdir",
            "find -L linkdir",
            "find -L . -name passwd",
            "find linkdir -follow",
            "du -L linkdir",
            "du --dereference linkdir",
            "rg --follow root linkdir",
            "rg -L root linkdir",
            "tree -l linkdir",
            "ls -L linkdir",
            "ls -RL linkdir",
            "ls --dereference linkdir",
            "cp -L -r linkdir copy",
            "cp -rL linkdir copy",
            "diff -r linkdir src",
            "grep -R root",
            "rg --follow root",
        ],
    ));
    all.extend(shells(
        "paths outside the root",
        &[
            "cat /etc/passwd",
            "cat ../../etc/passwd",
            "cat escape/passwd",
            "cat escape",
            "cat dangling",
            "cat up/etc/passwd",
            "cat inner/../../x",
            "cat -- /etc/passwd",
            "cat - /etc/passwd",
            "tail -n+1 /etc/passwd",
            "head -n5 /etc/passwd",
            "sed -n p /etc/passwd",
            "cut -d: -f1 /etc/passwd",
            "stat /etc/shadow",
            "test -e /etc/shadow",
            "test -f escape/passwd",
            "test notes.txt -nt /etc/passwd",
            "ls /",
            "ls ..",
            "find / -name x",
            "find /etc",
            "find . -newer /etc/passwd",
            "du -s /",
            "wc /proc/self/environ",
            "cat /proc/1/environ",
            "cat /proc/self/environ",
            "grep -a . /proc/self/environ",
            "realpath /etc",
            "realpath --relative-to=/etc notes.txt",
            "file /etc/passwd",
            "diff notes.txt /etc/passwd",
            "diff --from-file=/etc/passwd notes.txt",
            "sort /etc/passwd",
            "uniq /etc/passwd",
            "jq . /etc/passwd",
            "tree /",
            "ls ~",
            "ls ~root",
            "cat %2e%2e/etc",
            "cat ../notes.txt",
        ],
    ));
    all.extend(shells(
        "glued and separate option values",
        &[
            "cp -t.. notes.txt",
            "cp -t /tmp notes.txt",
            "cp -t/tmp notes.txt",
            "mv -t.. notes.txt",
            "mv -t/tmp notes.txt",
            "mv --target-directory=/tmp notes.txt",
            "sort -T.. notes.txt",
            "sort -T/tmp notes.txt",
            "sort -o/tmp/x notes.txt",
            "sort --output=/tmp/x notes.txt",
            "sort -no/tmp/x notes.txt",
            "grep -f/etc/passwd x",
            "grep --file=/etc/shadow x",
            "grep -e x -f /etc/passwd notes.txt",
            "grep --exclude-from=/etc/passwd x src",
            "touch -r/etc/passwd x",
            "date -r/etc/shadow",
            "date -f/etc/passwd",
            "jq --rawfile x /etc/passwd -n .",
            "jq -n . --slurpfile x /etc/passwd",
            "file -m/etc/magic notes.txt",
            "tree -o/tmp/x src",
            "cp notes.txt /tmp/stolen",
            "mv src ../src2",
            "ls --color=/etc/x",
            "ls > /tmp/out",
            "echo x >> ~/.bashrc",
            "cat < /etc/shadow",
            "echo hi > escape/x",
        ],
    ));
    all.extend(shells(
        "clock, cargo and unspecified programs",
        &[
            "date -s 2020-01-01",
            "date --set=2020-01-01",
            "date 010101012020",
            "date -s@0",
            "cargo install ripgrep",
            "cargo login",
            "cargo build",
            "cargo test",
            "cargo run",
            "rm -rf x",
            "dd if=/dev/zero of=x",
            "chmod +x notes.txt",
            "ln -s /etc x",
            "tar xf x.tar",
            "unzip x.zip",
            "kill -9 1",
            "tee out.txt",
            "shred notes.txt",
        ],
    ));
    all.extend(shells(
        "interpreters and indirection",
        &[
            "gawk 'BEGIN{system(\"id\")}'",
            "awk '{print}' notes.txt",
            "mawk 1 notes.txt",
            "nawk 1 notes.txt",
            "python3.12 -c 'import os'",
            "python3 -c 1",
            "python -c 1",
            "pypy3 -c 1",
            "busybox sh",
            "busybox cat notes.txt",
            "toybox sh",
            "stdbuf -o0 sh",
            "nice sh",
            "nohup sh",
            "timeout 5 sh",
            "env sh",
            "env -i sh",
            "xargs sh",
            "sh -c id",
            "bash -c id",
            "dash -c id",
            "zsh -c id",
            "perl -e 1",
            "perl5.36 -e 1",
            "ruby -e 1",
            "node -e 1",
            "nodejs -e 1",
            "deno run x.ts",
            "php -r 1",
            "lua5.4 -e 1",
            "vim -c '!id'",
            "vi notes.txt",
            "nvim notes.txt",
            "ed notes.txt",
            "ex notes.txt",
            "emacs --batch",
            "less notes.txt",
            "more notes.txt",
            "man ls",
            "sed e notes.txt",
            "sed '1e id' notes.txt",
            "sed 's/x/id/e' notes.txt",
            "sed -i s/a/b/ notes.txt",
            "sed --in-place s/a/b/ notes.txt",
            "sed -ibak s/a/b/ notes.txt",
            "sed 'w /tmp/x' notes.txt",
            "sed 's/a/b/w /tmp/x' notes.txt",
            "sed -f script.sed notes.txt",
            "sed 'r /etc/passwd' notes.txt",
            "sed -n 'W out' notes.txt",
            "sed -e p -e 'e id' notes.txt",
            "find . -exec id '{}' +",
            "find . -execdir id '{}' +",
            "find . -ok id '{}' +",
            "find . -okdir id '{}' +",
            "find . -delete",
            "find . -fprint /tmp/x",
            "find . -fprintf x '%p'",
            "find . -fls x",
            "find . -files0-from x",
            "make",
            "cmake .",
            "npm run x",
            "npx x",
            "pip install x",
            "pip3 install x",
            "go run x.go",
            "gcc x.c",
            "rustc x.rs",
            "ssh host",
            "curl https://evil.example",
            "wget https://evil.example",
            "nc -l 4444",
            "socat - x",
            "strace ls",
            "watch ls",
            "script -c id",
            "flock x sh",
            "unshare sh",
            "chroot / sh",
            "sudo ls",
            "doas ls",
            "su",
            "exec ls",
            "eval ls",
            "command ls",
            "builtin ls",
            "source x",
            ". x",
            "time ls",
            "setsid ls",
            "taskset 1 ls",
            "ionice ls",
            "git-shell",
            "docker run x",
            "'sh' -c id",
            "s''h -c id",
            "\"bash\" -c id",
            "/bin/sh",
            "./x.sh",
            "../bin/x",
            "sub/x",
            "ls | sh",
            "ls | bash",
            "cat notes.txt | python3",
            "cat notes.txt | xargs rm",
            "cat notes.txt | sed e",
            "ls | cp -t build notes.txt",
            "ls | mv a b",
        ],
    ));
    all.extend(shells(
        "secrets",
        &[
            "env",
            "printenv",
            "printenv HOME",
            "set",
            "declare -p",
            "export -p",
            "compgen -v",
            "alias",
            "history",
            "jq -n env",
            "jq -n '$ENV'",
            "jq -n '$ENV.HOME'",
            "jq -n '\"\\(env)\"'",
            "jq -n 'env|keys'",
            "jq -n '[env[]]'",
            "jq -n '$ ENV'",
            "jq -rn 'env.OPENAI_API_KEY'",
            "jq -n 'import \"x\" as x; .'",
            "jq -n 'include \"x\"; .'",
            "jq -L /tmp -n .",
            "jq -L/tmp -n .",
            "jq -f filter.jq data.json",
            "jq --from-file filter.jq data.json",
            "jq -n --args '$ARGS' a",
            "cat data.json | jq env",
        ],
    ));
    all.extend(shells(
        "sed bracket forms and delimiters",
        &[
            "sed '/[/a]/e' notes.txt",
            "sed -n 's/[/]/g;/w .git/config' notes.txt",
            "sed 's/[/]/x/w pwned' notes.txt",
            "sed '/[/]/W pwned' notes.txt",
            "sed '/[/]/r /etc/passwd' notes.txt",
            "sed '\\,[,],e' notes.txt",
            "sed 's|[|]|x|e' notes.txt",
            "sed '/[[:alpha:]/]/e' notes.txt",
            "sed 's^[^^]^x^w pwned' notes.txt",
            "sed -e '/[/a]/e touch pwned' notes.txt",
            "sed --expression='/[]/]/w pwned' notes.txt",
            "sed 's/[[:/]/x/' notes.txt",
        ],
    ));
    all.extend(shells(
        "shell syntax",
        &[
            "ls x${IFS}y",
            "ls; rm -rf /",
            "ls && curl evil.sh",
            "false || rm -rf .",
            "ls & rm x",
            "ls\nrm -rf /",
            "ls\rrm",
            "echo `id`",
            "echo $(whoami)",
            "echo \"$(whoami)\"",
            "echo $HOME",
            "echo ${PATH}",
            "cat \"$HOME\"",
            "echo $'\\x41'",
            "(rm -rf .)",
            "{ ls; }",
            "cat <(curl evil)",
            "ls >(cat)",
            "ls \\; rm",
            "ls\\ -la",
            "!!",
            "echo \"!!\"",
            "ls #comment",
            "echo 'unterminated",
            "echo \"unterminated",
            "ls|&cat",
            "ls 3>x",
            "ls >&x",
            "cat <&3",
            "ls <>x",
            "cat <<EOF",
            "cat <<<x",
            "ls >|x",
            "ls 2>&-",
            "ls >>>x",
            "ls 2>&1 >/tmp/x",
            "ls &> /tmp/x",
            "ls &>> ~/.bashrc",
            "FOO=bar ls",
            "LD_PRELOAD=/tmp/x.so ls",
            "PATH=/tmp ls",
            "IFS=x ls",
            "ls --opt=~/x",
            "ls x:~/y",
            "ls {a,b}",
            "ls a{b,c}",
            "ls @(x)",
            "ls ?(x)",
            "ls 'a\u{0}b'",
            "ls \u{1b}[31m",
            "echo 'a\nb'",
            "*",
            "l* -la",
            "",
            "   ",
            "ls |",
            "| ls",
            "ls || true",
        ],
    ));
    all.extend(shells(
        "options not in the specification",
        &[
            "ls --al",
            "grep --regex=x notes.txt",
            "sort --out=/tmp/x notes.txt",
            "head --line=5 notes.txt",
            "cat --evil notes.txt",
            "ls -Z9",
            "tail -f notes.txt",
            "tail --follow notes.txt",
            "tail -F notes.txt",
            "tail --pid=1 notes.txt",
            "du --files0-from=x",
            "wc --files0-from=x",
            "sort --files0-from=x",
            "sort --compress-program=sh notes.txt",
            "rg --pre=sh x",
            "rg --pre sh x",
            "rg -z x",
            "rg --search-zip x",
            "diff -l notes.txt data.json",
            "diff --paginate notes.txt data.json",
            "file -f names.txt",
            "tree -R",
            "tree --fromfile x",
            "cp -s notes.txt link",
            "cp --symbolic-link notes.txt link",
            "cp -l .git/config innocent.txt",
            "cp --link .git/config innocent.txt",
            "file -z notes.txt",
            "rg --files /etc",
            "rg --files escape",
            "rg --type-list /etc",
            "git log --format=%G?",
            "git log --pretty=format:%GS",
            "git show -s --format='%GK'",
            "date -Ievil",
            "head -n five notes.txt",
            "grep -D skip x notes.txt",
            "pwd /etc",
            "uniq a b c",
            "find . -name",
            "find . -evil",
            "find . -name x /etc",
            "sed 'k' notes.txt",
            "sed '{p' notes.txt",
            "sed",
            "ls --color=evil",
            "echo x | tee /tmp/x",
        ],
    ));
    // File tools: unknown keys, globs, patches, traversal and encodings.
    let ft = "file tools";
    all.extend([
        (ft, call("move_file", json!({ "from": "notes.txt", "dest": "/tmp/x" }))),
        (ft, call("move_file", json!({ "from": "notes.txt", "destination_dir": "/tmp" }))),
        (ft, call("move_file", json!({ "src": "/etc/passwd", "dst": "stolen" }))),
        (ft, call("copy_file", json!({ "source": "notes.txt", "destination": "/tmp/x" }))),
        (ft, call("rename_file", json!({ "old_path": "notes.txt", "new_path": "../x" }))),
        (ft, call("glob", json!({ "pattern": "/etc/**" }))),
        (ft, call("glob", json!({ "pattern": "../**" }))),
        (ft, call("glob", json!({ "pattern": "*/passwd" }))),
        (ft, call("glob", json!({ "pattern": "escape/*" }))),
        (ft, call("glob", json!({ "pattern": "linkdir/*/passwd" }))),
        (ft, call("glob", json!({ "pattern": "**/passwd" }))),
        (ft, call("glob", json!({ "pattern": "**/zzz-no-match" }))),
        (ft, call("glob", json!({ "pattern": "linkdir/**" }))),
        (ft, call("glob", json!({ "pattern": "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b" }))),
        (ft, call("glob", json!({ "pattern": "src/*", "path": "/etc" }))),
        (ft, call("search_text", json!({ "pattern": "x", "include": "/etc/*" }))),
        (ft, call("search_text", json!({ "pattern": "x", "path": "src", "include": "../**" }))),
        (ft, call("ls", json!({ "path": ".", "ignore": ["../*"] }))),
        (ft, call("apply_patch", json!({ "input": "*** Begin Patch\n*** Add File: /etc/cron.d/x\n+* * * * * root sh\n*** End Patch" }))),
        (ft, call("apply_patch", json!({ "input": "*** Begin Patch\n*** Update File: ../outside.rs\n@@\n-a\n+b\n*** End Patch" }))),
        (ft, call("apply_patch", json!({ "input": "*** Begin Patch\n*** Delete File: /etc/passwd\n*** End Patch" }))),
        (ft, call("apply_patch", json!({ "input": "*** Begin Patch\n*** Update File: notes.txt\n*** Move to: /tmp/x\n*** End Patch" }))),
        (ft, call("apply_patch", json!({ "input": "*** Begin Patch\n*** Add File: escape/cron.d/x\n+x\n*** End Patch" }))),
        (ft, call("apply_patch", json!({ "patch": "--- a/notes.txt\n+++ /etc/passwd\n@@ -1 +1 @@\n-a\n+b\n" }))),
        (ft, call("apply_patch", json!({ "patch": "diff --git a/x b/../../x\nrename from x\nrename to ../../x\n" }))),
        (ft, call("apply_patch", json!({ "input": "just some text, no targets" }))),
        (ft, call("apply_patch", json!({ "input": "*** Begin Patch\n*** Update File: notes.txt\n@@\n+x\n*** End Patch", "workdir": "/etc" }))),
        (ft, call("read_file", json!({ "path": "notes.txt", "extra": "x" }))),
        (ft, call("read_file", json!({ "uri": "file:///etc/passwd" }))),
        (ft, call("create_file", json!({ "name": "/etc/cron.d/x", "content": "x" }))),
        (ft, call("write_file", json!({ "file_path": "x", "content": "y", "mode": "0777" }))),
        (ft, call("read_file", json!({ "paths": ["notes.txt", "/etc/passwd"] }))),
        (ft, call("read_file", json!({ "file_path": { "nested": "/etc" } }))),
        (ft, call("read_file", json!({}))),
        (ft, call("read_file", json!("notes.txt"))),
        (ft, call("read_file", json!({ "path": 42 }))),
        (ft, call("multiedit", json!({ "edits": [{ "path": "notes.txt" }, { "path": "../b" }] }))),
        (ft, call("multiedit", json!({ "path": "notes.txt", "edits": [{ "old_string": "a", "target_file": "/etc/x" }] }))),
        (ft, call("multiedit", json!({ "path": "notes.txt", "edits": [{ "old_string": "a", "sneaky": "/etc/x" }] }))),
        (ft, call("write_file", json!({ "path": "escape/cron.d/evil", "content": "x" }))),
        (ft, call("write_file", json!({ "path": "dangling", "content": "x" }))),
        (ft, call("edit", json!({ "path": "inner/../../x", "old_string": "a", "new_string": "b" }))),
        (ft, call("create_directory", json!({ "path": "up/x" }))),
        (ft, call("delete_directory", json!({ "path": "/" }))),
        (ft, call("read_file", json!({ "path": "src/main.rs", "cwd": "/etc" }))),
    ]);
    for path in [
        "../etc/passwd",
        "/etc/passwd",
        "////etc/passwd",
        "/proc/self/environ",
        "..\\..\\windows\\system32",
        "C:/Windows/win.ini",
        "%2e%2e%2fetc%2fpasswd",
        "file:///etc/passwd",
        "~/.ssh/id_rsa",
        "$HOME/.ssh/id_rsa",
        "src/\u{0}../../etc/passwd",
        "\u{FF0E}\u{FF0E}/etc/passwd",
        "\u{202E}dwssap/cte/",
        "",
    ] {
        all.push(("path tricks", call("read_file", json!({ "path": path }))));
    }
    let keys = "shell call arguments";
    all.extend([
        (keys, call("shell", json!({ "cmd": ["ls", "-la"] }))),
        (keys, call("shell", json!({}))),
        (
            keys,
            call("shell", json!({ "command": "ls", "env": { "LD_PRELOAD": "x.so" } })),
        ),
        (keys, call("shell", json!({ "command": "ls", "cmd": "rm -rf /" }))),
        (
            keys,
            call("shell", json!({ "command": "cat", "args": ["/etc/passwd"] })),
        ),
        (keys, call("shell", json!({ "command": "ls", "stdin": "rm -rf /" }))),
        (keys, call("shell", json!({ "command": "ls", "shell": "bash" }))),
        (keys, call("shell", json!({ "argv": ["sh", "-c", "id"] }))),
        (keys, call("shell", json!({ "command": "ls", "argv": ["sh"] }))),
        (keys, call("shell", json!({ "command": "ls", "path": "/etc" }))),
        (keys, call("shell", json!({ "command": 42 }))),
        (
            keys,
            call("shell", json!({ "command": "ls", "cwd": "src", "workdir": "docs" })),
        ),
        (keys, call("shell", json!({ "command": "ls", "cwd": "notes.txt" }))),
        (keys, call("shell", json!({ "command": "ls", "cwd": 7 }))),
        (keys, call("bash", json!({ "command": "ls; id" }))),
    ]);
    let cwd = "operands resolve against the cwd";
    all.extend([
        (cwd, sh_in("/etc", "cat passwd")),
        (cwd, sh_in("escape", "cat passwd")),
        (cwd, sh_in("up", "ls")),
        (cwd, sh_in("..", "ls")),
        (cwd, sh_in("src", "cat ../../etc/passwd")),
        (cwd, sh_in("src", "cat ../escape/passwd")),
        (cwd, sh_in("inner", "cat ../escape/passwd")),
        (cwd, sh_in("src", "cp -t../.. main.rs")),
        (cwd, sh_in("src", "echo x > ../.git/config")),
        (cwd, sh_in("sub", "ls ../up/")),
        (cwd, sh_in("src", "cat ../*/passwd")),
        (cwd, sh_in("linkdir", "cat out/passwd")),
    ]);
    all
}

/// Ordinary developer commands: each must be admitted (and runs for real).
fn ordinary() -> Vec<ToolCall> {
    let mut calls: Vec<ToolCall> = [
        "date +%Y-%m-%d",
        "date -u",
        "date -Iseconds",
        "date --iso-8601=seconds",
        "date +'%H:%M'",
        "printf '%s' x",
        "printf '%s\\n' a b",
        "printf 'price: $5\\n'",
        "stat -c %s src/main.rs",
        "stat -c '%n %s' src/main.rs",
        "stat src/main.rs",
        "grep 'price: $5' notes.txt",
        "grep -rn 'fn main' src",
        "grep -n main src/main.rs",
        "grep -c fn src/*.rs",
        "grep -E 'a|b' notes.txt",
        "grep -e price -e a notes.txt",
        "grep -R main src",
        "grep -R main inner",
        "grep -i -w main -- src/main.rs",
        "grep -A1 -B2 price notes.txt",
        "grep -2 price notes.txt",
        "tr -d '\\r' < notes.txt",
        "tr a-z A-Z < notes.txt",
        "git log --grep='https://example.com/issue/1'",
        "git log --oneline -5",
        "git log -5 --format='%h %s'",
        "git log -n 1 --stat",
        "git log -p -- src/main.rs",
        "git status",
        "git status --short",
        "git status -sb",
        "git diff HEAD~1 -- src",
        "git diff",
        "git diff --stat HEAD~1",
        "git diff HEAD~1..HEAD",
        "git show --stat HEAD",
        "git show HEAD:src/main.rs",
        "git blame src/main.rs",
        "git blame -L 1,1 src/main.rs",
        "git shortlog -n -s --all",
        "git ls-files",
        "git rev-parse --show-toplevel",
        "git rev-parse --abbrev-ref HEAD",
        "git branch --show-current",
        "git branch -a",
        "git branch --list 'ma*'",
        "git tag -l",
        "git grep -n main",
        "git grep -e main -- src",
        "git describe --always",
        "git rev-list --count HEAD",
        "git shortlog -sn HEAD",
        "git stash list",
        "git remote -v",
        "git cat-file -p HEAD",
        "git --no-pager log -1",
        "ls",
        "ls -la",
        "ls -la src",
        "ls -l src/*.rs",
        "ls -R src",
        "ls --color=never -1",
        "rg pattern src",
        "rg -n main src",
        "rg -i --hidden -g '*.rs' main",
        "find . -name '*.rs'",
        "find src -type f",
        "find . -maxdepth 1 -type d",
        "find src -name '*.rs' -newer notes.txt",
        "find src '(' -name '*.rs' -o -name '*.md' ')' -print",
        "wc -l src/main.rs",
        "wc -l src/*.rs",
        "wc -l",
        "head -n 5 notes.txt",
        "head -5 notes.txt",
        "head -n5 notes.txt",
        "tail -n 3 notes.txt",
        "tail -n +2 notes.txt",
        "sed -n 1,20p notes.txt",
        "sed -n '1,20p' notes.txt",
        "sed 's/a/b/g' notes.txt",
        "sed -e 's/x/y/' -e '/^$/d' notes.txt",
        "sed 's/[^/]*$//' notes.txt",
        "sed -n '/[/]/p' notes.txt",
        "sed -E 's/([a-z]+) ([0-9])/\\2 \\1/' notes.txt",
        "cat src/main.rs",
        "cat -n notes.txt",
        "echo hello",
        "echo 'a; b'",
        "echo \"a && b\"",
        "echo \"a \\$HOME b\"",
        "pwd",
        "diff src/main.rs src/lib.rs",
        "diff -u src/main.rs src/lib.rs",
        "diff -r src docs",
        "sort notes.txt",
        "sort -u notes.txt",
        "sort -n -k2 notes.txt",
        "sort -o sorted.txt notes.txt",
        "uniq notes.txt",
        "uniq -c notes.txt",
        "uniq notes.txt uniq.txt",
        "sort notes.txt | uniq -c | sort -rn",
        "file src/main.rs",
        "file --mime-type src/main.rs",
        "du -sh src",
        "du -h -d 1 src",
        "tree src",
        "tree -L 2 src",
        "mkdir -p build/out",
        "touch build/stamp",
        "cp src/main.rs build/main.rs",
        "cp -r src build/src2",
        "cp -t build notes.txt",
        "mv build/stamp build/stamp2",
        "basename src/main.rs .rs",
        "dirname src/main.rs",
        "realpath src/main.rs",
        "realpath --relative-to=src docs",
        "cut -d' ' -f1 notes.txt",
        "cut -c1-3 notes.txt",
        "true",
        "false",
        "test -f src/main.rs",
        "test -d src",
        "jq . data.json",
        "jq -r '.name' data.json",
        "jq '.items | length' data.json",
        "jq -n '1+1'",
        "jq --arg x y -n '$x'",
        "cat data.json | jq .name",
        "ls 2>/dev/null",
        "ls src 2>&1 | head -n 3",
        "echo hi >&2",
        "grep main src/main.rs | wc -l",
        "find . -name '*.rs' | sort",
        "git log --oneline | head -n 3",
        "cat notes.txt | tr -d '\\r' | sort",
        "ls > listing.txt",
        "printf 'x\\n' >> listing.txt",
        "wc -l < notes.txt",
        "grep -rn 'fn main' .",
        "ls -la | grep src",
        "find . -type f -name '*.md'",
        "wc -c notes.txt data.json",
        "cat notes.txt | sort | uniq",
        "git diff --name-only HEAD~1",
        "git log origin..HEAD 2>/dev/null | head -n 1",
    ]
    .iter()
    .map(|c| sh(c))
    .collect();
    calls.extend([
        sh_in("src", "ls"),
        sh_in("src", "cat main.rs"),
        sh_in("src", "git status"),
        sh_in("src", "cat ../notes.txt"),
        sh_in("inner", "ls"),
        call("read_file", json!({ "path": "src/main.rs" })),
        call("read_file", json!({ "file_path": "notes.txt", "offset": 1, "limit": 2 })),
        call("write_file", json!({ "path": "new_dir/new_file.rs", "content": "x" })),
        call("edit", json!({ "path": "notes.txt", "old_string": "a", "new_string": "b" })),
        call(
            "multiedit",
            json!({ "path": "notes.txt", "edits": [{ "old_string": "a", "new_string": "b" }] }),
        ),
        call("move_file", json!({ "from": "notes.txt", "to": "docs/notes.txt" })),
        call("move_file", json!({ "from": "notes.txt", "dest": "docs/notes.txt" })),
        call("copy_file", json!({ "source": "notes.txt", "destination": "docs/copy.txt" })),
        call("glob", json!({ "pattern": "src/**/*.rs" })),
        call("search_text", json!({ "pattern": "fn main", "path": "src", "include": "*.rs" })),
        call(
            "apply_patch",
            json!({ "input": "*** Begin Patch\n*** Update File: src/main.rs\n@@\n-fn main() {}\n+fn main() { }\n*** End Patch" }),
        ),
        call(
            "apply_patch",
            json!({ "patch": "--- a/src/main.rs\n+++ b/src/main.rs\n@@ -1 +1 @@\n-a\n+b\n" }),
        ),
        call("ls", json!({ "path": "." })),
        call("get_symbol", json!({ "path": "src/main.rs", "symbol": "main" })),
        call("create_directory", json!({ "path": "newdir" })),
        call("create_directory", json!({ "directory": "newdir2/inner" })),
        call("ls", json!({ "dir": "src" })),
        call("read_file", json!({ "path": "main.rs", "cwd": "src" })),
        call("delete_file", json!({ "path": "build/old.txt" })),
        // not a file or shell tool: not this guard's business
        call("search", json!({ "path": "/etc" })),
    ]);
    calls
}

fn shell_command(call: &ToolCall) -> Option<&str> {
    (call.name == "shell")
        .then(|| call.arguments["command"].as_str())
        .flatten()
}

#[test]
fn the_corpus_is_refused_and_ordinary_work_admitted_under_the_default_config() {
    let ws = workspace("default");
    let d = Some(ws.descriptor());
    let guard = ShellFsGuardMiddleware::new();
    let hostile = hostile();
    let mut per_class: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    let mut admitted = Vec::new();
    for (class, call) in &hostile {
        let entry = per_class.entry(class).or_default();
        entry.0 += 1;
        match guard.check_call(call, d.as_ref()) {
            Ok(()) => admitted.push(format!("[{class}] {} {}", call.name, call.arguments)),
            Err(reason) => {
                entry.1 += 1;
                assert!(!reason.trim().is_empty(), "an empty reason for {}", call.arguments);
            }
        }
    }
    let ordinary = ordinary();
    let mut refused = Vec::new();
    for call in &ordinary {
        if let Err(reason) = guard.check_call(call, d.as_ref()) {
            refused.push(format!("{} {}: {reason}", call.name, call.arguments));
        }
    }
    let refused_hostile: usize = per_class.values().map(|(_, r)| r).sum();
    println!("shell_fs_guard corpus (default config):");
    for (class, (tried, refused)) in &per_class {
        println!("  {class:<40} {refused:>4} / {tried:<4} refused");
    }
    println!(
        "  hostile tried/refused: {}/{}; ordinary tried/admitted: {}/{}",
        hostile.len(),
        refused_hostile,
        ordinary.len(),
        ordinary.len() - refused.len()
    );
    assert!(admitted.is_empty(), "admitted hostile inputs:\n{}", admitted.join("\n"));
    assert!(refused.is_empty(), "refused ordinary inputs:\n{}", refused.join("\n"));
    // docs/security.md states these figures: keep them true.
    let page = include_str!("../../../../docs/security.md");
    let total = format!("| **total** | **{}** | **{}** |", hostile.len(), refused_hostile);
    assert!(page.contains(&total), "docs/security.md lacks `{total}`");
    let ord = format!("{} tried, {} admitted", ordinary.len(), ordinary.len() - refused.len());
    assert!(page.contains(&ord), "docs/security.md lacks `{ord}`");
    for (class, (tried, refused)) in &per_class {
        let row = format!("| {tried} | {refused} |");
        let line = page.lines().find(|l| l.starts_with(&format!("| {class}")));
        assert!(
            line.is_some_and(|l| l.ends_with(&row)),
            "docs/security.md: the row of `{class}` should end with `{row}`"
        );
    }
    assert!(hostile.len() >= 300, "the hostile corpus has {} inputs", hostile.len());
    assert!(
        ordinary.len() >= 60,
        "the ordinary corpus has {} inputs",
        ordinary.len()
    );
    // Every command of the default allow list is exercised by an admitted ordinary command.
    for command in DEFAULT_ALLOW_COMMANDS {
        assert!(
            ordinary.iter().filter_map(shell_command).any(|c| c
                .split('|')
                .any(|stage| stage.split_whitespace().next() == Some(command))),
            "no ordinary command exercises `{command}`"
        );
    }
}

#[test]
fn interpreters_and_secrets_stay_refused_with_an_empty_allow_list() {
    let ws = workspace("empty-allow");
    let d = Some(ws.descriptor());
    let guard = ShellFsGuardMiddleware::new().allow_commands(Vec::<String>::new());
    let mut tried = 0;
    for (class, call) in hostile() {
        if !matches!(
            class,
            "interpreters and indirection" | "secrets" | "git runs programs" | "git discloses configuration"
        ) {
            continue;
        }
        tried += 1;
        assert!(
            guard.check_call(&call, d.as_ref()).is_err(),
            "[{class}] {}",
            call.arguments
        );
    }
    // cargo is specified but opt-in: an empty list does not admit it
    let err = guard.check_call(&sh("cargo build"), d.as_ref()).unwrap_err();
    assert!(err.contains("explicitly"), "{err}");
    // an empty list admits every other specified command
    assert!(guard.check_call(&sh("echo x | tee out.txt"), d.as_ref()).is_ok());
    println!("empty allow list: {tried}/{tried} interpreter, secret and git inputs refused");
}

#[test]
fn read_only_mode_refuses_every_write_and_admits_the_reads() {
    let ws = workspace("read-only");
    // Admitted in write mode, refused in read-only mode because they write.
    let writes = [
        "sort -o out notes.txt",
        "sort -oout notes.txt",
        "sort --output=out notes.txt",
        "sort -T tmpdir notes.txt",
        "uniq notes.txt out",
        "file -C -m magic",
        "file --compile -m magic",
        "tree -o out src",
        "echo x > out",
        "echo x >> out",
        "ls > out 2>&1",
        "ls 2> err",
        "touch x",
        "mkdir x",
        "cp notes.txt b",
        "mv notes.txt b",
        "tee out",
        "ls | tee out",
        "cp -t build notes.txt",
        "mkdir -p build/out",
        "sort -o - notes.txt",
    ];
    // Refused in either mode (they write in ways the guard never admits).
    let always = [
        "git diff --output=x",
        "git commit -m x",
        "git stash",
        "sed -i s/a/b/ notes.txt",
        // `/bin/sh` may read `&>` as a background `&` and a second command
        "ls &> out",
    ];
    let tools = [
        call("write_file", json!({ "path": "src/a.rs", "content": "" })),
        call(
            "edit",
            json!({ "path": "notes.txt", "old_string": "a", "new_string": "b" }),
        ),
        call("delete_file", json!({ "path": "notes.txt" })),
        call("create_directory", json!({ "path": "x" })),
        call("move_file", json!({ "from": "notes.txt", "to": "x" })),
        call(
            "apply_patch",
            json!({ "input": "*** Begin Patch\n*** Add File: x\n+x\n*** End Patch" }),
        ),
    ];
    let reads = [
        "cat notes.txt",
        "sort notes.txt",
        "uniq notes.txt",
        "git diff",
        "git log --oneline",
        "grep -n price notes.txt",
        "ls -la",
        "file src/main.rs",
        "ls 2>/dev/null",
        "sort notes.txt | uniq -c",
    ];
    let any = || ShellFsGuardMiddleware::new().allow_commands(Vec::<String>::new());
    let writable = ws.descriptor();
    for w in writes {
        let v = any().check_call(&sh(w), Some(&writable));
        assert!(v.is_ok(), "{w} in write mode: {v:?}");
    }
    for t in &tools {
        let v = any().check_call(t, Some(&writable));
        assert!(v.is_ok(), "{} in write mode: {v:?}", t.arguments);
    }
    let mut tried = 0;
    for (guard, d) in [
        (any().read_only(true), ws.descriptor()),
        (any(), ws.descriptor().read_only(true)),
    ] {
        for w in writes {
            tried += 1;
            let err = guard.check_call(&sh(w), Some(&d)).unwrap_err();
            assert!(err.contains("read-only"), "{w}: {err}");
        }
        for t in &tools {
            tried += 1;
            let err = guard.check_call(t, Some(&d)).unwrap_err();
            assert!(err.contains("read-only"), "{}: {err}", t.arguments);
        }
        for a in always {
            tried += 1;
            assert!(guard.check_call(&sh(a), Some(&d)).is_err(), "{a}");
            assert!(any().check_call(&sh(a), Some(&writable)).is_err(), "{a}");
        }
        for r in reads {
            let v = guard.check_call(&sh(r), Some(&d));
            assert!(v.is_ok(), "{r}: {v:?}");
        }
    }
    println!(
        "read-only mode: {tried}/{tried} writes refused; {} reads admitted twice",
        reads.len()
    );
    let page = include_str!("../../../../docs/security.md");
    let line = format!("- **read-only mode**: {tried} writes tried");
    assert!(page.contains(&line), "docs/security.md lacks `{line}`");
}

#[test]
fn refusals_name_the_program_the_argument_and_the_rule() {
    let ws = workspace("reasons");
    let d = Some(ws.descriptor());
    let guard = ShellFsGuardMiddleware::new();
    let cases: &[(&str, &[&str])] = &[
        ("git grep -Osh main", &["`git grep`", "`-O`", "pager"]),
        (
            "git ls-remote --upload-pac=x origin",
            &["git ls-remote", "other machines"],
        ),
        (
            "git log --upload-pac=x",
            &["`git log`", "`--upload-pac`", "not abbreviated"],
        ),
        ("git -c core.pager=sh log", &["`git`", "`-c", "configuration"]),
        (
            "git log --onelin",
            &["`git log`", "`--onelin`", "fix: spell it `--oneline`"],
        ),
        ("ls --almost", &["`ls`", "fix: spell it `--almost-all`"]),
        ("git config --list", &["git config", "configuration"]),
        (
            "sort -o/etc/x notes.txt",
            &["`sort`", "`/etc/x`", "outside the workspace root"],
        ),
        ("cp -t.. notes.txt", &["`cp`", "`..`", "outside the workspace root"]),
        (
            "grep -R root linkdir",
            &["`grep`", "`-R`", "follows symlinks", "linkdir/out", "drop `-R`"],
        ),
        ("cat */passwd", &["`cat`", "`*/passwd`", "escape/passwd"]),
        ("date -s 2020-01-01", &["`date`", "`-s`", "clock"]),
        ("python3.12 -c 1", &["`python3.12`", "interpreter"]),
        ("jq -n env", &["`jq`", "`env`", "environment"]),
        ("sed '1e id' notes.txt", &["`sed`", "`1e id`", "runs a command"]),
        (
            "echo x > .git/config",
            &["`> .git/config`", "`.git`", "protected_paths"],
        ),
        ("touch .cargo/config.toml", &["`touch`", "`.cargo`", "protected_paths"]),
        ("cargo build", &["`cargo`", "allow_commands", "explicitly"]),
        ("make", &["`make`", "indirection"]),
        ("tail -f notes.txt", &["`tail`", "`-f`", "forever"]),
        ("ls; id", &["`;`", "one command per call"]),
        ("echo \"$HOME\"", &["double quotes", "single quotes"]),
    ];
    for (cmd, needles) in cases {
        let err = guard.check_call(&sh(cmd), d.as_ref()).unwrap_err();
        for n in *needles {
            assert!(err.contains(n), "{cmd}: `{n}` missing from: {err}");
        }
    }
    let err = guard
        .check_call(
            &call("move_file", json!({ "from": "notes.txt", "destination_dir": "x" })),
            d.as_ref(),
        )
        .unwrap_err();
    assert!(err.contains("`destination_dir`") && err.contains("path_keys"), "{err}");
    let err = guard
        .check_call(
            &call("write_file", json!({ "path": ".git/hooks/pre-commit", "content": "x" })),
            d.as_ref(),
        )
        .unwrap_err();
    assert!(err.contains("`.git`") && err.contains("protected_paths"), "{err}");
}

#[test]
fn a_root_that_confines_nothing_is_refused() {
    let guard = ShellFsGuardMiddleware::new().with_root("/");
    for c in [
        sh("cat /proc/self/environ"),
        call("read_file", json!({ "path": "/etc/passwd" })),
    ] {
        let err = guard.check_call(&c, None).unwrap_err();
        assert!(err.contains("confines nothing"), "{err}");
    }
    let d = WorkspaceDescriptor::new("/");
    assert!(ShellFsGuardMiddleware::new().check_call(&sh("ls"), Some(&d)).is_err());
}

#[test]
fn protected_paths_are_configurable_per_workspace() {
    let ws = workspace("protected");
    let d = Some(ws.descriptor());
    let write = call(
        "write_file",
        json!({ "path": ".github/workflows/ci.yml", "content": "x" }),
    );
    assert!(ShellFsGuardMiddleware::new().check_call(&write, d.as_ref()).is_err());
    // a workspace that lets the agent edit its CI, and protects its Makefile instead
    let guard = ShellFsGuardMiddleware::new().protected_paths([".git", "Makefile", "scripts/hooks"]);
    assert!(guard.check_call(&write, d.as_ref()).is_ok());
    for path in ["Makefile", "sub/makefile", "scripts/hooks/x", ".git/config"] {
        let c = call("write_file", json!({ "path": path, "content": "x" }));
        assert!(guard.check_call(&c, d.as_ref()).is_err(), "{path}");
    }
    assert!(guard
        .check_call(
            &call("write_file", json!({ "path": "scripts/build.sh", "content": "x" })),
            d.as_ref()
        )
        .is_ok());
    // from TOML, with validation
    let c: ShellFsGuardConfig = tinyagents::config::from_toml_str("protected_paths = [\".git\"]").unwrap();
    assert_eq!(c.protected_paths, [".git"]);
    for bad in [
        "protected_paths = [\"/etc\"]",
        "protected_paths = [\"a/../b\"]",
        "protected_paths = [\"\"]",
    ] {
        let err = tinyagents::config::from_toml_str::<ShellFsGuardConfig>(bad).unwrap_err();
        assert_eq!(err.errors()[0].path, "protected_paths", "{bad}");
    }
    for bad in [
        "allow_commands = [\"python3\"]",
        "allow_commands = [\"make\"]",
        "allow_commands = [\"gawk\"]",
    ] {
        let err = tinyagents::config::from_toml_str::<ShellFsGuardConfig>(bad).unwrap_err();
        assert_eq!(err.errors()[0].path, "allow_commands", "{bad}");
    }
    // cargo is specified: listing it admits the safe subcommands only
    let guard = ShellFsGuardMiddleware::new().allow_commands(["cargo", "ls"]);
    for ok in [
        "cargo build",
        "cargo test -p foo -- --nocapture",
        "cargo check --all-targets",
        "cargo fmt --check",
    ] {
        assert!(guard.check_call(&sh(ok), d.as_ref()).is_ok(), "{ok}");
    }
    for bad in [
        "cargo install x",
        "cargo login",
        "cargo publish",
        "cargo +nightly build",
        "cargo build --config build.rustc-wrapper=sh",
        "cargo build -Zunstable-options",
        "cargo build --target-dir /tmp/x",
        "cargo evil-plugin",
        "cargo run",
    ] {
        assert!(guard.check_call(&sh(bad), d.as_ref()).is_err(), "{bad}");
    }
    let ro = ShellFsGuardMiddleware::new().allow_commands(["cargo"]).read_only(true);
    assert!(ro.check_call(&sh("cargo build"), d.as_ref()).is_err());
    assert!(ro.check_call(&sh("cargo fmt --check"), d.as_ref()).is_ok());
    assert!(ro.check_call(&sh("cargo tree"), d.as_ref()).is_ok());
}

/// The admitted ordinary commands run for real in a fresh workspace: the
/// specifications match what the installed programs accept.
#[test]
fn admitted_ordinary_commands_run_for_real() {
    if !have("bash") {
        println!("skipped: no bash on this machine");
        return;
    }
    let ws = workspace("run");
    let guard = ShellFsGuardMiddleware::new();
    let d = Some(ws.descriptor());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sandbox = tinyagents::sandbox::Sandbox::new(
        tinyagents::sandbox::SandboxPolicy::new(ws.root()).with_mode(tinyagents::sandbox::SandboxMode::Off),
    )
    .unwrap();
    let (mut ran, mut skipped) = (0, Vec::new());
    for c in ordinary() {
        if c.name != "shell" {
            continue;
        }
        let cmd = c.arguments["command"].as_str().unwrap();
        assert!(guard.check_call(&c, d.as_ref()).is_ok(), "{cmd}");
        // stage heads (a `|` inside quotes makes a head with a quote: not a program)
        let programs: Vec<&str> = cmd
            .split('|')
            .filter_map(|s| s.split_whitespace().next())
            .filter(|p| !p.contains(['\'', '"']))
            .collect();
        if let Some(missing) = programs.iter().find(|p| !have(p)) {
            skipped.push(format!("{cmd} (no `{missing}`)"));
            continue;
        }
        let cwd = c.arguments["cwd"]
            .as_str()
            .map_or(ws.root().to_path_buf(), |p| ws.root().join(p));
        // what runs is the guard's plan (safe modes included), executed
        // without a shell by the runner (unconfined here: the corpus's
        // workspace is a throw-away directory)
        let _ = &cwd;
        let plan = guard.plan_call(&c, d.as_ref()).unwrap().unwrap();
        let out = runtime.block_on(sandbox.run_plan(&plan)).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.exit_code().unwrap_or(-1);
        let expect_one = cmd == "false" || cmd.starts_with("diff ");
        assert!(
            code == 0 || (expect_one && code == 1),
            "`{cmd}` exited {code}: {stderr}"
        );
        for bad in [
            "invalid option",
            "unrecognized option",
            "unknown option",
            "Usage:",
            "usage:",
        ] {
            assert!(!stderr.contains(bad), "`{cmd}`: {stderr}");
        }
        ran += 1;
    }
    println!(
        "ran {ran} admitted ordinary commands for real; skipped {}:",
        skipped.len()
    );
    for s in &skipped {
        println!("  {s}");
    }
    assert!(ran >= 100, "only {ran} commands ran");
}

/// The configuration example of `docs/security.md` parses and means what the page says.
#[test]
fn the_documented_configuration_parses() {
    let page = include_str!("../../../../docs/security.md");
    let block = page
        .split("### How to configure")
        .nth(1)
        .and_then(|rest| rest.split("```toml\n").nth(1))
        .and_then(|rest| rest.split("```").next())
        .expect("a toml block under `How to configure`");
    let body: String = block
        .lines()
        .filter(|l| !l.starts_with("[[middleware]]") && !l.starts_with("type ="))
        .map(|l| format!("{l}\n"))
        .collect();
    let c: ShellFsGuardConfig = tinyagents::config::from_toml_str(&body).unwrap();
    assert!(c.allow_pipes && !c.read_only);
    assert!(c.protected_paths.iter().any(|p| p == "Makefile"));
    assert!(!c.protected_paths.iter().any(|p| p == ".github"));
    let ws = workspace("documented");
    let guard = ShellFsGuardMiddleware::from(c);
    let d = Some(ws.descriptor());
    let ci = call(
        "write_file",
        json!({ "path": ".github/workflows/ci.yml", "content": "x" }),
    );
    assert!(guard.check_call(&ci, d.as_ref()).is_ok());
    let mk = call("write_file", json!({ "path": "Makefile", "content": "x" }));
    assert!(guard.check_call(&mk, d.as_ref()).is_err());
    let custom = call("my_tool", json!({ "path": "notes.txt", "comment": "x" }));
    assert!(guard.check_call(&custom, d.as_ref()).is_ok());
    let unknown = call("my_tool", json!({ "path": "notes.txt", "other": "x" }));
    assert!(guard.check_call(&unknown, d.as_ref()).is_err());
}

/// A tool outside the guard's name lists that declares the file it writes.
struct Exporter;

#[async_trait::async_trait]
impl Tool for Exporter {
    fn schema(&self) -> &ToolSchema {
        static SCHEMA: std::sync::OnceLock<ToolSchema> = std::sync::OnceLock::new();
        SCHEMA.get_or_init(|| ToolSchema::new("exporter", "Exports a report."))
    }

    fn file_access(&self, arguments: &Value) -> Vec<tinyagents::harness::tool::FileAccess> {
        vec![tinyagents::harness::tool::FileAccess {
            path: arguments["out"].as_str().unwrap_or_default().to_owned(),
            mode: tinyagents::harness::tool::FileAccessMode::Write,
        }]
    }

    async fn call(
        &self,
        _cx: tinyagents::harness::tool::ToolContext,
        _arguments: Value,
    ) -> Result<tinyagents::harness::tool::ToolOutput> {
        Ok("exported".into())
    }
}

#[tokio::test]
async fn declared_writes_to_protected_paths_are_refused_in_the_batch_review() {
    let ws = workspace("declared");
    let model = ScriptedModel::new([
        ScriptedTurn::tool_calls(vec![
            ToolCall::new("1", "exporter", json!({ "out": ".git/hooks/pre-commit" })),
            ToolCall::new("2", "exporter", json!({ "out": "reports/ok.txt" })),
        ]),
        ScriptedTurn::text("done"),
    ]);
    let agent: Agent<()> = Agent::new(model)
        .with_tools(ToolRegistry::new().with(Exporter).unwrap())
        .with_stack(MiddlewareStack::new().with(ShellFsGuardMiddleware::new()).unwrap());
    let mut ctx = RunContext::new(RunConfig::new("r"), ()).with_workspace(ws.descriptor());
    let run = agent.run(&mut ctx, &(), "go").await.unwrap();
    let results = tool_texts(&run.messages);
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(results[0].contains("protected_paths"), "{}", results[0]);
    assert_eq!(results[1], "exported");
}
