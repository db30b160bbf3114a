//! [`Object`]: a JSON object as one sorted vector of members.
//!
//! Why not a `BTreeMap`: documents are mostly many small objects (a manifest page is 300,000
//! objects of three or four keys; a record row of 2,000 fields is 10,000 of them), and a
//! B-tree gives every object, however small, a whole node of eleven slots (720 bytes on x86-64)
//! where its members take 64 bytes each. Here an object of `k` members parsed from a document
//! takes exactly `k` slots, so what a parse holds is a fixed price per member the parser can
//! be charged for before it runs ([`super::parse_bytes_at_most`]). Lookups are binary searches
//! (objects are read far more than they are changed); inserting out of order moves the members
//! after the new one, which only writers building small documents do.
//!
//! Members are kept in code-point order of their keys (the order of UTF-8 bytes), which is the
//! deterministic output order, and keys are unique.

use std::fmt;

use compact_str::CompactString;

use super::Value;

/// A JSON object: members sorted by key, keys unique.
#[derive(Clone, Default, PartialEq, Hash)]
pub struct Object {
    members: Vec<(CompactString, Value)>,
}

impl fmt::Debug for Object {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// The member `(key, value)` seen as a pair of references, as map iterators yield them.
fn as_pair((key, value): &(CompactString, Value)) -> (&CompactString, &Value) {
    (key, value)
}

fn as_pair_mut((key, value): &mut (CompactString, Value)) -> (&CompactString, &mut Value) {
    (key, value)
}

impl Object {
    /// An empty object (allocates nothing).
    pub const fn new() -> Object {
        Object {
            members: Vec::new(),
        }
    }

    /// Members already sorted by key and unique, as the parser has them; in debug builds the
    /// order is checked.
    pub(super) fn from_sorted(members: Vec<(CompactString, Value)>) -> Object {
        debug_assert!(members.windows(2).all(|w| w[0].0 < w[1].0));
        Object { members }
    }

    /// Where `key` is, or where it would go.
    fn search(&self, key: &str) -> Result<usize, usize> {
        self.members
            .binary_search_by(|(probe, _)| probe.as_str().cmp(key))
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The heap memory the object holds ([`Value::heap_bytes`]): its slots, its keys longer
    /// than a key keeps inline, and what its values hold.
    pub fn heap_bytes(&self) -> u64 {
        let slots =
            (self.members.capacity() * std::mem::size_of::<(CompactString, Value)>()) as u64;
        let held: u64 = self
            .members
            .iter()
            .map(|(key, value)| {
                let key = if key.is_heap_allocated() {
                    super::text_heap_bytes(key.capacity())
                } else {
                    0
                };
                key + value.heap_bytes()
            })
            .sum();
        held + if slots == 0 {
            0
        } else {
            slots + super::ALLOCATION
        }
    }

    pub fn get(&self, key: impl AsRef<str>) -> Option<&Value> {
        let at = self.search(key.as_ref()).ok()?;
        Some(&self.members[at].1)
    }

    pub fn get_key_value(&self, key: impl AsRef<str>) -> Option<(&CompactString, &Value)> {
        let at = self.search(key.as_ref()).ok()?;
        Some(as_pair(&self.members[at]))
    }

    pub fn get_mut(&mut self, key: impl AsRef<str>) -> Option<&mut Value> {
        let at = self.search(key.as_ref()).ok()?;
        Some(&mut self.members[at].1)
    }

    pub fn contains_key(&self, key: impl AsRef<str>) -> bool {
        self.search(key.as_ref()).is_ok()
    }

    /// Sets `key` to `value`; the value it replaces, if any.
    pub fn insert(&mut self, key: CompactString, value: Value) -> Option<Value> {
        // Writers mostly insert in order: the end is checked first.
        let after_last = self.members.last().is_none_or(|(last, _)| *last < key);
        if after_last {
            self.members.push((key, value));
            return None;
        }
        match self.search(&key) {
            Ok(at) => Some(std::mem::replace(&mut self.members[at].1, value)),
            Err(at) => {
                self.members.insert(at, (key, value));
                None
            }
        }
    }

    pub fn remove(&mut self, key: impl AsRef<str>) -> Option<Value> {
        let at = self.search(key.as_ref()).ok()?;
        Some(self.members.remove(at).1)
    }

    /// The member of `key`, to read, change or fill.
    pub fn entry(&mut self, key: CompactString) -> Entry<'_> {
        let at = self.search(&key);
        Entry {
            object: self,
            key,
            at,
        }
    }

    pub fn iter(&self) -> Iter<'_> {
        self.members.iter().map(as_pair)
    }

    pub fn iter_mut(&mut self) -> IterMut<'_> {
        self.members.iter_mut().map(as_pair_mut)
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &CompactString> + ExactSizeIterator {
        self.members.iter().map(|(key, _)| key)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.members.iter().map(|(_, value)| value)
    }

    pub fn values_mut(&mut self) -> impl DoubleEndedIterator<Item = &mut Value> {
        self.members.iter_mut().map(|(_, value)| value)
    }

    pub fn into_keys(self) -> impl DoubleEndedIterator<Item = CompactString> {
        self.members.into_iter().map(|(key, _)| key)
    }

    pub fn into_values(self) -> impl DoubleEndedIterator<Item = Value> {
        self.members.into_iter().map(|(_, value)| value)
    }

    pub fn first_key_value(&self) -> Option<(&CompactString, &Value)> {
        self.members.first().map(as_pair)
    }

    pub fn last_key_value(&self) -> Option<(&CompactString, &Value)> {
        self.members.last().map(as_pair)
    }

    pub fn pop_first(&mut self) -> Option<(CompactString, Value)> {
        (!self.members.is_empty()).then(|| self.members.remove(0))
    }

    /// Keeps the members for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&CompactString, &mut Value) -> bool) {
        self.members.retain_mut(|(key, value)| keep(key, value));
    }

    /// Moves every member of `other` into this object (replacing members of the same key).
    pub fn append(&mut self, other: &mut Object) {
        let taken = std::mem::take(&mut other.members);
        self.extend(taken);
    }

    /// Removes every member.
    pub fn clear(&mut self) {
        self.members.clear();
    }

    /// Frees the slots no member uses.
    pub fn shrink_to_fit(&mut self) {
        self.members.shrink_to_fit();
    }
}

/// The member of one key in an object ([`Object::entry`]).
pub struct Entry<'a> {
    object: &'a mut Object,
    key: CompactString,
    /// `Ok`: the member's index; `Err`: where it would go.
    at: Result<usize, usize>,
}

impl<'a> Entry<'a> {
    pub fn key(&self) -> &CompactString {
        &self.key
    }

    /// The value, `make()` put in first when the key is absent.
    pub fn or_insert_with(self, make: impl FnOnce() -> Value) -> &'a mut Value {
        let at = match self.at {
            Ok(at) => at,
            Err(at) => {
                self.object.members.insert(at, (self.key, make()));
                at
            }
        };
        &mut self.object.members[at].1
    }

    pub fn or_insert(self, value: Value) -> &'a mut Value {
        self.or_insert_with(|| value)
    }

    /// Changes the value when the key is present.
    pub fn and_modify(self, change: impl FnOnce(&mut Value)) -> Entry<'a> {
        if let Ok(at) = self.at {
            change(&mut self.object.members[at].1);
        }
        self
    }
}

pub type Iter<'a> = std::iter::Map<
    std::slice::Iter<'a, (CompactString, Value)>,
    fn(&'a (CompactString, Value)) -> (&'a CompactString, &'a Value),
>;

pub type IterMut<'a> = std::iter::Map<
    std::slice::IterMut<'a, (CompactString, Value)>,
    fn(&'a mut (CompactString, Value)) -> (&'a CompactString, &'a mut Value),
>;

impl<'a> IntoIterator for &'a Object {
    type Item = (&'a CompactString, &'a Value);
    type IntoIter = Iter<'a>;
    fn into_iter(self) -> Iter<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &'a mut Object {
    type Item = (&'a CompactString, &'a mut Value);
    type IntoIter = IterMut<'a>;
    fn into_iter(self) -> IterMut<'a> {
        self.iter_mut()
    }
}

impl IntoIterator for Object {
    type Item = (CompactString, Value);
    type IntoIter = std::vec::IntoIter<(CompactString, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.members.into_iter()
    }
}

/// Later members replace earlier ones of the same key, as inserting them one by one does.
impl Extend<(CompactString, Value)> for Object {
    fn extend<I: IntoIterator<Item = (CompactString, Value)>>(&mut self, members: I) {
        let incoming: Vec<(CompactString, Value)> = members.into_iter().collect();
        if incoming.len() < 16 {
            for (key, value) in incoming {
                self.insert(key, value);
            }
            return;
        }
        // Many at once: one sort rather than an insertion each. Stable, so of equal keys the
        // later comes later, and it is the one kept.
        self.members.extend(incoming);
        self.members.sort_by(|a, b| a.0.cmp(&b.0));
        let mut merged: Vec<(CompactString, Value)> = Vec::with_capacity(self.members.len());
        for member in self.members.drain(..) {
            match merged.last_mut() {
                Some(last) if last.0 == member.0 => *last = member,
                _ => merged.push(member),
            }
        }
        self.members = merged;
    }
}

impl FromIterator<(CompactString, Value)> for Object {
    fn from_iter<I: IntoIterator<Item = (CompactString, Value)>>(members: I) -> Object {
        let mut object = Object::new();
        object.extend(members);
        object
    }
}

impl<const N: usize> From<[(CompactString, Value); N]> for Object {
    fn from(members: [(CompactString, Value); N]) -> Object {
        members.into_iter().collect()
    }
}

/// `object["key"]`: the value, panicking when absent (as a map's index does; for tests and
/// documents this crate built itself, never for read data).
impl<Q: AsRef<str> + ?Sized> std::ops::Index<&Q> for Object {
    type Output = Value;
    fn index(&self, key: &Q) -> &Value {
        match self.get(key.as_ref()) {
            Some(value) => value,
            None => panic!("no key {:?} in the object", key.as_ref()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(object: &Object) -> Vec<&str> {
        object.keys().map(CompactString::as_str).collect()
    }

    #[test]
    fn members_stay_sorted_and_unique_however_they_arrive() {
        let mut object = Object::new();
        for key in ["m", "b", "z", "a", "b"] {
            object.insert(key.into(), Value::from(key));
        }
        assert_eq!(keys(&object), ["a", "b", "m", "z"]);
        assert_eq!(
            object.insert("a".into(), Value::Null),
            Some(Value::from("a"))
        );
        assert_eq!(object.remove("m"), Some(Value::from("m")));
        assert_eq!(keys(&object), ["a", "b", "z"]);
        assert!(object.contains_key("z") && !object.contains_key("m"));
    }

    #[test]
    fn keys_order_by_code_point_as_bytes() {
        // U+00E9 (two UTF-8 bytes) sorts after 'z', U+1F600 after U+FFFD.
        let object: Object = ["\u{1F600}", "\u{FFFD}", "é", "z", "Z"]
            .into_iter()
            .map(|k| (k.into(), Value::Null))
            .collect();
        assert_eq!(keys(&object), ["Z", "z", "é", "\u{FFFD}", "\u{1F600}"]);
    }

    #[test]
    fn many_members_at_once_keep_the_last_of_each_key() {
        let members = (0..40).map(|i| (format!("k{:02}", i % 20).into(), Value::from(i as u64)));
        let object: Object = members.collect();
        assert_eq!(object.len(), 20);
        assert_eq!(object.get("k03"), Some(&Value::from(23u64)));
        assert_eq!(keys(&object)[..3], ["k00", "k01", "k02"]);
    }

    #[test]
    fn entries_fill_and_change() {
        let mut object = Object::new();
        *object.entry("n".into()).or_insert(Value::from(1u64)) = Value::from(2u64);
        object
            .entry("n".into())
            .and_modify(|v| *v = Value::from(3u64))
            .or_insert(Value::Null);
        object
            .entry("a".into())
            .or_insert_with(|| Value::Bool(true));
        assert_eq!(keys(&object), ["a", "n"]);
        assert_eq!(object["n"], Value::from(3u64));
    }
}
