//! A shard's table: entries by the hash the registry computed once, so that a lookup hashes
//! its key once (with the registry's hasher, which also picks the shard) and compares keys
//! only on a hash match.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Hashes a `u64` hash as itself: the table's keys are hashes already.
#[derive(Default)]
pub(super) struct Identity(u64);

impl Hasher for Identity {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is ever called (the table's keys are `u64`); fold anything else.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, hash: u64) {
        self.0 = hash;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Entries by key, found by their key's hash; the entries whose keys share a hash (almost
/// always one) in one list.
pub(super) struct Table<K, V> {
    buckets: HashMap<u64, Vec<(K, V)>, BuildHasherDefault<Identity>>,
}

impl<K: Eq, V> Table<K, V> {
    pub(super) fn new() -> Self {
        Self {
            buckets: HashMap::default(),
        }
    }

    #[inline]
    pub(super) fn get<Q>(&self, hash: u64, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        self.buckets
            .get(&hash)?
            .iter()
            .find(|(k, _)| k.borrow() == key)
            .map(|(_, v)| v)
    }

    /// Inserts an entry whose key is not in the table.
    pub(super) fn insert(&mut self, hash: u64, key: K, value: V) {
        self.buckets.entry(hash).or_default().push((key, value));
    }

    pub(super) fn remove<Q>(&mut self, hash: u64, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let entries = self.buckets.get_mut(&hash)?;
        let i = entries.iter().position(|(k, _)| k.borrow() == key)?;
        let (_, value) = entries.swap_remove(i);
        if entries.is_empty() {
            self.buckets.remove(&hash);
        }
        Some(value)
    }

    /// Keeps only the entries `keep` answers `true` for; hands each removed value to
    /// `removed` (so that the caller decides where it is dropped).
    pub(super) fn retain(
        &mut self,
        mut keep: impl FnMut(&K, &V) -> bool,
        mut removed: impl FnMut(V),
    ) {
        self.buckets.retain(|_, entries| {
            let mut i = 0;
            while i < entries.len() {
                if keep(&entries[i].0, &entries[i].1) {
                    i += 1;
                } else {
                    removed(entries.swap_remove(i).1);
                }
            }
            !entries.is_empty()
        });
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.buckets
            .values()
            .flat_map(|entries| entries.iter().map(|(k, v)| (k, v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_share_a_hash_are_told_apart() {
        let mut t: Table<String, u32> = Table::new();
        t.insert(7, "a".into(), 1);
        t.insert(7, "b".into(), 2);
        t.insert(8, "c".into(), 3);
        assert_eq!(
            (t.get(7, "a"), t.get(7, "b"), t.get(7, "c")),
            (Some(&1), Some(&2), None)
        );
        assert_eq!(t.remove(7, "a"), Some(1));
        assert_eq!((t.get(7, "a"), t.get(7, "b")), (None, Some(&2)));
        let mut gone = Vec::new();
        t.retain(|k, _| k != "b", |v| gone.push(v));
        assert_eq!(gone, [2]);
        assert_eq!(t.iter().count(), 1);
        assert_eq!(t.get(8, "c"), Some(&3));
    }
}
