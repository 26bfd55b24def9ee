//! Which stored records a refresh-ahead was already started for, so that each is
//! refreshed ahead once, even when its refresh fails (an origin that is down must
//! not be asked again on every hit in the window).
//!
//! A fixed table of record ids, indexed by the id's low bits: lock-free, bounded
//! (8 KiB), and approximate only in the safe direction: a collision forgets an
//! earlier id, which can then be refreshed once more; an id is never reported
//! tried when it was not. A refresh that succeeds writes a new record (a new id),
//! so the renewed response gets its own refresh later in its life.

use std::sync::atomic::{AtomicU64, Ordering};

/// Slots of the table.
const SLOTS: usize = 1024;

/// The table; see the module documentation.
#[derive(Debug)]
pub(crate) struct Refreshed {
    ids: Box<[AtomicU64]>,
}

impl Default for Refreshed {
    fn default() -> Self {
        Refreshed {
            ids: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Refreshed {
    fn slot(&self, id: u64) -> &AtomicU64 {
        &self.ids[(id as usize) % SLOTS]
    }

    /// Whether a refresh-ahead was started for record `id`.
    pub(crate) fn tried(&self, id: u64) -> bool {
        id != 0 && self.slot(id).load(Ordering::Relaxed) == id
    }

    /// Marks record `id` as tried; `false` if it was already (someone else starts
    /// its refresh).
    pub(crate) fn mark(&self, id: u64) -> bool {
        // 0 is the empty slot: such an id is not tracked (always let through).
        id == 0 || self.slot(id).swap(id, Ordering::Relaxed) != id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_marked_once_and_a_collision_only_forgets() {
        let r = Refreshed::default();
        assert!(!r.tried(7));
        assert!(r.mark(7));
        assert!(r.tried(7));
        assert!(!r.mark(7), "the second mark is refused");
        // Another id in the same slot replaces it: 7 may be refreshed once more,
        // and the other is reported tried only after its own mark.
        let other = 7 + SLOTS as u64;
        assert!(!r.tried(other));
        assert!(r.mark(other));
        assert!(!r.tried(7));
        assert!(r.tried(other));
    }
}
