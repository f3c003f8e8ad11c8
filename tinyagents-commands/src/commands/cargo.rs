//! `cargo`: **not in the default allow list**: building or testing runs
//! code from the workspace (build scripts, proc macros, tests), so admit it
//! only where an OS sandbox confines the run. When named in
//! `allow_commands`, only these subcommands are admitted: `build`, `check`,
//! `test`, `clippy`, `doc`, `fmt`, `tree`, `metadata`, `version`;
//! never `install`, `login`, `publish`, `--config`, `-Z` or `+toolchain`.
//! In read-only mode only `tree`, `metadata`, `version` and `fmt --check`.

use super::{check_parsed, flag, getopt, req, Ctx, Operands, Opt, Parse, Spec, Val, BASE, WHEN};

pub(crate) const SPEC: Spec = Spec {
    name: "cargo",
    parse: Parse::Custom(parse),
    operands: Operands::Text,
    opt_in: true,
    ..BASE
};

const COMMON: &[Opt] = &[
    flag(&["-q", "--quiet", "-v", "--verbose", "--offline", "--locked", "--frozen"]),
    req(&["--color"], Val::OneOf(WHEN)),
    req(&["--manifest-path"], Val::Read),
    req(&["--lockfile-path"], Val::Read),
    req(&["-p", "--package", "--exclude"], Val::Text),
    flag(&["--workspace", "--all"]),
];
const BUILD: &[Opt] = &[
    flag(&[
        "--lib",
        "--bins",
        "--examples",
        "--tests",
        "--benches",
        "--all-targets",
        "--release",
        "--doc",
    ]),
    req(
        &[
            "--bin",
            "--example",
            "--test",
            "--bench",
            "--profile",
            "--target",
            "-F",
            "--features",
        ],
        Val::Text,
    ),
    flag(&[
        "--all-features",
        "--no-default-features",
        "--keep-going",
        "--future-incompat-report",
    ]),
    req(&["--target-dir"], Val::Write),
    req(&["-j", "--jobs"], Val::Num),
    req(&["--message-format"], Val::Text),
    flag(&[
        "--no-run",
        "--no-fail-fast",
        "--ignore-rust-version",
        "--timings",
        "--no-deps",
        "--document-private-items",
    ]),
    flag(&["--fix", "--allow-dirty", "--allow-staged", "--allow-no-vcs"]),
];
const FMT: &[Opt] = &[flag(&["--check"]), req(&["--message-format"], Val::Text)];
const TREE: &[Opt] = &[
    flag(&[
        "-e",
        "--edges",
        "-i",
        "--invert",
        "--no-dedupe",
        "-d",
        "--duplicates",
        "--all-features",
    ]),
    flag(&["--no-default-features"]),
    req(
        &[
            "--depth",
            "--prefix",
            "--charset",
            "-f",
            "--format",
            "--target",
            "-F",
            "--features",
            "--prune",
        ],
        Val::Text,
    ),
];
const METADATA: &[Opt] = &[
    flag(&["--no-deps", "--all-features", "--no-default-features"]),
    req(
        &["--format-version", "--filter-platform", "-F", "--features"],
        Val::Text,
    ),
];

const DENY: &[(&str, &str)] = &[
    (
        "--config",
        "it sets configuration, which can name programs for cargo to run",
    ),
    ("-Z", "unstable flags can change what cargo runs"),
    ("-C", "it changes the directory: give the shell tool a `cwd` instead"),
];

const fn sub(name: &'static str, opts: &'static [Opt]) -> Spec {
    Spec {
        name,
        opts,
        more_opts: COMMON,
        deny: DENY,
        operands: Operands::Text,
        ..BASE
    }
}

pub(crate) const SUBS: &[(&str, Spec, bool)] = &[
    ("build", sub("cargo build", BUILD), true),
    ("b", sub("cargo build", BUILD), true),
    ("check", sub("cargo check", BUILD), true),
    ("c", sub("cargo check", BUILD), true),
    ("test", sub("cargo test", BUILD), true),
    ("t", sub("cargo test", BUILD), true),
    ("clippy", sub("cargo clippy", BUILD), true),
    ("doc", sub("cargo doc", BUILD), true),
    ("fmt", sub("cargo fmt", FMT), true),
    ("tree", sub("cargo tree", TREE), false),
    ("metadata", sub("cargo metadata", METADATA), false),
    ("version", sub("cargo version", &[]), false),
];

fn parse(_spec: &'static Spec, args: &[String], cx: &Ctx<'_>) -> Result<(), String> {
    let Some(first) = args.first() else {
        return Err("`cargo` without a subcommand".to_owned());
    };
    if first.starts_with('+') {
        return Err(cx.refuse(
            first,
            "a `+toolchain` selects another toolchain (which could be any program)",
        ));
    }
    if first.starts_with('-') {
        return Err(cx.refuse(first, "put options after the subcommand"));
    }
    let Some((_, spec, writes)) = SUBS.iter().find(|(n, _, _)| n == first) else {
        return Err(cx.refuse(
            first,
            format!(
                "this subcommand is not admitted (it installs, publishes, logs in, edits manifests, talks to the \
                 registry or is a third-party plugin); admitted: {}",
                SUBS.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", ")
            ),
        ));
    };
    // Arguments after `--` go to the test binary or rustfmt: text.
    let end = args.iter().position(|a| a == "--").unwrap_or(args.len());
    let sub_cx = Ctx {
        program: spec.name,
        ..*cx
    };
    let parsed = getopt(spec, &args[1..end], &sub_cx)?;
    let check_only = spec.name == "cargo fmt" && parsed.has(&["--check"]);
    if *writes && cx.read_only && !check_only {
        return Err(format!(
            "`{}` writes (build output, formatted sources), and the guard is read-only",
            spec.name
        ));
    }
    if parsed.has(&["--fix"]) && cx.read_only {
        return Err(sub_cx.refuse("--fix", "it rewrites sources, and the guard is read-only"));
    }
    check_parsed(spec, &parsed, &sub_cx)?;
    Ok(())
}
