//! Resolving ordering constraints (`before`/`after` by name) into a stable
//! topological order with the least displacement from registration order:
//! the middleware that declares a constraint moves, the others keep their
//! registration order.

use std::collections::BTreeSet;

use crate::config::suggest::{did_you_mean, list};
use crate::harness::error::{Result, TinyAgentsError};

/// One node to order: its name and constraints.
pub(crate) struct OrderNode<'a> {
    pub(crate) name: &'a str,
    /// Must run before these (each must be registered).
    pub(crate) before: Vec<&'a str>,
    /// Must run after these (each must be registered).
    pub(crate) after: Vec<&'a str>,
    /// Runs before these when they are registered.
    pub(crate) before_if_present: Vec<&'a str>,
    /// Runs after these when they are registered.
    pub(crate) after_if_present: Vec<&'a str>,
}

/// The name that orders a middleware relative to every other one:
/// `before = ["*"]` runs it before all others (`after = ["*"]`: after all),
/// except those that name it in a constraint of their own or say `"*"` the
/// same way (those keep registration order among themselves).
pub(crate) const EVERY: &str = "*";

/// Where a node goes among the nodes ready at the same time: its anchor (its
/// own registration index, or — through a `before` constraint — the anchor
/// of the middleware it must precede), how far before that anchor, and its
/// registration index.
type Key = (usize, i64, usize);

/// Returns the indices of `nodes` in resolved order.
///
/// * Registration order is kept except where a constraint says otherwise,
///   and then the middleware that declared the constraint moves: `span`
///   declaring `before = ["log"]` in `[log, retry, span]` moves to just before
///   `log` (`[span, log, retry]`); one declaring `after = ["x"]` moves to just
///   after `x`.
/// * A required constraint naming a middleware that is not registered is a
///   `Config` error naming it (with a did-you-mean over the registered names
///   and the two fixes); an `_if_present` constraint naming one is ignored.
/// * [`EVERY`] (`"*"`) names every other middleware (see [`wildcard_edges`]).
/// * A cycle is a `Config` error naming the middleware on it.
pub(crate) fn resolve(nodes: &[OrderNode<'_>]) -> Result<Vec<usize>> {
    let n = nodes.len();
    let index = |name: &str| nodes.iter().position(|x| x.name == name);
    for node in nodes {
        for (key, names) in [("before", &node.before), ("after", &node.after)] {
            if let Some(missing) = names.iter().find(|t| **t != EVERY && index(t).is_none()) {
                let names = nodes.iter().map(|x| x.name);
                return Err(TinyAgentsError::config(format!(
                    "middleware `{}` declares `{key} = [\"{missing}\"]` but no middleware named `{missing}` \
                     is registered{} (registered: {}); register `{missing}` first, or declare \
                     `{key}_if_present = [\"{missing}\"]` to order relative to it only when it is there",
                    node.name,
                    did_you_mean(missing, names.clone().filter(|x| *x != node.name)),
                    list(names),
                )));
            }
        }
    }
    // edges[a] contains b: a must come before b. `ahead[a]`: the nodes `a`
    // declared it must precede (it moves toward them).
    let mut edges: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); n];
    let mut ahead: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in nodes.iter().enumerate() {
        for b in node
            .before
            .iter()
            .chain(&node.before_if_present)
            .filter_map(|b| index(b))
        {
            if b != i {
                edges[i].insert(b);
                ahead[i].push(b);
            }
        }
        for a in node.after.iter().chain(&node.after_if_present).filter_map(|a| index(a)) {
            if a != i {
                edges[a].insert(i);
            }
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
    // Cycle check first (any order will do), so the keys below are well founded.
    {
        let mut deg = indegree.clone();
        let mut ready: Vec<usize> = (0..n).filter(|&i| deg[i] == 0).collect();
        let mut seen = 0;
        while let Some(i) = ready.pop() {
            seen += 1;
            for &t in &edges[i] {
                deg[t] -= 1;
                if deg[t] == 0 {
                    ready.push(t);
                }
            }
        }
        if seen < n {
            return Err(TinyAgentsError::config(format!(
                "middleware ordering constraints form a cycle: {}; remove one of these `before`/`after` constraints",
                describe_cycle(nodes, &edges, &deg)
            )));
        }
    }
    let mut keys: Vec<Option<Key>> = vec![None; n];
    for i in 0..n {
        key_of(i, &ahead, &mut keys);
    }
    // Kahn's algorithm, always taking the ready node with the smallest key.
    let mut ready: BTreeSet<(Key, usize)> = (0..n)
        .filter(|&i| indegree[i] == 0)
        .map(|i| (keys[i].expect("every key is computed"), i))
        .collect();
    let mut out = Vec::with_capacity(n);
    while let Some((_, i)) = ready.pop_first() {
        out.push(i);
        for &t in &edges[i] {
            indegree[t] -= 1;
            if indegree[t] == 0 {
                ready.insert((keys[t].expect("every key is computed"), t));
            }
        }
    }
    debug_assert_eq!(out.len(), n, "the cycle check ran first");
    Ok(out)
}

/// The key of node `i`: its own place, or just before the earliest place of
/// a middleware it declared it must precede (the graph is acyclic).
fn key_of(i: usize, ahead: &[Vec<usize>], keys: &mut [Option<Key>]) -> Key {
    if let Some(k) = keys[i] {
        return k;
    }
    let mut key = (i, 0, i);
    for &t in &ahead[i] {
        let (anchor, depth, _) = key_of(t, ahead, keys);
        key = key.min((anchor, depth - 1, i));
    }
    keys[i] = Some(key);
    key
}

/// The edges `(a, b)` (`a` before `b`) that [`EVERY`] (`"*"`) adds: a node
/// with `before = ["*"]` precedes every node that does not say `before =
/// ["*"]` too; one with `after = ["*"]` follows every node that does not say
/// `after = ["*"]` too; a pair where either names the other keeps its own
/// constraint instead.
fn wildcard_edges(nodes: &[OrderNode<'_>]) -> Vec<(usize, usize)> {
    let names = |j: &OrderNode<'_>, i: &OrderNode<'_>| {
        [&j.before, &j.after, &j.before_if_present, &j.after_if_present]
            .into_iter()
            .any(|list| list.contains(&i.name))
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    fn node<'a>(name: &'a str, before: &[&'a str], after: &[&'a str]) -> OrderNode<'a> {
        OrderNode {
            name,
            before: before.to_vec(),
            after: after.to_vec(),
            before_if_present: Vec::new(),
            after_if_present: Vec::new(),
        }
    }

    fn names<'a>(nodes: &[OrderNode<'a>]) -> Vec<&'a str> {
        resolve(nodes).unwrap().into_iter().map(|i| nodes[i].name).collect()
    }

    #[test]
    fn the_declaring_middleware_moves_not_its_target() {
        let nodes = [
            node("log", &[], &[]),
            node("retry", &[], &[]),
            node("span", &["log"], &[]),
        ];
        assert_eq!(names(&nodes), ["span", "log", "retry"]);
        let nodes = [
            node("a", &[], &["c"]),
            node("b", &[], &[]),
            node("c", &[], &[]),
            node("d", &[], &[]),
        ];
        assert_eq!(names(&nodes), ["b", "c", "a", "d"]);
    }

    #[test]
    fn chains_and_mixed_constraints_resolve() {
        // x must follow b and precede a, registered a, b: b, x, a is the only order
        let nodes = [node("a", &[], &[]), node("b", &[], &[]), node("x", &["a"], &["b"])];
        assert_eq!(names(&nodes), ["b", "x", "a"]);
        let nodes = [
            node("c", &[], &[]),
            node("x", &[], &[]),
            node("b", &["c"], &[]),
            node("a", &["b"], &[]),
        ];
        assert_eq!(names(&nodes), ["a", "b", "c", "x"]);
    }

    #[test]
    fn a_missing_required_name_is_an_error_with_a_suggestion() {
        let nodes = [node("logging", &[], &[]), node("span", &["loging"], &[])];
        let err = resolve(&nodes).unwrap_err().to_string();
        assert!(err.contains("did you mean `logging`?"), "{err}");
        assert!(err.contains("before_if_present"), "{err}");
        let mut optional = node("span", &[], &[]);
        optional.before_if_present = vec!["loging"];
        assert_eq!(names(&[node("logging", &[], &[]), optional]), ["logging", "span"]);
    }
}
