//! The `tinyagents` command.
//!
//! ```text
//! tinyagents docs                 the built-in middleware table (as docs/middleware.md)
//! tinyagents check FILE           validate an agent file; print the resolved stack with each middleware's hooks
//! tinyagents run FILE [--model provider:model] [--script replies.json] [--prompt TEXT] [--json]
//!                                 run an agent with that stack on a real or the scripted model, streaming its events
//!                                 (`--record run.jsonl` keeps them as JSON Lines, `--html run.html` as a viewer page)
//! tinyagents view LOG [-o PAGE]   the self-contained HTML viewer page of a recorded run
//! ```
//!
//! `FILE` may be `-`: the agent file is read from standard input. `-v` (more
//! log, and every middleware hook), `-vv`, `-vvv` and `-q` (errors only) set
//! the level of the `tracing` log on stderr; `RUST_LOG`, when set, wins.
//! `--json` prints every event as one line of JSON on stdout (the shape of
//! `docs/events.md`), then a `{"type": "finished", …}` line, or a
//! `{"type": "failed", "error", "status", "message"}` line when the run failed
//! or could not start (a bad agent file, a missing key, no model).
//!
//! An agent file is TOML: `[[middleware]]` entries and `[[hooks]]` (the
//! stack, see `tinyagents::config`), `[agent]` (`prompt`, `system_prompt`,
//! `max_steps`, `run_id`, `tool_outputs`, `workspace`), `[model]` (`name =
//! "provider:model"`, `base_url`, `api_key_env`, `streaming`: a real model;
//! the key comes from the provider's usual variable) and `[[script]]` (the
//! scripted model's replies: `text`, `tool_calls = [{ name, arguments }]`, `fail`).

// Everything the command prints passes the process's secret redactor
// (`tinyagents::harness::secrets`): an API key or a URL password never shows.

/// `println!` that ignores a closed stdout (`tinyagents docs | head` must
/// not panic) and masks every known secret.
macro_rules! outln {
    () => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout());
    }};
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stdout(), "{}", tinyagents::harness::secrets::redactor().redact(&text));
    }};
}

/// `print!` that ignores a closed stdout and masks every known secret.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = write!(std::io::stdout(), "{}", tinyagents::harness::secrets::redactor().redact(&text));
    }};
}

/// `eprintln!` that masks every known secret.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let text = format!($($arg)*);
        let _ = writeln!(std::io::stderr(), "{}", tinyagents::harness::secrets::redactor().redact(&text));
    }};
}

mod agent_file;
mod render;
mod view;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use agent_file::Source;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Arg, ArgAction, Command};
use tinyagents::harness::event::ChannelSink;
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

fn file_arg() -> Arg {
    Arg::new("file")
        .required(true)
        .value_name("FILE")
        .help("The agent file (TOML); `-` reads it from standard input")
}

fn cli() -> Command {
    Command::new("tinyagents")
        .about("Agent middleware stacks: the built-in table, config checks, agent runs.")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .arg_required_else_help(true)
        .arg(
            Arg::new("verbose")
                .long("verbose")
                .short('v')
                .global(true)
                .action(ArgAction::Count)
                .help("More log on stderr (-v info and every middleware hook, -vv debug, -vvv trace); RUST_LOG wins when set"),
        )
        .arg(
            Arg::new("quiet")
                .long("quiet")
                .short('q')
                .global(true)
                .action(ArgAction::SetTrue)
                .conflicts_with("verbose")
                .help("Only errors on stderr; `run` prints only the final answer"),
        )
        .subcommand(Command::new("docs").about("Print the built-in middleware table (the text of docs/middleware.md)"))
        .subcommand(
            Command::new("check")
                .about("Validate an agent file and print the resolved stack, in order, with each middleware's hooks")
                .arg(file_arg()),
        )
        .subcommand(
            Command::new("run")
                .about("Run an agent with the file's stack on a real model ([model] or --model) or the scripted one, streaming its events")
                .arg(file_arg())
                .arg(
                    Arg::new("model")
                        .long("model")
                        .short('m')
                        .value_name("PROVIDER:MODEL")
                        .help("A real model (openai:gpt-4o-mini, anthropic:…, ollama:…, vllm:…), instead of [model] and the script; the key comes from the provider's usual variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, …)"),
                )
                .arg(
                    Arg::new("script")
                        .long("script")
                        .value_name("JSON")
                        .value_parser(clap::value_parser!(PathBuf))
                        .conflicts_with("model")
                        .help("A JSON array of replies, instead of the file's [[script]]"),
                )
                .arg(
                    Arg::new("prompt")
                        .long("prompt")
                        .value_name("TEXT")
                        .help("The user prompt, instead of [agent] prompt"),
                )
                .arg(
                    Arg::new("json")
                        .long("json")
                        .action(ArgAction::SetTrue)
                        .help("Print every event as one line of JSON on stdout (docs/events.md), then a `finished` line"),
                )
                .arg(
                    Arg::new("record")
                        .long("record")
                        .value_name("LOG")
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("Record the run's events, timed, as JSON Lines in LOG (read by `tinyagents view`)"),
                )
                .arg(
                    Arg::new("html")
                        .long("html")
                        .value_name("PAGE")
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("Write the run as a self-contained HTML viewer page (no network) when it ends"),
                ),
        )
        .subcommand(
            Command::new("view")
                .about("Write the self-contained HTML viewer page of a run recorded with `run --record`")
                .arg(
                    Arg::new("log")
                        .required(true)
                        .value_name("LOG")
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("The recorded run (JSON Lines)"),
                )
                .arg(
                    Arg::new("output")
                        .long("output")
                        .short('o')
                        .value_name("PAGE")
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("The page to write (default: LOG with the extension .html)"),
                ),
        )
}

/// How much `run` prints besides the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output {
    /// Readable event lines (`verbose`: every middleware hook too).
    Text { verbose: bool },
    /// Only the final answer.
    Quiet,
    /// One JSON object per event.
    Json,
}

/// Installs the `tracing` subscriber: formatted lines on stderr, filtered by
/// `RUST_LOG` when it is set, else by the `-v`/`-q` level.
fn init_logging(verbose: u8, quiet: bool) {
    use tracing_subscriber::EnvFilter;
    let level = match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::try_new(&spec).unwrap_or_else(|e| {
            errln!("warning: RUST_LOG=`{spec}` is not a valid filter ({e}); using `{level}`");
            EnvFilter::new(level)
        }),
        _ => EnvFilter::new(level),
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| RedactingStderr(Vec::new()))
        .with_ansi(false)
        .try_init();
}

/// The log's writer: one formatted event is buffered, then written to
/// stderr with every known secret masked.
struct RedactingStderr(Vec<u8>);

impl std::io::Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(&std::mem::take(&mut self.0)).into_owned();
        let clean = tinyagents::harness::secrets::redactor().redact(&text);
        std::io::stderr().write_all(clean.as_bytes())
    }
}

impl Drop for RedactingStderr {
    fn drop(&mut self) {
        let _ = std::io::Write::flush(self);
    }
}

fn main() -> ExitCode {
    let matches = cli().get_matches();
    let verbose = matches.get_count("verbose");
    let quiet = matches.get_flag("quiet");
    init_logging(verbose, quiet);
    match matches.subcommand() {
        Some(("docs", _)) => {
            out!("{}", tinyagents::docs::render_builtin_docs());
            ExitCode::SUCCESS
        }
        Some(("check", m)) => check(&Source::from_arg(m.get_one::<String>("file").expect("required"))),
        Some(("run", m)) => {
            let output = if m.get_flag("json") {
                Output::Json
            } else if quiet {
                Output::Quiet
            } else {
                Output::Text { verbose: verbose > 0 }
            };
            run(
                &Source::from_arg(m.get_one::<String>("file").expect("required")),
                m.get_one::<PathBuf>("script").map(PathBuf::as_path),
                m.get_one::<String>("model").map(String::as_str),
                m.get_one::<String>("prompt").cloned(),
                output,
                view::Keep {
                    record: m.get_one::<PathBuf>("record").cloned(),
                    html: m.get_one::<PathBuf>("html").cloned(),
                },
            )
        }
        Some(("view", m)) => view::view(
            m.get_one::<PathBuf>("log").expect("required"),
            m.get_one::<PathBuf>("output").map(PathBuf::as_path),
        ),
        _ => unreachable!("a subcommand is required"),
    }
}

/// Prints every error, one per line, and the count.
fn report(errors: &[tinyagents::config::FileErrors]) -> ExitCode {
    let n: usize = errors.iter().map(|e| e.len()).sum();
    for e in errors {
        errln!("{e}");
    }
    errln!("error: {n} problem{} found", if n == 1 { "" } else { "s" });
    ExitCode::FAILURE
}

fn hook_names(hooks: HookSet) -> String {
    hooks.kinds().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
}

/// What a middleware type keeps in a store of `feature` (`check`'s report).
fn shared_state(type_key: &str, feature: &str) -> &'static str {
    match (type_key, feature) {
        ("rate_limiter", "redis") => "its token buckets, shared by every worker",
        ("rate_limiter", _) => "its buckets stay in this process (only a redis:// store keeps buckets)",
        ("limits", _) => "each thread's `max_steps` count, when `max_steps` is set",
        (_, _) => "each thread's call count, when `thread_limit` is set",
    }
}

fn check(source: &Source) -> ExitCode {
    let loaded = match agent_file::load(source, None) {
        Ok(l) => l,
        Err(errors) => return report(&errors),
    };
    outln!(
        "{}: ok — {} middleware, in resolved order:",
        source.display(),
        loaded.stack.len()
    );
    if let Some(preset) = loaded.preset {
        let types: Vec<String> = preset
            .entries()
            .iter()
            .filter_map(|e| e.get("type").and_then(serde_json::Value::as_str).map(str::to_owned))
            .collect();
        outln!(
            "preset: {preset} — {} ({}; the file's entries override or extend it)",
            preset.decl().summary,
            types.join(", ")
        );
    }
    let width = loaded.stack.names().iter().map(|n| n.len()).max().unwrap_or(0);
    for (i, info) in loaded.stack.infos().enumerate() {
        let default = if loaded.defaults.contains(&info.name.as_ref()) {
            "  (on by default)"
        } else {
            ""
        };
        outln!(
            "  {:>2}. {:<width$}  {}{default}",
            i + 1,
            info.name,
            hook_names(info.hooks)
        );
    }
    if let Some(url) = &loaded.store {
        outln!("store: {url} (feature `{}`): reachable", url.feature());
        if loaded.shared.is_empty() {
            outln!("  no middleware of this file keeps its state there");
        }
        for t in &loaded.shared {
            outln!("  {t}: {}", shared_state(t, url.feature()));
        }
    }
    if !loaded.hooks.is_empty() {
        outln!("external hooks:");
        for h in &loaded.hooks {
            let matcher = h
                .matcher
                .as_ref()
                .map(|m| format!(" /{}/", m.as_str()))
                .unwrap_or_default();
            outln!(
                "  - {}{matcher}: {} (timeout {} ms)",
                h.event,
                h.command,
                h.timeout.as_millis()
            );
        }
    }
    if let Some(name) = &loaded.model.name {
        outln!("model: {name}");
    }
    outln!(
        "script: {} repl{}{}",
        loaded.script.len(),
        if loaded.script.len() == 1 { "y" } else { "ies" },
        if loaded.tools.is_empty() {
            String::new()
        } else {
            format!(", calling {}", loaded.tools.join(", "))
        }
    );
    ExitCode::SUCCESS
}

/// The real model a run calls: `--model`, else the file's `[model]`; `None`
/// for the scripted model.
fn real_model(flag: Option<&str>, section: &agent_file::ModelSection) -> Result<Option<Arc<dyn ChatModel>>> {
    use tinyagents::harness::model::providers::ProviderConfig;
    let Some(spec) = flag.or(section.name.as_deref()) else {
        return Ok(None);
    };
    // `[model]`'s key variable, base URL and streaming belong to the provider it
    // names: with `--model` naming another provider they are not used (the
    // file's key must not go to another provider's endpoint).
    let provider = |spec: &str| spec.split_once(':').map(|(p, _)| p.trim().to_ascii_lowercase());
    let section_applies = match (flag, section.name.as_deref()) {
        (Some(flag), Some(named)) => provider(flag) == provider(named),
        _ => true,
    };
    let ignored = !section_applies
        && (section.api_key_env.is_some() || section.base_url.is_some() || section.streaming.is_some());
    if ignored {
        errln!(
            "warning: `--model {spec}` names another provider than `[model]` (`{}`): the file's `api_key_env`, \
             `base_url` and `streaming` are for that one and are not used",
            section.name.as_deref().unwrap_or_default()
        );
    }
    let section = if section_applies {
        section.clone()
    } else {
        agent_file::ModelSection::default()
    };
    let section = &section;
    let default_var = ProviderConfig::parse(spec)?.api_key_env().map(str::to_owned);
    // A file that names its key variable takes the key from it alone.
    let own_var = section.api_key_env.as_deref();
    let mut config = ProviderConfig::from_env_with(spec, |name| {
        if own_var.is_some() && Some(name) == default_var.as_deref() {
            None
        } else {
            std::env::var(name).ok()
        }
    })?;
    if let Some(var) = own_var {
        config = config.with_api_key_env(var);
    }
    if let Some(url) = &section.base_url {
        config = config.with_base_url(url.clone());
    }
    if let Some(streaming) = section.streaming {
        config = config.with_streaming(streaming);
    }
    config.build().map(Some)
}

fn run(
    source: &Source,
    script: Option<&Path>,
    model: Option<&str>,
    prompt: Option<String>,
    output: Output,
    keep: view::Keep,
) -> ExitCode {
    let loaded = match agent_file::load(source, script) {
        Ok(l) => l,
        Err(errors) => {
            let message = errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n");
            not_started(output, ErrorKind::Config, &message);
            return report(&errors);
        }
    };
    let real = match real_model(model, &loaded.model) {
        Ok(m) => m,
        Err(e) => {
            not_started(output, e.kind(), &e.to_string());
            errln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    if real.is_none() && loaded.script.is_empty() {
        let message = "no model and no scripted replies: add `[model]` with `name = \"provider:model\"`, pass `--model provider:model`, or give scripted replies (`[[script]]` entries or `--script replies.json`)";
        not_started(output, ErrorKind::Config, message);
        errln!("error: {message}");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let message = format!("cannot start the runtime: {e}");
            not_started(output, ErrorKind::Config, &message);
            errln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run_agent(loaded, real, prompt, output, keep))
}

async fn run_agent(
    loaded: agent_file::Loaded,
    real: Option<Arc<dyn ChatModel>>,
    prompt: Option<String>,
    output: Output,
    keep: view::Keep,
) -> ExitCode {
    let agent_file::Loaded {
        stack,
        agent: section,
        script,
        mut tools,
        preset,
        ..
    } = loaded;
    // A real model may call any fake tool of `[agent] tool_outputs`.
    if real.is_some() {
        tools = section.tool_outputs.keys().cloned().collect();
    }
    let mut registry = ToolRegistry::new();
    for name in &tools {
        let output = section
            .tool_outputs
            .get(name)
            .cloned()
            .unwrap_or_else(|| "ok".to_owned());
        if let Err(e) = registry.register(RecordingTool::new(name.clone()).returning(output)) {
            errln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    let model: Arc<dyn ChatModel> = match real {
        Some(model) => model,
        None => Arc::new(ScriptedModel::new(script)),
    };
    let mut agent: Agent<()> = Agent::from_shared(model).with_tools(registry).with_stack(stack);
    if let Some(system) = &section.system_prompt {
        agent = agent.with_system_prompt(system.clone());
    }
    if let Some(max) = section.max_steps {
        agent = agent.with_max_steps(max);
    }
    let (sink, mut events) = ChannelSink::new();
    let recorder = match keep.any().then(|| view::open(&keep)).transpose() {
        Ok(r) => r.map(Arc::new),
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let sink: Arc<dyn tinyagents::harness::event::EventSink> = match &recorder {
        Some(recorder) => Arc::new(view::Tee {
            first: Arc::new(sink),
            recorder: recorder.clone(),
        }),
        None => Arc::new(sink),
    };
    let mut ctx = RunContext::new(RunConfig::new(section.run_id.clone()), ())
        .with_sink(sink)
        // a preset says how its runs' workspace is isolated (`coding`: the OS sandbox required)
        .with_workspace(match preset {
            Some(p) => p.workspace(section.workspace.clone()),
            None => WorkspaceDescriptor::new(section.workspace.clone()),
        });
    let prompt = prompt.unwrap_or(section.prompt);

    let printer = tokio::spawn(async move {
        if output == Output::Json {
            while let Some(event) = events.recv().await {
                let line = serde_json::to_value(&event).map(|mut v| {
                    tinyagents::harness::secrets::redactor().redact_json(&mut v);
                    v.to_string()
                });
                match line {
                    Ok(line) => outln!("{line}"),
                    Err(e) => errln!("error: an event could not be written as JSON: {e}"),
                }
            }
            return;
        }
        if output == Output::Quiet {
            while events.recv().await.is_some() {}
            return;
        }
        let mut renderer = render::Renderer::new(output == Output::Text { verbose: true });
        let started = Instant::now();
        let progress = std::io::stderr().is_terminal();
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Some(event) => renderer.event(&event),
                    None => break,
                },
                _ = tick.tick() => {
                    if progress && started.elapsed() > Duration::from_secs(1) {
                        renderer.progress(started.elapsed());
                    }
                }
            }
        }
        renderer.finish();
    });
    let result = agent.run(&mut ctx, &(), prompt.as_str()).await;
    drop(ctx);
    drop(agent);
    let _ = printer.await;
    if let Some(recorder) = recorder {
        let kept = Arc::try_unwrap(recorder)
            .map_err(|_| "the run's recorder is still shared after the run".to_owned())
            .and_then(|r| view::finish(&keep, r));
        if let Err(e) = kept {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    match result {
        Ok(run) if output == Output::Json => {
            let mut line = serde_json::json!({
                "type": "finished",
                "stop": stop_label(&run.stop),
                "steps": run.counters.steps,
                "model_calls": run.counters.model_calls,
                "tool_calls": run.counters.tool_calls,
                "usage": run.usage,
                "final": run.final_text(),
            });
            tinyagents::harness::secrets::redactor().redact_json(&mut line);
            outln!("{line}");
            ExitCode::SUCCESS
        }
        Ok(run) if output == Output::Quiet => {
            outln!("{}", run.final_text());
            ExitCode::SUCCESS
        }
        Ok(run) => {
            outln!(
                "\n── finished ({:?}): {} step{}, {} model call{}, {} tool call{}",
                run.stop,
                run.counters.steps,
                if run.counters.steps == 1 { "" } else { "s" },
                run.counters.model_calls,
                if run.counters.model_calls == 1 { "" } else { "s" },
                run.counters.tool_calls,
                if run.counters.tool_calls == 1 { "" } else { "s" },
            );
            for m in run.messages.iter().filter(|m| m.role == Role::Tool) {
                let text = m.text();
                let first = text.lines().next().unwrap_or("");
                let short: String = first.chars().take(120).collect();
                let more = if short.len() < text.len() { "…" } else { "" };
                outln!(
                    "tool result {} ({}): {short}{more}",
                    m.name.as_deref().unwrap_or("?"),
                    m.tool_call_id.as_deref().unwrap_or("?"),
                );
            }
            outln!("final: {}", run.final_text());
            ExitCode::SUCCESS
        }
        Err(e) => {
            if output == Output::Json {
                let mut line = serde_json::json!({
                    "type": "failed",
                    "error": e.kind(),
                    "status": e.status(),
                    "message": e.to_string(),
                });
                tinyagents::harness::secrets::redactor().redact_json(&mut line);
                outln!("{line}");
            }
            errln!("\nerror: the run failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Under `--json`, the `failed` line every run ends with, for a run that
/// could not start (a bad agent file, a missing key, no model): the caller
/// prints the readable error on stderr.
fn not_started(output: Output, kind: ErrorKind, message: &str) {
    if output == Output::Json {
        let line = serde_json::json!({
            "type": "failed",
            "error": kind,
            "status": null,
            "message": message,
        });
        outln!("{line}");
    }
}

/// A stop reason's label in the `finished` line of `--json`.
fn stop_label(stop: &StopReason) -> String {
    match stop {
        StopReason::Finished => "finished".to_owned(),
        StopReason::StoppedByMiddleware => "stopped_by_middleware".to_owned(),
        StopReason::JumpedToEnd => "jumped_to_end".to_owned(),
        StopReason::Failed(kind) => format!("failed:{}", kind.as_str()),
        other => format!("{other:?}"),
    }
}
