//! `file`: guesses file types. `-C` compiles a magic file (it writes
//! `NAME.mgc` into the working directory), `-m` reads magic files, `-f`
//! takes names from a file (refused).

use std::path::Path;

use super::{flag, fx, req, Ctx, Fx, Operands, Parsed, Spec, Val, BASE};

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
        // a `:`-separated list: each entry is confined by `magic_files`
        req(&["-m", "--magic-file"], Val::Text),
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
    check: Some(compiled_outputs),
    ..BASE
};

/// `-m` names a `:`-separated list of magic files, each read (confined);
/// `-C` writes one `NAME.mgc` into the working directory per magic file
/// (`magic.mgc` without `-m`): each is a write target, confined and refused
/// under a protected path like any other.
fn compiled_outputs(parsed: &Parsed, cx: &Ctx<'_>) -> Result<(), String> {
    // libmagic reads `-m` as a `:`-separated list of magic files
    for entry in parsed.values(&["-m", "--magic-file"]).flat_map(|v| v.split(':')) {
        if entry.is_empty() {
            return Err(cx.refuse("-m", "an empty entry in the `:`-separated list of magic files"));
        }
        cx.read(entry)?;
    }
    if !parsed.has(&["-C", "--compile"]) {
        return Ok(());
    }
    let mut sources: Vec<&str> = parsed
        .values(&["-m", "--magic-file"])
        .flat_map(|v| v.split(':'))
        .collect();
    if sources.is_empty() {
        sources.push("magic");
    }
    for source in sources {
        let name = Path::new(source)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "magic".to_owned());
        // libmagic writes `NAME.mgc`, keeping a `.mgc` the name already has
        let output = if name.ends_with(".mgc") {
            name
        } else {
            format!("{name}.mgc")
        };
        cx.write(&output, "-C")?;
    }
    Ok(())
}
