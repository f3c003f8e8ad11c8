//! [`StateGraph`]: declaring nodes, edges and reducers, checked by [`StateGraph::compile`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::node::Node;
use super::run::CompiledGraph;
use super::state::{GraphState, Reducer};
use crate::harness::error::{Result, TinyAgentsError};

/// The name that ends a run when an edge leads to it.
pub const END: &str = "__end__";

/// A router: picks the next node from the state.
pub type Router = Arc<dyn Fn(&GraphState) -> String + Send + Sync>;

/// Decides, at a safe point of a durable run, whether a checkpoint is
/// written there (see [`StateGraph::persist_when`]).
pub type PersistPolicy<G> = Arc<dyn Fn(&mut G) -> bool + Send + Sync>;

/// Where a node's run goes next when it returns `Continue` or `Update`.
#[derive(Clone)]
pub(crate) enum Edge {
    To(String),
    Conditional(Router),
}

/// A state graph under construction: nodes over a context `G`, plain and
/// conditional edges, per-field reducers and a step bound.
///
/// ```
/// use serde_json::json;
/// use tinyagents::graph::{node_fn, update, Command, GraphState, StateGraph, END};
///
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let graph = StateGraph::<()>::new()
///     .node("inc", node_fn(|s| async move {
///         let n = s.get("n").and_then(|v| v.as_i64()).unwrap_or(0);
///         Ok(Command::Update(update([("n", json!(n + 1))])))
///     }))
///     .entry("inc")
///     .conditional_edge("inc", |s| if s.get("n") == Some(&json!(3)) { END.into() } else { "inc".into() })
///     .compile()?;
/// let run = graph.run(&mut (), GraphState::new()).await?;
/// assert_eq!(run.state.get("n"), Some(&json!(3)));
/// # Ok::<(), tinyagents::TinyAgentsError>(()) }).unwrap();
/// ```
pub struct StateGraph<G: Send = ()> {
    pub(crate) nodes: BTreeMap<String, Arc<dyn Node<G>>>,
    pub(crate) edges: HashMap<String, Edge>,
    pub(crate) entry: Option<String>,
    pub(crate) reducers: HashMap<String, Reducer>,
    pub(crate) max_steps: u32,
    pub(crate) persist_when: Option<PersistPolicy<G>>,
    errors: Vec<String>,
}

impl<G: Send> Default for StateGraph<G> {
    fn default() -> Self {
        Self {
            nodes: BTreeMap::new(),
            edges: HashMap::new(),
            entry: None,
            reducers: HashMap::new(),
            max_steps: Self::DEFAULT_MAX_STEPS,
            persist_when: None,
            errors: Vec::new(),
        }
    }
}

impl<G: Send> StateGraph<G> {
    /// The default step bound.
    pub const DEFAULT_MAX_STEPS: u32 = 100;

    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a node. A second node with the same name is reported by [`compile`](Self::compile).
    pub fn node(mut self, name: impl Into<String>, node: impl Node<G> + 'static) -> Self {
        let name = name.into();
        if name == END {
            self.errors.push(format!(
                "`{END}` is reserved for the end of the graph; name the node otherwise"
            ));
        } else if self.nodes.insert(name.clone(), Arc::new(node)).is_some() {
            self.errors
                .push(format!("two nodes are named `{name}`; node names must be unique"));
        }
        self
    }

    /// The node the run starts at.
    pub fn entry(mut self, name: impl Into<String>) -> Self {
        self.entry = Some(name.into());
        self
    }

    /// After `from`, go to `to` (or [`END`]).
    pub fn edge(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.add_edge(from.into(), Edge::To(to.into()));
        self
    }

    /// After `from`, go where `router` says (a node name or [`END`]).
    pub fn conditional_edge(
        mut self,
        from: impl Into<String>,
        router: impl Fn(&GraphState) -> String + Send + Sync + 'static,
    ) -> Self {
        self.add_edge(from.into(), Edge::Conditional(Arc::new(router)));
        self
    }

    fn add_edge(&mut self, from: String, edge: Edge) {
        if self.edges.insert(from.clone(), edge).is_some() {
            self.errors.push(format!(
                "node `{from}` has two outgoing edges; give it one (a conditional edge routes)"
            ));
        }
    }

    /// Merges updates to `field` with `reducer` (default: replace).
    pub fn reducer(mut self, field: impl Into<String>, reducer: Reducer) -> Self {
        self.reducers.insert(field.into(), reducer);
        self
    }

    /// Bounds the run to `max_steps` node executions.
    pub fn max_steps(mut self, max_steps: u32) -> Self {
        self.max_steps = max_steps;
        self
    }

    /// Writes the checkpoint before a node of a durable run only when
    /// `policy` says so (it sees the graph's context, so it can read a
    /// request a node left there); interrupts and the end are always
    /// persisted. Without a policy every safe point is persisted.
    pub fn persist_when(mut self, policy: impl Fn(&mut G) -> bool + Send + Sync + 'static) -> Self {
        self.persist_when = Some(Arc::new(policy));
        self
    }

    /// Checks the graph: an entry that exists, edges between existing nodes,
    /// unique names. Every problem is reported at once as one `Config` error.
    pub fn compile(self) -> Result<CompiledGraph<G>> {
        let mut errors = self.errors.clone();
        match &self.entry {
            None => errors.push("the graph has no entry node; call `.entry(\"name\")`".to_owned()),
            Some(e) if !self.nodes.contains_key(e) => errors.push(format!(
                "the entry node `{e}` does not exist; the nodes are: {}",
                self.nodes.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
            Some(_) => {}
        }
        let mut froms: Vec<&String> = self.edges.keys().collect();
        froms.sort();
        for from in froms {
            if !self.nodes.contains_key(from) {
                errors.push(format!("an edge leaves `{from}`, which is not a node"));
            }
            if let Edge::To(to) = &self.edges[from]
                && to != END
                && !self.nodes.contains_key(to)
            {
                errors.push(format!(
                    "the edge `{from}` → `{to}` leads to a node that does not exist"
                ));
            }
        }
        if !errors.is_empty() {
            return Err(TinyAgentsError::config(format!(
                "the graph is not valid: {}",
                errors.join("; ")
            )));
        }
        Ok(CompiledGraph::new(self))
    }
}
