//! Protected paths: every file that some program executes, or loads as
//! configuration that runs commands, on its own — version-control config and
//! hooks, CI definitions, hook managers, environment loaders, editor and
//! agent project settings, package managers' executable configs. A model
//! that writes one has the person's next `git`, `cargo` or CI run execute its
//! program, outside any sandbox.
//!
//! [`PROTECTED_PATHS`] is the one declaration. From it come:
//!
//! * the command checker's default refusal list (`tinyagents_commands`'
//!   `DEFAULT_PROTECTED_PATHS`, `shell_fs_guard`'s `protected_paths`), which
//!   refuses writes early, with the reason;
//! * the runner's enforced list (`tinyagents_commands`'
//!   `SandboxPolicy::protected_paths`, handed to [`Protection`](crate::Protection)):
//!   inside the sandbox these paths, at any depth of the workspace
//!   (`sub/.envrc`, `vendor/x/.git/config`), cannot be written, renamed,
//!   replaced or removed, and one the command creates is removed after the
//!   run;
//! * the table of `docs/security.md` (a test checks it matches).
//!
//! ```
//! use tinyagents_sandbox::protected::{SandboxRule, PROTECTED_PATHS};
//!
//! let git = PROTECTED_PATHS.iter().find(|r| r.pattern == ".git/config").unwrap();
//! assert_eq!(git.sandbox, SandboxRule::ReadOnly);
//! assert!(git.program.contains("git"));
//! ```

/// How the sandbox enforces one protected path, wherever it stands in the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxRule {
    /// Read-only with everything beneath it; cannot be renamed, replaced or
    /// removed; created, it is removed after the run.
    ReadOnly,
    /// Writable beneath (the entries that run code have rows of their own),
    /// but the directory itself cannot be renamed, replaced or removed:
    /// `.git`, whose objects, refs and index `git commit` writes.
    Pinned,
}

/// One row of the table: a path, the program that executes or loads it, and why that runs code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProtectedPath {
    /// The path, matched at any depth by the guard and the sandbox alike
    /// ([`ends_with_pattern`]: `.git/config` is also `vendor/x/.git/config`,
    /// `.mvn/jvm.config` also `sub/.mvn/jvm.config`).
    pub pattern: &'static str,
    /// The programs that execute or load it on their own.
    pub program: &'static str,
    /// What in it runs code.
    pub why: &'static str,
    /// How the sandbox enforces it.
    pub sandbox: SandboxRule,
}

const fn row(pattern: &'static str, program: &'static str, why: &'static str) -> ProtectedPath {
    ProtectedPath {
        pattern,
        program,
        why,
        sandbox: SandboxRule::ReadOnly,
    }
}

/// The protected paths, one row each (see the module docs).
pub const PROTECTED_PATHS: &[ProtectedPath] = &[
    // version control
    ProtectedPath {
        pattern: ".git",
        program: "git",
        why: "the repository: its config and hooks run commands (rows below); a `.git` the model makes or swaps is a repository whose config git obeys",
        sandbox: SandboxRule::Pinned,
    },
    row(".git/config", "git", "`core.fsmonitor`, `core.pager`, `core.sshCommand`, aliases, filter and diff drivers run commands"),
    row(".git/config.worktree", "git", "per-worktree config, read like `.git/config`"),
    row(".git/hooks", "git", "hooks run on commit, checkout, merge, push"),
    row(".git/commondir", "git", "points git at another directory's config and hooks"),
    row(".git/modules", "git", "submodules' repositories, with their own config and hooks"),
    row(".git/worktrees", "git", "linked worktrees' git directories, with their own config"),
    row(".gitattributes", "git", "selects filter, diff and merge drivers (commands) per path"),
    row(".git/info/attributes", "git", "selects filter, diff and merge drivers (commands) per path, like `.gitattributes`"),
    row(".git/rebase-merge", "git (`rebase --continue`)", "a rebase's todo list: its `exec` lines run through the shell when the rebase goes on"),
    row(".gitmodules", "git", "submodule URLs and `update = !command`"),
    row(".githooks", "git (`core.hooksPath`)", "a common hooks directory"),
    row(".husky", "husky (npm install, git hooks)", "git hook scripts"),
    row(".pre-commit-config.yaml", "pre-commit", "hook commands and repositories run on commit"),
    row("lefthook.yml", "lefthook", "commands run by git hooks"),
    row("lefthook.yaml", "lefthook", "commands run by git hooks"),
    row("lefthook.json", "lefthook", "commands run by git hooks"),
    row("lefthook.toml", "lefthook", "commands run by git hooks"),
    row(".lefthook.yml", "lefthook", "commands run by git hooks"),
    row(".lefthook.yaml", "lefthook", "commands run by git hooks"),
    row("lefthook-local.yml", "lefthook", "local overrides of the hook commands"),
    row("lefthook-local.yaml", "lefthook", "local overrides of the hook commands"),
    row(".lefthook", "lefthook", "hook scripts"),
    row(".lintstagedrc", "lint-staged (pre-commit hook)", "commands run on staged files"),
    row(".lintstagedrc.json", "lint-staged (pre-commit hook)", "commands run on staged files"),
    row(".lintstagedrc.yaml", "lint-staged (pre-commit hook)", "commands run on staged files"),
    row(".lintstagedrc.yml", "lint-staged (pre-commit hook)", "commands run on staged files"),
    row(".lintstagedrc.js", "lint-staged (pre-commit hook)", "JavaScript run on commit"),
    row(".lintstagedrc.mjs", "lint-staged (pre-commit hook)", "JavaScript run on commit"),
    row(".lintstagedrc.cjs", "lint-staged (pre-commit hook)", "JavaScript run on commit"),
    row("lint-staged.config.js", "lint-staged (pre-commit hook)", "JavaScript run on commit"),
    row("lint-staged.config.mjs", "lint-staged (pre-commit hook)", "JavaScript run on commit"),
    row("lint-staged.config.cjs", "lint-staged (pre-commit hook)", "JavaScript run on commit"),
    row(".overcommit.yml", "overcommit", "commands run by git hooks"),
    // build tools and package managers
    row(".cargo", "cargo", "`config.toml`: `build.rustc-wrapper`, runners, aliases, env"),
    row("rust-toolchain", "rustup", "selects a toolchain, which can be a local path"),
    row("rust-toolchain.toml", "rustup", "selects a toolchain, which can be a local path"),
    row(".npmrc", "npm, pnpm", "`script-shell`, `node-options`, `git` program, registry credentials"),
    row(".yarnrc", "yarn 1", "`yarn-path` runs a JavaScript file"),
    row(".yarnrc.yml", "yarn 2+", "`yarnPath`, plugins run JavaScript"),
    row(".yarn/releases", "yarn 2+", "the yarn release `yarnPath` runs"),
    row(".yarn/plugins", "yarn 2+", "plugins loaded by every yarn command"),
    row(".pnp.cjs", "yarn 2+ (Plug'n'Play)", "the module loader every `yarn node` and script runs"),
    row(".pnp.loader.mjs", "yarn 2+ (Plug'n'Play)", "the ESM loader every `yarn node` and script runs"),
    row(".pnpmfile.cjs", "pnpm", "`readPackage` and other hooks run on install"),
    row(".pnpmfile.mjs", "pnpm", "hooks run on install"),
    row("bunfig.toml", "bun", "`preload` scripts run before every `bun` run and test"),
    row(".mvn/extensions.xml", "Maven", "build extensions (Java code) loaded by every build"),
    row(".mvn/jvm.config", "Maven", "JVM options (`-javaagent`) of every build"),
    row(".mvn/maven.config", "Maven", "command-line options of every build"),
    row(".mvn/wrapper", "Maven wrapper (`mvnw`)", "the Maven distribution (and wrapper jar) it downloads and runs"),
    row("gradle/wrapper", "Gradle wrapper (`gradlew`)", "the Gradle distribution it downloads and runs"),
    row(".bazelrc", "Bazel", "`--workspace_status_command`, `--run_under` and other options that run programs"),
    // CI
    row(".github", "GitHub Actions", "workflows run with the repository's secrets"),
    row(".gitlab", "GitLab CI", "included CI definitions"),
    row(".gitlab-ci.yml", "GitLab CI", "pipeline definition"),
    row(".circleci", "CircleCI", "pipeline definition"),
    row(".buildkite", "Buildkite", "pipeline definition"),
    row(".travis.yml", "Travis CI", "pipeline definition"),
    row("azure-pipelines.yml", "Azure Pipelines", "pipeline definition"),
    row("bitbucket-pipelines.yml", "Bitbucket Pipelines", "pipeline definition"),
    row("Jenkinsfile", "Jenkins", "pipeline definition (Groovy)"),
    row(".gitea", "Gitea Actions", "workflows in `.gitea/workflows`"),
    row(".forgejo", "Forgejo Actions", "workflows in `.forgejo/workflows`"),
    row(".woodpecker.yml", "Woodpecker CI", "pipeline definition"),
    row(".woodpecker.yaml", "Woodpecker CI", "pipeline definition"),
    row(".woodpecker", "Woodpecker CI", "pipeline definitions"),
    row(".drone.yml", "Drone CI", "pipeline definition"),
    row(".drone.yaml", "Drone CI", "pipeline definition"),
    row(".cirrus.yml", "Cirrus CI", "pipeline definition"),
    row("appveyor.yml", "AppVeyor", "pipeline definition"),
    row(".appveyor.yml", "AppVeyor", "pipeline definition"),
    row(".build.yml", "SourceHut builds", "pipeline definition"),
    row(".builds", "SourceHut builds", "pipeline definitions"),
    row(".semaphore", "Semaphore CI", "pipeline definitions"),
    row(".tekton", "Tekton (Pipelines as Code)", "pipeline definitions"),
    row("buildspec.yml", "AWS CodeBuild", "build commands"),
    row("cloudbuild.yaml", "Google Cloud Build", "build steps"),
    // editors, shells and environment loaders
    row(".vscode", "VS Code", "`tasks.json` (run on folder open), settings naming programs"),
    row(".idea", "JetBrains IDEs", "run configurations, startup tasks, tool paths"),
    row(".devcontainer", "Dev Containers", "`postCreateCommand` and friends, the container image"),
    row(".devcontainer.json", "Dev Containers", "`postCreateCommand` and friends, the container image"),
    row(".zed", "Zed", "`settings.json` (language servers, formatters), `tasks.json`"),
    row(".helix", "Helix", "`languages.toml`: language servers and formatters it starts"),
    row(".nvim.lua", "Neovim (`exrc`)", "Lua run when Neovim opens the directory"),
    row(".exrc", "Vim, Neovim (`exrc`)", "commands run when the editor opens the directory"),
    row(".claude/settings.json", "Claude Code", "hooks and allowed commands"),
    row(".claude/settings.local.json", "Claude Code", "hooks and allowed commands"),
    row(".mcp.json", "Claude Code, other MCP clients", "MCP servers: commands started with the project"),
    row(".cursor", "Cursor", "`mcp.json` servers, rules, hooks"),
    row(".gemini", "Gemini CLI", "`settings.json`: MCP servers and tool commands"),
    row(".codex", "Codex CLI", "project configuration: MCP servers, commands"),
    row(".envrc", "direnv", "a shell script sourced on `cd`"),
    row(".direnv", "direnv", "direnv's layout and cached environments"),
    row(".mise.toml", "mise", "`[env]` with `_.source`, tasks, hooks run on `cd`"),
    row("mise.toml", "mise", "`[env]` with `_.source`, tasks, hooks run on `cd`"),
    row("mise.local.toml", "mise", "local overrides: `[env]`, tasks, hooks run on `cd`"),
    row(".mise.local.toml", "mise", "local overrides: `[env]`, tasks, hooks run on `cd`"),
    row(".mise", "mise", "`.mise/config.toml`, task scripts"),
    row("mise/config.toml", "mise", "`[env]` with `_.source`, tasks, hooks run on `cd`"),
    // a home directory's configuration, should HOME point into the workspace
    row(".gitconfig", "git (global config)", "the same commands as `.git/config`"),
    row(".config", "git, and most tools (XDG config)", "`git/config`, tool configs that name programs"),
    row(".ssh", "ssh", "`config` (`ProxyCommand`, `LocalCommand`), `authorized_keys`"),
    row(".bashrc", "bash", "sourced by interactive shells"),
    row(".bash_profile", "bash", "sourced by login shells"),
    row(".profile", "sh, bash", "sourced by login shells"),
    row(".zshrc", "zsh", "sourced by interactive shells"),
    row(".zshenv", "zsh", "sourced by every zsh"),
];

const N: usize = PROTECTED_PATHS.len();

const fn patterns() -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = PROTECTED_PATHS[i].pattern;
        i += 1;
    }
    out
}

/// Every pattern of [`PROTECTED_PATHS`], in order (the guard's default list).
pub const PATTERNS: &[&str] = &patterns();

/// The table of [`PROTECTED_PATHS`] as Markdown (the one in `docs/security.md`).
///
/// ```
/// let md = tinyagents_sandbox::protected::markdown_table();
/// assert!(md.starts_with("| Path | Run or loaded by | What runs |"));
/// assert!(md.contains("| `.envrc` | direnv |"));
/// ```
pub fn markdown_table() -> String {
    let mut out = String::from("| Path | Run or loaded by | What runs | In the sandbox |\n|---|---|---|---|\n");
    for r in PROTECTED_PATHS {
        let rule = match r.sandbox {
            SandboxRule::ReadOnly => "read-only",
            SandboxRule::Pinned => "pinned",
        };
        out.push_str(&format!("| `{}` | {} | {} | {rule} |\n", r.pattern, r.program, r.why));
    }
    out
}

/// A pattern's components, lower-cased (ASCII, as every pattern is):
/// `None` for an empty pattern or one holding `.` or `..`. The one reading
/// of a pattern, the sandbox's and the guard's.
///
/// ```
/// use tinyagents_sandbox::protected::pattern_parts;
///
/// assert_eq!(pattern_parts("/.mvn/JVM.config/").unwrap(), [".mvn", "jvm.config"]);
/// assert!(pattern_parts("a/../b").is_none());
/// ```
pub fn pattern_parts(pattern: &str) -> Option<Vec<String>> {
    let parts: Vec<String> = pattern
        .split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    (!parts.is_empty() && !parts.iter().any(|p| p == "." || p == "..")).then_some(parts)
}

/// Whether the path whose components are `dir` then `name` ends with the
/// pattern `parts` (lower-cased, [`pattern_parts`]), comparing ASCII case
/// blind: where a pattern stands, at any depth (`.mvn/jvm.config` is also
/// `sub/.mvn/jvm.config`). The one placement rule: the sandbox applies it
/// to every entry it walks, [`protected_hit`] to every prefix of a path.
pub fn ends_with_pattern<S: AsRef<str>>(dir: &[S], name: &str, parts: &[String]) -> bool {
    let Some((last, head)) = parts.split_last() else {
        return false;
    };
    last.eq_ignore_ascii_case(name)
        && head.len() <= dir.len()
        && dir[dir.len() - head.len()..]
            .iter()
            .zip(head)
            .all(|(d, h)| d.as_ref().eq_ignore_ascii_case(h))
}

/// The protected entry of `protected` (the guard's list, or the patch
/// tool's) that `resolved`, a path under `root`, falls under, if any. Every
/// entry is placed at any depth, as the sandbox places it
/// ([`ends_with_pattern`]), compared case-insensitively: the path is the
/// entry, or lies under it (`sub/.mvn/jvm.config`, `a/.git/hooks/x`). An
/// entry with `/` also hits a directory it would lie in — a path ending with
/// a leading part of it (`x/.mvn`, `gradle`), or the root itself — where a
/// tree moved or copied would create it.
pub fn protected_hit<'a>(
    root: &std::path::Path,
    resolved: &std::path::Path,
    protected: &'a [String],
) -> Option<&'a str> {
    let rel = resolved.strip_prefix(root).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().to_lowercase())
        .collect();
    protected
        .iter()
        .map(String::as_str)
        .find(|entry| pattern_parts(entry).is_some_and(|e| parts_hit(&parts, &e, true)))
}

/// Whether the path `parts` (lower-cased components from the root) is the
/// pattern `e` or lies under it, at any depth; with `lies_in`, also whether
/// it is a directory the pattern would lie in ([`protected_hit`]).
pub fn parts_hit(parts: &[String], e: &[String], lies_in: bool) -> bool {
    let under = (1..=parts.len()).any(|n| ends_with_pattern(&parts[..n - 1], &parts[n - 1], e));
    under
        || (lies_in
            && e.len() > 1
            && (parts.is_empty()
                || (1..e.len()).any(|j| {
                    let (dir, name) = parts.split_at(parts.len() - 1);
                    ends_with_pattern(dir, &name[0], &e[..j])
                })))
}

/// Characters that look like `.` or `/` but are not, and invisible or
/// direction-changing characters: a path holding one is not understood.
const LOOKALIKES: &[char] = &[
    '\u{2024}', '\u{2025}', '\u{2026}', '\u{FF0E}', '\u{FF0F}', '\u{2215}', '\u{2044}', '\u{29F8}', '\u{FE52}',
    '\u{200B}', '\u{200C}', '\u{200D}', '\u{200E}', '\u{200F}', '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}',
    '\u{202E}', '\u{2066}', '\u{2067}', '\u{2068}', '\u{2069}', '\u{FEFF}', '\u{FF3C}', '\u{2216}',
];

/// The lexical checks of a path a write names (the guard's operands, a
/// patch's targets): `Err(reason)` for a form refused before the file system
/// is consulted, because no protected-path check could judge it as the
/// program will read it.
pub fn path_lexical(raw: &str) -> Result<(), String> {
    if raw.is_empty() {
        return Err("an empty path".to_owned());
    }
    if let Some(c) = raw.chars().find(|c| c.is_control()) {
        return Err(format!("a control character (U+{:04X}) in the path", c as u32));
    }
    if let Some(c) = raw.chars().find(|c| LOOKALIKES.contains(c)) {
        return Err(format!(
            "a look-alike or invisible character (U+{:04X}) in the path",
            c as u32
        ));
    }
    if raw.contains('\\') {
        return Err("a backslash (a Windows-style path or an escape)".to_owned());
    }
    if raw.contains('%') {
        return Err("a `%` (URL-encoded paths are not accepted)".to_owned());
    }
    if raw.contains("://") || raw.to_ascii_lowercase().starts_with("file:") {
        return Err("a URL instead of a path".to_owned());
    }
    let b = raw.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':' {
        return Err("a Windows drive letter".to_owned());
    }
    if raw.starts_with('~') {
        return Err("a `~` home-directory path".to_owned());
    }
    if raw.contains('$') || raw.contains('`') {
        return Err("a `$` or backtick (variables and substitutions are not expanded here)".to_owned());
    }
    Ok(())
}
