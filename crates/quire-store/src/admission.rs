//! Admission: a count-min sketch of recent misses decides whether a new key is worth
//! writing once the volume is full.
//!
//! Policy (TinyLFU's doorkeeper, as a ghost set without keys): a `get` that misses
//! counts its key, and so does a `put` that is turned away; a `put` of a key not
//! already stored is admitted only if that key was counted at least `ADMIT_MISSES`
//! times within the sketch's window. In the usual cache-aside flow that means the
//! second request for a key stores it, and a key asked for once (a scan, a crawler, a
//! one-hit wonder) never displaces the working set.
//! Counters are 8-bit, saturating at 15, and halve every `window` recorded misses so
//! old popularity fades.
//!
//! Hits never touch the sketch: the hit path stays free of its shared writes.
//! Counter updates are relaxed load/store pairs: a lost increment under a race only
//! makes one estimate one lower, which a frequency sketch tolerates by design.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

const DEPTH: usize = 4;
const COUNTER_MAX: u8 = 15;
/// Counted accesses (misses, turned-away puts) a key needs before a put of it is
/// admitted into a full volume.
pub const ADMIT_MISSES: u8 = 2;

/// The sketch. Pure policy: no clock, no I/O.
#[derive(Debug)]
pub struct Sketch {
    rows: Box<[AtomicU8]>,
    mask: u64,
    recorded: AtomicU64,
    window: u64,
}

impl Sketch {
    /// A sketch sized for about `expected_keys` distinct keys.
    pub fn new(expected_keys: u64) -> Sketch {
        let width = expected_keys.clamp(1 << 10, 1 << 24).next_power_of_two();
        Sketch {
            rows: (0..width as usize * DEPTH)
                .map(|_| AtomicU8::new(0))
                .collect(),
            mask: width - 1,
            recorded: AtomicU64::new(0),
            window: width * 8,
        }
    }

    fn slots(&self, hash: u64) -> [usize; DEPTH] {
        let width = self.mask + 1;
        let mut out = [0; DEPTH];
        let mut h = hash;
        for (row, slot) in out.iter_mut().enumerate() {
            // Re-mix per row so rows disagree on collisions.
            h = h.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29) ^ (row as u64);
            *slot = (row as u64 * width + (h & self.mask)) as usize;
        }
        out
    }

    /// Counts one miss of `hash`.
    pub fn record(&self, hash: u64) {
        for s in self.slots(hash) {
            let c = &self.rows[s];
            let v = c.load(Ordering::Relaxed);
            if v < COUNTER_MAX {
                c.store(v + 1, Ordering::Relaxed);
            }
        }
        self.recorded.fetch_add(1, Ordering::Relaxed);
    }

    /// How many recent misses `hash` had (an overestimate, never an underestimate
    /// save for lost racing increments).
    pub fn estimate(&self, hash: u64) -> u8 {
        self.slots(hash)
            .iter()
            .map(|&s| self.rows[s].load(Ordering::Relaxed))
            .min()
            .unwrap_or(0)
    }

    pub fn admits(&self, hash: u64) -> bool {
        self.estimate(hash) >= ADMIT_MISSES
    }

    /// Halves every counter once a window's worth of misses was recorded. Called by
    /// writers (it is O(width)), never on the read path.
    pub fn age_if_due(&self) {
        let seen = self.recorded.load(Ordering::Relaxed);
        // One writer wins the right to age; the others carry on.
        if seen < self.window
            || self
                .recorded
                .compare_exchange(seen, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        for c in self.rows.iter() {
            let v = c.load(Ordering::Relaxed);
            c.store(v / 2, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_miss_admits_first_does_not() {
        let s = Sketch::new(1000);
        assert!(!s.admits(7));
        s.record(7);
        assert!(!s.admits(7));
        s.record(7);
        assert!(s.admits(7));
        assert!(!s.admits(8));
    }

    #[test]
    fn aging_forgets_old_misses() {
        let s = Sketch::new(1024);
        s.record(1);
        s.record(1);
        s.age_if_due();
        assert_eq!(s.estimate(1), 2, "not due yet");
        s.recorded.store(s.window, Ordering::Relaxed);
        s.age_if_due();
        assert_eq!(s.estimate(1), 1, "halved below the admission bar");
    }

    #[test]
    fn counters_saturate() {
        let s = Sketch::new(1024);
        for _ in 0..100 {
            s.record(3);
        }
        assert_eq!(s.estimate(3), COUNTER_MAX);
    }

    #[test]
    fn few_false_admissions_at_design_load() {
        let s = Sketch::new(10_000);
        for k in 0..10_000u64 {
            s.record(k.wrapping_mul(0x2545_f491_4f6c_dd1d));
        }
        let false_admits = (0..10_000u64)
            .filter(|k| s.admits((k + 1_000_000).wrapping_mul(0x2545_f491_4f6c_dd1d)))
            .count();
        assert!(false_admits < 200, "{false_admits} unseen keys admitted");
    }
}
