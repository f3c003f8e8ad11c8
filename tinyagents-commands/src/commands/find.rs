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
    primaries(args, cx).map(drop)
}

/// Reads find's arguments: the expression's primaries and operators in
/// order (their arguments consumed), or `Err(rule)`.
pub(crate) fn primaries<'a>(args: &'a [String], cx: &Ctx<'_>) -> Result<Vec<&'a str>, String> {
    let mut read = Vec::new();
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
        read.push(a);
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
    Ok(read)
}

/// `-newerXY` (X, Y among a, B, c, m, t; Y = t takes a date).
fn is_newer_xy(a: &str) -> bool {
    a.strip_prefix("-newer").is_some_and(|xy| {
        let b = xy.as_bytes();
        b.len() == 2 && b"aBcm".contains(&b[0]) && b"aBcmt".contains(&b[1])
    })
}

/// The guard's reading of generated expressions against GNU find's own:
/// `find -D tree` prints the predicates it parsed. For every expression the
/// guard admits and find accepts, both must see the same primaries in the
/// same order (so no argument the guard took for a value is a primary to
/// find: `-name -delete`, `-printf -exec`), operators aside.
#[cfg(test)]
mod differential {
    use proptest::prelude::*;

    use super::primaries;
    use crate::commands::Ctx;
    use crate::path_check::WalkBudget;

    const OPERATORS: &[&str] = &["(", ")", "-a", "-and", "-o", "-or", "!", "-not", ","];
    const ACTIONS: &[&str] = &[
        "-print", "-print0", "-printf", "-ls", "-fprint", "-fprint0", "-fprintf", "-fls", "-exec", "-execdir", "-ok",
        "-okdir", "-delete",
    ];

    fn gnu_find() -> bool {
        std::process::Command::new("find")
            .arg("--version")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("GNU findutils"))
    }

    /// find's primaries, from the `Predicate List:` of `find -D tree`
    /// (`None` when find refuses the expression).
    fn find_reading(dir: &std::path::Path, expr: &[String]) -> Option<Vec<String>> {
        let out = std::process::Command::new("find")
            .args(["-D", "tree", "."])
            .args(expr)
            .current_dir(dir)
            .env_clear()
            .output()
            .expect("find runs");
        let err = String::from_utf8_lossy(&out.stderr);
        let list = err.lines().skip_while(|l| *l != "Predicate List:").nth(1)?;
        Some(
            list.split_whitespace()
                .map(|p| p.trim_start_matches('[').trim_end_matches(']').to_owned())
                .filter(|p| !OPERATORS.contains(&p.as_str()))
                .collect(),
        )
    }

    fn token() -> impl Strategy<Value = Vec<String>> {
        let value = prop::sample::select(vec![
            "x", "*.rs", "-delete", "-exec", "(", ")", "!", "-name", "-print", "-o", "%p", ";", "-fprint", "f",
        ]);
        prop_oneof![
            prop::sample::select(vec![
                "-print",
                "-print0",
                "-ls",
                "-prune",
                "-quit",
                "-true",
                "-false",
                "-empty",
                "-readable",
                "-depth",
                "-noleaf",
                "-not",
                "!",
                "-a",
                "-o",
                "-or",
                "-and",
                ",",
                "(",
                ")",
                "-delete",
                "-exec",
            ])
            .prop_map(|p| vec![p.to_owned()]),
            (
                prop::sample::select(vec![
                    "-name",
                    "-iname",
                    "-path",
                    "-regex",
                    "-lname",
                    "-printf",
                    "-wholename"
                ]),
                value,
            )
                .prop_map(|(p, v)| vec![p.to_owned(), v.to_owned()]),
            (
                prop::sample::select(vec!["-type", "-xtype"]),
                prop::sample::select(vec!["f", "d", "l"])
            )
                .prop_map(|(p, v)| vec![p.to_owned(), v.to_owned()]),
            (
                prop::sample::select(vec!["-mtime", "-mmin", "-size", "-links", "-maxdepth", "-mindepth"]),
                prop::sample::select(vec!["1", "+2", "-3"]),
            )
                .prop_map(|(p, v)| vec![p.to_owned(), v.to_owned()]),
            prop::sample::select(vec!["-newer", "-samefile"]).prop_map(|p| vec![p.to_owned(), "f".to_owned()]),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn the_guard_reads_find_expressions_as_gnu_find_does(
            tokens in prop::collection::vec(token(), 1..6)
        ) {
            if !gnu_find() {
                eprintln!("SKIPPED: no GNU find here");
                return Ok(());
            }
            let expr: Vec<String> = tokens.concat();
            let dir = std::env::temp_dir().join(format!("ta-find-diff-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("f"), "").unwrap();
            let root = dir.canonicalize().unwrap();
            let walk = WalkBudget::default();
            let cx = Ctx { root: &root, cwd: &root, read_only: true, protected: &[], program: "find", walk: &walk, workspace: false };
            let mut args = vec![".".to_owned()];
            args.extend(expr.iter().cloned());
            let guard = primaries(&args, &cx).map(|p| {
                let mut p: Vec<String> =
                    p.into_iter().filter(|a| !OPERATORS.contains(a)).map(str::to_owned).collect();
                // find adds `-print` to an expression without an action
                if !p.iter().any(|a| ACTIONS.contains(&a.as_str())) {
                    p.push("-print".to_owned());
                }
                p
            });
            let find = match &guard {
                Ok(_) => find_reading(&dir, &expr),
                Err(_) => None,
            };
            let _ = std::fs::remove_dir_all(&dir);
            if let (Ok(guard), Some(find)) = (guard, find) {
                prop_assert_eq!(guard, find, "expression {:?}", expr);
            }
        }
    }
}
