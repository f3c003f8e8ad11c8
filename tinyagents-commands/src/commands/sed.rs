//! `sed`: edits streams. The script (first operand, or every `-e`) is
//! parsed command by command: `e` (run a command), `w`/`W` (write a file),
//! `r`/`R` (read a file), the `e` and `w` flags of `s`, and in-place editing
//! (`-i`) are refused; so is a script read from a file (`-f`).

use super::{flag, req, Ctx, Operands, Parsed, Spec, Val, BASE};

pub(crate) const SPEC: Spec = Spec {
    name: "sed",
    opts: &[
        flag(&["-n", "--quiet", "--silent"]),
        req(&["-e", "--expression"], Val::Text),
        flag(&["-E", "-r", "--regexp-extended"]),
        flag(&["--posix"]),
        flag(&["-s", "--separate"]),
        flag(&["--sandbox"]),
        flag(&["-u", "--unbuffered"]),
        flag(&["-z", "--null-data"]),
        req(&["-l", "--line-length"], Val::Num),
        flag(&["--debug"]),
        flag(&["--follow-symlinks"]),
    ],
    deny: &[
        ("-f", "the script must be given inline so the guard can check it"),
        ("--file", "the script must be given inline so the guard can check it"),
        ("-i", "it edits files in place: use the file tools to edit"),
        ("--in-place", "it edits files in place: use the file tools to edit"),
    ],
    operands: Operands::PatternThenRead,
    pattern_opts: &["-e", "--expression"],
    check: Some(check_scripts),
    ..BASE
};

fn check_scripts(parsed: &Parsed, cx: &Ctx<'_>) -> Result<(), String> {
    let mut scripts: Vec<&str> = parsed.values(&["-e", "--expression"]).collect();
    if scripts.is_empty() {
        match parsed.operands.first() {
            Some(s) => scripts.push(s),
            None => return Err(format!("`{}` without a script", cx.program)),
        }
    }
    for s in scripts {
        script(s).map_err(|why| cx.refuse(s, why))?;
    }
    Ok(())
}

/// One command of a sed script as the guard reads it: how many addresses,
/// whether `!` negates them, the command, and for `s` its flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SedCommand {
    pub(crate) addresses: u8,
    pub(crate) negated: bool,
    pub(crate) command: char,
    pub(crate) flags: String,
}

/// Reads one sed script: its commands, or `Err(rule)` for a command that
/// runs programs, touches files or is not understood.
pub(crate) fn script(s: &str) -> Result<Vec<SedCommand>, String> {
    let mut read = Vec::new();
    let c: Vec<char> = s.chars().collect();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < c.len() && (c[*i] == ' ' || c[*i] == '\t') {
            *i += 1;
        }
    };
    // a regex (`regex`: brackets are read) or a replacement delimited by
    // `d`, starting after the opening delimiter
    let delimited = |i: &mut usize, d: char, regex: bool| -> Result<(), String> {
        while *i < c.len() {
            match c[*i] {
                '\\' => *i += 2,
                '\n' => return Err("a line break inside a regex".to_owned()),
                ch if ch == d => {
                    *i += 1;
                    return Ok(());
                }
                '[' if regex => *i = bracket_end(&c, *i)?,
                _ => *i += 1,
            }
        }
        Err("an unterminated regex or replacement".to_owned())
    };
    let address = |i: &mut usize| -> Result<bool, String> {
        if *i >= c.len() {
            return Ok(false);
        }
        match c[*i] {
            '0'..='9' => {
                while *i < c.len() && (c[*i].is_ascii_digit() || c[*i] == '~') {
                    *i += 1;
                }
                Ok(true)
            }
            '$' => {
                *i += 1;
                Ok(true)
            }
            '/' => {
                *i += 1;
                delimited(i, '/', true)?;
                while *i < c.len() && matches!(c[*i], 'I' | 'M') {
                    *i += 1;
                }
                Ok(true)
            }
            '\\' => {
                let Some(&d) = c.get(*i + 1) else {
                    return Err("an address delimiter is missing".to_owned());
                };
                *i += 2;
                delimited(i, d, true)?;
                while *i < c.len() && matches!(c[*i], 'I' | 'M') {
                    *i += 1;
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    };
    let mut depth = 0usize;
    loop {
        while i < c.len() && matches!(c[i], ' ' | '\t' | ';' | '\n') {
            i += 1;
        }
        if i >= c.len() {
            break;
        }
        let mut addresses = 0u8;
        if address(&mut i)? {
            addresses = 1;
            skip_ws(&mut i);
            if i < c.len() && c[i] == ',' {
                addresses = 2;
                i += 1;
                skip_ws(&mut i);
                if i < c.len() && matches!(c[i], '+' | '~') {
                    i += 1;
                    while i < c.len() && c[i].is_ascii_digit() {
                        i += 1;
                    }
                } else if !address(&mut i)? {
                    return Err("a second address is missing after `,`".to_owned());
                }
            }
        }
        skip_ws(&mut i);
        let mut negated = false;
        while i < c.len() && c[i] == '!' {
            negated = true;
            i += 1;
            skip_ws(&mut i);
        }
        let Some(&cmd) = c.get(i) else {
            return Err("an address without a command".to_owned());
        };
        i += 1;
        read.push(SedCommand {
            addresses,
            negated,
            command: cmd,
            flags: String::new(),
        });
        match cmd {
            '{' => {
                depth += 1;
                continue;
            }
            '}' => {
                depth = depth.checked_sub(1).ok_or_else(|| "an unmatched `}`".to_owned())?;
            }
            '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z' | 'F' => {}
            'q' | 'Q' | 'l' | 'L' => {
                skip_ws(&mut i);
                while i < c.len() && c[i].is_ascii_digit() {
                    i += 1;
                }
            }
            ':' | 'b' | 't' | 'T' | 'v' => {
                // GNU sed ends a label (and `v`'s version) at a blank or `;`,
                // and reads the next command right after it: `:a e CMD` is a
                // label and then `e`. Only a plain label, then the end of the
                // command, is understood.
                skip_ws(&mut i);
                let start = i;
                while i < c.len() && !matches!(c[i], ' ' | '\t' | '\n' | ';' | '}') {
                    if !(c[i].is_ascii_alphanumeric() || matches!(c[i], '_' | '.' | '-')) {
                        return Err(format!(
                            "a label with `{}` in it (a label is letters, digits, `_`, `.` or `-`)",
                            c[i]
                        ));
                    }
                    i += 1;
                }
                if cmd == ':' && i == start {
                    return Err("`:` without a label".to_owned());
                }
                skip_ws(&mut i);
                if i < c.len() && !matches!(c[i], '\n' | ';' | '}') {
                    return Err(format!(
                        "text after the label of `{cmd}` (sed reads it as another command): end the command with `;` \
                         or a line break"
                    ));
                }
            }
            'a' | 'i' | 'c' => {
                while i < c.len() && c[i] != '\n' {
                    if c[i] == '\\' && c.get(i + 1) == Some(&'\n') {
                        return Err("a multi-line `a`/`i`/`c` text".to_owned());
                    }
                    i += 1;
                }
            }
            's' => {
                let Some(&d) = c.get(i) else {
                    return Err("`s` without a delimiter".to_owned());
                };
                if d == '\n' || d == '\\' {
                    return Err("`s` with a line break or backslash delimiter".to_owned());
                }
                i += 1;
                delimited(&mut i, d, true)?;
                delimited(&mut i, d, false)?;
                while i < c.len() {
                    match c[i] {
                        f @ ('g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9') => {
                            if let Some(last) = read.last_mut() {
                                last.flags.push(f);
                            }
                            i += 1;
                        }
                        'e' => return Err("the `e` flag of `s` runs the pattern space as a command".to_owned()),
                        'w' => return Err("the `w` flag of `s` writes a file".to_owned()),
                        _ => break,
                    }
                }
            }
            'y' => {
                let Some(&d) = c.get(i) else {
                    return Err("`y` without a delimiter".to_owned());
                };
                i += 1;
                delimited(&mut i, d, false)?;
                delimited(&mut i, d, false)?;
            }
            'e' => return Err("the `e` command runs a command".to_owned()),
            'w' | 'W' => return Err(format!("the `{cmd}` command writes a file")),
            'r' | 'R' => return Err(format!("the `{cmd}` command reads a file the guard cannot check")),
            other => return Err(format!("the command `{other}` is not understood")),
        }
        skip_ws(&mut i);
        if i < c.len() && !matches!(c[i], ';' | '\n' | '}') {
            return Err(format!("`{}` after a command is not understood", c[i]));
        }
    }
    if depth != 0 {
        return Err("an unclosed `{`".to_owned());
    }
    Ok(read)
}

/// The index just past the bracket expression opening at `c[open]` (`[`),
/// as GNU sed reads it: the delimiter and a backslash are ordinary members
/// there; a `]` first (after an optional `^`) is a member; `[:`, `[.` and
/// `[=` open a class, collating element or equivalence class that ends at
/// `:]`, `.]` or `=]`.
fn bracket_end(c: &[char], open: usize) -> Result<usize, String> {
    let mut j = open + 1;
    if c.get(j) == Some(&'^') {
        j += 1;
    }
    if c.get(j) == Some(&']') {
        j += 1;
    }
    loop {
        match c.get(j) {
            None => return Err("an unterminated bracket expression `[...]` in a regex".to_owned()),
            Some('\n') => return Err("a line break inside a bracket expression".to_owned()),
            Some(']') => return Ok(j + 1),
            Some('[') if matches!(c.get(j + 1), Some(':' | '.' | '=')) => {
                let kind = c[j + 1];
                let mut k = j + 2;
                loop {
                    match (c.get(k), c.get(k + 1)) {
                        (Some(&a), Some(']')) if a == kind => break,
                        (None, _) => {
                            return Err(format!(
                                "an unterminated `[{kind}` inside a bracket expression (it ends at `{kind}]`)"
                            ))
                        }
                        _ => k += 1,
                    }
                }
                j = k + 2;
            }
            Some(_) => j += 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::script;

    #[test]
    fn ordinary_scripts_pass_and_commands_that_run_or_touch_files_do_not() {
        for ok in [
            "1,20p",
            "s/foo/bar/g",
            "/^#/d",
            "$p",
            "s|a|b|",
            "10q",
            "/start/,/end/p",
            "1~2d",
            "y/abc/xyz/",
            "s/a/b/;s/c/d/2",
            "/x/{p;d}",
            "=",
            "2,+3p",
            "\\,x,p",
            "s/\\//-/g",
            ":a;s/x/y/;ta",
            ":a\nN;ba",
            "/x/{:loop;s/a/b/;tloop}",
            "b",
            "bend;p;:end",
            "v 4.2",
            "v;p",
            // a delimiter inside a bracket expression belongs to the regex
            "s/[^/]*$//",
            "s/[/]/-/g",
            "/[/a]/p",
            "s/[]/]/x/",
            "s/[[:alpha:]/]/x/",
            "s^[^^]^x^",
            "\\,[,],p",
        ] {
            assert!(script(ok).is_ok(), "{ok}: {:?}", script(ok));
        }
        for bad in [
            "e",
            "1e id",
            "s/x/id/e",
            "s/x/y/w out",
            "w /tmp/x",
            "W x",
            "r /etc/passwd",
            "R x",
            "1!e",
            "/a/e ls",
            "s/a/b/ge",
            "{p",
            "}",
            "k",
            "p x",
            "s/a/b",
            "$!{e}",
            // GNU sed ends a label at a blank: what follows is another command
            ":a e touch pwned",
            ":a\te id",
            "ta e id",
            "b x w .git/config",
            "T x r /etc/passwd",
            "v 4.2 e id",
            ":a w out",
            ":",
            ":a$b",
            // the bracket spellings that hid a command from a reader that ended the regex at the delimiter
            "/[/a]/e",
            "/[/a]/e id",
            "s/[/]/g;/w .git/config",
            "s/[/]/x/w out",
            "/[/]/r /etc/passwd",
            "\\,[,],e",
            "s|[|]|x|e",
            "/[[:alpha:]/]/W out",
            "s/[/x/",
            "s/[[:/]/x/",
        ] {
            assert!(script(bad).is_err(), "{bad}");
        }
    }
}

/// The guard's reading of generated scripts against GNU sed's own: `sed
/// --debug` prints the program it parsed, one command a line. For every
/// script the guard admits and sed accepts, both must see the same
/// commands, with the same addresses, negation and `s` flags (so no `e`,
/// `w`, `r` hidden from the guard). The scripts are built from the pieces
/// that fooled the guard before: brackets holding the delimiter, custom
/// delimiters, escapes.
#[cfg(test)]
mod differential {
    use proptest::prelude::*;

    use super::{script, SedCommand};

    /// Whether this machine's `sed` is GNU sed with `--debug` (4.6 or later).
    fn gnu_sed() -> bool {
        std::process::Command::new("sed")
            .arg("--version")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("GNU sed"))
    }

    /// sed's reading of `script`, from `sed --debug` (`None` when sed refuses it).
    fn sed_reading(script: &str, dir: &std::path::Path) -> Option<Vec<SedCommand>> {
        // no input: nothing runs, sed only parses (and prints) the program
        let out = std::process::Command::new("sed")
            .args(["--debug", "-n", "-e", script, "/dev/null"])
            .current_dir(dir)
            .env_clear()
            .output()
            .expect("sed runs");
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let program = text.strip_prefix("SED PROGRAM:\n")?;
        Some(
            program
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(debug_line)
                .collect(),
        )
    }

    /// One line of `sed --debug`'s program: addresses, `!`, the command,
    /// and for `s` the flags after its last `/` (sed prints every regex with
    /// `/` delimiters, a `/` inside it escaped).
    fn debug_line(line: &str) -> SedCommand {
        let c: Vec<char> = line.trim_start().chars().collect();
        let mut i = 0;
        let mut addresses = 0u8;
        let address = |i: &mut usize| -> bool {
            match c.get(*i) {
                Some('0'..='9') => {
                    while c.get(*i).is_some_and(|d| d.is_ascii_digit() || *d == '~') {
                        *i += 1;
                    }
                    true
                }
                Some('$') => {
                    *i += 1;
                    true
                }
                Some('/') => {
                    *i += 1;
                    while let Some(&ch) = c.get(*i) {
                        *i += if ch == '\\' { 2 } else { 1 };
                        if ch == '/' {
                            break;
                        }
                    }
                    while c.get(*i).is_some_and(|f| matches!(f, 'I' | 'M')) {
                        *i += 1;
                    }
                    true
                }
                _ => false,
            }
        };
        if address(&mut i) {
            addresses = 1;
            if c.get(i) == Some(&',') {
                addresses = 2;
                i += 1;
                if matches!(c.get(i), Some('+' | '~')) {
                    i += 1;
                    while c.get(i).is_some_and(char::is_ascii_digit) {
                        i += 1;
                    }
                } else {
                    address(&mut i);
                }
            }
        }
        let mut negated = false;
        while matches!(c.get(i), Some(' ' | '!')) {
            negated |= c[i] == '!';
            i += 1;
        }
        let command = c.get(i).copied().unwrap_or(' ');
        let mut flags = String::new();
        if command == 's' {
            let rest: String = c[i..].iter().collect();
            flags = rest.rsplit('/').next().unwrap_or("").to_owned();
        }
        SedCommand {
            addresses,
            negated,
            command,
            flags,
        }
    }

    /// Flags compared as sed prints them: lower case, in any order.
    fn normal(mut cmds: Vec<SedCommand>) -> Vec<SedCommand> {
        for c in &mut cmds {
            let mut f: Vec<char> = c.flags.to_lowercase().chars().collect();
            f.sort_unstable();
            c.flags = f.into_iter().collect();
        }
        cmds
    }

    fn regex() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec![
                "a",
                "x",
                ".",
                "*",
                "[/]",
                "[^/]",
                "[]/]",
                "[^]/]",
                "[[:alpha:]/]",
                "[[.-.]/]",
                "[\\]",
                "\\/",
                "\\[",
                "[,|]",
                "[a-z/]*",
                "$",
                "^",
                "\\(a\\)",
                "/",
                "|",
                ",",
                "[",
                "]",
                "\\n",
                "[/a]",
                "[/p]",
                "[/i]",
                "[|a]",
                "[,a]",
                "[#a]",
                "[/]/g;/",
                "[|]|g;|",
            ]),
            0..5,
        )
        .prop_map(|v| v.concat())
    }

    fn replacement() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop::sample::select(vec!["b", "&", "[", "]", "\\/", "|", ",", "/"]),
            0..3,
        )
        .prop_map(|v| v.concat())
    }

    fn address() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            Just("1".to_owned()),
            Just("$".to_owned()),
            Just("2,5".to_owned()),
            Just("1~2".to_owned()),
            Just("3,+2".to_owned()),
            regex().prop_map(|r| format!("/{r}/")),
            regex().prop_map(|r| format!("\\,{r},")),
            regex().prop_map(|r| format!("/{r}/I,/x/")),
            regex().prop_map(|r| format!("0,/{r}/")),
        ]
    }

    fn command() -> impl Strategy<Value = String> {
        let delim = prop::sample::select(vec!['/', '|', ',', '#', ':', '[', ']']);
        let flags = prop::sample::select(vec!["", "g", "p", "2", "gI", "e", "w out", "M", "3g", "pe"]);
        prop_oneof![
            prop::sample::select(vec![
                "p", "d", "=", "h", "G", "x", "n", "N", "P", "D", "z", "F", "l", "q", "Q 1", "b", "t", "T", "e",
                "e id", "w out", "W out", "r in", "R in", "a text;p", "i\\", "y/ab/cd/",
            ])
            .prop_map(str::to_owned),
            (delim, regex(), replacement(), flags).prop_map(|(d, r, s, f)| format!("s{d}{r}{d}{s}{d}{f}")),
        ]
    }

    fn sed_script() -> impl Strategy<Value = String> {
        prop::collection::vec(
            (
                address(),
                prop::bool::weighted(0.2),
                command(),
                prop::bool::weighted(0.15),
            ),
            1..4,
        )
        .prop_map(|cmds| {
            let mut s = String::new();
            for (addr, neg, cmd, block) in cmds {
                s.push_str(&addr);
                if neg && !addr.is_empty() {
                    s.push('!');
                }
                if block {
                    s.push_str(&format!("{{{cmd}\n}}"));
                } else {
                    s.push_str(&cmd);
                }
                s.push('\n');
            }
            s
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 384, ..ProptestConfig::default() })]

        #[test]
        fn the_guard_reads_sed_scripts_as_gnu_sed_does(s in sed_script()) {
            if !gnu_sed() {
                eprintln!("SKIPPED: no GNU sed here");
                return Ok(());
            }
            let Ok(guard) = script(&s) else { return Ok(()) };
            let dir = std::env::temp_dir().join(format!("ta-sed-diff-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let sed = sed_reading(&s, &dir);
            let _ = std::fs::remove_dir_all(&dir);
            if let Some(sed) = sed {
                prop_assert_eq!(normal(guard), normal(sed), "script {:?}", s);
            }
        }
    }

    /// The generator reaches what the property is about: admitted scripts
    /// that sed also runs, and bracket forms among them.
    #[test]
    fn the_generated_scripts_exercise_both_readers() {
        if !gnu_sed() {
            eprintln!("SKIPPED: no GNU sed here");
            return;
        }
        let dir = std::env::temp_dir().join(format!("ta-sed-cover-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for s in ["s/[^/]*$//", "/[/a]/p", "s|[|]|x|g", "\\,[,],p;s/[]/]/x/2"] {
            let guard = normal(script(s).unwrap());
            assert_eq!(Some(guard), sed_reading(s, &dir).map(normal), "{s}");
        }
        // what a reader ending the regex at the delimiter got wrong: sed sees `e`
        let sed = sed_reading("/[/a]/e", &dir).unwrap();
        assert_eq!(sed[0].command, 'e');
        assert!(script("/[/a]/e").is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
