//! `find`: walks directory trees. Starting points are read; the
//! expression is parsed primary by primary. Actions that run programs
//! (`-exec`, `-execdir`, `-ok`, `-okdir`), delete (`-delete`) or write
//! files (`-fprint*`, `-fls`) are refused, as is `-files0-from`; `-L` and
//! `-follow` follow symlinks (every one met must stay in the root).

use super::{Ctx, Operands, Parse, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "find",
    parse: Parse::Custom(parse),
    operands: Operands::Read,
    ..BASE
};

/// Primaries without an argument.
const NULLARY: &[&str] = &[
    "-print",
    "-print0",
    "-ls",
    "-prune",
    "-quit",
    "-true",
    "-false",
    "-empty",
    "-readable",
    "-writable",
    "-executable",
    "-nouser",
    "-nogroup",
    "-depth",
    "-d",
    "-mount",
    "-xdev",
    "-noleaf",
    "-daystart",
    "-ignore_readdir_race",
    "-noignore_readdir_race",
    "-not",
    "!",
    "-a",
    "-and",
    "-o",
    "-or",
    "(",
    ")",
    ",",
];
/// Primaries whose argument is text.
const TEXT: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-lname",
    "-ilname",
    "-type",
    "-xtype",
    "-size",
    "-perm",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-links",
    "-inum",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-used",
    "-maxdepth",
    "-mindepth",
    "-regextype",
    "-printf",
    "-fstype",
    "-context",
];
/// Primaries whose argument is a path read.
const READ: &[&str] = &["-newer", "-anewer", "-cnewer", "-samefile"];
/// Refused primaries.
const DENY: &[(&str, &str)] = &[
    ("-exec", "it runs a program for each file"),
    ("-execdir", "it runs a program for each file"),
    ("-ok", "it runs a program for each file"),
    ("-okdir", "it runs a program for each file"),
    ("-delete", "it deletes files: use the file tools"),
    ("-fprint", "it writes a file"),
    ("-fprint0", "it writes a file"),
    ("-fprintf", "it writes a file"),
    ("-fls", "it writes a file"),
    (
        "-files0-from",
        "it takes starting points from a file, which the guard cannot check",
    ),
    ("-D", "debug options are not needed"),
];

fn parse(_spec: &'static Spec, args: &[String], cx: &Ctx<'_>) -> Result<(), String> {
    let mut i = 0;
    let mut follow: Option<&str> = None;
    // leading options
    while let Some(a) = args.get(i) {
        match a.as_str() {
            "-P" | "-H" => {}
            "-L" => follow = Some("-L"),
            o if o.starts_with("-O") && o[2..].chars().all(|c| c.is_ascii_digit()) => {}
            "-D" => return Err(cx.refuse(a, "refused: debug options are not needed")),
            _ => break,
        }
        i += 1;
    }
    // starting points
    let mut starts = Vec::new();
    while let Some(a) = args.get(i) {
        if a.starts_with('-') || matches!(a.as_str(), "!" | "(" | ")" | ",") {
            break;
        }
        starts.push(cx.read(a)?);
        i += 1;
    }
    // the expression
    while let Some(a) = args.get(i) {
        let a = a.as_str();
        i += 1;
        if let Some((_, why)) = DENY.iter().find(|(n, _)| *n == a) {
            return Err(cx.refuse(a, format!("refused: {why}")));
        }
        if a == "-follow" {
            follow = Some("-follow");
        } else if NULLARY.contains(&a) {
        } else if TEXT.contains(&a) || READ.contains(&a) || is_newer_xy(a) {
            let Some(value) = args.get(i) else {
                return Err(cx.refuse(a, "this primary needs an argument"));
            };
            i += 1;
            if READ.contains(&a) || (is_newer_xy(a) && !a.ends_with('t')) {
                cx.read(value)?;
            }
        } else {
            return Err(cx.refuse(
                a,
                "this primary is not in the guard's specification of `find` (or a starting point after the \
                 expression began)",
            ));
        }
    }
    if let Some(via) = follow {
        if starts.is_empty() {
            starts.push(cx.cwd.to_path_buf());
        }
        for s in &starts {
            cx.follows(s, via)?;
        }
    }
    Ok(())
}

/// `-newerXY` (X, Y among a, B, c, m, t; Y = t takes a date).
fn is_newer_xy(a: &str) -> bool {
    a.strip_prefix("-newer").is_some_and(|xy| {
        let b = xy.as_bytes();
        b.len() == 2 && b"aBcm".contains(&b[0]) && b"aBcmt".contains(&b[1])
    })
}
