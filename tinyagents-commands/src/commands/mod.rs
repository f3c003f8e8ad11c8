//! Argv-level specifications of the programs the shell guard admits, one
//! module per program, declared as data: the options each program accepts
//! (spelled exactly: no abbreviations), whether an option takes a value
//! (glued `-n5`, `-oFILE`, `--opt=v` and separate `-n 5`, `--opt v` are all
//! parsed, short flags may be clustered), which option values and operands
//! are paths the program reads or writes, whether it follows symlinks, and
//! whether it writes at all. Anything not in a program's specification is
//! refused with a reason naming the program, the argument and the rule.
//!
//! Specifications describe GNU coreutils/findutils/grep/sed, ripgrep, jq,
//! tree and git as shipped by current Linux distributions.

use std::path::{Path, PathBuf};

use crate::path_check::{check_followed, confine_from, confine_named, find_protected_landing, WalkBudget};

mod basename;
mod cargo;
mod cat;
mod cp;
mod cut;
mod date;
mod diff;
mod dirname;
mod du;
mod echo;
mod false_;
mod file;
mod find;
pub(crate) mod git;
mod grep;
mod head;
mod jq;
mod ls;
mod make;
mod mkdir;
mod mv;
mod npm;
mod printf;
mod pwd;
mod realpath;
mod rg;
mod sed;
mod sh;
mod sort;
mod stat;
mod tail;
mod tee;
mod test;
mod touch;
mod tr;
mod tree;
mod true_;
mod uniq;
mod wc;

/// Every specified program, by name.
pub(crate) const SPECS: &[&Spec] = &[
    &basename::SPEC,
    &cargo::SPEC,
    &cat::SPEC,
    &cp::SPEC,
    &cut::SPEC,
    &date::SPEC,
    &diff::SPEC,
    &dirname::SPEC,
    &du::SPEC,
    &echo::SPEC,
    &false_::SPEC,
    &file::SPEC,
    &find::SPEC,
    &git::SPEC,
    &grep::SPEC,
    &head::SPEC,
    &jq::SPEC,
    &ls::SPEC,
    &mkdir::SPEC,
    &mv::SPEC,
    &printf::SPEC,
    &pwd::SPEC,
    &realpath::SPEC,
    &rg::SPEC,
    &sed::SPEC,
    &sort::SPEC,
    &stat::SPEC,
    &tail::SPEC,
    &tee::SPEC,
    &test::SPEC,
    &touch::SPEC,
    &tr::SPEC,
    &tree::SPEC,
    &true_::SPEC,
    &uniq::SPEC,
    &wc::SPEC,
];

/// The programs only the `workspace` profile admits, where the run's
/// workspace requires the OS sandbox: they run the project's own code
/// (otherwise they are refused as build tools, interpreters or indirection).
pub(crate) const WORKSPACE_SPECS: &[&Spec] = &[&make::SPEC, &sh::SPEC, &npm::SPEC];

/// The specification of `name` in the `workspace` profile, if it has one there only.
pub(crate) fn workspace_spec(name: &str) -> Option<&'static Spec> {
    WORKSPACE_SPECS.iter().copied().find(|s| s.name == name)
}

/// Why `cp` and `mv` refuse their backup options (`-b`, `--backup`, `-S`,
/// `--suffix`): the backup's name is made, not given.
pub(crate) const BACKUP_REFUSAL: &str = "it renames an existing destination to a backup name (DEST plus a suffix) \
     the guard does not check against the protected paths (`.envr` becomes `.envrc`): remove or rename the \
     destination yourself";

/// The specification of `name`, if the guard has one.
pub(crate) fn spec(name: &str) -> Option<&'static Spec> {
    SPECS.iter().copied().find(|s| s.name == name)
}

/// The names of the specified programs.
pub(crate) fn specified_commands() -> Vec<&'static str> {
    SPECS.iter().map(|s| s.name).collect()
}

/// What an option value or an operand is.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Val {
    /// Text the program never opens (a pattern, a format, a field list).
    Text,
    /// A count or size: digits, an optional sign and unit suffix.
    Num,
    /// One of these words exactly.
    OneOf(&'static [&'static str]),
    /// A path the program reads.
    Read,
    /// A path the program writes (refused in read-only mode and under protected paths).
    Write,
    /// A directory the program writes into (`-t DIR` of `cp` and `mv`):
    /// refused in read-only mode and confined here; where each source lands
    /// in it (`DIR/NAME`) is judged with the operands.
    TargetDir,
}

/// Whether and how an option takes a value.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Takes {
    /// A flag.
    No,
    /// A required value: glued (`-n5`, `--lines=5`) or the next argument.
    Req(Val),
    /// An optional value: glued only (`-Iseconds`, `--color=auto`).
    Opt(Val),
}

/// What an option does besides its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fx {
    /// Nothing the guard cares about.
    Plain,
    /// Makes the program follow symlinks while walking its operands.
    Follows,
    /// Makes the program write (refused in read-only mode).
    Writes,
    /// Makes the program copy or walk directory trees (cp `-r`).
    Recursive,
}

/// One accepted option: all its spellings, its value and its effect.
#[derive(Debug)]
pub(crate) struct Opt {
    pub(crate) names: &'static [&'static str],
    pub(crate) takes: Takes,
    pub(crate) fx: Fx,
}

/// A flag (no value, no effect).
pub(crate) const fn flag(names: &'static [&'static str]) -> Opt {
    Opt {
        names,
        takes: Takes::No,
        fx: Fx::Plain,
    }
}

/// An option with a required value.
pub(crate) const fn req(names: &'static [&'static str], val: Val) -> Opt {
    Opt {
        names,
        takes: Takes::Req(val),
        fx: Fx::Plain,
    }
}

/// An option with an optional, glued value.
pub(crate) const fn opt(names: &'static [&'static str], val: Val) -> Opt {
    Opt {
        names,
        takes: Takes::Opt(val),
        fx: Fx::Plain,
    }
}

/// A flag with an effect.
pub(crate) const fn fx(names: &'static [&'static str], fx: Fx) -> Opt {
    Opt {
        names,
        takes: Takes::No,
        fx,
    }
}

/// The words `--color`/`--colour` accept.
pub(crate) const WHEN: &[&str] = &["always", "auto", "never", "yes", "no", "force", "none", "tty", "if-tty"];

/// What a program's operands are.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Operands {
    /// No operands.
    None,
    /// Text only (`echo`, `tr`).
    Text,
    /// Paths read.
    Read,
    /// Paths written.
    Write,
    /// A pattern/script/filter, then paths read; all paths when an option of
    /// `pattern_opts` gave the pattern.
    PatternThenRead,
    /// Sources read, the last operand written (or, with `-t`, all read);
    /// into a directory, where each source lands is judged.
    CopyLike,
    /// `mv`: sources written (they disappear), and where each lands, like
    /// [`Operands::CopyLike`].
    MoveLike,
    /// `INPUT [OUTPUT]`: the first read, the second written.
    InOut,
}

/// An extra check of a program's parsed arguments.
pub(crate) type ExtraCheck = fn(&Parsed, &Ctx<'_>) -> Result<(), String>;

/// How a program's arguments are parsed.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Parse {
    /// GNU `getopt_long`, with exact option names.
    Getopt,
    /// No options at all: every argument is text (`echo`, `printf`, `true`).
    Raw,
    /// The program's own grammar (`find`, `test`, `git`, `cargo`).
    Custom(fn(&'static Spec, &[String], &Ctx<'_>) -> Result<(), String>),
}

/// How a program reads a value glued to a short option in a cluster
/// (`-oFILE`, `-o=FILE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Glued {
    /// GNU `getopt`: the rest of the cluster is the value, `=` included.
    Getopt,
    /// clap (`rg`): the rest of the cluster is the value, a leading `=`
    /// dropped. A value that starts with `=` is refused: the guard would
    /// otherwise check a path the program does not open.
    DropsEquals,
    /// The program's own loop (`tree`): a value always comes from the next
    /// argument and the rest of the cluster is more options. A short option
    /// taking a value must end its cluster.
    NextArgument,
}

/// The argv-level specification of one program.
#[derive(Debug)]
pub(crate) struct Spec {
    pub(crate) name: &'static str,
    pub(crate) parse: Parse,
    pub(crate) opts: &'static [Opt],
    /// More accepted options (shared tables, such as git's diff options).
    pub(crate) more_opts: &'static [Opt],
    /// Options refused with their reason (the rest of the unknown ones are
    /// refused as "not in the specification").
    pub(crate) deny: &'static [(&'static str, &'static str)],
    pub(crate) operands: Operands,
    /// The program writes whenever it runs.
    pub(crate) writes: bool,
    /// It may create or move symlinks (refused inside a multi-stage pipeline,
    /// where a later stage could be checked before the link exists).
    pub(crate) relinks: bool,
    /// `-NUM` means this option with the value NUM (`head -5`).
    pub(crate) numeric: Option<&'static str>,
    /// Options that supply the pattern, so every operand is a path.
    pub(crate) pattern_opts: &'static [&'static str],
    /// Options may follow operands (GNU permutation).
    pub(crate) permute: bool,
    /// How a value glued to a short option is read.
    pub(crate) glued: Glued,
    /// Only admitted when named in `allow_commands` explicitly (it runs workspace code).
    pub(crate) opt_in: bool,
    /// Extra checks on the parsed arguments.
    pub(crate) check: Option<ExtraCheck>,
}

/// A specification with every field at its most restrictive value.
pub(crate) const BASE: Spec = Spec {
    name: "",
    parse: Parse::Getopt,
    opts: &[],
    more_opts: &[],
    deny: &[],
    operands: Operands::None,
    writes: false,
    relinks: false,
    numeric: None,
    pattern_opts: &[],
    permute: true,
    glued: Glued::Getopt,
    opt_in: false,
    check: None,
};

/// One parsed option: the spelling used, its spec and its value.
#[derive(Debug)]
pub(crate) struct Given {
    pub(crate) name: &'static str,
    pub(crate) opt: &'static Opt,
    pub(crate) value: Option<String>,
}

/// The parsed arguments of one command.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub(crate) opts: Vec<Given>,
    pub(crate) operands: Vec<String>,
    /// Operands after a `--`.
    pub(crate) after_dashdash: usize,
}

impl Parsed {
    /// Whether an option of these spellings was given.
    pub(crate) fn has(&self, names: &[&str]) -> bool {
        self.opts.iter().any(|g| g.opt.names.iter().any(|n| names.contains(n)))
    }

    /// The values given to an option of these spellings.
    pub(crate) fn values<'a>(&'a self, names: &'a [&'a str]) -> impl Iterator<Item = &'a str> + 'a {
        self.opts
            .iter()
            .filter(move |g| g.opt.names.iter().any(|n| names.contains(n)))
            .filter_map(|g| g.value.as_deref())
    }
}

/// Where a command runs and how it is judged.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub(crate) root: &'a Path,
    pub(crate) cwd: &'a Path,
    pub(crate) read_only: bool,
    pub(crate) protected: &'a [String],
    pub(crate) program: &'a str,
    /// The walks of the whole command line, every stage's.
    pub(crate) walk: &'a WalkBudget,
    /// The `workspace` profile is on and the run's workspace requires the
    /// OS sandbox: git's writing subcommands are admitted.
    pub(crate) workspace: bool,
}

impl Ctx<'_> {
    /// A refusal naming the program, the argument and the rule.
    pub(crate) fn refuse(&self, arg: &str, rule: impl std::fmt::Display) -> String {
        format!("`{}` argument `{arg}`: {rule}", self.program)
    }

    /// Confines a path the program reads.
    pub(crate) fn read(&self, arg: &str) -> Result<PathBuf, String> {
        if arg == "-" {
            return Ok(self.cwd.to_path_buf());
        }
        confine_from(self.root, self.cwd, arg).map_err(|e| self.refuse(arg, format!("a path it reads: {e}")))
    }

    /// Confines a path the program writes: refused in read-only mode and
    /// under a protected path, judged by where it resolves and by the name
    /// of every symlink on the way ([`NamedPath`](crate::path_check::NamedPath)).
    pub(crate) fn write(&self, arg: &str, via: &str) -> Result<PathBuf, String> {
        if arg == "/dev/null" {
            return Ok(PathBuf::from("/dev/null"));
        }
        if self.read_only {
            return Err(self.refuse(
                arg,
                format!("{via} writes this path, and the guard is read-only (fix: run a command that only reads)"),
            ));
        }
        let named =
            confine_named(self.root, self.cwd, arg).map_err(|e| self.refuse(arg, format!("a path it writes: {e}")))?;
        if let Some(hit) = named.protected_hit(self.root, self.protected) {
            return Err(self.protected_refusal(arg, hit));
        }
        Ok(named.resolved)
    }

    /// Confines a directory the program writes into; refused in read-only
    /// mode. Not judged against the protected paths itself (`cp f .` writes
    /// `./f`, not the root): [`Ctx::landing`] judges where each source lands.
    pub(crate) fn target_dir(&self, arg: &str, via: &str) -> Result<PathBuf, String> {
        if self.read_only {
            return Err(self.refuse(
                arg,
                format!(
                    "{via} writes into this directory, and the guard is read-only (fix: run a command that only reads)"
                ),
            ));
        }
        confine_from(self.root, self.cwd, arg).map_err(|e| self.refuse(arg, format!("a directory it writes into: {e}")))
    }

    /// Judges where a copy or move lands and returns, for each source, the
    /// resolved path it becomes: with a target directory (`-t DIR`, or a
    /// last operand naming an existing directory, unless `-T`), the
    /// source's last component joined to it (`cp f .` writes `./f`, refused
    /// only when that is protected; `cp -r stuff/. .mvn` writes the contents
    /// of `stuff` into `.mvn` itself: the last component is taken as
    /// written, never normalised away); otherwise `dest` itself.
    pub(crate) fn landing(
        &self,
        parsed: &Parsed,
        sources: &[String],
        dest: Option<&str>,
    ) -> Result<Vec<PathBuf>, String> {
        let no_target = parsed.has(&["-T", "--no-target-directory"]);
        let dir = match parsed.values(&["-t", "--target-directory"]).last() {
            Some(dir) => Some(dir),
            None if !no_target && !sources.is_empty() => {
                dest.filter(|d| self.target_dir(d, "the destination").is_ok_and(|p| p.is_dir()))
            }
            None => None,
        };
        let Some(dir) = dir else {
            let Some(dest) = dest else {
                return Ok(Vec::new());
            };
            let landed = self.write(dest, "the destination")?;
            return Ok(sources.iter().map(|_| landed.clone()).collect());
        };
        self.target_dir(dir, "the destination")?;
        let mut out = Vec::new();
        for src in sources {
            // the last component as the program takes it: trailing slashes
            // dropped, `.` and `..` kept (`stuff/.` is the contents of `stuff`)
            let trimmed = src.trim_end_matches('/');
            let name = trimmed.rsplit('/').next().filter(|n| !n.is_empty()).unwrap_or(".");
            let landed = format!("{}/{name}", dir.trim_end_matches('/'));
            out.push(self.write(&landed, "the destination")?);
        }
        Ok(out)
    }

    /// The refusal of a write under the protected entry `hit`.
    pub(crate) fn protected_refusal(&self, arg: &str, hit: &str) -> String {
        self.refuse(
            arg,
            format!(
                "it writes under `{hit}`, or the directory `{hit}` lies in (a tree moved or copied there would \
                 create it), or replaces a symlink standing at that name: configuration that programs execute \
                 (protected_paths, matched at any depth); make that change yourself, or remove `{hit}` from \
                 `protected_paths` for this workspace"
            ),
        )
    }

    /// Refuses when following symlinks from `start` (canonical) would leave the root.
    pub(crate) fn follows(&self, start: &Path, via: &str) -> Result<(), String> {
        check_followed(self.root, start, self.walk)
            .map_err(|e| self.refuse(via, format!("it follows symlinks, and {e} (fix: drop `{via}`)")))
    }

    /// Refuses when the tree at `start` (canonical), copied or moved to
    /// `landing` (its resolved path afterwards; `start` itself for the
    /// entries a move takes away), would write a protected entry. With
    /// `follow`, symlinks to directories are walked (`cp -L`).
    pub(crate) fn tree_not_protected(
        &self,
        arg: &str,
        start: &Path,
        landing: &Path,
        follow: bool,
    ) -> Result<(), String> {
        match find_protected_landing(self.root, start, landing, self.protected, follow, self.walk)
            .map_err(|e| self.refuse(arg, e))?
        {
            Some((entry, hit)) => {
                let shown = |p: &Path| p.strip_prefix(self.root).unwrap_or(p).display().to_string();
                let rel = entry.strip_prefix(start).unwrap_or(&entry);
                let landed = landing.join(rel);
                let what = if landed == entry {
                    format!("it takes away `{}`", shown(&entry))
                } else {
                    format!("`{}` lands at `{}`", shown(&entry), shown(&landed))
                };
                Err(self.refuse(
                    arg,
                    format!(
                        "the tree holds protected configuration: {what}, under `{hit}` (protected_paths, matched at \
                         any depth); copy or move the other entries by name, or make that change yourself"
                    ),
                ))
            }
            None => Ok(()),
        }
    }

    /// Checks one value of the given kind.
    pub(crate) fn value(&self, shown: &str, value: &str, val: Val) -> Result<(), String> {
        match val {
            Val::Text => Ok(()),
            Val::Num => {
                let digits = value.trim_start_matches(['+', '-']);
                let number = digits.trim_end_matches(|c: char| c.is_ascii_alphabetic());
                if !number.is_empty() && number.chars().all(|c| c.is_ascii_digit()) {
                    Ok(())
                } else {
                    Err(self.refuse(shown, format!("`{value}` is not a number")))
                }
            }
            Val::OneOf(words) => {
                if words.contains(&value) {
                    Ok(())
                } else {
                    Err(self.refuse(shown, format!("`{value}` is not one of: {}", words.join(", "))))
                }
            }
            Val::Read => self.read(value).map(drop),
            Val::Write => self.write(value, shown).map(drop),
            Val::TargetDir => self.target_dir(value, shown).map(drop),
        }
    }
}

/// Parses `args` as GNU `getopt_long` would with exactly the spec's
/// options; every option value is checked as it is parsed.
pub(crate) fn getopt(spec: &'static Spec, args: &[String], cx: &Ctx<'_>) -> Result<Parsed, String> {
    let find = |name: &str| -> Result<(&'static str, &'static Opt), String> {
        if let Some((_, why)) = spec.deny.iter().find(|(n, _)| *n == name) {
            return Err(cx.refuse(name, format!("refused: {why}")));
        }
        spec.opts
            .iter()
            .chain(spec.more_opts)
            .find_map(|o| o.names.iter().find(|n| **n == name).map(|n| (*n, o)))
            .ok_or_else(|| {
                // an abbreviation the program itself would accept: name the full spelling
                let full: Vec<&str> = spec
                    .opts
                    .iter()
                    .chain(spec.more_opts)
                    .flat_map(|o| o.names.iter().copied())
                    .filter(|n| name.starts_with("--") && n.len() > name.len() && n.starts_with(name))
                    .collect();
                let fix = match full.as_slice() {
                    [one] => format!(" (fix: spell it `{one}`)"),
                    _ => String::new(),
                };
                cx.refuse(
                    name,
                    format!(
                        "this option is not in the guard's specification of the program (options must be spelled \
                         exactly as listed, not abbreviated){fix}"
                    ),
                )
            })
    };
    let mut parsed = Parsed::default();
    let mut i = 0;
    let mut options_done = false;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if options_done || arg == "-" || !arg.starts_with('-') {
            parsed.operands.push(arg.clone());
            if !spec.permute {
                options_done = true;
            }
            continue;
        }
        if arg == "--" {
            options_done = true;
            parsed.after_dashdash = args.len() - i;
            continue;
        }
        if let Some(long) = arg.strip_prefix("--") {
            let (name, glued) = match long.split_once('=') {
                Some((n, v)) => (&arg[..n.len() + 2], Some(v.to_owned())),
                None => (arg.as_str(), None),
            };
            let (name, o) = find(name)?;
            let value = match (o.takes, glued) {
                (Takes::No, Some(_)) => return Err(cx.refuse(arg, "this option takes no value")),
                (Takes::No, None) => None,
                (Takes::Opt(_), v) => v,
                (Takes::Req(_), Some(v)) => Some(v),
                (Takes::Req(_), None) => {
                    let Some(v) = args.get(i) else {
                        return Err(cx.refuse(arg, "this option needs a value"));
                    };
                    i += 1;
                    Some(v.clone())
                }
            };
            given(&mut parsed, cx, name, o, value)?;
            continue;
        }
        let cluster = &arg[1..];
        if let Some(numeric) = spec.numeric
            && cluster.chars().all(|c| c.is_ascii_digit())
        {
            let (name, o) = find(numeric)?;
            given(&mut parsed, cx, name, o, Some(cluster.to_owned()))?;
            continue;
        }
        for (at, c) in cluster.char_indices() {
            let short = format!("-{c}");
            let (name, o) = find(&short)?;
            let rest = &cluster[at + c.len_utf8()..];
            match o.takes {
                Takes::No => given(&mut parsed, cx, name, o, None)?,
                Takes::Opt(_) | Takes::Req(_) if !rest.is_empty() => {
                    let value = glued_value(spec, cx, arg, &short, rest)?;
                    given(&mut parsed, cx, name, o, Some(value))?;
                    break;
                }
                Takes::Opt(_) => {
                    given(&mut parsed, cx, name, o, None)?;
                    break;
                }
                Takes::Req(_) => {
                    let value = if rest.is_empty() {
                        let Some(v) = args.get(i) else {
                            return Err(cx.refuse(arg, format!("`{short}` needs a value")));
                        };
                        i += 1;
                        v.clone()
                    } else {
                        rest.to_owned()
                    };
                    given(&mut parsed, cx, name, o, Some(value))?;
                    break;
                }
            }
        }
    }
    Ok(parsed)
}

/// The value `rest`, glued to the short option `short` in `arg`, as the
/// program reads it; refused where the program reads something else.
fn glued_value(spec: &Spec, cx: &Ctx<'_>, arg: &str, short: &str, rest: &str) -> Result<String, String> {
    match spec.glued {
        Glued::Getopt => Ok(rest.to_owned()),
        Glued::DropsEquals if rest.starts_with('=') => Err(cx.refuse(
            arg,
            format!(
                "`{}` drops the `=` of a value glued to `{short}`: write `{short} VALUE` as two arguments",
                spec.name
            ),
        )),
        Glued::DropsEquals => Ok(rest.to_owned()),
        Glued::NextArgument => Err(cx.refuse(
            arg,
            format!(
                "`{}` reads the value of `{short}` from the next argument and the rest of `{arg}` as more \
                 options: write `{short} VALUE` as two arguments",
                spec.name
            ),
        )),
    }
}

fn given(
    parsed: &mut Parsed,
    cx: &Ctx<'_>,
    name: &'static str,
    o: &'static Opt,
    value: Option<String>,
) -> Result<(), String> {
    if o.fx == Fx::Writes && cx.read_only {
        return Err(cx.refuse(name, "this option writes files, and the guard is read-only"));
    }
    if let (Takes::Req(val) | Takes::Opt(val), Some(v)) = (o.takes, value.as_deref()) {
        cx.value(name, v, val)?;
    }
    parsed.opts.push(Given { name, opt: o, value });
    Ok(())
}

/// Checks a command's arguments against its specification.
pub(crate) fn check(spec: &'static Spec, args: &[String], cx: &Ctx<'_>) -> Result<(), String> {
    if spec.writes && cx.read_only {
        return Err(format!(
            "`{}` writes files, and the guard is read-only (fix: run a command that only reads)",
            spec.name
        ));
    }
    match spec.parse {
        Parse::Raw => Ok(()),
        Parse::Custom(f) => f(spec, args, cx),
        Parse::Getopt => {
            let parsed = getopt(spec, args, cx)?;
            check_parsed(spec, &parsed, cx)
        }
    }
}

/// The operand and effect checks of a parsed command line.
pub(crate) fn check_parsed(spec: &Spec, parsed: &Parsed, cx: &Ctx<'_>) -> Result<(), String> {
    let ops = &parsed.operands;
    let mut reads: Vec<PathBuf> = Vec::new();
    match spec.operands {
        Operands::None => {
            if let Some(op) = ops.first() {
                return Err(cx.refuse(op, "this program takes no operands"));
            }
        }
        Operands::Text => {}
        Operands::Read => {
            for op in ops {
                reads.push(cx.read(op)?);
            }
        }
        Operands::Write => {
            for op in ops {
                cx.write(op, "the operand")?;
            }
        }
        Operands::PatternThenRead => {
            let skip = usize::from(!parsed.has(spec.pattern_opts));
            for op in ops.iter().skip(skip) {
                reads.push(cx.read(op)?);
            }
        }
        Operands::CopyLike => {
            let target_dir = parsed.has(&["-t", "--target-directory"]);
            let sources = if target_dir {
                ops.len()
            } else {
                ops.len().saturating_sub(1)
            };
            for op in &ops[..sources] {
                reads.push(cx.read(op)?);
            }
            let dest = (!target_dir).then(|| ops.last().map(String::as_str)).flatten();
            let landed = cx.landing(parsed, &ops[..sources], dest)?;
            if parsed.opts.iter().any(|g| g.opt.fx == Fx::Recursive) {
                let follow = parsed.opts.iter().any(|g| g.opt.fx == Fx::Follows);
                for ((op, start), landing) in ops.iter().zip(&reads).zip(&landed) {
                    cx.tree_not_protected(op, start, landing, follow)?;
                }
            }
        }
        Operands::MoveLike => {
            let target_dir = parsed.has(&["-t", "--target-directory"]);
            let sources = if target_dir {
                ops.len()
            } else {
                ops.len().saturating_sub(1)
            };
            let mut moved = Vec::new();
            for op in &ops[..sources] {
                moved.push(cx.write(op, "the operand")?);
            }
            let dest = (!target_dir).then(|| ops.last().map(String::as_str)).flatten();
            let landed = cx.landing(parsed, &ops[..sources], dest)?;
            // a moved directory takes its whole tree away and puts it where it lands
            for ((op, start), landing) in ops.iter().zip(&moved).zip(&landed) {
                if start.is_dir() {
                    cx.tree_not_protected(op, start, start, false)?;
                    cx.tree_not_protected(op, start, landing, false)?;
                }
            }
        }
        Operands::InOut => {
            if ops.len() > 2 {
                return Err(cx.refuse(&ops[2], "an extra operand (it takes INPUT and OUTPUT)"));
            }
            if let Some(input) = ops.first() {
                reads.push(cx.read(input)?);
            }
            if let Some(output) = ops.get(1) {
                cx.write(output, "the OUTPUT operand")?;
            }
        }
    }
    if let Some(g) = parsed.opts.iter().find(|g| g.opt.fx == Fx::Follows) {
        if reads.is_empty() {
            reads.push(cx.cwd.to_path_buf());
        }
        for start in &reads {
            cx.follows(start, g.name)?;
        }
    }
    if let Some(check) = spec.check {
        check(parsed, cx)?;
    }
    Ok(())
}

/// Why a program is refused whatever the configuration, if it is: programs
/// that run code given to them (interpreters, editors, pagers, build
/// tools), that run another program (indirection), or that print the
/// environment. Versioned names (`python3.12`, `pip3`) count as their base.
///
/// ```
/// use tinyagents_commands::intrinsic_refusal;
///
/// assert!(intrinsic_refusal("python3.12").unwrap().contains("interpreter"));
/// assert!(intrinsic_refusal("printenv").unwrap().contains("environment"));
/// assert!(intrinsic_refusal("grep").is_none());
/// ```
pub fn intrinsic_refusal(name: &str) -> Option<&'static str> {
    const INTERPRETERS: &[&str] = &[
        "sh",
        "bash",
        "zsh",
        "dash",
        "ksh",
        "mksh",
        "pdksh",
        "fish",
        "csh",
        "tcsh",
        "ash",
        "yash",
        "rc",
        "es",
        "busybox",
        "toybox",
        "python",
        "pypy",
        "ipython",
        "perl",
        "ruby",
        "irb",
        "node",
        "nodejs",
        "deno",
        "bun",
        "php",
        "lua",
        "luajit",
        "tclsh",
        "wish",
        "expect",
        "awk",
        "gawk",
        "mawk",
        "nawk",
        "r",
        "rscript",
        "julia",
        "guile",
        "racket",
        "sbcl",
        "clisp",
        "ghci",
        "runghc",
        "ocaml",
        "swift",
        "osascript",
        "pwsh",
        "powershell",
        "jshell",
        "groovy",
        "scala",
        "erl",
        "elixir",
        "iex",
        "dotnet",
        "java",
        "gdb",
        "lldb",
        "sqlite",
        "psql",
        "mysql",
        "bc",
        "dc",
        "m4",
        "jjs",
        "qjs",
        "tsx",
        "ts-node",
    ];
    const EDITORS_PAGERS: &[&str] = &[
        "vi",
        "vim",
        "nvim",
        "view",
        "vimdiff",
        "ex",
        "ed",
        "red",
        "emacs",
        "emacsclient",
        "nano",
        "pico",
        "joe",
        "mg",
        "less",
        "more",
        "most",
        "man",
        "info",
        "pager",
        "sensible-pager",
        "sensible-editor",
        "editor",
    ];
    const INDIRECTION: &[&str] = &[
        "env",
        "exec",
        "eval",
        "command",
        "builtin",
        "source",
        ".",
        "xargs",
        "parallel",
        "stdbuf",
        "nice",
        "ionice",
        "chrt",
        "taskset",
        "nohup",
        "timeout",
        "time",
        "setsid",
        "setpriv",
        "chroot",
        "sudo",
        "su",
        "doas",
        "pkexec",
        "runuser",
        "unshare",
        "nsenter",
        "flock",
        "watch",
        "script",
        "strace",
        "ltrace",
        "valgrind",
        "firejail",
        "bwrap",
        "systemd-run",
        "at",
        "batch",
        "crontab",
        "trap",
        "coproc",
        "fakeroot",
        "proot",
        "schroot",
        "sg",
        "newgrp",
        "catchsegv",
        "unbuffer",
        "entr",
        "inotifywait",
        "ssh",
        "sshpass",
        "docker",
        "podman",
        "kubectl",
        "make",
        "gmake",
        "cmake",
        "ninja",
        "meson",
        "bazel",
        "npm",
        "npx",
        "yarn",
        "pnpm",
        "pip",
        "pipx",
        "uv",
        "poetry",
        "gem",
        "bundle",
        "rake",
        "go",
        "rustc",
        "rustup",
        "cc",
        "gcc",
        "g++",
        "clang",
        "clang++",
        "ld",
        "dlopen",
        "ldd",
        "install",
        "git-shell",
        "gpg",
        "socat",
        "nc",
        "ncat",
        "netcat",
        "curl",
        "wget",
    ];
    const SECRETS: &[&str] = &[
        "printenv", "set", "declare", "export", "typeset", "compgen", "alias", "history",
    ];
    let lower = name.to_ascii_lowercase();
    let base = lower.trim_end_matches(|c: char| c.is_ascii_digit() || matches!(c, '.' | '-' | '_'));
    let base = if base.is_empty() { lower.as_str() } else { base };
    if SECRETS.contains(&base) || base == "env" {
        return Some("it prints (or runs with) the environment, which holds secrets");
    }
    if INTERPRETERS.contains(&base) || INTERPRETERS.contains(&lower.as_str()) {
        return Some("it is an interpreter: it runs code given in its arguments or input");
    }
    if EDITORS_PAGERS.contains(&base) {
        return Some("it is an editor or pager: these can run commands");
    }
    if INDIRECTION.contains(&base) || INDIRECTION.contains(&lower.as_str()) {
        return Some(
            "it runs other programs, code from the workspace or the network (indirection): name the program you \
             need directly, if it is admitted",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::{intrinsic_refusal, Parse, Takes, SPECS};

    /// The specifications are data: check that the data is well formed.
    #[test]
    fn every_specification_is_well_formed() {
        let mut names = std::collections::HashSet::new();
        let subs = super::git::SUBCOMMANDS
            .iter()
            .map(|(_, s)| *s)
            .chain(super::cargo::SUBS.iter().map(|(_, s, _)| s))
            .chain(super::git::WORKSPACE_SUBCOMMANDS.iter().map(|(_, s)| *s));
        for spec in SPECS
            .iter()
            .copied()
            .chain(subs)
            .chain(super::WORKSPACE_SPECS.iter().copied())
        {
            if !spec.name.contains(' ') && !super::WORKSPACE_SPECS.iter().any(|w| w.name == spec.name) {
                assert!(names.insert(spec.name), "`{}` is specified twice", spec.name);
                assert!(
                    intrinsic_refusal(spec.name).is_none(),
                    "`{}` is also always refused",
                    spec.name
                );
            }
            let mut seen = std::collections::HashSet::new();
            for opt in spec.opts.iter().chain(spec.more_opts) {
                for n in opt.names {
                    assert!(seen.insert(*n), "`{}`: option `{n}` listed twice", spec.name);
                    let short = n.len() == 2 && n.starts_with('-') && n != &"--";
                    let long = n.len() > 2 && n.starts_with("--") && !n.contains('=');
                    assert!(
                        short || long,
                        "`{}`: option `{n}` is neither `-x` nor `--long`",
                        spec.name
                    );
                    if short {
                        assert!(
                            !matches!(opt.takes, Takes::Opt(_))
                                || spec.name.starts_with("git")
                                || spec.name == "date"
                                || spec.name == "diff",
                            "`{}`: short `{n}` with an optional value",
                            spec.name
                        );
                    }
                }
            }
            for (n, why) in spec.deny {
                assert!(!seen.contains(n), "`{}`: `{n}` is both admitted and refused", spec.name);
                assert!(!why.is_empty(), "`{}`: `{n}` is refused without a reason", spec.name);
            }
            if matches!(spec.parse, Parse::Raw) {
                assert!(spec.opts.is_empty(), "`{}` takes no options but lists some", spec.name);
            }
            if let Some(numeric) = spec.numeric {
                assert!(
                    seen.contains(numeric),
                    "`{}`: the numeric option `{numeric}` is not listed",
                    spec.name
                );
            }
        }
    }

    #[test]
    fn versioned_and_cased_names_count_as_their_base() {
        for name in [
            "python3.12",
            "Python3",
            "pip3",
            "perl5.36",
            "lua5.4",
            "node18",
            "gawk",
            "busybox",
            "ENV",
        ] {
            assert!(intrinsic_refusal(name).is_some(), "{name}");
        }
        for name in ["ls", "cat", "sha256sum", "tr", "test", "stat", "git"] {
            assert!(intrinsic_refusal(name).is_none(), "{name}");
        }
    }
}
