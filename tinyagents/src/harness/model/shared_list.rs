//! [`SharedList`]: a list that requests share until one of them changes it.

use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A list shared by clones until one changes it (copy on write): the run's
/// history, the agent's tool schemas and its system prompt go into every
/// [`ModelRequest`] as a reference count, and a middleware that changes
/// them (`retain`, `push`, indexing, …, through `DerefMut`) copies the list
/// first, so neither the history nor another request sees the change. A
/// middleware that rewrites the messages every turn can keep what it handed
/// on and extend it: see [`appended_since`](Self::appended_since).
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
    Shared(Arc<Body<T>>),
}

/// The items of a shared list and the list's identity, which
/// [`SharedList::appended_since`] compares.
struct Body<T> {
    items: Vec<T>,
    /// Unique among the lists of the process: a copy and any change other
    /// than appending take a new one.
    id: u64,
}

impl<T: Clone> Clone for Body<T> {
    fn clone(&self) -> Self {
        Self {
            items: self.items.clone(),
            id: next_id(),
        }
    }
}

/// A list identity never given before (0 is the empty list's).
fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// A list as it was at one moment: its identity and length
/// ([`SharedList::mark`]). Holds no item, so keeping one shares nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListMark {
    id: u64,
    len: usize,
}

impl ListMark {
    /// The list's length when marked.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the list was empty when marked.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
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

    /// This list as it is now, to ask later what was appended since
    /// ([`appended_since`](Self::appended_since)).
    pub fn mark(&self) -> ListMark {
        match &self.0 {
            Repr::Empty(_) => ListMark::default(),
            Repr::Shared(body) => ListMark {
                id: body.id,
                len: body.items.len(),
            },
        }
    }

    /// `Some(n)` when this is the list `mark` was taken of and it was only
    /// appended to since ([`push`](Self::push), `extend`):
    /// its first `n` items (`n` = [`ListMark::len`]) are the same values,
    /// and what follows is new. `None` when it is another list, or was
    /// changed otherwise (through `&mut Vec`, which may change any item):
    /// then compare the items. An empty mark is the start of every list.
    ///
    /// It lets a middleware that rewrites a growing history handle only
    /// what each turn added, without comparing the history it already saw:
    ///
    /// ```
    /// use tinyagents::harness::model::SharedList;
    ///
    /// let mut history: SharedList<u32> = vec![1, 2].into();
    /// let mark = history.mark();
    /// history.push(3);
    /// assert_eq!(history.appended_since(&mark), Some(2)); // items 2.. are new
    /// history[0] = 9; // any other change
    /// assert_eq!(history.appended_since(&mark), None);
    /// ```
    pub fn appended_since(&self, mark: &ListMark) -> Option<usize> {
        if mark.id == 0 && mark.len == 0 {
            return Some(0);
        }
        match &self.0 {
            Repr::Shared(body) if body.id == mark.id && body.items.len() >= mark.len => Some(mark.len),
            _ => None,
        }
    }
}

impl<T: Clone> SharedList<T> {
    /// The body to change, this handle's own (copied first when shared; a
    /// copy is another list). An empty list gets a body now.
    fn body_mut(&mut self) -> &mut Body<T> {
        if let Repr::Empty(_) = self.0 {
            self.0 = Repr::Shared(Arc::new(Body {
                items: Vec::new(),
                id: next_id(),
            }));
        }
        match &mut self.0 {
            Repr::Shared(body) => Arc::make_mut(body),
            Repr::Empty(_) => unreachable!("moved to `Shared` above"),
        }
    }

    /// Appends `item` (the list is copied first when shared). Appending
    /// keeps the list's identity: see [`appended_since`](Self::appended_since);
    /// so does `extend` ([`Extend`]).
    pub fn push(&mut self, item: T) {
        self.body_mut().items.push(item);
    }
}

impl<T: Clone> Extend<T> for SharedList<T> {
    /// Appends `items` (the list is copied first when shared), keeping its
    /// identity as [`push`](SharedList::push) does.
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        self.body_mut().items.extend(items);
    }
}

impl<T: Clone> SharedList<T> {
    /// The items, copied out only when the list is still shared.
    pub fn into_vec(self) -> Vec<T> {
        match self.0 {
            Repr::Empty(items) => items,
            Repr::Shared(body) => match Arc::try_unwrap(body) {
                Ok(body) => body.items,
                Err(shared) => shared.items.clone(),
            },
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
            Repr::Shared(body) => &body.items,
        }
    }
}

impl<T: Clone> DerefMut for SharedList<T> {
    /// The list to change: copied first when another handle shares it.
    #[inline]
    fn deref_mut(&mut self) -> &mut Vec<T> {
        // what is changed is shared from now on, so `Empty` stays empty;
        // any item may change, so the list takes a new identity
        let body = self.body_mut();
        body.id = next_id();
        &mut body.items
    }
}

impl<T> From<Vec<T>> for SharedList<T> {
    fn from(items: Vec<T>) -> Self {
        if items.is_empty() {
            Self::new()
        } else {
            Self(Repr::Shared(Arc::new(Body { items, id: next_id() })))
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

impl<'a, T: Clone> IntoIterator for &'a mut SharedList<T> {
    type Item = &'a mut T;
    type IntoIter = std::slice::IterMut<'a, T>;

    /// The items to change: the list is copied first when shared.
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
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

impl<T: PartialEq> PartialEq<SharedList<T>> for Vec<T> {
    fn eq(&self, other: &SharedList<T>) -> bool {
        *self == **other
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
    fn only_appending_to_the_same_list_keeps_its_mark() {
        let mut a: SharedList<u32> = SharedList::new();
        let empty = a.mark();
        a.push(1);
        assert_eq!(a.appended_since(&empty), Some(0), "an empty mark starts every list");
        let m = a.mark();
        a.extend([2, 3]);
        Extend::extend(&mut a, [4]);
        assert_eq!(a.appended_since(&m), Some(1));
        // a shared list appended to is a copy: another list
        let b = a.clone();
        let mut c = a.clone();
        c.push(5);
        assert_eq!(c.appended_since(&a.mark()), None);
        assert_eq!(b.appended_since(&a.mark()), Some(4), "a clone is the same list");
        // a change through `&mut Vec`, even one that appends, or a truncation
        let m = a.mark();
        drop(b);
        a.as_mut_slice()[0] = 9;
        assert_eq!(a.appended_since(&m), None);
        let m = a.mark();
        a.truncate(1);
        a.push(7);
        assert_eq!(a.appended_since(&m), None);
        // a list made anew with the same items is another list
        let same: SharedList<u32> = a.to_vec().into();
        assert_eq!(same.appended_since(&a.mark()), None);
        assert_eq!(same, a);
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
