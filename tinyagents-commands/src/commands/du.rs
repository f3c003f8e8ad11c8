//! `du`: disk usage of files. `-L` follows symlinks (every one met must
//! stay in the root); `--files0-from` takes names from a file (refused).

use super::{flag, fx, opt, req, Fx, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "du",
    opts: &[
        flag(&["-0", "--null"]),
        flag(&["-a", "--all"]),
        flag(&["-A", "--apparent-size"]),
        req(&["-B", "--block-size"], Val::Text),
        flag(&["-b", "--bytes"]),
        flag(&["-c", "--total"]),
        flag(&["-D", "-H", "--dereference-args"]),
        req(&["-d", "--max-depth"], Val::Num),
        flag(&["-h", "--human-readable"]),
        flag(&["--inodes"]),
        flag(&["-k"]),
        fx(&["-L", "--dereference"], Fx::Follows),
        flag(&["-l", "--count-links"]),
        flag(&["-m"]),
        flag(&["-P", "--no-dereference"]),
        flag(&["-S", "--separate-dirs"]),
        flag(&["--si"]),
        flag(&["-s", "--summarize"]),
        req(&["-t", "--threshold"], Val::Text),
        opt(&["--time"], Val::OneOf(&["atime", "access", "use", "ctime", "status"])),
        req(&["--time-style"], Val::Text),
        req(&["--exclude"], Val::Text),
        req(&["-X", "--exclude-from"], Val::Read),
        flag(&["-x", "--one-file-system"]),
    ],
    deny: &[(
        "--files0-from",
        "it takes the names to measure from a file, which the guard cannot check",
    )],
    operands: Operands::Read,
    ..BASE
};
