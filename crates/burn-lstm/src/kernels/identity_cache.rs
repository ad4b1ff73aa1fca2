//! A small least-recently-used cache keyed on the *identity* of immutable values (a
//! fusion tensor's id, which Burn's fusion client draws from a global counter and never
//! reuses), holding what was derived from them: the flat parameter buffer built from a
//! module's parameters, cuDNN's weight space copied from that buffer.
//!
//! **Why an entry is never stale.** A key names values that cannot change: an optimizer
//! step, `Param::map` or a loaded record gives a parameter a new tensor (a new id), which
//! misses. The entry holds clones of what it derived (and of what that was derived
//! from, where the derived value reads it), so their memory is neither freed nor reused
//! while the entry lives; a backend writes a tensor's memory in place only when nobody
//! else holds it.
//!
//! Bounded by a number of entries and of bytes; a budget of zero bytes keeps nothing.

/// The cache: at most `max_entries` entries and `max_bytes` bytes, most recent first.
pub(crate) struct IdentityCache<K, V> {
    entries: Vec<(K, V, usize)>,
    max_entries: usize,
    max_bytes: usize,
}

impl<K: PartialEq, V> IdentityCache<K, V> {
    /// An empty cache with these bounds.
    pub const fn new(max_entries: usize, max_bytes: usize) -> Self {
        Self {
            entries: Vec::new(),
            max_entries,
            max_bytes,
        }
    }

    /// The value kept for `key`, which becomes the most recently used.
    pub fn get(&mut self, key: &K) -> Option<&V> {
        let at = self.entries.iter().position(|(k, _, _)| k == key)?;
        let entry = self.entries.remove(at);
        self.entries.insert(0, entry);
        self.entries.first().map(|(_, v, _)| v)
    }

    /// Keeps `value` (of `bytes`) for `key`, replacing an entry with the same key and
    /// dropping the least recently used entries past the bounds. A value larger than the
    /// byte budget is not kept.
    pub fn insert(&mut self, key: K, value: V, bytes: usize) {
        self.entries.retain(|(k, _, _)| k != &key);
        if bytes > self.max_bytes || self.max_entries == 0 {
            return;
        }
        self.entries.insert(0, (key, value, bytes));
        while self.entries.len() > self.max_entries || self.bytes() > self.max_bytes {
            self.entries.pop();
        }
    }

    /// Drops the entries whose value `keep` refuses (entries that can no longer be
    /// looked up, say).
    pub fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        self.entries.retain(|(_, v, _)| keep(v));
    }

    /// Bytes the entries account for.
    pub fn bytes(&self) -> usize {
        self.entries.iter().map(|(_, _, b)| b).sum()
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Drops every entry.
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// An immutable value with an identity, as a fusion tensor is: `id` never reused.
    #[derive(Clone)]
    struct Value {
        id: u64,
        data: Arc<Vec<f32>>,
    }

    fn derived(parts: &[Value]) -> Vec<f32> {
        parts.iter().flat_map(|p| p.data.iter().copied()).collect()
    }

    #[test]
    fn unchanged_parameters_hit_and_a_changed_one_never_serves_the_old_copy() {
        let mut cache: IdentityCache<Vec<u64>, Vec<f32>> = IdentityCache::new(4, 1 << 20);
        let mut parts = vec![
            Value {
                id: 1,
                data: Arc::new(vec![1.0, 2.0]),
            },
            Value {
                id: 2,
                data: Arc::new(vec![3.0]),
            },
        ];
        let key = |parts: &[Value]| parts.iter().map(|p| p.id).collect::<Vec<_>>();
        cache.insert(key(&parts), derived(&parts), 12);
        assert_eq!(cache.get(&key(&parts)), Some(&vec![1.0, 2.0, 3.0]));
        // An optimizer step: a new value with a new id, the old one still alive.
        parts[1] = Value {
            id: 3,
            data: Arc::new(vec![4.0]),
        };
        assert_eq!(cache.get(&key(&parts)), None, "a changed parameter misses");
        cache.insert(key(&parts), derived(&parts), 12);
        assert_eq!(cache.get(&key(&parts)), Some(&vec![1.0, 2.0, 4.0]));
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let mut cache = IdentityCache::new(2, 100);
        cache.insert(1, "a", 10);
        cache.insert(2, "b", 10);
        assert_eq!(cache.get(&1), Some(&"a"));
        cache.insert(3, "c", 10);
        assert_eq!(cache.get(&2), None, "2 was the least recently used");
        assert_eq!(cache.get(&1), Some(&"a"));
        assert_eq!(cache.get(&3), Some(&"c"));
        cache.insert(4, "d", 95);
        assert_eq!(cache.len(), 1, "the byte budget keeps only the newest");
        assert_eq!(cache.bytes(), 95);
        cache.insert(5, "e", 101);
        assert_eq!(cache.get(&5), None, "larger than the budget: not kept");
        cache.clear();
        assert_eq!(cache.len(), 0);
    }

    #[test]
    fn entries_whose_source_only_the_cache_holds_can_be_dropped() {
        // A value derived from a source the cache holds too (cuDNN's weight space and the
        // flat buffer it was copied from): once nobody else holds the source, its id is
        // never looked up again.
        let mut cache = IdentityCache::new(4, 100);
        let (live, dead) = (Arc::new(1), Arc::new(2));
        cache.insert(1, (live.clone(), "space 1"), 10);
        cache.insert(2, (dead.clone(), "space 2"), 10);
        drop(dead);
        cache.retain(|(source, _)| Arc::strong_count(source) > 1);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.bytes(), 10);
        assert_eq!(cache.get(&1).map(|(_, space)| *space), Some("space 1"));
        assert!(cache.get(&2).is_none());
    }

    #[test]
    fn a_zero_budget_keeps_nothing() {
        let mut cache = IdentityCache::new(8, 0);
        cache.insert(1, 1, 1);
        assert_eq!(cache.get(&1), None);
        let mut none = IdentityCache::new(0, 100);
        none.insert(1, 1, 1);
        assert_eq!(none.len(), 0);
    }
}
