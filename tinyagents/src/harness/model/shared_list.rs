//! [`SharedList`]: a list that requests share until one of them changes it.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A list shared by clones until one changes it (copy on write): the agent's
/// tool schemas and system prompt go into every [`ModelRequest`] as a
/// reference count, and a middleware that filters them (`retain`, `push`, …,
/// through `DerefMut`) copies the list first, so no other request sees the
/// change.
///
/// It reads as a `Vec` (`len`, `iter`, indexing, `for t in &list`), compares
/// with a `Vec` or an array, and is built from one with `.into()`.
///
/// ```
/// use tinyagents::harness::model::{ModelRequest, SharedList};
/// use tinyagents::harness::tool::ToolSchema;
///
/// let tools: SharedList<ToolSchema> = vec![ToolSchema::new("a", ""), ToolSchema::new("b", "")].into();
/// let mut request = ModelRequest::default();
/// request.tools = tools.clone(); // shared: no copy
/// request.tools.retain(|t| t.name == "b"); // this request's own copy
/// assert_eq!(request.tools, [ToolSchema::new("b", "")]);
/// assert_eq!(tools.len(), 2);
/// ```
///
/// An empty list allocates nothing (a request's lists start empty).
///
/// [`ModelRequest`]: super::ModelRequest
pub struct SharedList<T>(Repr<T>);

/// Where the items are.
enum Repr<T> {
    /// No items, and no allocation (the `Vec` is always empty and never
    /// allocated: a change first moves the list to [`Repr::Shared`]).
    Empty(Vec<T>),
    /// Items behind a reference count.
    Shared(Arc<Vec<T>>),
}

impl<T> SharedList<T> {
    /// An empty list (allocates nothing).
    pub const fn new() -> Self {
        Self(Repr::Empty(Vec::new()))
    }

    /// Whether `self` and `other` are one shared list (a pointer comparison;
    /// two empty lists are the same list).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        match (&self.0, &other.0) {
            (Repr::Empty(_), Repr::Empty(_)) => true,
            (Repr::Shared(a), Repr::Shared(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl<T: Clone> SharedList<T> {
    /// The items, copied out only when the list is still shared.
    pub fn into_vec(self) -> Vec<T> {
        match self.0 {
            Repr::Empty(items) => items,
            Repr::Shared(items) => Arc::unwrap_or_clone(items),
        }
    }
}

impl<T> Clone for SharedList<T> {
    /// Another handle on the same list (a reference count).
    fn clone(&self) -> Self {
        match &self.0 {
            Repr::Empty(_) => Self::new(),
            Repr::Shared(items) => Self(Repr::Shared(Arc::clone(items))),
        }
    }
}

impl<T> Default for SharedList<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Deref for SharedList<T> {
    type Target = Vec<T>;

    #[inline]
    fn deref(&self) -> &Vec<T> {
        match &self.0 {
            Repr::Empty(items) => items,
            Repr::Shared(items) => items,
        }
    }
}

impl<T: Clone> DerefMut for SharedList<T> {
    /// The list to change: copied first when another handle shares it.
    #[inline]
    fn deref_mut(&mut self) -> &mut Vec<T> {
        if let Repr::Empty(_) = self.0 {
            // what is changed is shared from now on, so `Empty` stays empty
            self.0 = Repr::Shared(Arc::new(Vec::new()));
        }
        match &mut self.0 {
            Repr::Shared(items) => Arc::make_mut(items),
            Repr::Empty(_) => unreachable!("moved to `Shared` above"),
        }
    }
}

impl<T> From<Vec<T>> for SharedList<T> {
    fn from(items: Vec<T>) -> Self {
        if items.is_empty() {
            Self::new()
        } else {
            Self(Repr::Shared(Arc::new(items)))
        }
    }
}

impl<T: Clone> From<SharedList<T>> for Vec<T> {
    fn from(list: SharedList<T>) -> Self {
        list.into_vec()
    }
}

impl<T> FromIterator<T> for SharedList<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        Self::from(iter.into_iter().collect::<Vec<T>>())
    }
}

impl<'a, T> IntoIterator for &'a SharedList<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<T: Clone> IntoIterator for SharedList<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl<T: PartialEq> PartialEq for SharedList<T> {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || **self == **other
    }
}

impl<T: Eq> Eq for SharedList<T> {}

impl<T: PartialEq> PartialEq<Vec<T>> for SharedList<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        **self == *other
    }
}

impl<T: PartialEq> PartialEq<[T]> for SharedList<T> {
    fn eq(&self, other: &[T]) -> bool {
        self.as_slice() == other
    }
}

impl<T: PartialEq, const N: usize> PartialEq<[T; N]> for SharedList<T> {
    fn eq(&self, other: &[T; N]) -> bool {
        self.as_slice() == other
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for SharedList<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (**self).fmt(f)
    }
}

impl<T: Serialize> Serialize for SharedList<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        (**self).serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for SharedList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::SharedList;

    #[test]
    fn a_change_copies_a_shared_list_and_no_other_handle_sees_it() {
        let a: SharedList<u32> = vec![1, 2, 3].into();
        let mut b = a.clone();
        assert!(a.ptr_eq(&b));
        b.retain(|n| *n != 2);
        assert!(!a.ptr_eq(&b));
        assert_eq!(a, [1, 2, 3]);
        assert_eq!(b, vec![1, 3]);
        // an unshared list changes in place
        b.push(4);
        b[0] = 9;
        assert_eq!(b, [9, 3, 4]);
        assert_eq!(serde_json::to_string(&b).unwrap(), "[9,3,4]");
        assert_eq!(serde_json::from_str::<SharedList<u32>>("[9,3,4]").unwrap(), b);
        assert_eq!(b.into_iter().sum::<u32>(), 16);
    }

    #[test]
    fn an_empty_list_is_one_list_until_a_change_and_a_change_is_its_own() {
        let a: SharedList<u32> = SharedList::default();
        let mut b = a.clone();
        assert!(a.ptr_eq(&b) && a.ptr_eq(&Vec::new().into()) && a.ptr_eq(&std::iter::empty().collect()));
        b.push(1);
        assert!(!a.ptr_eq(&b));
        assert!(a.is_empty(), "the other handle sees no change");
        assert_eq!(b, [1]);
        let c = b.clone();
        assert!(c.ptr_eq(&b), "a changed list is shared by its clones");
        b.clear();
        assert!(b.is_empty() && !b.ptr_eq(&c));
        assert_eq!(c, [1]);
        assert_eq!(a, b);
        assert_eq!(format!("{a:?}"), "[]");
        assert_eq!(SharedList::<u32>::new().into_vec(), Vec::<u32>::new());
    }
}
