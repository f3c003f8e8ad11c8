//! Two worker processes share one rate limit and one budget through Redis,
//! and a run paused for approval in one is resumed by the other from
//! PostgreSQL (`docs/scale-out.md`).
//!
//! ```sh
//! TINYAGENTS_REDIS_URL=redis://127.0.0.1:16379/0 \
//! TINYAGENTS_POSTGRES_URL=postgres://tinyagents@127.0.0.1:15432/tinyagents_test \
//! cargo run -p tinyagents-examples --features stores --example two_workers
//! ```
//!
//! The program starts itself twice as a worker (`two_workers worker N`), the
//! way a deployment starts the same binary on many machines.

use std::process::Command;

use serde_json::json;
use tinyagents::graph::AgentGraph;
use tinyagents::harness::message::Role;
use tinyagents::harness::model::ModelResponse;
use tinyagents::middleware::{
    Decision, HitlInterrupt, HitlResume, HumanInTheLoopMiddleware, InterruptOn, LimitsMiddleware,
    RateLimiterMiddleware, TokenRates,
};
use tinyagents::prelude::*;
use tinyagents::store::{SharedBudget, StoreUrl};

fn env(var: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| panic!("set {var} (see docs/scale-out.md, \"Running workers\")"))
}

async fn open(var: &str) -> Result<tinyagents::store::SharedStores> {
    StoreUrl::parse(&env(var))
        .map_err(TinyAgentsError::config)?
        .open()
        .await
}

/// Ten runs through a shared 2/s bucket (burst 5, refusing) and a shared $0.10 budget.
async fn worker(n: &str, key: &str) -> Result<()> {
    let redis = open("TINYAGENTS_REDIS_URL").await?;
    let limiter = RateLimiterMiddleware::new(2.0, 5)
        .reject()
        .with_store(redis.rate_limits()?);
    let budget = SharedBudget::new(redis.ledger(), key, 0.10)?.reserve_usd(0.03)?;
    let limits = LimitsMiddleware::new()
        .manual_rates(TokenRates {
            input: Some(30.0),
            output: Some(0.0),
            ..TokenRates::default()
        })
        .map_err(|e| TinyAgentsError::config(e.to_string()))?
        .shared_budget(budget);
    let model = ScriptedModel::from_fn(|_| ModelResponse::text("ok").with_usage(Usage::new(1000, 0)).into());
    let agent: Agent<()> = Agent::new(model).with_stack(MiddlewareStack::new().with(limiter)?.with(limits)?);
    for i in 0..10 {
        let mut ctx = RunContext::new(RunConfig::new(format!("w{n}-{i}")), ());
        match agent.run(&mut ctx, &(), "go").await {
            Ok(_) => println!("worker {n}: run {i} ran ($0.03)"),
            Err(e) => println!("worker {n}: run {i} refused: {}", e.kind()),
        }
    }
    Ok(())
}

fn approval_agent() -> Result<Agent<()>> {
    let delete = tool_fn("delete", "Deletes a file.", |_cx, args| async move {
        println!("  process {}: deleting {}", std::process::id(), args["path"]);
        Ok("deleted".into())
    });
    Ok(Agent::new(ScriptedModel::from_fn(|request| {
        if request.messages.last().is_some_and(|m| m.role == Role::Tool) {
            ScriptedTurn::text("done")
        } else {
            ScriptedTurn::tool_call("delete", json!({"path": "a.txt"}))
        }
    }))
    .with_tools(ToolRegistry::new().with(delete)?)
    .with_stack(
        MiddlewareStack::new().with(HumanInTheLoopMiddleware::new().interrupt_on("delete", InterruptOn::new()))?,
    ))
}

/// Runs until the approval pause and prints what the person must decide.
async fn pause(thread: &str) -> Result<()> {
    let store = open("TINYAGENTS_POSTGRES_URL").await?.checkpointer()?;
    let agent = approval_agent()?;
    let mut ctx = RunContext::new(RunConfig::new("a"), ());
    let err = AgentGraph::new(&agent)
        .run_durable(&mut ctx, &(), "tidy up", thread, store.as_ref())
        .await
        .unwrap_err();
    eprintln!("  process {}: paused ({})", std::process::id(), err.kind());
    let interrupt = HumanInTheLoopMiddleware::take_interrupt(&ctx).expect("an approval request");
    println!("{}", serde_json::to_string(&interrupt).expect("JSON"));
    Ok(())
}

/// Resumes the paused thread with the decisions given as JSON.
async fn resume(thread: &str, decisions: &str) -> Result<()> {
    let store = open("TINYAGENTS_POSTGRES_URL").await?.checkpointer()?;
    let agent = approval_agent()?;
    let resume: HitlResume = serde_json::from_str(decisions).map_err(|e| TinyAgentsError::validation(e.to_string()))?;
    let mut ctx = RunContext::new(RunConfig::new("b"), ());
    let run = AgentGraph::new(&agent)
        .resume_with(&mut ctx, &(), thread, store.as_ref(), resume)
        .await?;
    println!(
        "  process {}: resumed and finished: {}",
        std::process::id(),
        run.final_text()
    );
    Ok(())
}

fn me(args: &[&str]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().expect("own path"));
    cmd.args(args);
    cmd
}

#[tokio::main]
async fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["worker", n, key] => return worker(n, key).await,
        ["pause", thread] => return pause(thread).await,
        ["resume", thread, decisions] => return resume(thread, decisions).await,
        _ => {}
    }
    let id = std::process::id();
    println!("== two workers, one bucket (2/s, burst 5) and one $0.10 budget on Redis");
    let key = format!("demo-{id}");
    let workers: Vec<_> = ["1", "2"]
        .iter()
        .map(|n| me(&["worker", n, &key]).spawn().expect("start a worker"))
        .collect();
    for mut w in workers {
        w.wait().expect("a worker");
    }
    println!("== a pause for approval in process A, resumed by process B from PostgreSQL");
    let thread = format!("demo-thread-{id}");
    let out = me(&["pause", &thread]).output().expect("process A");
    let interrupt: HitlInterrupt =
        serde_json::from_slice(&out.stdout).map_err(|e| TinyAgentsError::validation(e.to_string()))?;
    println!(
        "  the person approves `{}` {}",
        interrupt.requests[0].tool, interrupt.requests[0].arguments
    );
    let call = interrupt.requests[0].call_id.clone();
    let decided = interrupt.decide([(call, Decision::Approve)])?;
    let decided = serde_json::to_string(&decided).expect("JSON");
    me(&["resume", &thread, &decided]).status().expect("process B");
    Ok(())
}
