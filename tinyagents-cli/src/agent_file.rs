//! The `[agent]` and `[[script]]` sections of an agent file (the stack's
//! sections are read by the library), and loading a whole file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use tinyagents::config::{ConfigError, ConfigErrors, ConfigFile, FileErrors, MiddlewareRegistry};
use tinyagents::external_hooks::ExternalHooksMiddleware;
use tinyagents::harness::model::providers::ProviderConfig;
use tinyagents::prelude::*;

/// The `[agent]` section.
#[derive(Debug, Clone)]
pub struct AgentSection {
    /// The user prompt.
    pub prompt: String,
    /// The system prompt.
    pub system_prompt: Option<String>,
    /// The step limit.
    pub max_steps: Option<u32>,
    /// The run id.
    pub run_id: String,
    /// What each fake tool answers (default `ok`).
    pub tool_outputs: BTreeMap<String, String>,
    /// The workspace directory (hooks run there), relative to the file.
    pub workspace: PathBuf,
}

/// The `[model]` section: a real model instead of the scripted one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelSection {
    /// `provider:model` (`openai:gpt-4o-mini`, `anthropic:…`, `vllm:…`).
    pub name: Option<String>,
    /// The server's base URL, instead of the provider's default and its variable.
    pub base_url: Option<String>,
    /// The variable holding the API key, instead of the provider's usual one.
    pub api_key_env: Option<String>,
    /// Whether calls stream (default `true`).
    pub streaming: Option<bool>,
}

/// Where an agent file comes from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A file.
    Path(PathBuf),
    /// Standard input (`-`); relative paths are relative to the current directory.
    Stdin,
}

impl Source {
    /// `-` is standard input, anything else a path.
    pub fn from_arg(arg: &str) -> Self {
        if arg == "-" {
            Self::Stdin
        } else {
            Self::Path(PathBuf::from(arg))
        }
    }

    /// How errors and `check` name it.
    pub fn display(&self) -> String {
        match self {
            Self::Path(p) => p.display().to_string(),
            Self::Stdin => "<stdin>".to_owned(),
        }
    }
}

/// The most an agent file read from standard input may hold.
pub const MAX_STDIN: u64 = 4 << 20;

/// A loaded, checked agent file.
#[derive(Debug)]
pub struct Loaded {
    /// The stack it describes.
    pub stack: MiddlewareStack<()>,
    /// Its `[agent]` section.
    pub agent: AgentSection,
    /// The scripted model's replies (from `[[script]]` or a JSON file).
    pub script: Vec<ScriptedTurn>,
    /// The tools the script calls, in order of first use.
    pub tools: Vec<String>,
    /// The hook commands of the stack's `external_hooks` (for `check`).
    pub hooks: Vec<tinyagents::external_hooks::HookCommand>,
    /// The built-ins in the stack because they are on by default.
    pub defaults: Vec<&'static str>,
    /// Its `[model]` section (empty when absent).
    pub model: ModelSection,
    /// Its `[store] url`, checked (scheme, feature compiled in) and opened:
    /// a server that does not answer stops the load.
    pub store: Option<tinyagents::store::StoreUrl>,
    /// The middleware types built to keep their state in the store (empty without one).
    pub shared: Vec<&'static str>,
    /// The file's `preset`, when it names one.
    pub preset: Option<tinyagents::presets::Preset>,
}

const AGENT_KEYS: [&str; 6] = [
    "prompt",
    "system_prompt",
    "max_steps",
    "run_id",
    "tool_outputs",
    "workspace",
];
const MODEL_KEYS: [&str; 4] = ["name", "base_url", "api_key_env", "streaming"];
const TURN_KEYS: [&str; 3] = ["text", "tool_calls", "fail"];
const CALL_KEYS: [&str; 3] = ["name", "arguments", "id"];

fn unknown(map: &Map<String, Value>, path: &str, keys: &[&str], errors: &mut ConfigErrors) {
    for (k, v) in map.iter().filter(|(k, _)| !keys.contains(&k.as_str())) {
        let valid: Vec<String> = keys.iter().map(|k| format!("`{k}`")).collect();
        let hint = keys
            .iter()
            .map(|c| (distance(k, c), c))
            .filter(|(d, c)| *d <= c.len() / 3 + 1)
            .min_by_key(|(d, _)| *d)
            .map(|(_, c)| format!("; did you mean `{c}`?"))
            .unwrap_or_default();
        errors.push(ConfigError::new(
            format!("{path}.{k}"),
            Some(v.clone()),
            format!("unknown key; the valid keys are {}{hint}", valid.join(", ")),
        ));
    }
}

/// The edit distance between two keys.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn string(map: &Map<String, Value>, path: &str, key: &str, errors: &mut ConfigErrors) -> Option<String> {
    match map.get(key) {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            errors.push(ConfigError::new(
                format!("{path}.{key}"),
                Some(other.clone()),
                "must be a string",
            ));
            None
        }
    }
}

fn agent_section(value: Option<&Value>, base: &Path, errors: &mut ConfigErrors) -> AgentSection {
    let mut agent = AgentSection {
        prompt: "Hello".to_owned(),
        system_prompt: None,
        max_steps: None,
        run_id: "run-1".to_owned(),
        tool_outputs: BTreeMap::new(),
        workspace: base.to_path_buf(),
    };
    let Some(value) = value else { return agent };
    let Some(map) = value.as_object() else {
        errors.push(ConfigError::new(
            "agent",
            Some(value.clone()),
            "must be a table: write `[agent]`",
        ));
        return agent;
    };
    unknown(map, "agent", &AGENT_KEYS, errors);
    if let Some(p) = string(map, "agent", "prompt", errors) {
        agent.prompt = p;
    }
    agent.system_prompt = string(map, "agent", "system_prompt", errors);
    if let Some(id) = string(map, "agent", "run_id", errors) {
        agent.run_id = id;
    }
    if let Some(dir) = string(map, "agent", "workspace", errors) {
        agent.workspace = base.join(dir);
    }
    match map.get("max_steps") {
        None => {}
        Some(v) => match v.as_u64() {
            Some(n @ 1..=10_000) => agent.max_steps = Some(n as u32),
            _ => errors.push(ConfigError::new(
                "agent.max_steps",
                Some(v.clone()),
                "must be in 1..=10000",
            )),
        },
    }
    match map.get("tool_outputs") {
        None => {}
        Some(Value::Object(outputs)) => {
            for (tool, v) in outputs {
                match v {
                    Value::String(s) => {
                        agent.tool_outputs.insert(tool.clone(), s.clone());
                    }
                    other => errors.push(ConfigError::new(
                        format!("agent.tool_outputs.{tool}"),
                        Some(other.clone()),
                        "must be a string: what the fake tool answers",
                    )),
                }
            }
        }
        Some(other) => errors.push(ConfigError::new(
            "agent.tool_outputs",
            Some(other.clone()),
            "must be a table: `tool_outputs = { shell = \"a.txt\" }`",
        )),
    }
    agent
}

fn model_section(value: Option<&Value>, errors: &mut ConfigErrors) -> ModelSection {
    let mut model = ModelSection::default();
    let Some(value) = value else { return model };
    let Some(map) = value.as_object() else {
        errors.push(ConfigError::new(
            "model",
            Some(value.clone()),
            "must be a table: write `[model]` with `name = \"openai:gpt-4o-mini\"`",
        ));
        return model;
    };
    unknown(map, "model", &MODEL_KEYS, errors);
    model.name = string(map, "model", "name", errors);
    if model.name.is_none() && !map.contains_key("name") {
        errors.push(ConfigError::new(
            "model.name",
            None,
            "required key is missing: `name = \"provider:model\"` (e.g. `openai:gpt-4o-mini`)",
        ));
    }
    if let Some(name) = &model.name {
        // checked here, so `check` reports it with its place, not `run` without one
        if let Err(TinyAgentsError::Config { message, .. }) = ProviderConfig::parse(name) {
            errors.push(ConfigError::new(
                "model.name",
                Some(Value::String(name.clone())),
                message,
            ));
        }
    }
    model.base_url = string(map, "model", "base_url", errors);
    if let Some(url) = &model.base_url
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        errors.push(ConfigError::new(
            "model.base_url",
            Some(Value::String(url.clone())),
            "must be an `http://` or `https://` URL (e.g. `http://localhost:11434/v1`)",
        ));
    }
    model.api_key_env = string(map, "model", "api_key_env", errors);
    match map.get("streaming") {
        None => {}
        Some(Value::Bool(b)) => model.streaming = Some(*b),
        Some(other) => errors.push(ConfigError::new(
            "model.streaming",
            Some(other.clone()),
            "must be `true` or `false`",
        )),
    }
    model
}

/// Parses a script (the `[[script]]` list or a JSON file's array); `path` prefixes errors.
pub fn parse_script(
    value: &Value,
    path: &str,
    tools: &mut Vec<String>,
    errors: &mut ConfigErrors,
) -> Vec<ScriptedTurn> {
    let Some(turns) = value.as_array() else {
        errors.push(ConfigError::new(
            path,
            Some(value.clone()),
            "must be a list of replies: write `[[script]]` entries",
        ));
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, turn) in turns.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let Some(map) = turn.as_object() else {
            errors.push(ConfigError::new(
                &at,
                Some(turn.clone()),
                "must be a table with `text` and/or `tool_calls`",
            ));
            continue;
        };
        unknown(map, &at, &TURN_KEYS, errors);
        if let Some(message) = string(map, &at, "fail", errors) {
            out.push(ScriptedTurn::Fail(TinyAgentsError::model(message, false)));
            continue;
        }
        let text = string(map, &at, "text", errors).unwrap_or_default();
        let mut calls = Vec::new();
        match map.get("tool_calls") {
            None => {}
            Some(Value::Array(list)) => {
                for (j, call) in list.iter().enumerate() {
                    let cat = format!("{at}.tool_calls[{j}]");
                    let Some(c) = call.as_object() else {
                        errors.push(ConfigError::new(
                            &cat,
                            Some(call.clone()),
                            "must be a table with `name` and `arguments`",
                        ));
                        continue;
                    };
                    unknown(c, &cat, &CALL_KEYS, errors);
                    let Some(name) = string(c, &cat, "name", errors) else {
                        if !c.contains_key("name") {
                            errors.push(ConfigError::new(
                                format!("{cat}.name"),
                                None,
                                "required key is missing: the tool's name",
                            ));
                        }
                        continue;
                    };
                    let arguments = match c.get("arguments") {
                        None => Value::Object(Map::new()),
                        Some(v @ Value::Object(_)) => v.clone(),
                        Some(other) => {
                            errors.push(ConfigError::new(
                                format!("{cat}.arguments"),
                                Some(other.clone()),
                                "must be a table",
                            ));
                            continue;
                        }
                    };
                    let id = string(c, &cat, "id", errors).unwrap_or_else(|| format!("call-{i}-{j}"));
                    if !tools.contains(&name) {
                        tools.push(name.clone());
                    }
                    calls.push(ToolCall::new(id, name, arguments));
                }
            }
            Some(other) => errors.push(ConfigError::new(
                format!("{at}.tool_calls"),
                Some(other.clone()),
                "must be a list: `tool_calls = [{ name = \"shell\", arguments = { command = \"ls\" } }]`",
            )),
        }
        if calls.is_empty() {
            out.push(ScriptedTurn::text(text));
        } else {
            let mut response = ModelResponse::tool_calls(calls);
            if !text.is_empty() {
                response.message.set_text(text);
            }
            out.push(ScriptedTurn::Reply(response));
        }
    }
    out
}

/// Reads an agent file from `source`: standard input is read up to
/// [`MAX_STDIN`] bytes, a longer input is refused.
fn read_source(source: &Source) -> Result<(ConfigFile, PathBuf), FileErrors> {
    let (file, base) = read_file(source)?;
    // An agent file that declares nothing is a mistake (most often `cat
    // missing.toml | tinyagents check -`, whose `cat` failed), not a request
    // for the default stack.
    if file.value().as_object().is_some_and(|sections| sections.is_empty()) {
        let hint = match source {
            Source::Stdin => "; standard input was empty: check that the command before `|` printed the file",
            Source::Path(_) => "",
        };
        return Err(errors_of(
            &source.display(),
            ConfigError::new(
                "",
                None,
                format!(
                    "the agent file is empty (no section): write at least one of `[[middleware]]`, `[[hooks]]`, \
                     `[agent]`, `[model]`, `[[script]]` (see examples/agent.toml){hint}"
                ),
            ),
        ));
    }
    Ok((file, base))
}

/// Reads and parses the agent file at `source`; its directory (relative paths' base).
fn read_file(source: &Source) -> Result<(ConfigFile, PathBuf), FileErrors> {
    match source {
        Source::Path(path) => {
            let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
            Ok((ConfigFile::read(path)?, base))
        }
        Source::Stdin => {
            use std::io::Read as _;
            let name = source.display();
            let mut bytes = Vec::new();
            let read = std::io::stdin().lock().take(MAX_STDIN + 1).read_to_end(&mut bytes);
            let fail = |message: String| errors_of(&name, ConfigError::new("", None, message));
            if let Err(e) = read {
                return Err(fail(format!("cannot read standard input: {e}")));
            }
            if bytes.len() as u64 > MAX_STDIN {
                return Err(fail(format!(
                    "the agent file on standard input is longer than {MAX_STDIN} bytes; pass a smaller file"
                )));
            }
            let text = String::from_utf8(bytes).map_err(|e| {
                fail(format!(
                    "standard input is not UTF-8 text (at byte {})",
                    e.utf8_error().valid_up_to()
                ))
            })?;
            Ok((ConfigFile::parse(name, text)?, PathBuf::new()))
        }
    }
}

/// Loads the agent file at `source` (with the script from `script_file`
/// when given): every error of the file, each located, or the loaded agent.
pub fn load(source: &Source, script_file: Option<&Path>) -> Result<Loaded, Vec<FileErrors>> {
    let (file, base) = read_source(source).map_err(|e| vec![e])?;
    let mut registry: MiddlewareRegistry<()> = MiddlewareRegistry::with_builtins();
    // A `[store]` is opened before the stack is built, so the middleware
    // that share state (rate_limiter, limits, the call limits) keep it there.
    let opened = match tinyagents::store::StoreUrl::of_section(file.section("store")) {
        Ok(Some(url)) => Some(open_store(&url).map_err(|e| {
            vec![file.locate_errors(ConfigError::new("store.url", Some(Value::String(url.to_string())), e).into())]
        })?),
        // A malformed section is reported by `build_file`.
        _ => None,
    };
    let shared: Vec<&'static str> = match &opened {
        Some(stores) => {
            registry.set_stores(stores.clone());
            registry.shared_types().collect()
        }
        None => Vec::new(),
    };
    let stack = registry.build_file(&file);
    let preset = file
        .section("preset")
        .and_then(Value::as_str)
        .and_then(|name| tinyagents::presets::Preset::from_name(name).ok());
    let preset_tables = preset.map(|p| p.entries()).unwrap_or_default();
    let mut named: Vec<&str> = file
        .section("middleware")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| e.get("type").and_then(Value::as_str))
                .collect()
        })
        .unwrap_or_default();
    named.extend(
        preset_tables
            .iter()
            .filter_map(|e| e.get("type").and_then(Value::as_str)),
    );
    let defaults: Vec<&'static str> = registry.defaults().filter(|t| !named.contains(t)).collect();
    let base = if base.as_os_str().is_empty() {
        PathBuf::from(".")
    } else {
        base
    };

    let mut errors = ConfigErrors::new();
    let agent = agent_section(file.section("agent"), &base, &mut errors);
    let model = model_section(file.section("model"), &mut errors);
    let mut tools = Vec::new();
    let mut script = match file.section("script") {
        Some(v) => parse_script(v, "script", &mut tools, &mut errors),
        None => Vec::new(),
    };
    let mut all = Vec::new();
    let mut stack = match stack {
        Ok(s) => Some(s),
        Err(e) => {
            all.push(e);
            None
        }
    };
    if !errors.is_empty() {
        all.push(file.locate_errors(errors));
    }
    if let Some(script_path) = script_file {
        let name = script_path.display().to_string();
        let text = std::fs::read_to_string(script_path).map_err(|e| {
            errors_of(
                &name,
                ConfigError::new("", None, format!("cannot read the script: {e}")),
            )
        });
        match text.and_then(|t| {
            serde_json::from_str::<Value>(&t).map_err(|e| {
                errors_of(
                    &name,
                    ConfigError::new(
                        "",
                        None,
                        format!("invalid JSON at line {}, column {}: {e}", e.line(), e.column()),
                    ),
                )
            })
        }) {
            Ok(value) => {
                let mut errs = ConfigErrors::new();
                tools.clear();
                script = parse_script(&value, "", &mut tools, &mut errs);
                if !errs.is_empty() {
                    all.push(FileErrors {
                        file: name,
                        errors: errs
                            .into_iter()
                            .map(|error| tinyagents::config::LocatedError { error, location: None })
                            .collect(),
                    });
                }
            }
            Err(e) => all.push(e),
        }
    }
    if !all.is_empty() {
        return Err(all);
    }
    let stack = stack.take().expect("no errors");
    let hooks = hooks_of(&file);
    // Checked by `build_file` above: an error there stopped the load.
    let store = tinyagents::store::StoreUrl::of_section(file.section("store")).unwrap_or_default();
    let shared = shared.into_iter().filter(|t| stack.names().contains(t)).collect();
    Ok(Loaded {
        store,
        shared,
        stack,
        agent,
        script,
        tools,
        hooks,
        defaults,
        model,
        preset,
    })
}

/// Opens a store on a runtime of its own (loading is synchronous).
fn open_store(url: &tinyagents::store::StoreUrl) -> Result<tinyagents::store::SharedStores, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime to open the store: {e}"))?
        .block_on(url.open())
        .map_err(|e| e.to_string())
}

fn errors_of(file: &str, error: ConfigError) -> FileErrors {
    FileErrors {
        file: file.to_owned(),
        errors: vec![tinyagents::config::LocatedError { error, location: None }],
    }
}

/// The hook commands of a file that is known to be valid.
fn hooks_of(file: &ConfigFile) -> Vec<tinyagents::external_hooks::HookCommand> {
    file.section("hooks")
        .and_then(|h| tinyagents::external_hooks::ExternalHooksConfig::from_list(h, "hooks").ok())
        .map(|c| ExternalHooksMiddleware::from(c).commands().to_vec())
        .unwrap_or_default()
}
