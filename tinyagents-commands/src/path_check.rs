//! Confining a path argument to a workspace root: lexical checks for tricks
//! the file system would not see (encodings, Windows forms, look-alikes),
//! then resolution of `..` and of symlinks against the canonical root;
//! the protected configuration paths writes may not touch; glob expansion
//! and the walk that checks every symlink a following option would follow.

use std::path::{Component, Path, PathBuf};

pub use tinyagents_sandbox::protected::{path_lexical as lexical, protected_hit};

/// Confines `raw` to `root` (which must be canonical): `Ok(resolved)` when the
/// path, walked component by component as the OS would (every existing
/// symlink resolved where it stands, so `link/..` means the link target's
/// parent), ends under the root. A dangling symlink is refused: writing
/// through it could create a file anywhere.
pub fn confine(root: &Path, raw: &str) -> Result<PathBuf, String> {
    confine_from(root, root, raw)
}

/// [`confine`] for a path relative to `base` (a canonical directory under
/// the root: the working directory a command runs in).
pub fn confine_from(root: &Path, base: &Path, raw: &str) -> Result<PathBuf, String> {
    confine_named(root, base, raw).map(|named| named.resolved)
}

/// A path a write names, confined ([`confine_named`]): where it lands, and
/// the names it acts on on the way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedPath {
    /// The path with every symlink resolved: what a write through it changes.
    pub resolved: PathBuf,
    /// For each symlink met on the way, the link's own path with the rest
    /// of the path joined to it (`.envrc` for `.envrc` -> `env.txt`): what
    /// a write that replaces the link (`mv`, `cp --remove-destination`,
    /// `touch -h`) changes, and the name the written file means to the
    /// programs that read it.
    pub links: Vec<PathBuf>,
}

impl NamedPath {
    /// The protected entry of `protected` the write hits, by its resolved
    /// path or by the name of any symlink on the way ([`protected_hit`]).
    pub fn protected_hit<'a>(&self, root: &Path, protected: &'a [String]) -> Option<&'a str> {
        std::iter::once(&self.resolved)
            .chain(&self.links)
            .find_map(|path| protected_hit(root, path, protected))
    }
}

/// [`confine_from`], also keeping the name of every symlink met
/// ([`NamedPath::links`]): a write is judged by both (a symlink at a
/// protected name is replaced by `mv` onto it, and what is written through
/// it is what the name means).
pub fn confine_named(root: &Path, base: &Path, raw: &str) -> Result<NamedPath, String> {
    lexical(raw)?;
    let mut current = if Path::new(raw).is_absolute() {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    let comps: Vec<Component<'_>> = Path::new(raw).components().collect();
    let mut links = Vec::new();
    let mut exists = true;
    for (i, comp) in comps.iter().enumerate() {
        match comp {
            Component::Prefix(_) => return Err("a path prefix".to_owned()),
            Component::RootDir => current = PathBuf::from("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                if !current.pop() {
                    return Err("`..` climbs above the file-system root".to_owned());
                }
            }
            Component::Normal(part) => {
                current.push(part);
                if !exists {
                    continue;
                }
                match std::fs::symlink_metadata(&current) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        links.push(lexical_join(&current, &comps[i + 1..]));
                        current = std::fs::canonicalize(&current)
                            .map_err(|_| format!("`{raw}` goes through a symlink that cannot be resolved"))?;
                    }
                    Ok(_) => {}
                    Err(_) => exists = false,
                }
            }
        }
    }
    if !current.starts_with(root) {
        return Err(format!("`{raw}` resolves outside the workspace root"));
    }
    Ok(NamedPath {
        resolved: current,
        links,
    })
}

/// `base` with `rest` joined lexically (`..` drops a component).
fn lexical_join(base: &Path, rest: &[Component<'_>]) -> PathBuf {
    let mut out = base.to_path_buf();
    for comp in rest {
        match comp {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            _ => {}
        }
    }
    out
}

/// The configuration programs execute, refused to writes by default: an
/// entry without `/` matches any path component (case-insensitively, as on
/// case-insensitive file systems), an entry with `/` matches that path at
/// any depth and everything under it ([`protected_hit`]). Derived from the table
/// [`PROTECTED_PATHS`](tinyagents_sandbox::protected::PROTECTED_PATHS) (each row names the program that
/// runs the file), which the sandbox enforces too.
pub const DEFAULT_PROTECTED_PATHS: &[&str] = tinyagents_sandbox::protected::PATTERNS;

/// The most wildcards a glob argument of a file tool may hold (matching is
/// backtracking).
const MAX_GLOB_WILDCARDS: usize = 16;

/// Confines a glob argument of a file tool (`src/**/*.rs`): it may not
/// climb with `..`, hold more than 16 wildcards or name a place outside the
/// root; it is expanded from `cwd` (a canonical directory under the canonical
/// `root`; `**` matches any depth), and every match confined. `Ok` holds
/// each match as written and resolved; `Err(reason)` names the glob.
///
/// ```
/// let root = std::env::temp_dir().canonicalize().unwrap();
/// assert!(tinyagents_commands::confine_glob(&root, &root, "../*").unwrap_err().contains("climbs"));
/// ```
pub fn confine_glob(root: &Path, cwd: &Path, raw: &str) -> Result<Vec<(String, PathBuf)>, String> {
    lexical(raw).map_err(|e| format!("the glob `{raw}`: {e}"))?;
    if raw.split('/').any(|p| p == "..") {
        return Err(format!("the glob `{raw}` climbs with `..`"));
    }
    if raw.matches(['*', '?', '[']).count() > MAX_GLOB_WILDCARDS {
        return Err(format!(
            "the glob `{raw}` has more than {MAX_GLOB_WILDCARDS} wildcards: narrow it"
        ));
    }
    if raw.starts_with('/') {
        let literal: String = raw.split(['*', '?', '[']).next().unwrap_or("/").to_owned();
        confine_from(root, cwd, &literal).map_err(|e| format!("the glob `{raw}`: {e}"))?;
    }
    let matches = expand_glob(root, cwd, raw, true, &WalkBudget::default())?;
    let mut out = Vec::new();
    for m in matches.unwrap_or_default() {
        let path = confine_from(root, cwd, &m).map_err(|e| format!("the glob `{raw}` matches `{m}`: {e}"))?;
        out.push((m, path));
    }
    Ok(out)
}

/// The most glob matches (or walked entries) checked before refusing.
pub(crate) const EXPANSION_LIMIT: usize = 4096;
/// The most entries the walks of one command line (its globs, the symlinks
/// its programs would follow, the trees it copies) visit before refusing.
pub(crate) const WALK_LIMIT: usize = 50_000;

/// What the walks of one command line have visited so far: every directory
/// listed and every entry read counts against [`WALK_LIMIT`], whichever
/// operand, glob or option asked for the walk. Bounding each walk alone let a
/// line of 20,000 `.` operands walk the workspace 20,000 times.
#[derive(Debug, Default)]
pub(crate) struct WalkBudget(std::cell::Cell<usize>);

impl WalkBudget {
    /// Charges `n` visits; `false` once the line has visited more than [`WALK_LIMIT`].
    #[must_use]
    pub(crate) fn charge(&self, n: usize) -> bool {
        let used = self.0.get().saturating_add(n);
        self.0.set(used);
        used <= WALK_LIMIT
    }
}

/// Expands a glob `pattern` (quoted metacharacters already escaped as
/// `[*]`) from `base` as `bash` would: the matches, each as the program
/// would see it (relative when the pattern is), or `None` when nothing
/// matches (the shell then passes the word as it is). Hidden names need a
/// literal dot. With `recursive`, a `**` component matches any depth of
/// directories (as glob tools do; the shell, without `globstar`, treats it
/// as `*`); the recursion does not descend through symlinks, and one that
/// leaves `root` is refused. Bounded: the entries it visits are charged to
/// `walk` (one budget spans every walk of a command line), and at most
/// [`EXPANSION_LIMIT`] matches.
pub(crate) fn expand_glob(
    root: &Path,
    base: &Path,
    pattern: &str,
    recursive: bool,
    walk: &WalkBudget,
) -> Result<Option<Vec<String>>, String> {
    let options = glob::MatchOptions {
        case_sensitive: true,
        require_literal_separator: true,
        require_literal_leading_dot: true,
    };
    let absolute = pattern.starts_with('/');
    let start = if absolute {
        PathBuf::from("/")
    } else {
        base.to_path_buf()
    };
    // (the path on disk, the path as shown)
    let mut current: Vec<(PathBuf, String)> = vec![(start, if absolute { "/".to_owned() } else { String::new() })];
    let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
    let too_many = |pattern: &str| {
        format!(
            "the glob `{pattern}` reaches more than {WALK_LIMIT} entries, with the other walks of the command \
             line (too many to check): narrow it"
        )
    };
    let join = |shown: &str, name: &str| {
        if shown.is_empty() {
            name.to_owned()
        } else if shown.ends_with('/') {
            format!("{shown}{name}")
        } else {
            format!("{shown}/{name}")
        }
    };
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let mut next = Vec::new();
        let is_glob = part.contains(['*', '?', '[']);
        if !is_glob {
            for (dir, shown) in &current {
                let path = dir.join(part);
                if std::fs::symlink_metadata(&path).is_ok() && (last || path.is_dir()) {
                    next.push((path, join(shown, part)));
                }
            }
        } else if recursive && *part == "**" {
            for (dir, shown) in &current {
                let mut stack = vec![(dir.clone(), shown.clone())];
                while let Some((d, s)) = stack.pop() {
                    next.push((d.clone(), s.clone()));
                    if !walk.charge(1) {
                        return Err(too_many(pattern));
                    }
                    let Ok(entries) = std::fs::read_dir(&d) else { continue };
                    for entry in entries.flatten() {
                        if !walk.charge(1) {
                            return Err(too_many(pattern));
                        }
                        let name = utf8_name(&entry, pattern)?;
                        if name.starts_with('.') {
                            continue;
                        }
                        let path = entry.path();
                        let Ok(meta) = std::fs::symlink_metadata(&path) else {
                            continue;
                        };
                        if meta.file_type().is_symlink() {
                            if let Ok(target) = std::fs::canonicalize(&path)
                                && !target.starts_with(root)
                            {
                                return Err(format!(
                                    "the glob `{pattern}` would descend through `{}`, a symlink to `{}` outside \
                                         the workspace root",
                                    join(&s, &name),
                                    target.display()
                                ));
                            }
                        } else if meta.is_dir() {
                            stack.push((path, join(&s, &name)));
                        }
                    }
                }
            }
        } else {
            brackets_understood(part).map_err(|what| format!("the glob `{pattern}` has {what}"))?;
            let matcher =
                glob::Pattern::new(part).map_err(|e| format!("the glob `{pattern}` is not understood ({e})"))?;
            for (dir, shown) in &current {
                if !walk.charge(1) {
                    return Err(too_many(pattern));
                }
                let Ok(entries) = std::fs::read_dir(dir) else { continue };
                let mut names: Vec<String> = Vec::new();
                // shells before bash 5.2 match `.` and `..` with `.*`: count them as matches (`..` then fails
                // confinement); glob tools never do
                if !recursive && part.starts_with('.') {
                    names.extend(
                        [".", ".."]
                            .into_iter()
                            .filter(|n| matcher.matches_with(n, options))
                            .map(str::to_owned),
                    );
                }
                for entry in entries.flatten() {
                    if !walk.charge(1) {
                        return Err(too_many(pattern));
                    }
                    let name = utf8_name(&entry, pattern)?;
                    if matcher.matches_with(&name, options) {
                        names.push(name);
                    }
                }
                names.sort();
                for name in names {
                    let path = dir.join(&name);
                    if last || path.is_dir() {
                        next.push((path, join(shown, &name)));
                    }
                }
            }
        }
        if next.len() > EXPANSION_LIMIT {
            return Err(format!(
                "the glob `{pattern}` matches more than {EXPANSION_LIMIT} paths (too many to check): narrow it"
            ));
        }
        current = next;
        if current.is_empty() {
            return Ok(None);
        }
    }
    let out: Vec<String> = current
        .into_iter()
        .map(|(_, shown)| if shown.is_empty() { ".".to_owned() } else { shown })
        .collect();
    Ok((!out.is_empty()).then_some(out))
}

/// Whether every bracket expression of a glob component means the same to
/// the matcher here as to the shells that run the command (dash and bash):
/// a plain set or range, negated with `!`, a `]` first taken literally.
/// `Err` names what is not: a character class, equivalence class or
/// collating symbol (`[[:alpha:]]`, `[[=a=]]`, `[[.a.]]`: the shells expand
/// them, the matcher reads a set and a literal `]`), a `^` negation (bash
/// negates, dash matches `^`), a backslash, or a `[` never closed.
pub(crate) fn brackets_understood(part: &str) -> Result<(), String> {
    let c: Vec<char> = part.chars().collect();
    let mut i = 0;
    while i < c.len() {
        if c[i] != '[' {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        match c.get(j) {
            Some('!') => j += 1,
            Some('^') => {
                return Err("a `[^...]` bracket (bash negates it, `/bin/sh` may match `^`): write `[!...]`".to_owned())
            }
            _ => {}
        }
        if c.get(j) == Some(&']') {
            j += 1; // a `]` first is a member
        }
        loop {
            match c.get(j) {
                None => return Err("a `[` that is never closed (quote it if it is literal)".to_owned()),
                Some(']') => break,
                Some('[') if matches!(c.get(j + 1), Some(':' | '=' | '.')) => {
                    return Err(
                        "a character class, equivalence class or collating symbol inside `[...]` (such as \
                         `[[:alpha:]]`): list the characters, as in `[a-z]`"
                            .to_owned(),
                    )
                }
                Some('\\') => return Err("a backslash inside `[...]`".to_owned()),
                Some(_) => j += 1,
            }
        }
        i = j + 1;
    }
    Ok(())
}

/// A directory entry's name, or a refusal when it is not UTF-8 (it could
/// not be checked under the name a program would see).
fn utf8_name(entry: &std::fs::DirEntry, pattern: &str) -> Result<String, String> {
    entry.file_name().into_string().map_err(|raw| {
        format!(
            "the glob `{pattern}` meets a file name that is not UTF-8 (`{}`): name it plainly",
            raw.to_string_lossy()
        )
    })
}

/// Walks the tree at `start` (canonical) as a symlink-following program
/// would, and refuses when any symlink met resolves outside `root` (a
/// dangling one is followed nowhere). Each directory listed and each entry
/// read is charged to `walk`, the command line's budget.
pub(crate) fn check_followed(root: &Path, start: &Path, walk: &WalkBudget) -> Result<(), String> {
    let mut stack = vec![start.to_path_buf()];
    let mut seen = std::collections::HashSet::new();
    while let Some(dir) = stack.pop() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        if !walk.charge(1) {
            return Err(too_many_to_walk(start));
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if !walk.charge(1) {
                return Err(too_many_to_walk(start));
            }
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                let Ok(target) = std::fs::canonicalize(&path) else {
                    continue;
                };
                if !target.starts_with(root) {
                    return Err(format!(
                        "it would follow the symlink `{}` to `{}`, outside the workspace root",
                        path.strip_prefix(root).unwrap_or(&path).display(),
                        target.display()
                    ));
                }
                if target.is_dir() {
                    stack.push(target);
                }
            } else if meta.is_dir() {
                stack.push(path);
            }
        }
    }
    Ok(())
}

/// The refusal of a walk past the command line's [`WalkBudget`].
fn too_many_to_walk(start: &Path) -> String {
    format!(
        "walking `{}`, the command line visits more than {WALK_LIMIT} entries (every operand's walk counts): \
         too many to check; name fewer or smaller trees",
        start.display()
    )
}

/// Walks the tree at `start` (canonical) as a copy or move of it would
/// write it at `landing` (the resolved path the tree becomes) and returns
/// the first entry whose landed path is protected ([`protected_hit`]: at or
/// under an entry, at any depth): `(the entry under start, the hit)`. With
/// `follow`, symlinks to directories are walked as the copy would (`cp -L`);
/// a symlink is also judged by its own name, as a directory a pattern
/// would lie in (`.mvn` for `.mvn/jvm.config`). Each directory
/// listed and each entry read is charged to `walk`.
pub(crate) fn find_protected_landing<'a>(
    root: &Path,
    start: &Path,
    landing: &Path,
    protected: &'a [String],
    follow: bool,
    walk: &WalkBudget,
) -> Result<Option<(PathBuf, &'a str)>, String> {
    let patterns: Vec<(&'a str, Vec<String>)> = protected
        .iter()
        .filter_map(|p| tinyagents_sandbox::protected::pattern_parts(p).map(|parts| (p.as_str(), parts)))
        .collect();
    let Ok(landed) = landing.strip_prefix(root) else {
        return Ok(None);
    };
    let base: Vec<String> = landed
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_lowercase())
        .collect();
    let mut stack = vec![(start.to_path_buf(), base)];
    let mut seen = std::collections::HashSet::new();
    while let Some((dir, parts)) = stack.pop() {
        if !walk.charge(1) {
            return Err(too_many_to_walk(start));
        }
        if !seen.insert(dir.clone()) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if !walk.charge(1) {
                return Err(too_many_to_walk(start));
            }
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_lowercase();
            if let Some((hit, _)) = patterns
                .iter()
                .find(|(_, e)| tinyagents_sandbox::protected::ends_with_pattern(&parts, &name, e))
            {
                return Ok(Some((path, hit)));
            }
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            // a symlink copied as it is lands at a name a pattern may lie
            // in (`.mvn` -> a directory holding `jvm.config`): it creates the
            // pattern where the walk cannot see
            if meta.file_type().is_symlink()
                && let Some((hit, _)) = patterns.iter().find(|(_, e)| {
                    (1..e.len()).any(|j| tinyagents_sandbox::protected::ends_with_pattern(&parts, &name, &e[..j]))
                })
            {
                return Ok(Some((path, hit)));
            }
            let next = if meta.is_dir() {
                Some(path)
            } else if follow && meta.file_type().is_symlink() {
                std::fs::canonicalize(&path).ok().filter(|t| t.is_dir())
            } else {
                None
            };
            if let Some(next) = next {
                let mut below = parts.clone();
                below.push(name);
                stack.push((next, below));
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{expand_glob, protected_hit, WalkBudget, DEFAULT_PROTECTED_PATHS};

    fn protected() -> Vec<String> {
        DEFAULT_PROTECTED_PATHS.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn protected_entries_match_at_any_depth_case_insensitively() {
        let root = Path::new("/w");
        let p = protected();
        for hit in [
            "/w/.git/config",
            "/w/.GIT/hooks/x",
            "/w/a/b/.git/config",
            "/w/.github/workflows/ci.yml",
            "/w/jenkinsfile",
        ] {
            assert!(protected_hit(root, Path::new(hit), &p).is_some(), "{hit}");
        }
        for miss in [
            "/w/src/git.rs",
            "/w/.gitignore",
            "/w/docs/github.md",
            "/w/src",
            "/elsewhere/.git",
        ] {
            assert!(protected_hit(root, Path::new(miss), &p).is_none(), "{miss}");
        }
        // the default list has path-shaped entries (`.mvn/extensions.xml`,
        // `.claude/settings.json`): the root itself, as a write's target, is
        // where a tree moved or copied would create them
        assert!(protected_hit(root, Path::new("/w"), &p).is_some());
        assert!(protected_hit(root, Path::new("/w/.mvn"), &p).is_some());
        let rooted = vec!["scripts/hooks".to_owned()];
        assert!(protected_hit(root, Path::new("/w/scripts/hooks/x"), &rooted).is_some());
        assert!(protected_hit(root, Path::new("/w/scripts/hooks"), &rooted).is_some());
        // at any depth, as the sandbox places it
        assert!(protected_hit(root, Path::new("/w/a/scripts/hooks"), &rooted).is_some());
        assert!(protected_hit(root, Path::new("/w/a/scripts/hooks/x"), &rooted).is_some());
        assert!(protected_hit(root, Path::new("/w/scripts/hooksx"), &rooted).is_none());
        assert!(protected_hit(root, Path::new("/w/hooks"), &rooted).is_none());
        // a directory a path-shaped entry lies in: a tree moved there creates it
        assert!(protected_hit(root, Path::new("/w/scripts"), &rooted).is_some());
        assert!(protected_hit(root, Path::new("/w/a/scripts"), &rooted).is_some());
        assert!(protected_hit(root, Path::new("/w"), &rooted).is_some());
        assert!(protected_hit(root, Path::new("/w/scriptsx"), &rooted).is_none());
        assert!(protected_hit(root, Path::new("/w/scripts/x"), &rooted).is_none());
    }

    #[test]
    fn globs_expand_like_bash_and_stay_bounded() {
        let dir = std::env::temp_dir().join(format!("tinyagents-glob-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        for f in ["a/x.rs", "a/y.rs", "a/.hidden.rs", "a/b/z.rs", "a/*.rs"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        let root = std::fs::canonicalize(&dir).unwrap();
        let got = |p: &str, rec: bool| expand_glob(&root, &root, p, rec, &WalkBudget::default()).unwrap();
        assert_eq!(got("a/*.rs", false).unwrap(), ["a/*.rs", "a/x.rs", "a/y.rs"]);
        assert_eq!(got("a/[*].rs", false).unwrap(), ["a/*.rs"], "a quoted `*` is literal");
        assert_eq!(got("a/.*.rs", false).unwrap(), ["a/.hidden.rs"]);
        assert_eq!(got("**/z.rs", true).unwrap(), ["a/b/z.rs"]);
        assert_eq!(got("**/z.rs", false), None, "without globstar `**` is `*`");
        assert_eq!(got("**/b/z.rs", false).unwrap(), ["a/b/z.rs"]);
        assert_eq!(got("nothing*", false), None);
        // `.*` meets `..` for the shell (older bash matched it): the caller then refuses it
        assert!(got(".*", false).unwrap().contains(&"..".to_owned()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
