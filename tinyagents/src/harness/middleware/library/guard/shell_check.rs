//! Judging a shell command line: a conservative lexer that refuses every
//! construct it does not fully understand (chaining, substitution,
//! expansion, subshells, escapes), then an allow/deny check of each command
//! and a confinement check of every path-like argument and redirection.

use std::path::Path;

use super::path_check::confine;

/// Commands that only read (the only ones read-only mode admits).
pub(super) const READ_ONLY_COMMANDS: &[&str] = &[
    "ls", "cat", "head", "tail", "wc", "grep", "rg", "find", "pwd", "echo", "diff", "sort", "uniq", "stat", "file",
    "du", "tree", "git", "date", "basename", "dirname", "realpath", "cut", "tr", "printf", "true", "false", "test",
    "jq",
];

/// `git` subcommands read-only mode admits.
const GIT_READ_ONLY: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "blame",
    "ls-files",
    "grep",
    "rev-parse",
    "shortlog",
    "describe",
];

/// Options that make an otherwise harmless command run other programs or
/// reach outside the workspace: refused whatever the mode.
const DANGEROUS_OPTIONS: &[(&str, &[&str])] = &[
    (
        "find",
        &[
            "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls",
        ],
    ),
    (
        "git",
        &[
            "-c",
            "--config-env",
            "--exec-path",
            "--upload-pack",
            "--receive-pack",
            "-C",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--ext-diff",
            "--textconv",
        ],
    ),
    ("rg", &["--pre", "--pre-glob", "-z", "--search-zip"]),
    ("grep", &["--devices"]),
];

/// Options that write files, refused in read-only mode.
const WRITING_OPTIONS: &[&str] = &["-o", "--output", "-i", "--in-place"];

/// How commands are judged.
pub(super) struct ShellRules<'a> {
    pub(super) allow: &'a [String],
    pub(super) deny: &'a [String],
    pub(super) read_only: bool,
    pub(super) allow_pipes: bool,
    pub(super) root: &'a Path,
}

#[derive(Debug, PartialEq)]
enum Token {
    Word(String),
    Pipe,
    /// `>`, `>>` or `<`.
    Redirect(&'static str),
}

fn lex(cmd: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = cmd.chars().peekable();
    let flush = |word: &mut String, in_word: &mut bool, tokens: &mut Vec<Token>| {
        if *in_word {
            tokens.push(Token::Word(std::mem::take(word)));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => flush(&mut word, &mut in_word, &mut tokens),
            '\n' | '\r' => return Err("a line break (runs a second command)".to_owned()),
            c if c.is_control() => return Err(format!("a control character (U+{:04X})", c as u32)),
            ';' => return Err("command chaining with `;`".to_owned()),
            '&' => {
                return Err(if chars.peek() == Some(&'&') {
                    "command chaining with `&&`".to_owned()
                } else {
                    "a background `&` or descriptor duplication".to_owned()
                })
            }
            '|' => {
                if chars.peek() == Some(&'|') {
                    return Err("command chaining with `||`".to_owned());
                }
                if chars.peek() == Some(&'&') {
                    return Err("a `|&` pipe".to_owned());
                }
                flush(&mut word, &mut in_word, &mut tokens);
                tokens.push(Token::Pipe);
            }
            '`' => return Err("backtick command substitution".to_owned()),
            '$' => {
                return Err(if chars.peek() == Some(&'(') {
                    "`$(...)` command substitution".to_owned()
                } else {
                    "a `$` expansion (variables are not expanded)".to_owned()
                })
            }
            '(' | ')' => return Err("a subshell or process substitution".to_owned()),
            '{' | '}' => return Err("a brace group or expansion".to_owned()),
            '\\' => return Err("a backslash escape".to_owned()),
            '!' => return Err("a `!` (history expansion or negation)".to_owned()),
            '#' if !in_word => return Err("a `#` comment".to_owned()),
            '~' if !in_word => return Err("a `~` home-directory expansion".to_owned()),
            '>' | '<' => {
                let next = chars.peek().copied();
                if matches!(next, Some('&' | '|' | '(' | '>')) && !(c == '>' && next == Some('>')) {
                    return Err(format!("a `{c}{}` redirection", next.unwrap_or(' ')));
                }
                if c == '<' && next == Some('<') {
                    return Err("a here-document".to_owned());
                }
                if in_word && word.chars().all(|d| d.is_ascii_digit()) {
                    return Err("a redirection of a numbered descriptor".to_owned());
                }
                flush(&mut word, &mut in_word, &mut tokens);
                if c == '>' && next == Some('>') {
                    chars.next();
                    if chars.peek() == Some(&'>') {
                        return Err("a `>>>` redirection".to_owned());
                    }
                    tokens.push(Token::Redirect(">>"));
                } else if c == '>' {
                    tokens.push(Token::Redirect(">"));
                } else {
                    tokens.push(Token::Redirect("<"));
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) if ch.is_control() => return Err("a control character in quotes".to_owned()),
                        Some(ch) => word.push(ch),
                        None => return Err("an unclosed `'` quote".to_owned()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('$' | '`' | '\\' | '!') => {
                            return Err("an expansion or escape inside double quotes".to_owned())
                        }
                        Some(ch) if ch.is_control() => return Err("a control character in quotes".to_owned()),
                        Some(ch) => word.push(ch),
                        None => return Err("an unclosed `\"` quote".to_owned()),
                    }
                }
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    flush(&mut word, &mut in_word, &mut tokens);
    Ok(tokens)
}

/// Whether an argument names a path (and so must stay in the root).
fn path_like(arg: &str) -> bool {
    arg.contains('/') || arg.starts_with('.') || arg == "~"
}

/// `Err(reason)` when the command line is refused.
pub(super) fn check_command(cmd: &str, rules: &ShellRules<'_>) -> Result<(), String> {
    if cmd.trim().is_empty() {
        return Err("an empty command".to_owned());
    }
    let tokens = lex(cmd)?;
    let segments: Vec<&[Token]> = tokens.split(|t| *t == Token::Pipe).collect();
    if segments.len() > 1 && !rules.allow_pipes {
        return Err("a pipe (`allow_pipes` is off)".to_owned());
    }
    for segment in segments {
        check_segment(segment, rules)?;
    }
    Ok(())
}

fn check_segment(tokens: &[Token], rules: &ShellRules<'_>) -> Result<(), String> {
    let mut words = Vec::new();
    let mut iter = tokens.iter();
    while let Some(t) = iter.next() {
        match t {
            Token::Word(w) => words.push(w.as_str()),
            Token::Redirect(op) => {
                let Some(Token::Word(target)) = iter.next() else {
                    return Err(format!("a `{op}` redirection without a target"));
                };
                if rules.read_only && *op != "<" {
                    return Err(format!("a `{op}` redirection writes a file in read-only mode"));
                }
                confine(rules.root, target).map_err(|e| format!("redirection target refused: {e}"))?;
            }
            Token::Pipe => unreachable!("segments are split at pipes"),
        }
    }
    let Some((&command, args)) = words.split_first() else {
        return Err("an empty pipeline stage".to_owned());
    };
    if command.is_empty() {
        return Err("an empty command name".to_owned());
    }
    if command.contains('=') {
        return Err(format!("an environment assignment (`{command}`) before the command"));
    }
    if command.contains('/') {
        return Err(format!("a command given by path (`{command}`): name it plainly"));
    }
    if command
        .chars()
        .any(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+')))
    {
        return Err(format!("a command name that is not understood (`{command}`)"));
    }
    if rules.deny.iter().any(|d| d == command) {
        return Err(format!("the command `{command}` is denied"));
    }
    if !rules.allow.is_empty() && !rules.allow.iter().any(|a| a == command) {
        return Err(format!("the command `{command}` is not in the allowed commands"));
    }
    if rules.read_only && !READ_ONLY_COMMANDS.contains(&command) {
        return Err(format!("the command `{command}` may write, and the guard is read-only"));
    }
    if let Some((_, bad)) = DANGEROUS_OPTIONS.iter().find(|(c, _)| *c == command) {
        for arg in args {
            let opt = arg.split('=').next().unwrap_or(arg);
            if bad.contains(&opt) || (command == "git" && arg.starts_with("-c")) {
                return Err(format!(
                    "`{command} {opt}` can run other programs or leave the workspace"
                ));
            }
        }
    }
    if rules.read_only {
        if command == "git" {
            let sub = args.iter().find(|a| !a.starts_with('-')).copied().unwrap_or("");
            if !GIT_READ_ONLY.contains(&sub) {
                return Err(format!("`git {sub}` may write, and the guard is read-only"));
            }
        }
        for arg in args {
            let opt = arg.split('=').next().unwrap_or(arg);
            if WRITING_OPTIONS.contains(&opt) {
                return Err(format!("`{command} {opt}` writes a file, and the guard is read-only"));
            }
        }
    }
    for arg in args {
        if let Some(stripped) = arg.strip_prefix('-') {
            match stripped.split_once('=') {
                Some((_, value)) if path_like(value) => {
                    confine(rules.root, value).map_err(|e| format!("argument `{arg}` refused: {e}"))?;
                }
                Some(_) => {}
                None if arg.contains('/') => {
                    return Err(format!("an option with a glued path (`{arg}`) is not understood"));
                }
                None => {}
            }
        } else if !arg.is_empty() {
            // Every operand may name a file (a bare name can be a symlink that leaves the root).
            confine(rules.root, arg).map_err(|e| format!("argument refused: {e}"))?;
        }
    }
    Ok(())
}
