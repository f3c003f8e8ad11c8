//! `git`: only read-only subcommands, with options that cannot run other
//! programs or reach outside the workspace. Never `-c`, `--config-env`,
//! `--exec-path`, `-C`, `--git-dir`/`--work-tree`, `--exec`, `--upload-pack`,
//! pagers, external diff or textconv drivers, `--no-index`, `--output`, or
//! any subcommand that writes, talks to a remote, runs hooks, or discloses
//! configuration outside the workspace (`config`, `var`). Options are
//! matched exactly (git itself accepts abbreviations: `--upload-pac`).
//! Before running, the repository git would discover must be a `.git`
//! inside the root: a directory that git would take for a bare repository
//! (whose config could name programs) is refused.

use std::path::{Path, PathBuf};

use crate::path_check::protected_hit;

use super::{check_parsed, flag, getopt, opt, req, Ctx, Operands, Opt, Parse, Parsed, Spec, Val, BASE, WHEN};

pub(crate) const SPEC: Spec = Spec {
    name: "git",
    parse: Parse::Custom(parse),
    operands: Operands::Text,
    ..BASE
};

/// Global options before the subcommand.
const GLOBAL_FLAGS: &[&str] = &[
    "--no-pager",
    "-P",
    "--no-optional-locks",
    "--literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-replace-objects",
    "--no-lazy-fetch",
    "--no-advice",
];

const GLOBAL_DENY: &[(&str, &str)] = &[
    ("-c", "it sets configuration, which can name programs for git to run"),
    (
        "--config-env",
        "it sets configuration, which can name programs for git to run",
    ),
    ("--exec-path", "it names where git finds the programs it runs"),
    ("-C", "it changes the directory: give the shell tool a `cwd` instead"),
    (
        "--git-dir",
        "it points git at another repository (whose config can name programs)",
    ),
    ("--work-tree", "it points git at another work tree"),
    ("--namespace", "it is not needed to read the repository"),
    ("--super-prefix", "it is internal to git"),
    ("-p", "it runs the pager program"),
    ("--paginate", "it runs the pager program"),
    ("--bare", "it treats the directory as a bare repository"),
    ("--html-path", "it is not needed"),
    ("--man-path", "it is not needed"),
    ("--info-path", "it is not needed"),
    ("--list-cmds", "it is not needed"),
    (
        "--attr-source",
        "it reads attributes (which select drivers) from elsewhere",
    ),
];

/// Why a subcommand outside the read-only set is refused.
fn refused_subcommand(sub: &str) -> &'static str {
    match sub {
        "config" => "it reads or writes configuration, including the user's and the system's outside the workspace",
        "var" => "it discloses configuration and the programs git runs (editor, pager)",
        "push" | "fetch" | "pull" | "clone" | "ls-remote" | "remote-ext" | "remote-fd" | "send-email"
        | "request-pull" | "archive" | "upload-pack" | "receive-pack" | "upload-archive" | "daemon" | "instaweb"
        | "http-backend" | "credential" | "credential-store" | "credential-cache" => {
            "it talks to other machines or runs programs named in options (`--exec`, `--upload-pack`)"
        }
        "rebase" | "bisect" | "difftool" | "mergetool" | "submodule" | "filter-branch" | "filter-repo" | "hook"
        | "am" | "send-pack" | "help" | "web--browse" | "gui" | "citool" | "gitk" | "p4" | "svn" | "cvsimport"
        | "fsmonitor--daemon" | "sh-setup" | "run-command" | "maintenance" => {
            "it runs other programs (commands given in options, hooks, tools or a browser)"
        }
        _ => "it is not among the read-only subcommands the guard admits",
    }
}

const DIFF_OPTS: &[Opt] = &[
    flag(&["-p", "-u", "--patch"]),
    flag(&["-s", "--no-patch"]),
    opt(&["-U", "--unified"], Val::Num),
    flag(&["--raw"]),
    flag(&["--patch-with-raw", "--patch-with-stat"]),
    opt(&["--stat"], Val::Text),
    req(
        &[
            "--stat-width",
            "--stat-name-width",
            "--stat-graph-width",
            "--stat-count",
        ],
        Val::Num,
    ),
    flag(&["--compact-summary", "--numstat", "--shortstat", "--summary"]),
    opt(&["-X", "--dirstat"], Val::Text),
    flag(&["--cumulative", "--dirstat-by-file"]),
    flag(&["--name-only", "--name-status"]),
    opt(&["--submodule"], Val::OneOf(&["short", "log", "diff"])),
    opt(&["--color"], Val::OneOf(WHEN)),
    flag(&["--no-color"]),
    opt(&["--color-moved"], Val::Text),
    flag(&["--no-color-moved"]),
    opt(&["--word-diff"], Val::OneOf(&["color", "plain", "porcelain", "none"])),
    opt(&["--color-words"], Val::Text),
    req(&["--word-diff-regex"], Val::Text),
    flag(&["--no-renames", "--rename-empty", "--no-rename-empty"]),
    flag(&["--check", "--full-index", "--binary"]),
    opt(&["--abbrev"], Val::Num),
    opt(&["-B", "--break-rewrites"], Val::Text),
    opt(&["-M", "--find-renames"], Val::Text),
    opt(&["-C", "--find-copies"], Val::Text),
    flag(&["--find-copies-harder", "-D", "--irreversible-delete"]),
    req(&["-l"], Val::Num),
    req(&["--diff-filter"], Val::Text),
    req(&["-S", "-G"], Val::Text),
    req(&["--find-object"], Val::Text),
    flag(&["--pickaxe-all", "--pickaxe-regex"]),
    flag(&["-R"]),
    opt(&["--relative"], Val::Text),
    flag(&["--no-relative"]),
    flag(&["-a", "--text"]),
    flag(&["--ignore-cr-at-eol", "--ignore-space-at-eol"]),
    flag(&[
        "-b",
        "--ignore-space-change",
        "-w",
        "--ignore-all-space",
        "--ignore-blank-lines",
    ]),
    req(&["-I", "--ignore-matching-lines"], Val::Text),
    req(&["--inter-hunk-context"], Val::Num),
    flag(&["-W", "--function-context"]),
    flag(&["--exit-code", "--quiet"]),
    flag(&["--no-ext-diff", "--no-textconv"]),
    opt(
        &["--ignore-submodules"],
        Val::OneOf(&["none", "untracked", "dirty", "all"]),
    ),
    req(&["--src-prefix", "--dst-prefix", "--line-prefix"], Val::Text),
    flag(&["--no-prefix", "--default-prefix"]),
    flag(&["--minimal", "--patience", "--histogram"]),
    req(&["--anchored"], Val::Text),
    req(
        &["--diff-algorithm"],
        Val::OneOf(&["default", "myers", "minimal", "patience", "histogram"]),
    ),
    flag(&["-z"]),
    flag(&["--ita-invisible-in-index", "--ita-visible-in-index"]),
    flag(&["--indent-heuristic", "--no-indent-heuristic"]),
];

const DIFF_DENY: &[(&str, &str)] = &[
    ("--ext-diff", "it runs the external diff program from the configuration"),
    ("--textconv", "it runs text-conversion programs from the configuration"),
    ("--output", "it writes a file: redirect the output instead"),
    ("-O", "it reads an order file from any path"),
    ("--no-index", "it compares paths outside the repository"),
    ("--show-signature", "it runs gpg"),
    ("-L", "it takes a path inside its value, which the guard cannot check"),
    ("--open-files-in-pager", "it runs a pager program"),
    ("--exec", "it runs a program"),
    ("--upload-pack", "it runs a program"),
    ("--follow-symlinks", "it follows symlinks out of the repository"),
    ("--filters", "it runs filter programs from the configuration"),
    (
        "--alternate-refs",
        "it reads the refs of other repositories (the alternates) through a command the configuration names",
    ),
];

const GREP_DENY: &[(&str, &str)] = &[
    ("-O", "it opens the matching files in a pager program"),
    (
        "--open-files-in-pager",
        "it opens the matching files in a pager program",
    ),
    ("--no-index", "it searches paths outside the repository"),
    ("--textconv", "it runs text-conversion programs from the configuration"),
    ("--exec", "it runs a program"),
];

const LOG_OPTS: &[Opt] = &[
    flag(&["--oneline"]),
    opt(&["--pretty"], Val::Text),
    req(&["--format"], Val::Text),
    req(&["-n", "--max-count"], Val::Num),
    req(&["--skip"], Val::Num),
    req(
        &["--since", "--after", "--until", "--before", "--since-as-filter"],
        Val::Text,
    ),
    req(&["--author", "--committer", "--grep", "--grep-reflog"], Val::Text),
    flag(&[
        "--all-match",
        "--invert-grep",
        "-i",
        "--regexp-ignore-case",
        "-E",
        "--extended-regexp",
    ]),
    flag(&["-F", "--fixed-strings", "-P", "--perl-regexp", "--basic-regexp"]),
    flag(&[
        "--merges",
        "--no-merges",
        "--first-parent",
        "--exclude-first-parent-only",
    ]),
    opt(&["--min-parents", "--max-parents"], Val::Num),
    flag(&["--no-min-parents", "--no-max-parents"]),
    flag(&[
        "--all",
        "--not",
        "--reflog",
        "--single-worktree",
        "-g",
        "--walk-reflogs",
    ]),
    opt(&["--branches", "--tags", "--remotes", "--glob"], Val::Text),
    req(&["--exclude"], Val::Text),
    flag(&[
        "--graph",
        "--reverse",
        "--topo-order",
        "--date-order",
        "--author-date-order",
    ]),
    opt(&["--decorate"], Val::OneOf(&["short", "full", "auto", "no"])),
    flag(&["--no-decorate"]),
    req(&["--decorate-refs", "--decorate-refs-exclude"], Val::Text),
    flag(&["--clear-decorations"]),
    req(&["--date"], Val::Text),
    flag(&["--relative-date"]),
    flag(&["--follow", "--no-follow"]),
    flag(&[
        "--abbrev-commit",
        "--no-abbrev-commit",
        "--full-history",
        "--simplify-merges",
        "--ancestry-path",
    ]),
    flag(&[
        "--left-right",
        "--left-only",
        "--right-only",
        "--cherry",
        "--cherry-mark",
        "--cherry-pick",
    ]),
    flag(&[
        "--boundary",
        "--source",
        "--use-mailmap",
        "--mailmap",
        "--no-use-mailmap",
        "--no-mailmap",
    ]),
    flag(&[
        "--parents",
        "--children",
        "--log-size",
        "--dense",
        "--sparse",
        "--show-pulls",
    ]),
    flag(&["--no-notes", "--show-notes-by-default"]),
    req(&["--encoding"], Val::Text),
    flag(&[
        "-m",
        "-c",
        "--cc",
        "--dd",
        "--remerge-diff",
        "--no-diff-merges",
        "--combined-all-paths",
    ]),
    opt(&["--diff-merges"], Val::Text),
    flag(&["-t", "-r", "--root", "--no-walk", "--do-walk", "--count"]),
    flag(&[
        "--full-diff",
        "--show-linear-break",
        "--expand-tabs",
        "--no-expand-tabs",
    ]),
    flag(&["--objects", "--objects-edge", "--no-object-names", "--bisect"]),
    flag(&["--stdin", "--ignore-missing"]),
    flag(&["--header", "--timestamp"]),
];

const fn sub(name: &'static str, opts: &'static [Opt], more: &'static [Opt], operands: Operands) -> Spec {
    Spec {
        name,
        opts,
        more_opts: more,
        deny: DIFF_DENY,
        operands,
        numeric: None,
        ..BASE
    }
}

const LOG: Spec = Spec {
    numeric: Some("-n"),
    ..sub("git log", LOG_OPTS, DIFF_OPTS, Operands::Text)
};
const SHOW: Spec = Spec {
    numeric: Some("-n"),
    ..sub("git show", LOG_OPTS, DIFF_OPTS, Operands::Text)
};
const REV_LIST: Spec = Spec {
    numeric: Some("-n"),
    ..sub("git rev-list", LOG_OPTS, &[], Operands::Text)
};
const SHORTLOG: Spec = sub(
    "git shortlog",
    &[
        flag(&[
            "-n",
            "--numbered",
            "-s",
            "--summary",
            "-e",
            "--email",
            "-c",
            "--committer",
        ]),
        req(&["--group"], Val::Text),
        opt(&["-w"], Val::Text),
        req(&["--format"], Val::Text),
        req(
            &["--since", "--after", "--until", "--before", "--author", "--grep"],
            Val::Text,
        ),
        req(&["--max-count"], Val::Num),
        flag(&["--all", "--no-merges", "--merges", "--first-parent"]),
    ],
    &[],
    Operands::Text,
);
const DIFF: Spec = sub(
    "git diff",
    &[flag(&[
        "--cached",
        "--staged",
        "--merge-base",
        "-0",
        "-1",
        "-2",
        "-3",
        "--base",
        "--ours",
        "--theirs",
    ])],
    DIFF_OPTS,
    Operands::Text,
);
const STATUS: Spec = sub(
    "git status",
    &[
        flag(&[
            "-s",
            "--short",
            "-b",
            "--branch",
            "--long",
            "-v",
            "--verbose",
            "--show-stash",
            "--no-column",
        ]),
        opt(&["--porcelain"], Val::OneOf(&["v1", "v2"])),
        opt(&["-u", "--untracked-files"], Val::OneOf(&["no", "normal", "all"])),
        opt(&["--ignored"], Val::OneOf(&["traditional", "no", "matching"])),
        opt(
            &["--ignore-submodules"],
            Val::OneOf(&["none", "untracked", "dirty", "all"]),
        ),
        flag(&["-z", "--ahead-behind", "--no-ahead-behind", "--renames", "--no-renames"]),
        opt(&["--find-renames"], Val::Num),
    ],
    &[],
    Operands::Text,
);
const BLAME: Spec = Spec {
    deny: &[("--textconv", "it runs text-conversion programs from the configuration")],
    ..sub(
        "git blame",
        &[
            req(&["-L"], Val::Text),
            flag(&[
                "-b",
                "--root",
                "--show-stats",
                "-l",
                "-t",
                "-s",
                "-e",
                "--show-email",
                "-w",
                "-f",
                "--show-name",
            ]),
            flag(&[
                "-n",
                "--show-number",
                "-p",
                "--porcelain",
                "--line-porcelain",
                "--incremental",
                "-c",
            ]),
            flag(&[
                "--color-lines",
                "--color-by-age",
                "--progress",
                "--no-progress",
                "--minimal",
            ]),
            opt(&["-M", "-C"], Val::Num),
            req(&["--date", "--ignore-rev"], Val::Text),
            req(&["--ignore-revs-file", "--contents", "-S"], Val::Read),
            opt(&["--abbrev"], Val::Num),
            flag(&["--first-parent", "--reverse"]),
        ],
        &[],
        Operands::Text,
    )
};
const LS_FILES: Spec = sub(
    "git ls-files",
    &[
        flag(&[
            "-c",
            "--cached",
            "-d",
            "--deleted",
            "-m",
            "--modified",
            "-o",
            "--others",
            "-i",
            "--ignored",
        ]),
        flag(&[
            "-s",
            "--stage",
            "-u",
            "--unmerged",
            "-k",
            "--killed",
            "-z",
            "-t",
            "-v",
            "-f",
            "--full-name",
        ]),
        flag(&[
            "--directory",
            "--no-empty-directory",
            "--eol",
            "--deduplicate",
            "--exclude-standard",
        ]),
        flag(&[
            "--error-unmatch",
            "--recurse-submodules",
            "--sparse",
            "--resolve-undo",
            "--debug",
        ]),
        req(
            &["-x", "--exclude", "--exclude-per-directory", "--format", "--with-tree"],
            Val::Text,
        ),
        req(&["-X", "--exclude-from"], Val::Read),
        opt(&["--abbrev"], Val::Num),
    ],
    &[],
    Operands::Text,
);
const LS_TREE: Spec = sub(
    "git ls-tree",
    &[
        flag(&[
            "-d",
            "-r",
            "-t",
            "-l",
            "--long",
            "-z",
            "--name-only",
            "--name-status",
            "--object-only",
        ]),
        flag(&["--full-name", "--full-tree"]),
        opt(&["--abbrev"], Val::Num),
        req(&["--format"], Val::Text),
    ],
    &[],
    Operands::Text,
);
const GREP: Spec = Spec {
    numeric: Some("-C"),
    deny: GREP_DENY,
    pattern_opts: &["-e", "-f"],
    ..sub(
        "git grep",
        &[
            flag(&[
                "--cached",
                "--untracked",
                "--no-exclude-standard",
                "--exclude-standard",
                "--recurse-submodules",
            ]),
            flag(&[
                "-a",
                "--text",
                "--no-textconv",
                "-i",
                "--ignore-case",
                "-I",
                "-r",
                "--recursive",
            ]),
            flag(&[
                "--no-recursive",
                "-w",
                "--word-regexp",
                "-v",
                "--invert-match",
                "-h",
                "-H",
                "--full-name",
            ]),
            flag(&[
                "-E",
                "--extended-regexp",
                "-G",
                "--basic-regexp",
                "-P",
                "--perl-regexp",
                "-F",
            ]),
            flag(&[
                "--fixed-strings",
                "-n",
                "--line-number",
                "--column",
                "-l",
                "--files-with-matches",
            ]),
            flag(&[
                "--name-only",
                "-L",
                "--files-without-match",
                "-z",
                "--null",
                "-o",
                "--only-matching",
                "-c",
            ]),
            flag(&[
                "--count",
                "--no-color",
                "--break",
                "--heading",
                "-p",
                "--show-function",
                "-W",
            ]),
            flag(&[
                "--function-context",
                "--and",
                "--or",
                "--not",
                "--all-match",
                "-q",
                "--quiet",
            ]),
            opt(&["--color"], Val::OneOf(WHEN)),
            req(
                &[
                    "--max-depth",
                    "-m",
                    "--max-count",
                    "-A",
                    "--after-context",
                    "-B",
                    "--before-context",
                ],
                Val::Num,
            ),
            req(&["-C", "--context", "--threads"], Val::Num),
            req(&["-e"], Val::Text),
            req(&["-f"], Val::Read),
        ],
        &[],
        Operands::Text,
    )
};
const REV_PARSE: Spec = sub(
    "git rev-parse",
    &[
        flag(&[
            "--show-toplevel",
            "--show-prefix",
            "--show-cdup",
            "--git-dir",
            "--git-common-dir",
        ]),
        flag(&[
            "--absolute-git-dir",
            "--is-inside-work-tree",
            "--is-inside-git-dir",
            "--is-bare-repository",
        ]),
        flag(&[
            "--is-shallow-repository",
            "--show-superproject-working-tree",
            "--shared-index-path",
        ]),
        flag(&[
            "--verify",
            "-q",
            "--quiet",
            "--symbolic",
            "--symbolic-full-name",
            "--all",
            "--sq",
            "--revs-only",
        ]),
        flag(&[
            "--no-revs",
            "--flags",
            "--no-flags",
            "--not",
            "--show-object-format",
            "--show-ref-format",
        ]),
        opt(&["--abbrev-ref"], Val::OneOf(&["strict", "loose"])),
        opt(&["--short"], Val::Num),
        opt(&["--branches", "--tags", "--remotes", "--glob"], Val::Text),
        req(
            &["--default", "--since", "--after", "--until", "--before", "--exclude"],
            Val::Text,
        ),
    ],
    &[],
    Operands::Text,
);
const DESCRIBE: Spec = sub(
    "git describe",
    &[
        flag(&[
            "--tags",
            "--all",
            "--long",
            "--always",
            "--exact-match",
            "--contains",
            "--first-parent",
        ]),
        opt(&["--abbrev", "--candidates"], Val::Num),
        opt(&["--dirty", "--broken"], Val::Text),
        req(&["--match", "--exclude"], Val::Text),
    ],
    &[],
    Operands::Text,
);
const CAT_FILE: Spec = sub(
    "git cat-file",
    &[
        flag(&[
            "-t",
            "-s",
            "-p",
            "-e",
            "--batch-all-objects",
            "--buffer",
            "--unordered",
            "-Z",
        ]),
        flag(&[
            "--use-mailmap",
            "--mailmap",
            "--no-use-mailmap",
            "--no-mailmap",
            "--allow-unknown-type",
        ]),
        opt(&["--batch", "--batch-check"], Val::Text),
        flag(&["--batch-command"]),
    ],
    &[],
    Operands::Text,
);
const MERGE_BASE: Spec = sub(
    "git merge-base",
    &[flag(&[
        "-a",
        "--all",
        "--octopus",
        "--is-ancestor",
        "--independent",
        "--fork-point",
    ])],
    &[],
    Operands::Text,
);
const SHOW_REF: Spec = sub(
    "git show-ref",
    &[
        flag(&[
            "--head",
            "--heads",
            "--branches",
            "--tags",
            "-d",
            "--dereference",
            "--verify",
            "-q",
            "--quiet",
        ]),
        flag(&["--exists"]),
        opt(&["-s", "--hash", "--abbrev"], Val::Num),
    ],
    &[],
    Operands::Text,
);
const BRANCH: Spec = sub(
    "git branch",
    &[
        flag(&[
            "-a",
            "--all",
            "-r",
            "--remotes",
            "-v",
            "--verbose",
            "-l",
            "--list",
            "--show-current",
        ]),
        flag(&["-i", "--ignore-case", "--no-color", "--no-column", "--omit-empty"]),
        opt(&["--color"], Val::OneOf(WHEN)),
        opt(&["--abbrev"], Val::Num),
        req(
            &[
                "--contains",
                "--no-contains",
                "--merged",
                "--no-merged",
                "--points-at",
                "--sort",
                "--format",
            ],
            Val::Text,
        ),
    ],
    &[],
    Operands::Text,
);
const TAG: Spec = sub(
    "git tag",
    &[
        flag(&["-l", "--list", "-i", "--ignore-case", "--no-column", "--omit-empty"]),
        opt(&["-n"], Val::Num),
        opt(&["--color"], Val::OneOf(WHEN)),
        req(
            &[
                "--contains",
                "--no-contains",
                "--merged",
                "--no-merged",
                "--points-at",
                "--sort",
                "--format",
            ],
            Val::Text,
        ),
    ],
    &[],
    Operands::Text,
);
const REMOTE: Spec = sub("git remote", &[flag(&["-v", "--verbose"])], &[], Operands::None);
const VERSION: Spec = sub("git version", &[flag(&["--build-options"])], &[], Operands::None);
const STASH_LIST: Spec = sub("git stash list", LOG_OPTS, DIFF_OPTS, Operands::None);

pub(crate) const SUBCOMMANDS: &[(&str, &Spec)] = &[
    ("status", &STATUS),
    ("log", &LOG),
    ("show", &SHOW),
    ("diff", &DIFF),
    ("blame", &BLAME),
    ("annotate", &BLAME),
    ("ls-files", &LS_FILES),
    ("ls-tree", &LS_TREE),
    ("grep", &GREP),
    ("rev-parse", &REV_PARSE),
    ("rev-list", &REV_LIST),
    ("shortlog", &SHORTLOG),
    ("describe", &DESCRIBE),
    ("cat-file", &CAT_FILE),
    ("merge-base", &MERGE_BASE),
    ("show-ref", &SHOW_REF),
    ("branch", &BRANCH),
    ("tag", &TAG),
    ("remote", &REMOTE),
    ("version", &VERSION),
];

/// A writing subcommand of the `workspace` profile.
const fn write_sub(name: &'static str, opts: &'static [Opt], operands: Operands) -> Spec {
    Spec {
        writes: true,
        ..sub(name, opts, &[], operands)
    }
}

const ADD: Spec = write_sub(
    "git add",
    &[flag(&[
        "-A",
        "--all",
        "-u",
        "--update",
        "-N",
        "--intent-to-add",
        "-f",
        "--force",
        "-v",
        "--verbose",
        "-n",
        "--dry-run",
        "--no-all",
        "--ignore-removal",
    ])],
    Operands::Read,
);
const COMMIT: Spec = write_sub(
    "git commit",
    &[
        req(&["-m", "--message"], Val::Text),
        req(&["-F", "--file"], Val::Read),
        req(
            &["--author", "--date", "-C", "--reuse-message", "--fixup", "--squash"],
            Val::Text,
        ),
        req(
            &["--cleanup"],
            Val::OneOf(&["strip", "whitespace", "verbatim", "scissors", "default"]),
        ),
        flag(&[
            "-a",
            "--all",
            "--amend",
            "--no-edit",
            "-q",
            "--quiet",
            "--allow-empty",
            "--allow-empty-message",
            "-s",
            "--signoff",
            "--no-verify",
            "-n",
            "--no-status",
            "--reset-author",
            "-o",
            "--only",
            "-i",
            "--include",
        ]),
    ],
    Operands::Read,
);
const CHECKOUT: Spec = write_sub(
    "git checkout",
    &[req(&["-b", "-B"], Val::Text), flag(&["-q", "--quiet", "--no-track"])],
    Operands::Text,
);
const SWITCH: Spec = write_sub(
    "git switch",
    &[
        req(&["-c", "--create", "-C", "--force-create"], Val::Text),
        flag(&["-d", "--detach", "-q", "--quiet", "--no-track", "--guess", "--no-guess"]),
    ],
    Operands::Text,
);
const RESTORE: Spec = write_sub(
    "git restore",
    &[
        req(&["-s", "--source"], Val::Text),
        flag(&[
            "-S",
            "--staged",
            "-W",
            "--worktree",
            "-q",
            "--quiet",
            "--ours",
            "--theirs",
            "--ignore-unmerged",
        ]),
    ],
    Operands::Write,
);
const RM: Spec = write_sub(
    "git rm",
    &[flag(&[
        "--cached",
        "-r",
        "-f",
        "--force",
        "-q",
        "--quiet",
        "-n",
        "--dry-run",
        "--ignore-unmatch",
    ])],
    Operands::Write,
);
const MV: Spec = write_sub(
    "git mv",
    &[flag(&["-f", "--force", "-k", "-n", "--dry-run", "-v", "--verbose"])],
    Operands::Write,
);
const STASH_PUSH: Spec = write_sub(
    "git stash push",
    &[
        req(&["-m", "--message"], Val::Text),
        flag(&[
            "-u",
            "--include-untracked",
            "-k",
            "--keep-index",
            "--no-keep-index",
            "-q",
            "--quiet",
            "-S",
            "--staged",
        ]),
    ],
    Operands::Read,
);
const STASH_APPLY: Spec = write_sub(
    "git stash apply",
    &[flag(&["--index", "-q", "--quiet"])],
    Operands::Text,
);
const STASH_DROP: Spec = write_sub("git stash drop", &[flag(&["-q", "--quiet"])], Operands::Text);
const STASH_SHOW: Spec = sub("git stash show", LOG_OPTS, DIFF_OPTS, Operands::Text);

/// The writing subcommands the `workspace` profile admits, where the run's
/// workspace requires the OS sandbox (`git stash` and its `push`, `pop`,
/// `apply`, `drop`, `show` are read apart).
pub(crate) const WORKSPACE_SUBCOMMANDS: &[(&str, &Spec)] = &[
    ("add", &ADD),
    ("commit", &COMMIT),
    ("checkout", &CHECKOUT),
    ("switch", &SWITCH),
    ("restore", &RESTORE),
    ("rm", &RM),
    ("mv", &MV),
];

/// The spec of `git stash [SUB]` and the arguments after `SUB`.
fn stash<'a>(rest: &'a [String], cx: &Ctx<'_>) -> Result<(&'static Spec, &'a [String]), String> {
    let first = rest.first().map(String::as_str);
    if first == Some("list") {
        return Ok((&STASH_LIST, &rest[1..]));
    }
    if !cx.workspace {
        return Err(cx.refuse(
            "stash",
            "`git stash` writes; only `git stash list` is admitted (the `workspace` profile admits more where the \
             run's workspace requires the OS sandbox)",
        ));
    }
    Ok(match first {
        None => (&STASH_PUSH, rest),
        Some(o) if o.starts_with('-') => (&STASH_PUSH, rest),
        Some("push") => (&STASH_PUSH, &rest[1..]),
        Some("pop" | "apply") => (&STASH_APPLY, &rest[1..]),
        Some("drop") => (&STASH_DROP, &rest[1..]),
        Some("show") => (&STASH_SHOW, &rest[1..]),
        Some(other) => {
            return Err(cx.refuse(
                other,
                "not a `git stash` subcommand the `workspace` profile admits (push, pop, apply, drop, show, list)",
            ))
        }
    })
}

/// The read-only subcommands the guard admits.
pub(crate) fn admitted_subcommands() -> Vec<&'static str> {
    let mut subs: Vec<&str> = SUBCOMMANDS.iter().map(|(n, _)| *n).collect();
    subs.push("stash list");
    subs
}

fn parse(_spec: &'static Spec, args: &[String], cx: &Ctx<'_>) -> Result<(), String> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if !a.starts_with('-') {
            break;
        }
        let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
        if let Some((_, why)) = GLOBAL_DENY
            .iter()
            .find(|(n, _)| *n == name || (n.len() == 2 && !n.starts_with("--") && a.starts_with(n)))
        {
            return Err(cx.refuse(a, format!("refused: {why}")));
        }
        if a == "--version" && args.len() == i + 1 {
            return Ok(());
        }
        if !GLOBAL_FLAGS.contains(&a.as_str()) {
            return Err(cx.refuse(
                a,
                "this option is not in the guard's specification of git (options must be spelled exactly, not \
                 abbreviated)",
            ));
        }
        i += 1;
    }
    let Some(sub) = args.get(i) else {
        return Err(format!(
            "`git` without a subcommand (admitted: {})",
            admitted_subcommands().join(", ")
        ));
    };
    let rest = &args[i + 1..];
    let workspace_sub = cx
        .workspace
        .then(|| WORKSPACE_SUBCOMMANDS.iter().find(|(n, _)| n == sub))
        .flatten();
    let (spec, rest): (&'static Spec, &[String]) = if sub == "stash" {
        stash(rest, cx)?
    } else {
        match SUBCOMMANDS.iter().find(|(n, _)| n == sub).or(workspace_sub) {
            Some((_, spec)) => (spec, rest),
            None => {
                let profile = if WORKSPACE_SUBCOMMANDS.iter().any(|(n, _)| n == sub) {
                    " (the `workspace` profile admits it where the run's workspace requires the OS sandbox)"
                } else {
                    ""
                };
                return Err(format!(
                    "`git {sub}` is refused: {}{profile} (admitted: {})",
                    refused_subcommand(sub),
                    admitted_subcommands().join(", ")
                ));
            }
        }
    };
    let sub_cx = Ctx {
        program: spec.name,
        ..*cx
    };
    if spec.writes && cx.read_only {
        return Err(format!(
            "`{}` writes, and the guard is read-only (fix: run a command that only reads)",
            spec.name
        ));
    }
    let parsed = getopt(spec, rest, &sub_cx)?;
    check_parsed(spec, &parsed, &sub_cx)?;
    if spec.writes {
        if spec.name == "git checkout" {
            if !parsed.has(&["-b", "-B"]) {
                return Err(sub_cx.refuse(
                    "checkout",
                    "only `git checkout -b NAME [START]` is admitted: use `git switch BRANCH` to change branches \
                     and `git restore PATH` to restore files",
                ));
            }
            if let Some(extra) = parsed.operands.get(1) {
                return Err(sub_cx.refuse(extra, "`git checkout -b NAME` takes at most one start point"));
            }
        }
        write_pathspecs(spec, &parsed, &args[..i], &sub_cx)?;
        return repository_inside_root(cx);
    }
    if let Some(format) = parsed
        .values(&["--format", "--pretty"])
        .find(|f| verifies_signatures(f))
    {
        return Err(sub_cx.refuse(format, "a `%G` placeholder verifies signatures, which runs gpg"));
    }
    match sub.as_str() {
        "status"
            if parsed
                .opts
                .iter()
                .filter(|g| matches!(g.name, "-v" | "--verbose"))
                .count()
                > 1 =>
        {
            return Err(sub_cx.refuse(
                "-v",
                "a second `-v` also diffs the work tree, through the text-conversion drivers of the \
                 configuration, which `git status` cannot switch off: give `-v` once, or run `git diff`",
            ));
        }
        "branch" | "tag" => {
            if !parsed.operands.is_empty() && !parsed.has(&["-l", "--list"]) {
                return Err(sub_cx.refuse(
                    &parsed.operands[0],
                    "an operand without `--list` creates a branch or tag (the guard admits listing only)",
                ));
            }
            return repository_inside_root(cx);
        }
        _ => {}
    }
    revisions_and_paths(spec, &parsed, &sub_cx)?;
    repository_inside_root(cx)
}

/// The subcommands whose operands are pathspecs naming what they write
/// (to the work tree or the index); `checkout -b`, `switch`, `stash
/// apply`/`drop` take revisions and stash names.
const PATHSPEC_WRITERS: &[&str] = &[
    "git add",
    "git commit",
    "git restore",
    "git rm",
    "git mv",
    "git stash push",
];

/// Operands of the writing subcommands are judged as the literal paths git
/// reads with `--literal-pathspecs` (the executor's safe mode): no pathspec
/// magic, no glob characters (git would match them across `/`), no global
/// option that changes how pathspecs are read; a directory that `rm`,
/// `restore` or `mv` would act on must hold no protected entry (walked as a
/// tree `cp -r` copies). An operand of `add`/`commit`/`stash push` writes
/// the index: one naming a protected path, or a path under one, is refused
/// (a directory a protected entry lies in is admitted — `git add .` — the
/// sandbox keeps protected files as they were, and checks what the run
/// changed in the index and the refs afterwards).
fn write_pathspecs(spec: &Spec, parsed: &Parsed, globals: &[String], cx: &Ctx<'_>) -> Result<(), String> {
    if !PATHSPEC_WRITERS.contains(&spec.name) {
        return Ok(());
    }
    if let Some(g) = globals.iter().find(|g| {
        matches!(
            g.as_str(),
            "--glob-pathspecs" | "--noglob-pathspecs" | "--icase-pathspecs"
        )
    }) {
        return Err(cx.refuse(
            g,
            "a writing git subcommand reads its pathspecs literally (the guard judges each as the path it names): \
             drop this option",
        ));
    }
    for op in &parsed.operands {
        if op.starts_with(':') {
            return Err(cx.refuse(
                op,
                "pathspec magic (`:(glob)`, `:/`, `:!`) reaches paths the guard does not judge: name the paths \
                 plainly",
            ));
        }
        if op.contains(['*', '?', '[', '\\']) {
            return Err(cx.refuse(
                op,
                "git reads this as a pattern matching paths in any directory (across `/`), which the guard does \
                 not judge: name the paths plainly (an unquoted shell glob is expanded and each match judged)",
            ));
        }
        if matches!(spec.name, "git rm" | "git restore" | "git mv") {
            let path = cx.read(op)?;
            if path.symlink_metadata().is_ok_and(|m| m.is_dir()) {
                cx.tree_not_protected(op, &path, &path, false)?;
            }
        } else {
            staged_not_protected(op, cx)?;
        }
    }
    Ok(())
}

/// Refuses staging a protected path (or one under it): `git add
/// sub/.mvn/jvm.config` writes it into the index, from where a commit and a
/// later checkout put it in place outside the sandbox.
fn staged_not_protected(op: &str, cx: &Ctx<'_>) -> Result<(), String> {
    let path = cx.read(op)?;
    let Some(hit) = protected_hit(cx.root, &path, cx.protected) else {
        return Ok(());
    };
    let rel = path
        .strip_prefix(cx.root)
        .unwrap_or(&path)
        .to_string_lossy()
        .to_lowercase();
    let entry = hit.trim_matches('/').to_lowercase();
    // a directory an entry with `/` lies in (`.`, `sub/.mvn` for `.mvn/jvm.config`)
    if entry.contains('/') && !format!("/{rel}/").contains(&format!("/{entry}/")) {
        return Ok(());
    }
    Err(cx.refuse(
        op,
        format!(
            "it stages `{hit}` (or a path under it) in the index, configuration that programs execute \
             (protected_paths), which a commit and a later checkout would put in place: make that change \
             yourself, outside the agent"
        ),
    ))
}

/// Operands before `--` are revisions or paths: a name that exists (from
/// the cwd) or climbs with `..` is confined as a path, an absolute one is
/// refused; after `--` every operand is a path confined to the root.
fn revisions_and_paths(spec: &Spec, parsed: &Parsed, cx: &Ctx<'_>) -> Result<(), String> {
    let first = parsed.operands.len() - parsed.after_dashdash;
    let skip_pattern = usize::from(spec.name == "git grep" && !parsed.has(spec.pattern_opts));
    for (n, op) in parsed.operands.iter().enumerate() {
        if n < skip_pattern {
            continue;
        }
        let is_path = n >= first
            || cx.cwd.join(op).symlink_metadata().is_ok()
            || op.starts_with('/')
            || op == ".."
            || op.starts_with("../")
            || op.contains("/../")
            || op.ends_with("/..");
        if is_path {
            cx.read(op)?;
        }
        if let Some((_, path)) = op.split_once(':')
            && (path.starts_with('/') || path.split('/').any(|p| p == ".."))
        {
            return Err(cx.refuse(op, "a `REV:PATH` whose path leaves the repository root"));
        }
        if op.starts_with(":(") || op.starts_with(":/") {
            return Err(cx.refuse(op, "pathspec magic is not supported by the guard: name paths plainly"));
        }
    }
    Ok(())
}

/// The repository git discovers from the cwd must be a `.git` inside the
/// root; a directory git would take for a bare repository is refused.
/// Whether a pretty format has a placeholder that verifies a signature (and
/// so runs gpg): `%G…`, also with a modifier between `%` and the placeholder
/// (`%+GG`, `%-G?`, `% GS`), or `%(signature…)`.
fn verifies_signatures(format: &str) -> bool {
    let b = format.as_bytes();
    format.contains("%(signature")
        || b.iter().enumerate().any(|(i, &c)| {
            c == b'%' && {
                let next = i + 1 + usize::from(matches!(b.get(i + 1), Some(b'+' | b'-' | b' ')));
                b.get(next) == Some(&b'G')
            }
        })
}

/// A `.git` file (a gitlink: `gitdir: PATH`, as submodules and linked
/// worktrees have) is followed by git to the repository it names. Admitted
/// only when that is inside a real `.git` directory of the workspace (where
/// git keeps submodules and worktrees, and where no command may write): a
/// gitlink anywhere else may be the model's own, naming a repository whose
/// config runs programs.
fn gitlink_inside_a_repository(cx: &Ctx<'_>, dir: &Path, dot_git: &Path) -> Result<PathBuf, String> {
    let refuse = |why: String| {
        Err(format!(
            "`{}` is a gitlink {why}: git would use that repository, whose config can name programs to run; refused",
            dot_git.display()
        ))
    };
    let mut text = String::new();
    let read = std::fs::File::open(dot_git).and_then(|f| {
        use std::io::Read;
        f.take(4096).read_to_string(&mut text)
    });
    if read.is_err() {
        return refuse("that cannot be read as text".to_owned());
    }
    let Some(target) = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("gitdir:"))
        .map(str::trim)
    else {
        return refuse("without a `gitdir:` line".to_owned());
    };
    let Ok(target) = std::fs::canonicalize(dir.join(target)) else {
        return refuse(format!("to `{target}`, which does not exist"));
    };
    // the first `.git` component of the target, within the root, must be a real directory
    let inside = target.strip_prefix(cx.root).ok().and_then(|rel| {
        let mut at = cx.root.to_path_buf();
        for part in rel.components() {
            at.push(part);
            if part.as_os_str() == ".git" {
                return Some(at.symlink_metadata().is_ok_and(|m| m.is_dir()));
            }
        }
        None
    });
    if inside == Some(true) {
        Ok(target)
    } else {
        refuse(format!(
            "to `{}`, which is not inside a `.git` directory of the workspace",
            target.display()
        ))
    }
}

fn repository_inside_root(cx: &Ctx<'_>) -> Result<(), String> {
    find_repository(cx).map(drop)
}

/// The repository git runs against, as the guard judged it: its git
/// directory and its work tree (both canonical, inside the root). The
/// executor pins git to exactly these (`--git-dir`, `--work-tree`), so a
/// directory made a bare repository after the check (by an earlier stage of
/// the same pipeline) is never discovered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repository {
    pub(crate) git_dir: PathBuf,
    pub(crate) work_tree: PathBuf,
}

/// The repository an admitted git argv runs against: `None` for `git
/// --version` (no repository), else the one [`repository_inside_root`] admits.
pub(crate) fn pinned_repository(argv: &[String], cx: &Ctx<'_>) -> Result<Option<Repository>, String> {
    let first = argv.iter().find(|a| !GLOBAL_FLAGS.contains(&a.as_str()));
    if first.is_some_and(|a| a == "--version") {
        return Ok(None);
    }
    find_repository(cx).map(Some)
}

fn find_repository(cx: &Ctx<'_>) -> Result<Repository, String> {
    let mut dir: &Path = cx.cwd;
    loop {
        // git's own test (`is_git_directory`): a `HEAD`, and `objects` and
        // `refs` it can enter, which an executable file or a symlink passes
        // as well as a directory; any entry of those names counts here.
        let entry = |name: &str| dir.join(name).symlink_metadata().is_ok();
        // A `HEAD` or `commondir` anywhere on the way up is refused, a `.git`
        // beside it or not: git skips a `.git` that is not a repository and
        // then tests the directory itself, and a `commondir` sends its test
        // for `objects` and `refs` to another directory.
        if entry("HEAD") || entry("commondir") || (entry("objects") && entry("refs")) {
            return Err(format!(
                "`git` would take `{}` for a bare repository (its config could name programs to run); refused",
                dir.display()
            ));
        }
        let dot_git = dir.join(".git");
        match dot_git.symlink_metadata() {
            // a repository's own directory: the guard never lets a command write under `.git`
            Ok(meta) if meta.is_dir() => {
                return Ok(Repository {
                    git_dir: dot_git,
                    work_tree: dir.to_path_buf(),
                })
            }
            Ok(meta) if meta.is_file() => {
                return gitlink_inside_a_repository(cx, dir, &dot_git).map(|git_dir| Repository {
                    git_dir,
                    work_tree: dir.to_path_buf(),
                })
            }
            Ok(_) => {
                return Err(format!(
                    "`{}` is neither a directory nor a file (a symlink?): git would follow it to a repository the \
                     guard cannot vouch for; refused",
                    dot_git.display()
                ))
            }
            Err(_) => {}
        }
        if dir == cx.root {
            return Err(format!(
                "`git` finds no repository inside the workspace root `{}` (it would use one above it)",
                cx.root.display()
            ));
        }
        dir = match dir.parent() {
            Some(parent) if parent.starts_with(cx.root) => parent,
            _ => return Err("`git` runs in a directory outside the workspace root".to_owned()),
        };
    }
}
