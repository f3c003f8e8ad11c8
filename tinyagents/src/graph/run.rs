//! [`CompiledGraph`]: running a graph, durably or not, and resuming it.

use serde_json::Value;

use super::builder::{Edge, StateGraph, END};
use super::checkpoint::{Checkpoint, Checkpointer, InterruptRecord, UpdateRecord};
use super::command::{interrupt_command, Command};
use super::state::GraphState;
use crate::harness::error::{Result, TinyAgentsError};

/// How a graph run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphOutcome {
    /// It reached the end.
    Finished,
    /// It paused; [`CompiledGraph::resume`] goes on from here.
    Interrupted(InterruptRecord),
}

/// The result of a graph run.
#[derive(Debug, Clone, PartialEq)]
pub struct GraphRun {
    /// The final (or paused) state.
    pub state: GraphState,
    /// How it ended.
    pub outcome: GraphOutcome,
    /// Node executions, branches included.
    pub steps: u32,
    /// Every explicit update this call applied, in order. After a
    /// [`resume`](CompiledGraph::resume), the updates since the resume: the
    /// thread's whole record is in its checkpoints (each holds the updates
    /// since the one before).
    pub updates: Vec<UpdateRecord>,
}

/// Where a durable run writes its checkpoints.
struct Durable<'a> {
    thread_id: &'a str,
    store: &'a dyn Checkpointer,
    seq: u64,
}

/// Progress of one run.
struct Progress {
    state: GraphState,
    steps: u32,
    updates: Vec<UpdateRecord>,
    /// How many of `updates` are already in a checkpoint.
    saved: usize,
}

/// A checked graph, ready to run any number of times.
pub struct CompiledGraph<G: Send> {
    graph: StateGraph<G>,
}

impl<G: Send> std::fmt::Debug for CompiledGraph<G> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledGraph")
            .field("nodes", &self.graph.nodes.keys().collect::<Vec<_>>())
            .field("entry", &self.graph.entry)
            .finish_non_exhaustive()
    }
}

impl<G: Send> CompiledGraph<G> {
    pub(crate) fn new(graph: StateGraph<G>) -> Self {
        Self { graph }
    }

    fn entry(&self) -> String {
        self.graph.entry.clone().expect("compile checked the entry")
    }

    /// Runs from the entry node, without checkpoints.
    pub async fn run(&self, ctx: &mut G, input: GraphState) -> Result<GraphRun> {
        let progress = Progress {
            state: input,
            steps: 0,
            updates: Vec::new(),
            saved: 0,
        };
        self.execute(ctx, progress, self.entry(), None).await
    }

    /// Runs from the entry node, writing a checkpoint of `thread_id` before
    /// every node, at an interrupt and at the end.
    pub async fn run_durable(
        &self,
        ctx: &mut G,
        input: GraphState,
        thread_id: &str,
        store: &dyn Checkpointer,
    ) -> Result<GraphRun> {
        let seq = store.latest(thread_id).await?.map_or(0, |c| c.seq);
        let progress = Progress {
            state: input,
            steps: 0,
            updates: Vec::new(),
            saved: 0,
        };
        self.execute(ctx, progress, self.entry(), Some(Durable { thread_id, store, seq }))
            .await
    }

    /// Goes on from the latest checkpoint of `thread_id`: the node that was
    /// about to run (or that interrupted) runs, and sees `value` as
    /// [`GraphState::resume_value`].
    pub async fn resume(
        &self,
        ctx: &mut G,
        thread_id: &str,
        store: &dyn Checkpointer,
        value: Option<Value>,
    ) -> Result<GraphRun> {
        let checkpoint = store.latest(thread_id).await?.ok_or_else(|| {
            TinyAgentsError::config(format!(
                "there is no checkpoint for thread `{thread_id}`; start it with `run_durable`"
            ))
        })?;
        let Some(next) = checkpoint.next else {
            return Err(TinyAgentsError::validation(format!(
                "thread `{thread_id}` already finished; start a new run instead of resuming"
            )));
        };
        let mut state = checkpoint.state;
        state.set_resume(value);
        // The checkpoint's own updates are already stored with it.
        let progress = Progress {
            state,
            steps: checkpoint.steps,
            updates: Vec::new(),
            saved: 0,
        };
        self.execute(
            ctx,
            progress,
            next,
            Some(Durable {
                thread_id,
                store,
                seq: checkpoint.seq,
            }),
        )
        .await
    }

    async fn save(
        &self,
        durable: &mut Option<Durable<'_>>,
        progress: &mut Progress,
        next: Option<&str>,
        interrupt: Option<&InterruptRecord>,
    ) -> Result<()> {
        let Some(d) = durable else { return Ok(()) };
        d.seq = super::checkpoint::next_seq(d.thread_id, d.seq)?;
        // Only what is new since the previous checkpoint: linear storage.
        let updates = progress.updates[progress.saved..].to_vec();
        progress.saved = progress.updates.len();
        let checkpoint = Checkpoint {
            thread_id: d.thread_id.to_owned(),
            seq: d.seq,
            steps: progress.steps,
            next: next.map(str::to_owned),
            state: progress.state.clone(),
            interrupt: interrupt.cloned(),
            updates,
        };
        d.store.put(&checkpoint).await
    }

    fn next_after(&self, node: &str, state: &GraphState) -> String {
        match self.graph.edges.get(node) {
            Some(Edge::To(to)) => to.clone(),
            Some(Edge::Conditional(router)) => router(state),
            None => END.to_owned(),
        }
    }

    fn node(&self, name: &str) -> Result<&std::sync::Arc<dyn super::node::Node<G>>> {
        self.graph.nodes.get(name).ok_or_else(|| {
            TinyAgentsError::config(format!(
                "the graph has no node `{name}`; the nodes are: {}",
                self.graph.nodes.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })
    }

    fn apply(&self, progress: &mut Progress, node: &str, update: super::state::Update) {
        progress.updates.push(UpdateRecord {
            step: progress.steps,
            node: node.to_owned(),
            update: update.clone(),
        });
        progress.state.apply(update, &self.graph.reducers);
    }

    async fn execute(
        &self,
        ctx: &mut G,
        mut progress: Progress,
        start: String,
        mut durable: Option<Durable<'_>>,
    ) -> Result<GraphRun> {
        let mut current = start;
        loop {
            if current == END {
                self.save(&mut durable, &mut progress, None, None).await?;
                return Ok(GraphRun {
                    state: progress.state,
                    outcome: GraphOutcome::Finished,
                    steps: progress.steps,
                    updates: progress.updates,
                });
            }
            if progress.steps >= self.graph.max_steps {
                return Err(TinyAgentsError::limit(
                    "graph_max_steps",
                    format!(
                        "the graph ran {} node steps without reaching the end; raise `max_steps` or add an exit",
                        self.graph.max_steps
                    ),
                ));
            }
            let node = self.node(&current)?.clone();
            let persist = self.graph.persist_when.as_ref().is_none_or(|policy| policy(ctx));
            if persist {
                self.save(&mut durable, &mut progress, Some(&current), None).await?;
            }
            progress.steps += 1;
            let mut command = match node.run(ctx, &progress.state).await {
                Ok(command) => command,
                // A node that fails with an interrupt is a harness-native interrupt
                // reaching the graph boundary.
                Err(TinyAgentsError::Interrupted { node, message }) => interrupt_command(node, message),
                Err(e) => return Err(e),
            };
            // Progress reported with a routing command is merged first.
            while let Command::UpdateThen { update, then } = command {
                self.apply(&mut progress, &current, update);
                command = *then;
            }
            if !matches!(command, Command::Interrupt { .. }) {
                progress.state.set_resume(None);
            }
            current = match command {
                Command::Continue => self.next_after(&current, &progress.state),
                Command::Update(update) => {
                    self.apply(&mut progress, &current, update);
                    self.next_after(&current, &progress.state)
                }
                Command::Goto(next) => {
                    if !self.graph.nodes.contains_key(&next) {
                        return Err(TinyAgentsError::config(format!(
                            "node `{current}` asked to go to `{next}`, but the graph has no node `{next}`; \
                             the nodes are: {}; go to one of them, or add the node to the graph",
                            self.graph.nodes.keys().cloned().collect::<Vec<_>>().join(", ")
                        )));
                    }
                    next
                }
                Command::End => END.to_owned(),
                Command::Interrupt { message, .. } => {
                    let record = InterruptRecord {
                        node: current.clone(),
                        message,
                    };
                    self.save(&mut durable, &mut progress, Some(&current), Some(&record))
                        .await?;
                    return Ok(GraphRun {
                        state: progress.state,
                        outcome: GraphOutcome::Interrupted(record),
                        steps: progress.steps,
                        updates: progress.updates,
                    });
                }
                Command::Fork(branches) => {
                    // Every branch sees the state as it was at the fork; their
                    // updates merge in branch order, so the result is deterministic.
                    let snapshot = progress.state.clone();
                    let mut results = Vec::with_capacity(branches.len());
                    for branch in branches {
                        let node = self.node(&branch.node)?.clone();
                        let mut view = snapshot.clone();
                        view.apply(branch.input, &self.graph.reducers);
                        progress.steps += 1;
                        match node.run(ctx, &view).await? {
                            Command::Continue => {}
                            Command::Update(update) => results.push((branch.node, update)),
                            other => {
                                return Err(TinyAgentsError::validation(format!(
                                    "branch `{}` returned {other:?}; a branch may only return `Continue` or `Update`",
                                    branch.node
                                )))
                            }
                        }
                    }
                    for (node, update) in results {
                        self.apply(&mut progress, &node, update);
                    }
                    self.next_after(&current, &progress.state)
                }
                Command::UpdateThen { .. } => unreachable!("merged above"),
            };
        }
    }
}
