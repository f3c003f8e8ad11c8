//! Property test of the agent loop (issue 15): random sequences of control
//! requests, jumps (declared or not), limits, refusals, rejections, model
//! and tool errors and panics, sequential or concurrent batches, are driven
//! through the loop with the scripted model. Every run must end (a result or
//! a classified error, never a panic), leave a transcript providers accept
//! (every tool call answered exactly once, right after its assistant
//! message; an interrupted run may leave only the calls of its last reply
//! unanswered, for the resume), and pair every `ToolCallStarted` with one
//! `ToolCallCompleted`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use proptest::prelude::*;
use serde_json::json;
use tinyagents::harness::context::JumpSet;
use tinyagents::middleware::{ExitBehavior, ToolCallLimitMiddleware};
use tinyagents::prelude::*;
use tinyagents::testing::{check_transcript, CollectingSink, RecordingTool};

/// What one hook invocation does.
#[derive(Debug, Clone)]
enum Act {
    Nothing,
    Stop,
    Interrupt,
    Jump(JumpTarget),
    Fail,
    /// In the batch review: reject the first call. Elsewhere: nothing.
    Reject,
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        6 => Just(Act::Nothing),
        1 => Just(Act::Stop),
        1 => Just(Act::Interrupt),
        1 => Just(Act::Jump(JumpTarget::Model)),
        1 => Just(Act::Jump(JumpTarget::Tools)),
        1 => Just(Act::Jump(JumpTarget::End)),
        1 => Just(Act::Fail),
        1 => Just(Act::Reject),
    ]
}

/// One model reply.
#[derive(Debug, Clone)]
enum Turn {
    Text,
    Calls(Vec<&'static str>),
    ModelError,
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        2 => Just(Turn::Text),
        6 => prop::collection::vec(prop::sample::select(vec!["ok", "ok", "fail", "boom", "nope"]), 1..4)
            .prop_map(Turn::Calls),
        1 => Just(Turn::ModelError),
    ]
}

#[derive(Debug, Clone)]
struct Scenario {
    turns: Vec<Turn>,
    acts: Vec<Act>,
    declared: bool,
    max_steps: u32,
    limit: Option<(u32, u8)>,
    concurrent: bool,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(turn(), 1..6),
        prop::collection::vec(act(), 0..24),
        any::<bool>(),
        1u32..7,
        prop::option::of((1u32..4, 0u8..3)),
        any::<bool>(),
    )
        .prop_map(|(turns, acts, declared, max_steps, limit, concurrent)| Scenario {
            turns,
            acts,
            declared,
            max_steps,
            limit,
            concurrent,
        })
}

/// Plays the scenario's acts, one per hook invocation, at every hook it implements.
struct Chaos {
    acts: Vec<Act>,
    next: AtomicUsize,
    jumps: JumpSet,
}

impl Chaos {
    fn act(&self) -> Act {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        self.acts.get(i).cloned().unwrap_or(Act::Nothing)
    }

    fn apply(&self, ctx: &mut RunContext<Ctx>, batch: Option<&mut PreparedBatch>) -> Result<()> {
        match self.act() {
            Act::Nothing => {}
            Act::Stop => ctx
                .flow_mut()
                .request_control(MiddlewareControl::StopWithFinal("stopped".into())),
            Act::Interrupt => ctx.flow_mut().request_control(MiddlewareControl::Interrupt {
                node: None,
                message: "pause".into(),
            }),
            Act::Jump(t) => ctx.flow_mut().jump_to(t),
            Act::Fail => return Err(TinyAgentsError::validation("chaos refuses")),
            Act::Reject => {
                if let Some(batch) = batch
                    && !batch.is_empty()
                {
                    batch.reject(0, "chaos rejects");
                }
            }
        }
        Ok(())
    }
}

#[derive(Clone, Default)]
struct Ctx;

const HOOKS: HookSet = HookSet::BEFORE_MODEL
    .union(HookSet::AFTER_MODEL)
    .union(HookSet::ON_TOOL_BATCH)
    .union(HookSet::BEFORE_TOOL)
    .union(HookSet::AFTER_TOOL)
    .union(HookSet::AFTER_AGENT);

/// The transcript `after_agent` saw (also for a failed run).
#[derive(Default)]
struct Seen(Mutex<Option<Vec<Message>>>);

struct Observed {
    chaos: Chaos,
    seen: Arc<Seen>,
}

#[async_trait]
impl Middleware<(), Ctx> for Observed {
    fn hooks(&self) -> HookSet {
        HOOKS
    }
    fn info(&self) -> MiddlewareInfo {
        MiddlewareInfo::new("chaos")
            .with_hooks(HOOKS)
            .with_jumps(self.chaos.jumps)
    }
    async fn before_model(&self, ctx: &mut RunContext<Ctx>, _: &(), _: &mut ModelRequest) -> Result<()> {
        self.chaos.apply(ctx, None)
    }
    async fn after_model(&self, ctx: &mut RunContext<Ctx>, _: &(), _: &mut ModelResponse) -> Result<()> {
        self.chaos.apply(ctx, None)
    }
    async fn on_tool_batch(&self, ctx: &mut RunContext<Ctx>, _: &(), batch: &mut PreparedBatch) -> Result<()> {
        self.chaos.apply(ctx, Some(batch))
    }
    async fn before_tool(&self, ctx: &mut RunContext<Ctx>, _: &(), _: &mut ToolCall) -> Result<()> {
        self.chaos.apply(ctx, None)
    }
    async fn after_tool(&self, ctx: &mut RunContext<Ctx>, _: &(), _: &mut ToolResult) -> Result<()> {
        self.chaos.apply(ctx, None)
    }
    async fn after_agent(&self, _: &mut RunContext<Ctx>, _: &(), run: &mut AgentRun) -> Result<()> {
        *self.seen.0.lock().unwrap() = Some(run.messages.to_vec());
        Ok(())
    }
}

fn panicking() -> impl Tool {
    tool_fn("boom", "Panics.", |_cx, _args| async move {
        if true {
            panic!("boom");
        }
        Ok("never".into())
    })
}

fn run_scenario(s: &Scenario) -> std::result::Result<(), TestCaseError> {
    let turns = s.turns.clone();
    let served = AtomicUsize::new(0);
    let model = ScriptedModel::from_fn(move |_| {
        let n = served.fetch_add(1, Ordering::Relaxed);
        match &turns[n % turns.len()] {
            Turn::Text => ScriptedTurn::text("answer"),
            Turn::ModelError => ScriptedTurn::Fail(TinyAgentsError::model("scripted failure", false)),
            Turn::Calls(names) => ScriptedTurn::tool_calls(
                names
                    .iter()
                    .enumerate()
                    .map(|(k, name)| ToolCall::new(format!("m{n}c{k}"), *name, json!({ "k": k })))
                    .collect(),
            ),
        }
    });
    let seen = Arc::new(Seen::default());
    let mut stack: MiddlewareStack<(), Ctx> = MiddlewareStack::new();
    if let Some((limit, exit)) = s.limit {
        let exit = [ExitBehavior::Continue, ExitBehavior::End, ExitBehavior::Error][exit as usize];
        stack
            .add(ToolCallLimitMiddleware::per_run(None, limit).exit_behavior(exit))
            .unwrap();
    }
    stack
        .add(Observed {
            chaos: Chaos {
                acts: s.acts.clone(),
                next: AtomicUsize::new(0),
                jumps: if s.declared { JumpSet::all() } else { JumpSet::empty() },
            },
            seen: seen.clone(),
        })
        .unwrap();
    let tools = ToolRegistry::new()
        .with(RecordingTool::new("ok"))
        .unwrap()
        .with(RecordingTool::new("fail").failing("it failed"))
        .unwrap()
        .with(panicking())
        .unwrap();
    let mut agent = Agent::new(model)
        .with_tools(tools)
        .with_stack(stack)
        .with_max_steps(s.max_steps);
    if s.concurrent {
        agent = agent.with_concurrent_tools();
    }
    let sink = Arc::new(CollectingSink::new());
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let result = runtime.block_on(async {
        let mut ctx = RunContext::new(RunConfig::new("prop"), Ctx).with_sink(sink.clone());
        agent.run(&mut ctx, &(), "go").await
    });

    // the transcript: the run's, or the one after_agent saw when it failed
    let (messages, failed) = match &result {
        Ok(run) => (run.messages.to_vec(), None),
        Err(e) => (seen.0.lock().unwrap().clone().unwrap_or_default(), Some(e.clone())),
    };
    let violations = check_transcript(&messages);
    let at_end_only = violations.iter().all(|v| v.index == messages.len());
    match &failed {
        None => prop_assert!(violations.is_empty(), "{violations:?}\n{messages:#?}"),
        // a failed run (an interrupt pauses for a resume) may leave the calls of
        // its last reply unanswered, nothing else
        Some(e) => prop_assert!(at_end_only, "{e}: {violations:?}\n{messages:#?}"),
    }
    if let Ok(run) = &result
        && let Some(last) = run.messages.last()
    {
        prop_assert!(
            last.role != tinyagents::harness::message::Role::Assistant
                || last.tool_calls.is_empty()
                || run.stop != StopReason::Finished,
            "a finished run ends on a reply without calls"
        );
    }

    // every started call completes exactly once, after it started
    let mut open: HashMap<String, i32> = HashMap::new();
    for event in sink.events() {
        match event {
            AgentEvent::ToolCallStarted { call_id, .. } => {
                let n = open.entry(call_id.clone()).or_default();
                prop_assert_eq!(*n, 0, "{} started twice", call_id);
                *n = 1;
            }
            AgentEvent::ToolCallCompleted { call_id, .. } => {
                let n = open.entry(call_id.clone()).or_default();
                prop_assert_eq!(*n, 1, "{} completed without being started", call_id);
                *n = 2;
            }
            _ => {}
        }
    }
    prop_assert!(open.values().all(|n| *n == 2), "{open:?}");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 400,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_run_leaves_a_transcript_providers_accept(s in scenario()) {
        run_scenario(&s)?;
    }
}
