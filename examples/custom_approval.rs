//! An approval middleware of your own, written against tinyagents' public
//! API only: it pauses a run before a call to a gated tool through the
//! runtime's interrupt protocol (`tinyagents::harness::interrupt`), the run
//! is durable (checkpointed to files), and a second process resumes it with
//! a person's decision.
//!
//! ```sh
//! cargo run -p tinyagents-examples --example custom_approval
//! ```
//!
//! The program starts itself as the two processes, the way a deployment
//! would run a worker and, later, an approval service:
//! `custom_approval pause DIR` runs until the pause and prints the interrupt
//! (JSON); `custom_approval resume DIR approve|reject INTERRUPT` decides and
//! goes on from the store in `DIR`. The protocol in four steps:
//!
//! 1. the gate's batch review fails with `Interrupted` before the call runs,
//!    and a [`PauseHolder`] tells the loop the gate holds the pause;
//! 2. its `after_agent` records an [`Interrupt`] (its name, and what it asked
//!    as JSON) and writes the same under its state key, which the durable run
//!    keeps in its checkpoint;
//! 3. the answer implements [`Resume`]: `AgentGraph::resume_with` checks it
//!    against the checkpoint ([`Resume::rebind`]), spends its single-use
//!    token there, and attaches it to the new run;
//! 4. the gate claims it when the new run starts, and lets the call run (or
//!    rejects it).

use std::any::Any;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tinyagents::graph::{AgentGraph, FileCheckpointer};
use tinyagents::harness::interrupt::{Interrupt, PauseHolder, Resume};
use tinyagents::prelude::*;

/// The gate's name: the owner of its interrupts.
const OWNER: &str = "approval_gate";
/// The state key of what the gate asked (kept in the checkpoint).
const ASKED: &str = "approval_gate_asked";
/// The state key of the answers' tokens already spent.
const SPENT: &str = "approval_gate_spent";
/// The durable run's thread.
const THREAD: &str = "approval-demo";

/// What the gate asked: the call, a single-use token, and the reply that asked for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Asked {
    /// The call's id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// Its arguments, as the person sees them.
    pub arguments: Value,
    /// Spent by the answer: a second answer with it is refused.
    pub token: String,
    /// The model's reply that asked for the call.
    pub reply: Message,
}

/// A person's answer to what the gate asked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer {
    /// What was asked.
    pub asked: Asked,
    /// Run the call (`true`) or refuse it.
    pub approve: bool,
}

impl Resume for Answer {
    fn owner(&self) -> &str {
        OWNER
    }

    fn interrupt_key(&self) -> &str {
        ASKED
    }

    fn spent_key(&self) -> &str {
        SPENT
    }

    fn tokens(&self) -> Vec<String> {
        vec![self.asked.token.clone()]
    }

    fn paused_reply(&self) -> &Message {
        &self.asked.reply
    }

    fn rebind(self: Box<Self>, recorded: Option<Value>, thread_id: &str) -> Result<Box<dyn Resume>> {
        // The store is the authority on what was asked: the answer must be to exactly that.
        let recorded: Option<Asked> = recorded.and_then(|v| serde_json::from_value(v).ok());
        if recorded.as_ref() != Some(&self.asked) {
            return Err(TinyAgentsError::validation(format!(
                "this answer is not to what thread `{thread_id}` asked at its pause; answer the interrupt it \
                 recorded; nothing ran"
            )));
        }
        Ok(self)
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        self
    }
}

/// The call a run is paused on, until `after_agent` records the interrupt.
#[derive(Default)]
struct Pending(Mutex<Option<ToolCall>>);

impl PauseHolder for Pending {
    fn holds_pause(&self) -> bool {
        self.0.lock().expect("pending lock").is_some()
    }
}

/// The answer given to this run.
#[derive(Default)]
struct Given(Mutex<Option<Answer>>);

/// Pauses the run before any call to `tool` until a person answers.
pub struct ApprovalGate {
    tool: String,
}

impl ApprovalGate {
    /// Gates calls to `tool`.
    pub fn new(tool: impl Into<String>) -> Self {
        Self { tool: tool.into() }
    }
}

#[middleware(
    name = "approval_gate",
    doc(summary = "Pauses the run before a gated tool call until a person answers.")
)]
impl ApprovalGate {
    #[before_agent]
    fn start(&self, ctx: &mut RunContext) -> Result<()> {
        let interrupts = ctx.locals().interrupts();
        interrupts.hold(ctx.locals().local::<Pending>());
        if let Some((answer, _replay)) = interrupts.claim::<Answer>(OWNER) {
            *ctx.locals().local::<Given>().0.lock().expect("given lock") = Some(answer);
        }
        Ok(())
    }

    #[on_tool_batch]
    fn review(&self, ctx: &mut RunContext, batch: &mut PreparedBatch) -> Result<()> {
        let given = ctx.locals().local::<Given>().0.lock().expect("given lock").take();
        for i in 0..batch.len() {
            let call = batch.calls()[i].call.clone();
            if call.name != self.tool {
                continue;
            }
            let answer = given.as_ref().filter(|a| {
                a.asked.call_id == call.id && a.asked.tool == call.name && a.asked.arguments == call.arguments
            });
            let Some(answer) = answer else {
                *ctx.locals().local::<Pending>().0.lock().expect("pending lock") = Some(call.clone());
                return Err(TinyAgentsError::interrupted(
                    Some(OWNER.to_owned()),
                    format!("call `{}` to `{}` awaits a person's approval", call.id, call.name),
                ));
            };
            let interrupts = ctx.locals().interrupts();
            if interrupts.is_spent(OWNER, &answer.asked.token) {
                return Err(TinyAgentsError::conflict(format!(
                    "the answer to call `{}` was already used; nothing ran",
                    call.id
                )));
            }
            let spent = interrupts.spend(OWNER, [answer.asked.token.clone()]);
            ctx.flow_mut().update_state(SPENT, json!(spent));
            if !answer.approve {
                batch.reject(i, format!("a person refused this call to `{}`", call.name));
            }
        }
        Ok(())
    }

    #[after_agent]
    fn ask(&self, ctx: &mut RunContext, run: &mut AgentRun) -> Result<()> {
        let Some(call) = ctx.locals().local::<Pending>().0.lock().expect("pending lock").take() else {
            return Ok(());
        };
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let asked = Asked {
            token: format!("{}/{}/{nanos}", ctx.run_id(), call.id),
            call_id: call.id,
            tool: call.name,
            arguments: call.arguments,
            reply: run.messages.last().cloned().unwrap_or_else(|| Message::assistant("")),
        };
        let payload = serde_json::to_value(&asked).map_err(|e| TinyAgentsError::validation(e.to_string()))?;
        ctx.flow_mut().update_state(ASKED, payload.clone());
        ctx.locals().interrupts().record(Interrupt::new(OWNER, payload));
        Ok(())
    }
}

/// The agent as each process builds it: a `delete` tool that appends each
/// call to `DIR/calls.log` (so calls count across processes), gated.
pub fn agent(dir: &Path) -> Result<Agent<()>> {
    let log = dir.join("calls.log");
    let delete = tool_fn("delete", "Deletes a file.", move |_cx, args| {
        let log = log.clone();
        async move {
            use std::io::Write;
            let io =
                |e: std::io::Error| TinyAgentsError::validation(format!("cannot append to {}: {e}", log.display()));
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .map_err(io)?;
            writeln!(f, "{args}").map_err(io)?;
            Ok(format!("deleted {}", args["path"]).into())
        }
    });
    Ok(
        Agent::new(ScriptedModel::from_fn(|request| match request.messages.last() {
            Some(m) if m.role == Role::Tool => ScriptedTurn::text(format!("done: {}", m.text())),
            _ => ScriptedTurn::tool_call("delete", json!({"path": "old.log"})),
        }))
        .with_tools(ToolRegistry::new().with(delete)?)
        .with_stack(MiddlewareStack::new().with(ApprovalGate::new("delete"))?),
    )
}

/// Runs until the gate pauses; gives the interrupt as JSON.
pub async fn pause(dir: &Path) -> Result<String> {
    let store = FileCheckpointer::open(dir.join("store"))?;
    let agent = agent(dir)?;
    let mut ctx = RunContext::new(RunConfig::new("worker"), ());
    let err = AgentGraph::new(&agent)
        .run_durable(&mut ctx, &(), "clean up", THREAD, &store)
        .await
        .expect_err("the gate pauses the run");
    if err.kind() != ErrorKind::Interrupted {
        return Err(err);
    }
    let interrupt = ctx
        .locals()
        .interrupts()
        .take(OWNER)
        .ok_or_else(|| TinyAgentsError::validation("the run paused without the gate's interrupt"))?;
    serde_json::to_string(&interrupt).map_err(|e| TinyAgentsError::validation(e.to_string()))
}

/// Answers the interrupt (`approve` or not) and goes on from the store; gives the final text.
pub async fn resume(dir: &Path, approve: bool, interrupt: &str) -> Result<String> {
    let store = FileCheckpointer::open(dir.join("store"))?;
    let agent = agent(dir)?;
    let interrupt: Interrupt =
        serde_json::from_str(interrupt).map_err(|e| TinyAgentsError::validation(e.to_string()))?;
    let answer = Answer {
        asked: interrupt.decode()?,
        approve,
    };
    let mut ctx = RunContext::new(RunConfig::new("approver"), ());
    let run = AgentGraph::new(&agent)
        .resume_with(&mut ctx, &(), THREAD, &store, answer)
        .await?;
    Ok(run.final_text())
}

/// The lines of `DIR/calls.log`: one per call of the tool.
pub fn calls(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("calls.log")).map_or(0, |s| s.lines().count())
}

/// One process's part, from its arguments (`pause DIR`, `resume DIR approve|reject INTERRUPT`).
pub async fn role(args: &[String]) -> Result<String> {
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["pause", dir] => pause(Path::new(dir)).await,
        ["resume", dir, decision @ ("approve" | "reject"), interrupt] => {
            resume(Path::new(dir), decision == "approve", interrupt).await
        }
        _ => Err(TinyAgentsError::validation(format!(
            "unknown arguments {args:?}: give `pause DIR` or `resume DIR approve|reject INTERRUPT`"
        ))),
    }
}

/// Runs this program as a child process with `args`: its stdout, or its stderr as the error.
pub fn me(args: &[&str]) -> std::result::Result<String, String> {
    let out = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if out.status.success() {
        Ok(text)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !args.is_empty() {
        match role(&args).await {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(1);
            }
        }
        return;
    }
    let dir = std::env::temp_dir().join(format!("tinyagents-custom-approval-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let path = dir.to_string_lossy().into_owned();
    let interrupt = me(&["pause", &path]).expect("process A pauses");
    println!("process A paused; the gate asked: {interrupt}");
    println!("calls so far: {}", calls(&dir));
    let text = me(&["resume", &path, "approve", &interrupt]).expect("process B resumes");
    println!("process B approved and finished: {text}");
    println!("calls now: {}", calls(&dir));
    let again = me(&["resume", &path, "approve", &interrupt]).expect_err("a replay is refused");
    println!("process C replayed the answer and was refused: {again}");
    let _ = std::fs::remove_dir_all(&dir);
}
