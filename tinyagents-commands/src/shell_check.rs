//! Judging a shell command line: a lexer that follows the quoting `bash`
//! and POSIX `sh` share exactly and refuses every construct it does not
//! fully understand, or that the two read differently
//! (chaining, substitution, expansion, subshells, here-documents), glob
//! expansion with every match confined, redirections confined, then each
//! pipeline stage checked against its program's argv-level specification
//! ([`crate::commands`]).

use std::path::Path;

use crate::commands::{self, intrinsic_refusal, Ctx};
use crate::path_check::{confine_from, confine_named, expand_glob, WalkBudget, EXPANSION_LIMIT};
use crate::plan::{PlanRedirect, PlanStage, RedirectTarget, ShellPlan};

/// The longest command line judged.
const MAX_COMMAND_BYTES: usize = 64 * 1024;
/// The most glob metacharacters in one word (matching is backtracking).
const MAX_GLOB_METAS: usize = 16;

/// How commands are judged.
pub(crate) struct ShellRules<'a> {
    pub(crate) allow: &'a [String],
    pub(crate) deny: &'a [String],
    pub(crate) read_only: bool,
    pub(crate) allow_pipes: bool,
    pub(crate) root: &'a Path,
    /// The canonical directory the command runs in (under the root).
    pub(crate) cwd: &'a Path,
    pub(crate) protected: &'a [String],
    /// The `workspace` profile is on.
    pub(crate) workspace: bool,
    /// The run's workspace requires the OS sandbox.
    pub(crate) sandboxed: bool,
}

/// One shell word: its text after quote removal, and the glob pattern it is
/// (quoted metacharacters escaped) when an unquoted `*`, `?` or `[` makes
/// the shell expand it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Word {
    pub(crate) text: String,
    pub(crate) glob: Option<String>,
}

#[derive(Debug, PartialEq)]
pub(crate) enum Token {
    Word(Word),
    Pipe,
    /// A redirection: the descriptor, the operator (`>`, `>>`, `<`, `>&`),
    /// and for `>&` the descriptor duplicated.
    Redirect {
        fd: Option<u32>,
        op: &'static str,
        dup: Option<u32>,
    },
}

/// Splits a command line into tokens as `bash` and POSIX `sh` both would,
/// refusing what is not understood or what the two read differently.
pub(crate) fn lex(cmd: &str) -> Result<Vec<Token>, String> {
    let c: Vec<char> = cmd.chars().collect();
    let mut tokens = Vec::new();
    let mut text = String::new();
    let mut pattern = String::new();
    let mut in_word = false;
    let mut globbing = false;
    let mut any_quoted = false;
    // an unquoted `[` opened a bracket expression in this word: a quote after
    // it is refused (the shells read a quoted member literally, the matcher
    // reads the `[x]` it is escaped to as a bracket of its own)
    let mut bracket = false;
    // the previous character of the word, and whether it was unquoted
    let mut prev: Option<(char, bool)> = None;
    let mut i = 0;
    macro_rules! flush {
        () => {
            if in_word {
                tokens.push(Token::Word(Word {
                    text: std::mem::take(&mut text),
                    glob: globbing.then(|| std::mem::take(&mut pattern)),
                }));
                pattern.clear();
                in_word = false;
                globbing = false;
                any_quoted = false;
                bracket = false;
                prev = None;
            }
        };
    }
    let quoted_push = |text: &mut String, pattern: &mut String, ch: char| {
        text.push(ch);
        if matches!(ch, '*' | '?' | '[' | ']') {
            pattern.push('[');
            pattern.push(ch);
            pattern.push(']');
        } else {
            pattern.push(ch);
        }
    };
    while i < c.len() {
        let ch = c[i];
        i += 1;
        match ch {
            ' ' | '\t' => flush!(),
            '\n' | '\r' => {
                return Err("a line break (it would run a second command): send one command per call".to_owned())
            }
            ch if ch.is_control() => return Err(format!("a control character (U+{:04X})", ch as u32)),
            ';' => return Err("command chaining with `;`: send one command per call".to_owned()),
            '&' => match c.get(i) {
                Some('&') => return Err("command chaining with `&&`: send one command per call".to_owned()),
                // bash reads `&>` as "stdout and stderr to a file"; POSIX sh (dash, the
                // `/bin/sh` of Debian) reads a background `&` and a second command
                Some('>') => {
                    return Err(
                        "a `&>` redirection (`/bin/sh` may read it as a background `&` and a second command): \
                         write `> FILE 2>&1`"
                            .to_owned(),
                    )
                }
                _ => return Err("a background `&` (the command would outlive the call)".to_owned()),
            },
            '|' => match c.get(i) {
                Some('|') => return Err("command chaining with `||`: send one command per call".to_owned()),
                Some('&') => return Err("a `|&` pipe (use `2>&1 |`)".to_owned()),
                _ => {
                    flush!();
                    tokens.push(Token::Pipe);
                }
            },
            '`' => return Err("backtick command substitution".to_owned()),
            '$' => {
                return Err(match c.get(i) {
                    Some('(') => "`$(...)` command substitution".to_owned(),
                    Some('\'') => "`$'...'` quoting is not supported: use plain single quotes".to_owned(),
                    _ => "a `$` expansion outside single quotes (variables are not expanded: quote a literal `$` \
                          with single quotes)"
                        .to_owned(),
                })
            }
            '(' | ')' => return Err("a subshell, process substitution or extended glob (quote parentheses)".to_owned()),
            '{' | '}' => return Err("a brace group or brace expansion (quote braces)".to_owned()),
            '\\' => return Err("a backslash outside quotes: quote the argument with single quotes instead".to_owned()),
            '!' => return Err("a `!` outside single quotes (negation or history expansion)".to_owned()),
            '#' if !in_word => return Err("a `#` comment (quote it if it is an argument)".to_owned()),
            '~' if !in_word || matches!(prev, Some(('=' | ':', true))) => {
                return Err("a `~` home-directory expansion".to_owned())
            }
            '>' | '<' => {
                let mut fd = None;
                if in_word {
                    if !any_quoted && !text.is_empty() && text.chars().all(|d| d.is_ascii_digit()) {
                        let n: u32 = text
                            .parse()
                            .map_err(|_| "a redirection descriptor that is too large".to_owned())?;
                        if n > 2 {
                            return Err(format!(
                                "a redirection of descriptor {n} (only 0, 1 and 2 are understood)"
                            ));
                        }
                        fd = Some(n);
                        text.clear();
                        pattern.clear();
                        in_word = false;
                        prev = None;
                    } else {
                        flush!();
                    }
                }
                let next = c.get(i).copied();
                let op: &'static str = match (ch, next) {
                    ('<', Some('<')) => return Err("a here-document or here-string".to_owned()),
                    ('<', Some('>')) => return Err("a `<>` read-write redirection".to_owned()),
                    ('<', Some('(')) | ('>', Some('(')) => return Err("a process substitution".to_owned()),
                    ('<', Some('&')) => return Err("a `<&` descriptor duplication".to_owned()),
                    ('>', Some('|')) => return Err("a `>|` clobbering redirection".to_owned()),
                    ('>', Some('>')) => {
                        i += 1;
                        ">>"
                    }
                    ('>', Some('&')) => {
                        i += 1;
                        let start = i;
                        while i < c.len() && c[i].is_ascii_digit() {
                            i += 1;
                        }
                        let digits: String = c[start..i].iter().collect();
                        let Ok(dup) = digits.parse::<u32>() else {
                            return Err(
                                "a `>&` redirection to a file or a closed descriptor (use `> file 2>&1`)".to_owned(),
                            );
                        };
                        if dup > 2 || c.get(i).is_some_and(|n| !matches!(n, ' ' | '\t' | '|')) {
                            return Err(format!("a `>&{digits}` duplication that is not understood"));
                        }
                        tokens.push(Token::Redirect {
                            fd,
                            op: ">&",
                            dup: Some(dup),
                        });
                        continue;
                    }
                    ('>', _) => ">",
                    _ => "<",
                };
                if op == ">>" && c.get(i) == Some(&'>') {
                    return Err("a `>>>` redirection".to_owned());
                }
                tokens.push(Token::Redirect { fd, op, dup: None });
            }
            '\'' | '"' if bracket => {
                return Err(
                    "a quoted character after a `[` in the same word (the shells read it as a member of the \
                     bracket, the guard's matcher would not): list the characters unquoted, or quote the whole word"
                        .to_owned(),
                )
            }
            '\'' => {
                in_word = true;
                any_quoted = true;
                loop {
                    match c.get(i) {
                        Some('\'') => {
                            i += 1;
                            break;
                        }
                        Some('\n' | '\r') => return Err("a line break inside quotes".to_owned()),
                        Some(&q) if q.is_control() && q != '\t' => {
                            return Err(format!("a control character (U+{:04X}) inside quotes", q as u32))
                        }
                        Some(&q) => {
                            quoted_push(&mut text, &mut pattern, q);
                            prev = Some((q, false));
                            i += 1;
                        }
                        None => return Err("an unclosed `'` quote".to_owned()),
                    }
                }
            }
            '"' => {
                in_word = true;
                any_quoted = true;
                loop {
                    let Some(&q) = c.get(i) else {
                        return Err("an unclosed `\"` quote".to_owned());
                    };
                    i += 1;
                    match q {
                        '"' => break,
                        '\\' => match c.get(i) {
                            Some(&e @ ('"' | '\\' | '$' | '`')) => {
                                quoted_push(&mut text, &mut pattern, e);
                                prev = Some((e, false));
                                i += 1;
                            }
                            Some('\n') | None => return Err("a backslash line continuation".to_owned()),
                            Some(_) => {
                                quoted_push(&mut text, &mut pattern, '\\');
                                prev = Some(('\\', false));
                            }
                        },
                        '$' => {
                            return Err(
                                "a `$` inside double quotes expands a variable or a command: use single quotes for a \
                                 literal `$`"
                                    .to_owned(),
                            )
                        }
                        '`' => return Err("backtick command substitution inside double quotes".to_owned()),
                        '!' => {
                            return Err("a `!` inside double quotes (history expansion): use single quotes".to_owned())
                        }
                        '\n' | '\r' => return Err("a line break inside quotes".to_owned()),
                        q if q.is_control() && q != '\t' => {
                            return Err(format!("a control character (U+{:04X}) inside quotes", q as u32))
                        }
                        q => {
                            quoted_push(&mut text, &mut pattern, q);
                            prev = Some((q, false));
                        }
                    }
                }
            }
            '*' | '?' | '[' => {
                in_word = true;
                globbing = true;
                bracket |= ch == '[';
                text.push(ch);
                pattern.push(ch);
                prev = Some((ch, true));
            }
            ch => {
                in_word = true;
                text.push(ch);
                pattern.push(ch);
                prev = Some((ch, true));
            }
        }
    }
    if in_word {
        tokens.push(Token::Word(Word {
            text,
            glob: globbing.then_some(pattern),
        }));
    }
    Ok(tokens)
}

/// The tokens of the command line, or `Err(reason)` when it is not
/// understood (empty, too long, or a construct the lexer refuses).
pub(crate) fn read_line(cmd: &str) -> Result<Vec<Token>, String> {
    if cmd.trim().is_empty() {
        return Err("an empty command".to_owned());
    }
    if cmd.len() > MAX_COMMAND_BYTES {
        return Err(format!(
            "a command line of {} bytes (more than {MAX_COMMAND_BYTES}): send a shorter command",
            cmd.len()
        ));
    }
    lex(cmd)
}

/// The plan of the command line `cmd` read into `tokens` — what runs,
/// exactly — or `Err(reason)` when it is refused.
pub(crate) fn plan_tokens(cmd: &str, tokens: &[Token], rules: &ShellRules<'_>) -> Result<ShellPlan, String> {
    let stages: Vec<&[Token]> = tokens.split(|t| *t == Token::Pipe).collect();
    if stages.len() > 1 && !rules.allow_pipes {
        return Err("a pipe (`allow_pipes` is off)".to_owned());
    }
    let pipeline = stages.len() > 1;
    // one budget for every glob of the line: what a word may walk and yield
    // is bounded, and so is what all of them together may
    let mut budget = GlobBudget::default();
    let walk = WalkBudget::default();
    let mut planned = Vec::with_capacity(stages.len());
    for stage in stages {
        planned.push(check_stage(stage, rules, pipeline, &mut budget, &walk)?);
    }
    Ok(ShellPlan::new(cmd, planned, rules.cwd))
}

/// The words the globs of one command line have become so far (at most
/// [`EXPANSION_LIMIT`](crate::path_check::EXPANSION_LIMIT)); what their
/// expansion visited is charged to the line's [`WalkBudget`].
#[derive(Debug, Default)]
struct GlobBudget {
    words: usize,
}

fn check_stage(
    tokens: &[Token],
    rules: &ShellRules<'_>,
    pipeline: bool,
    budget: &mut GlobBudget,
    walk: &WalkBudget,
) -> Result<PlanStage, String> {
    let mut words: Vec<&Word> = Vec::new();
    let mut redirects = Vec::new();
    let mut iter = tokens.iter();
    while let Some(t) = iter.next() {
        match t {
            Token::Word(w) => words.push(w),
            Token::Redirect { fd, op, dup: Some(dup) } => {
                debug_assert_eq!(*op, ">&");
                redirects.push((*fd, *op, Err(*dup)));
            }
            Token::Redirect { fd, op, dup: None } => {
                let Some(Token::Word(target)) = iter.next() else {
                    return Err(format!("a `{op}` redirection without a target"));
                };
                redirects.push((*fd, *op, Ok(target)));
            }
            Token::Pipe => unreachable!("stages are split at pipes"),
        }
    }
    let Some((name, args)) = words.split_first() else {
        return Err("an empty pipeline stage (or a redirection without a command)".to_owned());
    };
    if name.glob.is_some() {
        return Err(format!("a command name with a glob (`{}`)", name.text));
    }
    let command = name.text.as_str();
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
    let profile_spec = if rules.workspace {
        commands::workspace_spec(command)
    } else {
        None
    };
    if profile_spec.is_some() && !rules.sandboxed {
        return Err(format!(
            "`{command}` runs the project's own code: the `workspace` profile admits it only where the run's \
             workspace requires the OS sandbox (WorkspaceDescriptor::with_sandbox(SandboxMode::Required)), and this \
             run's does not"
        ));
    }
    if profile_spec.is_none()
        && let Some(why) = intrinsic_refusal(command)
    {
        return Err(format!("the command `{command}` is refused: {why}"));
    }
    if rules.deny.iter().any(|d| d == command) {
        return Err(format!("the command `{command}` is denied (`deny_commands`)"));
    }
    let Some(spec) = profile_spec.or_else(|| commands::spec(command)) else {
        return Err(format!(
            "the command `{command}` has no argv specification in the guard, so it is refused (specified: {})",
            commands::specified_commands().join(", ")
        ));
    };
    // the workspace profile, with the sandbox required, admits its own programs and cargo
    let profile = rules.workspace && rules.sandboxed && (profile_spec.is_some() || command == "cargo");
    let listed = profile || rules.allow.iter().any(|a| a == command);
    if !listed && (!rules.allow.is_empty() || spec.opt_in) {
        return Err(format!(
            "the command `{command}` is not in the allowed commands (`allow_commands`){}",
            if spec.opt_in {
                "; it runs code from the workspace, so it is admitted only when listed there explicitly"
            } else {
                ""
            }
        ));
    }
    if pipeline && spec.relinks {
        return Err(format!(
            "`{command}` can create or move symlinks, so it is refused inside a pipeline (a later stage would be \
             checked before the link exists): run it on its own"
        ));
    }
    let cx = Ctx {
        root: rules.root,
        cwd: rules.cwd,
        read_only: rules.read_only,
        protected: rules.protected,
        program: spec.name,
        walk,
        workspace: rules.workspace && rules.sandboxed,
    };
    // Expand globs as bash would; every match must be confined whatever the program does with it.
    let mut argv: Vec<String> = Vec::with_capacity(args.len());
    for w in args {
        match &w.glob {
            None => argv.push(w.text.clone()),
            Some(pattern) => {
                let words = expand_word(&w.text, pattern, rules, &cx)?;
                budget.words += words.len();
                if budget.words > EXPANSION_LIMIT {
                    return Err(cx.refuse(
                        &w.text,
                        format!(
                            "the globs of this command expand to more than {EXPANSION_LIMIT} words (too many to \
                             check): narrow them"
                        ),
                    ));
                }
                argv.extend(words);
            }
        }
    }
    let mut planned = Vec::with_capacity(redirects.len());
    for (fd, op, target) in redirects {
        let default = if op == "<" { 0 } else { 1 };
        let target = match target {
            Err(dup) => RedirectTarget::Dup(dup),
            Ok(target) => check_redirect(fd, op, target, rules)?,
        };
        planned.push(PlanRedirect {
            fd: fd.unwrap_or(default),
            target,
        });
    }
    commands::check(spec, &argv, &cx)?;
    // git runs against the repository the guard judged, whatever an earlier
    // stage of the pipeline makes of the directories on the way
    let repository = match command {
        "git" => commands::git::pinned_repository(&argv, &cx)?,
        _ => None,
    };
    let mut run = Vec::with_capacity(argv.len() + 1);
    run.push(command.to_owned());
    run.extend(argv);
    PlanStage::new(
        run,
        planned,
        repository
            .as_ref()
            .map(|r| (r.git_dir.as_path(), r.work_tree.as_path())),
    )
}

/// The words an unquoted glob word becomes, each confined: its matches, or
/// the word itself when nothing matches. A match that begins with `-` is
/// given as `./-name`: the same file, which no program reads as an option.
fn expand_word(text: &str, pattern: &str, rules: &ShellRules<'_>, cx: &Ctx<'_>) -> Result<Vec<String>, String> {
    if pattern.matches(['*', '?', '[']).count() > MAX_GLOB_METAS {
        return Err(cx.refuse(
            text,
            format!("a glob with more than {MAX_GLOB_METAS} wildcards: narrow it"),
        ));
    }
    // the directories before the first glob component must be in the root: checked before any listing
    let literal: Vec<&str> = pattern
        .split('/')
        .take_while(|p| !p.contains(['*', '?', '[']))
        .collect();
    let literal = literal.join("/");
    if !literal.is_empty() && (pattern.starts_with('/') || literal.split('/').any(|p| p == "..")) {
        confine_from(rules.root, rules.cwd, &literal)
            .map_err(|e| cx.refuse(text, format!("a glob outside the workspace: {e}")))?;
    }
    match expand_glob(rules.root, rules.cwd, pattern, false, cx.walk).map_err(|e| cx.refuse(text, e))? {
        Some(matches) => {
            for m in &matches {
                confine_from(rules.root, rules.cwd, m)
                    .map_err(|e| cx.refuse(text, format!("the glob matches `{m}`: {e}")))?;
            }
            Ok(matches
                .into_iter()
                .map(|m| if m.starts_with('-') { format!("./{m}") } else { m })
                .collect())
        }
        None => {
            if text.starts_with('/') || text.split('/').any(|p| p == "..") {
                confine_from(rules.root, rules.cwd, text)
                    .map_err(|e| cx.refuse(text, format!("a glob outside the workspace: {e}")))?;
            }
            Ok(vec![text.to_owned()])
        }
    }
}

/// Checks one redirection and returns the file it opens, resolved.
fn check_redirect(fd: Option<u32>, op: &str, target: &Word, rules: &ShellRules<'_>) -> Result<RedirectTarget, String> {
    let shown = format!("{}{op} {}", fd.map(|f| f.to_string()).unwrap_or_default(), target.text);
    if target.glob.is_some() {
        return Err(format!(
            "the redirection `{shown}` has a glob target: name the file plainly"
        ));
    }
    if target.text == "/dev/null" {
        return Ok(RedirectTarget::Null);
    }
    let writes = op != "<";
    if writes && rules.read_only {
        return Err(format!(
            "the redirection `{shown}` writes a file, and the guard is read-only (fix: drop the redirection, the \
             output comes back to you anyway)"
        ));
    }
    let named = confine_named(rules.root, rules.cwd, &target.text)
        .map_err(|e| format!("the redirection `{shown}` is refused: {e}"))?;
    if writes && let Some(hit) = named.protected_hit(rules.root, rules.protected) {
        return Err(format!(
            "the redirection `{shown}` writes under `{hit}` (or through a symlink standing at that name), \
             configuration that programs execute (protected_paths, matched at any depth); make that change \
             yourself, or remove `{hit}` from `protected_paths`"
        ));
    }
    let path = named.resolved;
    Ok(match op {
        "<" => RedirectTarget::Read(path),
        ">>" => RedirectTarget::Append(path),
        _ => RedirectTarget::Write(path),
    })
}

#[cfg(test)]
mod tests {
    use super::{lex, Token, Word};

    fn words(cmd: &str) -> Vec<String> {
        lex(cmd)
            .unwrap()
            .into_iter()
            .filter_map(|t| match t {
                Token::Word(Word { text, .. }) => Some(text),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn quoting_follows_bash() {
        assert_eq!(words("grep 'price: $5' f"), ["grep", "price: $5", "f"]);
        assert_eq!(words("tr -d '\\r'"), ["tr", "-d", "\\r"]);
        assert_eq!(words("printf '%s' x"), ["printf", "%s", "x"]);
        assert_eq!(words("echo \"a \\\"b\\\" c\""), ["echo", "a \"b\" c"]);
        assert_eq!(words("echo a'b'\"c\""), ["echo", "abc"]);
        assert_eq!(words("git diff HEAD~1 -- src"), ["git", "diff", "HEAD~1", "--", "src"]);
        assert_eq!(words("echo ''"), ["echo", ""]);
        let Token::Word(w) = &lex("ls '*'.rs").unwrap()[1] else {
            panic!()
        };
        assert_eq!(w.glob, None);
        let Token::Word(w) = &lex("ls 'a*'*.rs").unwrap()[1] else {
            panic!()
        };
        assert_eq!(w.glob.as_deref(), Some("a[*]*.rs"));
        for bad in [
            "echo \"$HOME\"",
            "echo $HOME",
            "echo --x=~/a",
            "echo ~",
            "a && b",
            "a; b",
            "echo `id`",
        ] {
            assert!(lex(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn redirections_are_tokens() {
        let t = lex("ls 2>&1 >out 2>>err <in").unwrap();
        assert_eq!(t.len(), 8, "{t:?}");
        assert!(matches!(
            t[1],
            Token::Redirect {
                fd: Some(2),
                op: ">&",
                dup: Some(1)
            }
        ));
        for bad in [
            "ls 3>x",
            "ls >&x",
            "cat <<EOF",
            "ls <>x",
            "ls >|x",
            "ls >>>x",
            "ls 2>&-",
        ] {
            assert!(lex(bad).is_err(), "{bad}");
        }
    }
}
