//! `sort`: sorts lines of files. `-o FILE` and `-T DIR` write;
//! `--compress-program` runs a program and `--files0-from` takes names from
//! a file (both refused).

use super::{flag, req, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "sort",
    opts: &[
        flag(&["-b", "--ignore-leading-blanks"]),
        flag(&["-d", "--dictionary-order"]),
        flag(&["-f", "--ignore-case"]),
        flag(&["-g", "--general-numeric-sort"]),
        flag(&["-i", "--ignore-nonprinting"]),
        flag(&["-M", "--month-sort"]),
        flag(&["-h", "--human-numeric-sort"]),
        flag(&["-n", "--numeric-sort"]),
        flag(&["-R", "--random-sort"]),
        req(&["--random-source"], Val::Read),
        flag(&["-r", "--reverse"]),
        req(
            &["--sort"],
            Val::OneOf(&[
                "general-numeric",
                "human-numeric",
                "month",
                "numeric",
                "random",
                "version",
            ]),
        ),
        flag(&["-V", "--version-sort"]),
        req(&["--batch-size"], Val::Num),
        flag(&["-c"]),
        opt_check(),
        flag(&["-C"]),
        flag(&["--debug"]),
        req(&["-k", "--key"], Val::Text),
        flag(&["-m", "--merge"]),
        req(&["-o", "--output"], Val::Write),
        flag(&["-s", "--stable"]),
        req(&["-S", "--buffer-size"], Val::Text),
        req(&["-t", "--field-separator"], Val::Text),
        req(&["-T", "--temporary-directory"], Val::Write),
        req(&["--parallel"], Val::Num),
        flag(&["-u", "--unique"]),
        flag(&["-z", "--zero-terminated"]),
    ],
    deny: &[
        ("--compress-program", "it runs the named program"),
        (
            "--files0-from",
            "it takes the names to sort from a file, which the guard cannot check",
        ),
    ],
    operands: Operands::Read,
    ..BASE
};

const fn opt_check() -> super::Opt {
    super::opt(&["--check"], Val::OneOf(&["diagnose-first", "quiet", "silent"]))
}
