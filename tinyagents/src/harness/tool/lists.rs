//! [`ToolLists`]: an allow list and a deny list of tool names, and the rule
//! by which a child policy narrows its parent's.

use std::collections::BTreeSet;

/// An allow list (when `Some`, a tool must be listed) and a deny list (always
/// hides). A child composed with [`ToolLists::narrowed`] can only narrow.
///
/// ```
/// use tinyagents::harness::tool::ToolLists;
///
/// let parent = ToolLists::new(Some(["a", "b", "c"]), ["c"]);
/// let child = ToolLists::new(Some(["b", "c", "d"]), Vec::<String>::new());
/// let effective = parent.narrowed(&child);
/// assert!(effective.permits("b"));
/// assert!(!effective.permits("c")); // parent-denied
/// assert!(!effective.permits("d")); // never parent-allowed
/// assert!(!effective.permits("a")); // the child did not allow it
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolLists {
    allow: Option<BTreeSet<String>>,
    deny: BTreeSet<String>,
}

impl ToolLists {
    /// Lists from an optional allow list and a deny list.
    pub fn new<A, D>(allow: Option<A>, deny: D) -> Self
    where
        A: IntoIterator,
        A::Item: Into<String>,
        D: IntoIterator,
        D::Item: Into<String>,
    {
        Self {
            allow: allow.map(|a| a.into_iter().map(Into::into).collect()),
            deny: deny.into_iter().map(Into::into).collect(),
        }
    }

    /// No restriction at all.
    pub fn unrestricted() -> Self {
        Self::default()
    }

    /// The allow list, when there is one.
    pub fn allow(&self) -> Option<&BTreeSet<String>> {
        self.allow.as_ref()
    }

    /// The deny list.
    pub fn deny(&self) -> &BTreeSet<String> {
        &self.deny
    }

    /// Whether a tool named `name` is permitted: not denied, and listed when there is an allow list.
    pub fn permits(&self, name: &str) -> bool {
        !self.deny.contains(name) && self.allow.as_ref().is_none_or(|a| a.contains(name))
    }

    /// `child` composed under `self`: deny is additive (parent ∪ child) and
    /// allow intersective (the intersection when both restrict, the single
    /// restriction when only one does, unrestricted otherwise).
    pub fn narrowed(&self, child: &ToolLists) -> ToolLists {
        let allow = match (&self.allow, &child.allow) {
            (Some(p), Some(c)) => Some(p.intersection(c).cloned().collect()),
            (Some(one), None) | (None, Some(one)) => Some(one.clone()),
            (None, None) => None,
        };
        ToolLists {
            allow,
            deny: self.deny.union(&child.deny).cloned().collect(),
        }
    }
}
