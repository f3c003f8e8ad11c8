//! `file`: guesses file types. `-C` compiles a magic file (writes), `-m`
//! reads magic files, `-f` takes names from a file (refused).

use super::{flag, fx, req, Fx, Operands, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "file",
    opts: &[
        flag(&["-b", "--brief"]),
        fx(&["-C", "--compile"], Fx::Writes),
        flag(&["-c", "--checking-printout"]),
        req(&["-e", "--exclude"], Val::Text),
        req(&["--exclude-quiet"], Val::Text),
        req(&["-F", "--separator"], Val::Text),
        flag(&["-h", "--no-dereference"]),
        flag(&["-i", "--mime"]),
        flag(&["--mime-type"]),
        flag(&["--mime-encoding"]),
        flag(&["--extension"]),
        flag(&["--apple"]),
        flag(&["-k", "--keep-going"]),
        flag(&["-l", "--list"]),
        flag(&["-L", "--dereference"]),
        req(&["-m", "--magic-file"], Val::Read),
        flag(&["-N", "--no-pad"]),
        flag(&["-n", "--no-buffer"]),
        flag(&["-0", "--print0"]),
        flag(&["-p", "--preserve-date"]),
        req(&["-P", "--parameter"], Val::Text),
        flag(&["-r", "--raw"]),
        flag(&["-s", "--special-files"]),
        flag(&["-S", "--no-sandbox"]),
        flag(&["-E"]),
    ],
    deny: &[
        ("-z", "it may run decompression programs on compressed files"),
        ("--uncompress", "it may run decompression programs on compressed files"),
        ("-Z", "it may run decompression programs on compressed files"),
        (
            "--uncompress-noreport",
            "it may run decompression programs on compressed files",
        ),
        (
            "-f",
            "it takes the names to examine from a file, which the guard cannot check",
        ),
        (
            "--files-from",
            "it takes the names to examine from a file, which the guard cannot check",
        ),
    ],
    operands: Operands::Read,
    ..BASE
};
