//! The `tinyagents` command.
//!
//! ```text
//! tinyagents docs                 the built-in middleware table (as docs/middleware.md)
//! tinyagents check FILE           validate an agent file; print the resolved stack with each middleware's hooks
//! tinyagents run FILE [--script replies.json] [--prompt TEXT] [--verbose]
//!                                 run an agent with that stack on the scripted model, streaming its events
//! ```
//!
//! An agent file is TOML: `[[middleware]]` entries and `[[hooks]]` (the
//! stack, see `tinyagents::config`), `[agent]` (`prompt`, `system_prompt`,
//! `max_steps`, `run_id`, `tool_outputs`, `workspace`) and `[[script]]`
//! (the scripted model's replies: `text`, `tool_calls = [{ name, arguments }]`, `fail`).

/// `println!` that ignores a closed stdout (`tinyagents docs | head` must not panic).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

/// `print!` that ignores a closed stdout.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}

mod agent_file;
mod render;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Arg, ArgAction, Command};
use tinyagents::harness::event::ChannelSink;
use tinyagents::harness::workspace::WorkspaceDescriptor;
use tinyagents::prelude::*;
use tinyagents::testing::RecordingTool;

fn cli() -> Command {
    Command::new("tinyagents")
        .about("Agent middleware stacks: the built-in table, config checks, scripted runs.")
        .version(env!("CARGO_PKG_VERSION"))
        .subcommand_required(true)
        .arg_required_else_help(true)
        .subcommand(Command::new("docs").about("Print the built-in middleware table (the text of docs/middleware.md)"))
        .subcommand(
            Command::new("check")
                .about("Validate an agent file and print the resolved stack, in order, with each middleware's hooks")
                .arg(
                    Arg::new("file")
                        .required(true)
                        .value_parser(clap::value_parser!(PathBuf)),
                ),
        )
        .subcommand(
            Command::new("run")
                .about("Run an agent with the file's stack on the scripted model, streaming its events")
                .arg(
                    Arg::new("file")
                        .required(true)
                        .value_parser(clap::value_parser!(PathBuf)),
                )
                .arg(
                    Arg::new("script")
                        .long("script")
                        .value_name("JSON")
                        .value_parser(clap::value_parser!(PathBuf))
                        .help("A JSON array of replies, instead of the file's [[script]]"),
                )
                .arg(
                    Arg::new("prompt")
                        .long("prompt")
                        .value_name("TEXT")
                        .help("The user prompt, instead of [agent] prompt"),
                )
                .arg(
                    Arg::new("verbose")
                        .long("verbose")
                        .short('v')
                        .action(ArgAction::SetTrue)
                        .help("Also show every middleware hook as it starts and completes"),
                ),
        )
}

fn main() -> ExitCode {
    let matches = cli().get_matches();
    match matches.subcommand() {
        Some(("docs", _)) => {
            out!(
                "{}",
                tinyagents::docs::render_markdown(&tinyagents::middleware::catalog())
            );
            ExitCode::SUCCESS
        }
        Some(("check", m)) => check(m.get_one::<PathBuf>("file").expect("required")),
        Some(("run", m)) => run(
            m.get_one::<PathBuf>("file").expect("required"),
            m.get_one::<PathBuf>("script").map(PathBuf::as_path),
            m.get_one::<String>("prompt").cloned(),
            m.get_flag("verbose"),
        ),
        _ => unreachable!("a subcommand is required"),
    }
}

/// Prints every error, one per line, and the count.
fn report(errors: &[tinyagents::config::FileErrors]) -> ExitCode {
    let n: usize = errors.iter().map(|e| e.len()).sum();
    for e in errors {
        eprintln!("{e}");
    }
    eprintln!("error: {n} problem{} found", if n == 1 { "" } else { "s" });
    ExitCode::FAILURE
}

fn hook_names(hooks: HookSet) -> String {
    hooks.kinds().map(|k| k.to_string()).collect::<Vec<_>>().join(", ")
}

fn check(path: &Path) -> ExitCode {
    let loaded = match agent_file::load(path, None) {
        Ok(l) => l,
        Err(errors) => return report(&errors),
    };
    outln!(
        "{}: ok — {} middleware, in resolved order:",
        path.display(),
        loaded.stack.len()
    );
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

fn run(path: &Path, script: Option<&Path>, prompt: Option<String>, verbose: bool) -> ExitCode {
    let loaded = match agent_file::load(path, script) {
        Ok(l) => l,
        Err(errors) => return report(&errors),
    };
    if loaded.script.is_empty() {
        eprintln!("error: no scripted replies: add `[[script]]` entries to the file or pass `--script replies.json`");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run_agent(loaded, prompt, verbose))
}

async fn run_agent(loaded: agent_file::Loaded, prompt: Option<String>, verbose: bool) -> ExitCode {
    let agent_file::Loaded {
        stack,
        agent: section,
        script,
        tools,
        ..
    } = loaded;
    let mut registry = ToolRegistry::new();
    for name in &tools {
        let output = section
            .tool_outputs
            .get(name)
            .cloned()
            .unwrap_or_else(|| "ok".to_owned());
        if let Err(e) = registry.register(RecordingTool::new(name.clone()).returning(output)) {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    let mut agent: Agent<()> = Agent::new(ScriptedModel::new(script))
        .with_tools(registry)
        .with_stack(stack);
    if let Some(system) = &section.system_prompt {
        agent = agent.with_system_prompt(system.clone());
    }
    if let Some(max) = section.max_steps {
        agent = agent.with_max_steps(max);
    }
    let (sink, mut events) = ChannelSink::new();
    let mut ctx = RunContext::new(RunConfig::new(section.run_id.clone()), ())
        .with_sink(Arc::new(sink))
        .with_workspace(WorkspaceDescriptor::new(section.workspace.clone()));
    let prompt = prompt.unwrap_or(section.prompt);

    let printer = tokio::spawn(async move {
        let mut renderer = render::Renderer::new(verbose);
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
    match result {
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
            eprintln!("\nerror: the run failed: {e}");
            ExitCode::FAILURE
        }
    }
}
