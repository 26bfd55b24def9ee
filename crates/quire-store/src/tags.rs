//! The tag index: tag hash → hashes of the keys whose live entry carries the tag.
//!
//! Owned by the writer (it lives inside the writer lock): every change to which entry
//! is live for a key — put, overwrite, remove, reclaim — happens there, so membership
//! is exact without counts. `remove_tagged` still re-reads each member's tags from its
//! entry before removing it, so a 64-bit hash collision between two tags can never
//! purge an entry that does not carry the tag asked for.

use std::collections::{HashMap, HashSet};

#[derive(Debug, Default)]
pub(crate) struct TagIndex {
    members: HashMap<u64, HashSet<u64>>,
    links: u64,
}

impl TagIndex {
    pub(crate) fn add(&mut self, key_hash: u64, tag_hashes: impl IntoIterator<Item = u64>) {
        for t in tag_hashes {
            if self.members.entry(t).or_default().insert(key_hash) {
                self.links += 1;
            }
        }
    }

    pub(crate) fn remove(&mut self, key_hash: u64, tag_hashes: impl IntoIterator<Item = u64>) {
        for t in tag_hashes {
            if let Some(set) = self.members.get_mut(&t) {
                if set.remove(&key_hash) {
                    self.links -= 1;
                }
                if set.is_empty() {
                    self.members.remove(&t);
                }
            }
        }
    }

    /// The keys carrying `tag_hash` now (a copy: the caller mutates while iterating).
    pub(crate) fn members(&self, tag_hash: u64) -> Vec<u64> {
        self.members
            .get(&tag_hash)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    /// Approximate RAM: a set slot per link plus a map slot per tag.
    pub(crate) fn bytes(&self) -> u64 {
        self.links * 9 + self.members.len() as u64 * 57
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_follows_adds_and_removes() {
        let mut t = TagIndex::default();
        t.add(1, [10, 11]);
        t.add(2, [10]);
        let mut m = t.members(10);
        m.sort();
        assert_eq!(m, vec![1, 2]);
        t.remove(1, [10, 11]);
        assert_eq!(t.members(10), vec![2]);
        assert!(t.members(11).is_empty());
        t.remove(2, [10]);
        assert_eq!(t.bytes(), 0);
    }
}
