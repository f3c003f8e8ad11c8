//! [`ShellPlan`]: a command line as [`judge`](crate::judge) read it —
//! pipeline stages of argv, their redirections, the working directory and
//! the environment — which the sandboxed runner executes itself
//! ([`Sandbox::run_plan`](crate::Sandbox::run_plan)): every stage spawned
//! directly with OS pipes between them, every redirection file opened by the
//! runner. No `/bin/sh` reads the line a second time, so what the guard
//! checked is what runs: globs were expanded once, at check time, and reach
//! the program as literal words; a glob match that begins with `-` is passed
//! as `./-name`, a path no program can take for an option.
//!
//! A plan cannot be built outside this crate: only [`judge`](crate::judge)
//! makes one, from a command line it admitted (in tinyagents the
//! `shell_fs_guard` built-in records it for the call, and the shell tool
//! reads it back); the model only ever supplies the command line.
//!
//! Programs that embed an interpreter or run configured programs get their
//! safe mode whatever the model wrote ([`SAFE_MODES`]): GNU sed runs with
//! `--sandbox` (it refuses `e`, `w`, `r` itself), git with overrides that
//! switch off the programs its configuration or the work tree can name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where one descriptor of a stage points.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RedirectTarget {
    /// `< FILE`: this file, opened for reading (resolved at check time).
    Read(PathBuf),
    /// `> FILE`: this file, created or truncated.
    Write(PathBuf),
    /// `>> FILE`: this file, created or appended to.
    Append(PathBuf),
    /// `/dev/null`, either way.
    Null,
    /// `N>&M`: where descriptor `M` points at this point of the line.
    Dup(u32),
}

/// One redirection of a stage: descriptor `fd` (0, 1 or 2) to `target`,
/// applied in the order written (`> f 2>&1` and `2>&1 > f` differ as in sh).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRedirect {
    pub(crate) fd: u32,
    pub(crate) target: RedirectTarget,
}

impl PlanRedirect {
    /// The descriptor redirected (0, 1 or 2).
    pub fn fd(&self) -> u32 {
        self.fd
    }

    /// Where it points.
    pub fn target(&self) -> &RedirectTarget {
        &self.target
    }
}

/// One pipeline stage: the program and its arguments exactly as they are
/// executed (the program's safe-mode switches included), and its
/// redirections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanStage {
    pub(crate) argv: Vec<String>,
    pub(crate) redirects: Vec<PlanRedirect>,
}

impl PlanStage {
    /// A stage running `argv` (the program's safe mode injected) with these
    /// redirections. Refused when the safe mode cannot be guaranteed.
    /// `repository`: for git, the git directory and work tree the guard
    /// judged, which git is pinned to.
    pub(crate) fn new(
        argv: Vec<String>,
        redirects: Vec<PlanRedirect>,
        repository: Option<(&Path, &Path)>,
    ) -> Result<Self, String> {
        Ok(Self {
            argv: safe_argv(argv, repository)?,
            redirects,
        })
    }

    /// The argv executed (the program is looked up in `PATH`).
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// The redirections, in the order they apply.
    pub fn redirects(&self) -> &[PlanRedirect] {
        &self.redirects
    }
}

/// A checked command line, ready to execute: see [`Sandbox::run_plan`](crate::Sandbox::run_plan).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellPlan {
    pub(crate) line: String,
    pub(crate) stages: Vec<PlanStage>,
    pub(crate) cwd: PathBuf,
    pub(crate) env: BTreeMap<String, String>,
}

impl ShellPlan {
    pub(crate) fn new(line: &str, stages: Vec<PlanStage>, cwd: &Path) -> Self {
        Self {
            line: line.to_owned(),
            stages,
            cwd: cwd.to_path_buf(),
            env: BTreeMap::new(),
        }
    }

    /// The command line the plan was read from (for messages).
    pub fn line(&self) -> &str {
        &self.line
    }

    /// The stages, first to last; stage `n`'s stdout feeds stage `n + 1`'s stdin.
    pub fn stages(&self) -> &[PlanStage] {
        &self.stages
    }

    /// The canonical working directory (inside the workspace root).
    pub fn cwd(&self) -> &Path {
        &self.cwd
    }

    /// Environment variables the plan sets on every stage (after the
    /// sandbox policy's; `judge` admits no environment overrides, so this
    /// is empty for a plan it made).
    pub fn env(&self) -> &BTreeMap<String, String> {
        &self.env
    }
}

/// The switches the runner puts in front of a program's own arguments so
/// that it cannot run code named by its input, its configuration or the
/// work tree: `(program, arguments inserted after the program name)`.
/// `git` also gets `--no-ext-diff`/`--no-textconv` after the subcommands
/// that can diff ([`GIT_NO_DRIVERS`]). The other specified programs have no
/// such switch: their code-running features are refused by the checker's
/// specifications (`find -exec`, `jq`'s `import`), and the files they would
/// load on their own (`~/.jq`) are in the sandbox's private, empty `HOME`.
pub const SAFE_MODES: &[(&str, &[&str])] = &[
    // GNU sed refuses the `e`, `w`, `W`, `r`, `R` commands and the `e`/`w` flags of `s` itself
    ("sed", &["--sandbox"]),
    // ripgrep reads no config file (RIPGREP_CONFIG_PATH could name one with `--pre`)
    ("rg", &["--no-config"]),
    (
        "git",
        &[
            "--no-pager",
            "-c",
            "core.pager=cat",
            "-c",
            "core.fsmonitor=false",
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.editor=false",
            "-c",
            "sequence.editor=false",
            "-c",
            "credential.helper=",
            "-c",
            "commit.gpgSign=false",
            "-c",
            "tag.gpgSign=false",
            "-c",
            "protocol.ext.allow=never",
            "-c",
            "protocol.file.allow=never",
            "-c",
            "core.sshCommand=false",
            "-c",
            "protocol.allow=never",
            // git never takes a directory for a bare repository by discovery
            // (the executor names the repository with `--git-dir` anyway)
            "-c",
            "safe.bareRepository=explicit",
            // programs other keys name: alternate refs (`git log
            // --alternate-refs`, run through the shell), the password prompt,
            // signature programs, the proxy of `git://`
            "-c",
            "core.alternateRefsCommand=true",
            "-c",
            "core.askPass=",
            "-c",
            "core.gitProxy=",
            "-c",
            "gpg.program=false",
            "-c",
            "gpg.openpgp.program=false",
            "-c",
            "gpg.x509.program=false",
            "-c",
            "gpg.ssh.program=false",
            "-c",
            "gpg.ssh.defaultKeyCommand=false",
            "-c",
            "log.showSignature=false",
            // no background `git gc`/`git maintenance` outliving the call
            "-c",
            "gc.auto=0",
            "-c",
            "maintenance.auto=false",
        ],
    ),
];

/// The git subcommands that write (the `workspace` profile's): git runs them
/// with `--literal-pathspecs`, so an operand is the very path the guard
/// judged, never a glob or pathspec magic reaching others.
pub const GIT_LITERAL_PATHSPECS: &[&str] = &["add", "commit", "checkout", "switch", "restore", "rm", "mv", "stash"];

/// Git subcommands that can run an external diff or text-conversion driver,
/// and the switches that turn them off, inserted right after the subcommand
/// (`stash list`: after both words; it diffs like `log` with `-p`). `git
/// status` has no such switch: the guard admits one `-v` only (a second one
/// diffs the work tree).
pub const GIT_NO_DRIVERS: &[(&str, &[&str])] = &[
    ("diff", &["--no-ext-diff", "--no-textconv"]),
    ("log", &["--no-ext-diff", "--no-textconv"]),
    ("show", &["--no-ext-diff", "--no-textconv"]),
    ("stash list", &["--no-ext-diff", "--no-textconv"]),
    ("stash show", &["--no-ext-diff", "--no-textconv"]),
    ("blame", &["--no-textconv"]),
    ("annotate", &["--no-textconv"]),
    ("grep", &["--no-textconv"]),
];

/// Git options before the subcommand that take the next argument as a value.
const GIT_GLOBAL_WITH_VALUE: &[&str] = &["-c", "-C", "--config-env", "--git-dir", "--work-tree", "--namespace"];

/// `argv` with its program's safe mode: [`SAFE_MODES`] after the program
/// name, and for git the repository the guard judged (`repository`:
/// `--git-dir` and `--work-tree`, so git discovers nothing at run time),
/// `--literal-pathspecs` for the writing subcommands
/// ([`GIT_LITERAL_PATHSPECS`]) and [`GIT_NO_DRIVERS`] after the subcommand.
/// A git argv that sets configuration or names a repository itself is
/// refused (a later `-c` would undo an override).
pub(crate) fn safe_argv(argv: Vec<String>, repository: Option<(&Path, &Path)>) -> Result<Vec<String>, String> {
    let Some(program) = argv.first() else {
        return Err("an empty stage".to_owned());
    };
    let Some((_, switches)) = SAFE_MODES.iter().find(|(p, _)| p == program) else {
        return Ok(argv);
    };
    let mut out: Vec<String> = Vec::with_capacity(argv.len() + switches.len() + 2);
    out.push(program.clone());
    out.extend(switches.iter().map(|s| (*s).to_owned()));
    if program != "git" {
        out.extend(argv[1..].iter().cloned());
        return Ok(out);
    }
    if let Some((git_dir, work_tree)) = repository {
        let (Some(git_dir), Some(work_tree)) = (git_dir.to_str(), work_tree.to_str()) else {
            return Err("the repository's path is not UTF-8, so git cannot be pinned to it".to_owned());
        };
        out.push(format!("--git-dir={git_dir}"));
        out.push(format!("--work-tree={work_tree}"));
    }
    let first_sub = argv[1..]
        .iter()
        .position(|a| !a.starts_with('-'))
        .map(|p| argv[p + 1].as_str());
    if first_sub.is_some_and(|s| GIT_LITERAL_PATHSPECS.contains(&s)) {
        out.push("--literal-pathspecs".to_owned());
    }
    let mut i = 1;
    while let Some(a) = argv.get(i) {
        if !a.starts_with('-') {
            break;
        }
        if a == "-c" || a.starts_with("--config-env") || (a.starts_with("-c") && !a.starts_with("--")) {
            return Err(format!(
                "`git {a}` sets configuration, which would undo the overrides git runs with (core.fsmonitor, \
                 hooks, pagers): drop it"
            ));
        }
        if ["--git-dir", "--work-tree", "-C"].contains(&a.split_once('=').map_or(a.as_str(), |(n, _)| n)) {
            return Err(format!(
                "`git {a}` names the repository, which the guard pins to the one it judged: drop it"
            ));
        }
        out.push(a.clone());
        i += 1;
        if GIT_GLOBAL_WITH_VALUE.contains(&a.as_str())
            && let Some(v) = argv.get(i)
        {
            out.push(v.clone());
            i += 1;
        }
    }
    if let Some(sub) = argv.get(i) {
        out.push(sub.clone());
        i += 1;
        let mut sub = sub.clone();
        if sub == "stash"
            && let Some(action) = argv.get(i)
        {
            out.push(action.clone());
            i += 1;
            sub = format!("stash {action}");
        }
        if let Some((_, extra)) = GIT_NO_DRIVERS.iter().find(|(s, _)| *s == sub) {
            out.extend(extra.iter().map(|s| (*s).to_owned()));
        }
    }
    out.extend(argv[i..].iter().cloned());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::safe_argv;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn programs_get_their_safe_mode_whatever_was_written() {
        assert_eq!(
            safe_argv(v(&["sed", "-n", "p"]), None).unwrap()[..2],
            v(&["sed", "--sandbox"])
        );
        let git = safe_argv(v(&["git", "--no-pager", "diff", "HEAD"]), None).unwrap();
        let sub = git.iter().position(|a| a == "diff").unwrap();
        assert_eq!(git[sub + 1..], v(&["--no-ext-diff", "--no-textconv", "HEAD"]));
        let stash = safe_argv(v(&["git", "stash", "list", "-p"]), None).unwrap();
        let sub = stash.iter().position(|a| a == "list").unwrap();
        assert_eq!(stash[sub + 1..], v(&["--no-ext-diff", "--no-textconv", "-p"]));
        assert!(git.iter().any(|a| a == "core.fsmonitor=false"));
        assert!(safe_argv(v(&["git", "-c", "core.fsmonitor=x", "status"]), None).is_err());
        assert!(safe_argv(v(&["git", "-ccore.pager=x", "status"]), None).is_err());
        assert_eq!(safe_argv(v(&["ls", "-l"]), None).unwrap(), v(&["ls", "-l"]));
        assert_eq!(
            safe_argv(v(&["rg", "x"]), None).unwrap(),
            v(&["rg", "--no-config", "x"])
        );
        // pinned to the repository judged; literal pathspecs for the writing subcommands
        let (dir, tree) = (std::path::Path::new("/w/.git"), std::path::Path::new("/w"));
        let rm = safe_argv(v(&["git", "rm", "--cached", "x"]), Some((dir, tree))).unwrap();
        let sub = rm.iter().position(|a| a == "rm").unwrap();
        for global in ["--git-dir=/w/.git", "--work-tree=/w", "--literal-pathspecs"] {
            assert!(rm[..sub].iter().any(|a| a == global), "{global} in {rm:?}");
        }
        let log = safe_argv(v(&["git", "log", "--", "*.rs"]), Some((dir, tree))).unwrap();
        assert!(!log.iter().any(|a| a == "--literal-pathspecs"), "{log:?}");
        for named in ["--git-dir=/x", "--work-tree=/x", "-C"] {
            assert!(safe_argv(v(&["git", named, "status"]), None).is_err(), "{named}");
        }
        let show = safe_argv(v(&["git", "stash", "show", "-p"]), None).unwrap();
        let sub = show.iter().position(|a| a == "show").unwrap();
        assert_eq!(show[sub + 1..], v(&["--no-ext-diff", "--no-textconv", "-p"]));
    }
}
