//! `grep`: searches files. The first operand is the pattern unless `-e` or
//! `-f` gave it. `-r` follows only symlinks named as operands (which the
//! guard resolves), `-R` follows every symlink (every one met must stay in
//! the root); `-f` and `--exclude-from` read files.

use super::{flag, fx, opt, req, Fx, Operands, Spec, Val, BASE, WHEN};

pub(crate) const SPEC: Spec = Spec {
    name: "grep",
    opts: &[
        flag(&["-E", "--extended-regexp"]),
        flag(&["-F", "--fixed-strings"]),
        flag(&["-G", "--basic-regexp"]),
        flag(&["-P", "--perl-regexp"]),
        req(&["-e", "--regexp"], Val::Text),
        req(&["-f", "--file"], Val::Read),
        flag(&["-i", "-y", "--ignore-case"]),
        flag(&["--no-ignore-case"]),
        flag(&["-v", "--invert-match"]),
        flag(&["-w", "--word-regexp"]),
        flag(&["-x", "--line-regexp"]),
        flag(&["-c", "--count"]),
        opt(&["--color", "--colour"], Val::OneOf(WHEN)),
        flag(&["-L", "--files-without-match"]),
        flag(&["-l", "--files-with-matches"]),
        req(&["-m", "--max-count"], Val::Num),
        flag(&["-o", "--only-matching"]),
        flag(&["-q", "--quiet", "--silent"]),
        flag(&["-s", "--no-messages"]),
        flag(&["-b", "--byte-offset"]),
        flag(&["-H", "--with-filename"]),
        flag(&["-h", "--no-filename"]),
        req(&["--label"], Val::Text),
        flag(&["-n", "--line-number"]),
        flag(&["-T", "--initial-tab"]),
        flag(&["-Z", "--null"]),
        req(&["-A", "--after-context"], Val::Num),
        req(&["-B", "--before-context"], Val::Num),
        req(&["-C", "--context"], Val::Num),
        flag(&["-a", "--text"]),
        req(&["--binary-files"], Val::OneOf(&["binary", "text", "without-match"])),
        req(&["-d", "--directories"], Val::OneOf(&["read", "skip", "recurse"])),
        flag(&["-r", "--recursive"]),
        fx(&["-R", "--dereference-recursive"], Fx::Follows),
        req(&["--include"], Val::Text),
        req(&["--exclude"], Val::Text),
        req(&["--exclude-from"], Val::Read),
        req(&["--exclude-dir"], Val::Text),
        flag(&["-I"]),
        flag(&["--line-buffered"]),
        flag(&["-U", "--binary"]),
        flag(&["-z", "--null-data"]),
        flag(&["--no-group-separator"]),
        req(&["--group-separator"], Val::Text),
    ],
    deny: &[
        ("-D", "device handling is not needed to search files"),
        ("--devices", "device handling is not needed to search files"),
    ],
    operands: Operands::PatternThenRead,
    numeric: Some("-C"),
    pattern_opts: &["-e", "--regexp", "-f", "--file"],
    ..BASE
};
