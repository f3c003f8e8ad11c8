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

/// Checks one sed script: `Err(rule)` for a command that runs programs,
/// touches files or is not understood.
pub(crate) fn script(s: &str) -> Result<(), String> {
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
        if address(&mut i)? {
            skip_ws(&mut i);
            if i < c.len() && c[i] == ',' {
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
        while i < c.len() && c[i] == '!' {
            i += 1;
            skip_ws(&mut i);
        }
        let Some(&cmd) = c.get(i) else {
            return Err("an address without a command".to_owned());
        };
        i += 1;
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
                        'g' | 'p' | 'i' | 'I' | 'm' | 'M' | '0'..='9' => i += 1,
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
    Ok(())
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
