//! `jq`: filters JSON. The first operand is the filter, the rest are files
//! read. Filters that read the environment (`env`, `$ENV`) or load modules
//! (`import`, `include`, `-L`) are refused, as is a filter read from a file.

use super::{Ctx, Operands, Parse, Spec, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "jq",
    parse: Parse::Custom(parse),
    operands: Operands::Text,
    ..BASE
};

/// Flags (long, short).
const FLAGS: &[(&str, char)] = &[
    ("--raw-output", 'r'),
    ("--raw-output0", '\0'),
    ("--join-output", 'j'),
    ("--ascii-output", 'a'),
    ("--compact-output", 'c'),
    ("--null-input", 'n'),
    ("--raw-input", 'R'),
    ("--slurp", 's'),
    ("--exit-status", 'e'),
    ("--sort-keys", 'S'),
    ("--color-output", 'C'),
    ("--monochrome-output", 'M'),
    ("--tab", '\0'),
    ("--unbuffered", '\0'),
    ("--stream", '\0'),
    ("--stream-errors", '\0'),
    ("--seq", '\0'),
];

/// Options refused, with the reason.
const DENY: &[(&str, &str)] = &[
    ("-f", "the filter must be given inline so the guard can check it"),
    (
        "--from-file",
        "the filter must be given inline so the guard can check it",
    ),
    (
        "-L",
        "it loads jq modules from a directory (code the guard cannot check)",
    ),
    (
        "--args",
        "positional arguments are not supported by the guard: use `--arg NAME VALUE`",
    ),
    (
        "--jsonargs",
        "positional arguments are not supported by the guard: use `--argjson NAME JSON`",
    ),
];

/// jq builtins that disclose the environment or load code.
const BANNED: &[(&str, &str)] = &[
    ("env", "it reads the environment, which holds secrets"),
    ("ENV", "it reads the environment, which holds secrets"),
    ("import", "it loads a module (code the guard cannot check)"),
    ("include", "it loads a module (code the guard cannot check)"),
    ("get_search_list", "it discloses the module search path"),
    ("modulemeta", "it loads module metadata"),
];

/// jq's own argument grammar: options anywhere, `--arg NAME VALUE`,
/// `--argjson NAME JSON`, `--slurpfile NAME FILE`, `--rawfile NAME FILE`,
/// `--indent N`; the first operand is the filter, the others files read.
fn parse(_spec: &'static Spec, args: &[String], cx: &Ctx<'_>) -> Result<(), String> {
    let mut i = 0;
    let mut options_done = false;
    let operand = |op: &str, filter: &mut Option<String>| -> Result<(), String> {
        if filter.is_none() {
            if let Some((word, why)) = banned_word(op) {
                return Err(cx.refuse(op, format!("the filter uses `{word}`: {why}")));
            }
            *filter = Some(op.to_owned());
            Ok(())
        } else {
            cx.read(op).map(drop)
        }
    };
    let mut owned_filter: Option<String> = None;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        if options_done || arg == "-" || !arg.starts_with('-') {
            operand(arg, &mut owned_filter)?;
            continue;
        }
        if arg == "--" {
            options_done = true;
            continue;
        }
        if let Some((_, why)) = DENY
            .iter()
            .find(|(n, _)| *n == arg || (n.len() == 2 && arg.starts_with(n)))
        {
            return Err(cx.refuse(arg, format!("refused: {why}")));
        }
        let take = |i: &mut usize, n: usize| -> Result<Vec<&str>, String> {
            let values: Vec<&str> = args.iter().skip(*i).take(n).map(String::as_str).collect();
            if values.len() < n {
                return Err(cx.refuse(arg, format!("this option needs {n} values")));
            }
            *i += n;
            Ok(values)
        };
        match arg {
            "--arg" | "--argjson" => {
                take(&mut i, 2)?;
            }
            "--slurpfile" | "--rawfile" => {
                let values = take(&mut i, 2)?;
                cx.read(values[1])?;
            }
            "--indent" => {
                let v = take(&mut i, 1)?;
                cx.value(arg, v[0], super::Val::Num)?;
            }
            long if long.starts_with("--") => {
                if !FLAGS.iter().any(|(n, _)| *n == long) {
                    return Err(cx.refuse(
                        long,
                        "this option is not in the guard's specification of the program (options must be spelled \
                         exactly as listed, not abbreviated)",
                    ));
                }
            }
            short => {
                for c in short.chars().skip(1) {
                    if c == '\0' || !FLAGS.iter().any(|(_, s)| *s == c) {
                        return Err(cx.refuse(
                            short,
                            format!("the option `-{c}` is not in the guard's specification of the program"),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// The first banned identifier of a jq filter (strings included: `"\(env)"`
/// interpolates code).
fn banned_word(filter: &str) -> Option<(&'static str, &'static str)> {
    let mut word = String::new();
    let flush = |word: &mut String| -> Option<(&'static str, &'static str)> {
        let hit = BANNED.iter().copied().find(|(w, _)| *w == word.as_str());
        word.clear();
        hit
    };
    for c in filter.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word.push(c);
        } else if let Some(hit) = flush(&mut word) {
            return Some(hit);
        }
    }
    flush(&mut word)
}

#[cfg(test)]
mod tests {
    use super::banned_word;

    #[test]
    fn environment_and_modules_are_found_anywhere_in_a_filter() {
        for f in [
            "env",
            "$ENV",
            "$ENV.HOME",
            "\"\\(env)\"",
            "env|keys",
            "$ ENV",
            "import \"a\" as a; .",
            "[env[]]",
        ] {
            assert!(banned_word(f).is_some(), "{f}");
        }
        for f in [
            ".",
            ".environment",
            ".[] | .name",
            "map(select(.a > 1))",
            "keys",
            ".envoy",
        ] {
            assert!(banned_word(f).is_none(), "{f}");
        }
    }
}
