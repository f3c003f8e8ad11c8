//! Resolving ordering constraints (`before`/`after` by name) into a stable
//! topological order: registration order, except where a constraint says otherwise.

use std::collections::BTreeSet;

use crate::harness::error::{Result, TinyAgentsError};

/// One node to order: its name and constraints.
pub(crate) struct OrderNode<'a> {
    pub(crate) name: &'a str,
    pub(crate) before: Vec<&'a str>,
    pub(crate) after: Vec<&'a str>,
}

/// The name that orders a middleware relative to every other one:
/// `before = ["*"]` runs it before all others (`after = ["*"]`: after all),
/// except those that name it in a constraint of their own or say `"*"` the
/// same way (those keep registration order among themselves).
pub(crate) const EVERY: &str = "*";

/// Returns the indices of `nodes` in resolved order. A constraint naming an
/// absent middleware is ignored (it orders relative to it *if* present);
/// [`EVERY`] (`"*"`) names every other middleware. A cycle is a `Config`
/// error naming the middleware on it.
pub(crate) fn resolve(nodes: &[OrderNode<'_>]) -> Result<Vec<usize>> {
    let n = nodes.len();
    let index = |name: &str| nodes.iter().position(|x| x.name == name);
    // edges[a] contains b: a must come before b.
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    for (i, node) in nodes.iter().enumerate() {
        for b in node.before.iter().filter_map(|b| index(b)) {
            edges[i].insert(b);
        }
        for a in node.after.iter().filter_map(|a| index(a)) {
            edges[a].insert(i);
        }
    }
    for (a, b) in wildcard_edges(nodes) {
        edges[a].insert(b);
    }
    let mut indegree = vec![0usize; n];
    for targets in &edges {
        for &t in targets {
            indegree[t] += 1;
        }
    }
    // Kahn's algorithm, always taking the earliest-registered ready node: stable.
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut out = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        out.push(i);
        for &t in &edges[i] {
            indegree[t] -= 1;
            if indegree[t] == 0 {
                ready.insert(t);
            }
        }
    }
    if out.len() == n {
        return Ok(out);
    }
    Err(TinyAgentsError::config(format!(
        "middleware ordering constraints form a cycle: {}; remove one of these `before`/`after` constraints",
        describe_cycle(nodes, &edges, &indegree)
    )))
}

/// The edges `(a, b)` (`a` before `b`) that [`EVERY`] (`"*"`) adds: a node
/// with `before = ["*"]` precedes every node that does not say `before =
/// ["*"]` too; one with `after = ["*"]` follows every node that does not say
/// `after = ["*"]` too; a pair where either names the other keeps its own
/// constraint instead.
fn wildcard_edges(nodes: &[OrderNode<'_>]) -> Vec<(usize, usize)> {
    let names = |j: &OrderNode<'_>, i: &OrderNode<'_>| j.before.contains(&i.name) || j.after.contains(&i.name);
    let mut out = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let (first, last) = (node.before.contains(&EVERY), node.after.contains(&EVERY));
        if !first && !last {
            continue;
        }
        for (j, other) in nodes.iter().enumerate() {
            if j == i || names(other, node) || names(node, other) {
                continue;
            }
            if first && !other.before.contains(&EVERY) {
                out.push((i, j));
            }
            if last && !other.after.contains(&EVERY) {
                out.push((j, i));
            }
        }
    }
    out
}

/// Finds one cycle among the nodes left with a positive indegree and writes it `a → b → a`.
fn describe_cycle(nodes: &[OrderNode<'_>], edges: &[BTreeSet<usize>], indegree: &[usize]) -> String {
    let start = indegree.iter().position(|&d| d > 0).unwrap_or(0);
    let mut path = vec![start];
    let mut cur = start;
    while let Some(&next) = edges[cur].iter().find(|&&t| indegree[t] > 0) {
        if let Some(pos) = path.iter().position(|&p| p == next) {
            let mut names: Vec<&str> = path[pos..].iter().map(|&i| nodes[i].name).collect();
            names.push(nodes[next].name);
            return names.join(" → ");
        }
        path.push(next);
        cur = next;
    }
    path.iter().map(|&i| nodes[i].name).collect::<Vec<_>>().join(", ")
}
