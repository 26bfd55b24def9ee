//! Admission: a count-min sketch of recent misses, and the eviction boundary, decide
//! whether a new key is worth writing once the volume is full.
//!
//! Policy (TinyLFU: a doorkeeper, then the candidate against the victim). A `get` that
//! misses counts its key, and so does a `put` that is turned away. A `put` of a key not
//! already stored is admitted if
//! - the key was counted at least `ADMIT_MISSES` times within the sketch's window (in
//!   the usual cache-aside flow: the miss and the turned-away put of its first request
//!   count twice, so its second request stores it), or
//! - it was counted at all (its own miss) and its value per byte — counted accesses /
//!   bytes — is at least `FIRST_MARGIN` times the eviction [`Boundary`]: the highest
//!   (hits + 1) / bytes among the entries reclaim evicted last. A first request is
//!   thus stored at once when it is much smaller than what the cache is currently
//!   giving up, and otherwise waits for its second request. Blind puts of keys never
//!   asked for (a count of 0) only ever pass the first test.
//!
//! A key asked for once and never again (a scan, a crawler) so passes only if it is
//! small next to what is being evicted, and then sits unhit where reclaim looks first.
//! Counters are 8-bit, saturating at 15, and halve every `width` recorded accesses, so
//! old popularity fades and a counter's mean load stays under 2: with 4 rows, a key
//! never counted reads as counted twice about 4 % of the time at worst (simulated: just
//! before a halving, every access a new key). Each row has a counter per KiB of cap.
//! (At one per 4 KiB and a window of 8 × width, counters ran at a mean of up to 8, and
//! `quire bench store` saw 1 in 15 scan keys pass the doorkeeper on collisions alone.)
//!
//! Hits never touch the sketch or the boundary: the hit path stays free of their shared
//! writes. Counter updates are relaxed load/store pairs: a lost increment under a race
//! only makes one estimate one lower, which a frequency sketch tolerates by design.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

const DEPTH: usize = 4;
const COUNTER_MAX: u8 = 15;
/// Counted accesses (misses, turned-away puts) a key needs before a put of it is
/// admitted into a full volume whatever its size.
const ADMIT_MISSES: u8 = 2;
/// How many times denser than the eviction boundary a key counted fewer than
/// `ADMIT_MISSES` times must be to be admitted. 4 rather than 8: measured at both
/// of `quire bench store`'s scales, at least as good on every stream, with the scans'
/// lead kept (docs/performance.md, "Against W-TinyLFU and S3-FIFO").
const FIRST_MARGIN: f64 = 4.0;
/// Sketch counters per row, per byte of cap.
const CAP_BYTES_PER_COUNTER: u64 = 1024;

/// An entry's worth to the cache per byte of volume it takes: (hits + 1) / bytes.
/// Reclaim carries the highest first; admission weighs a new key against the highest
/// it evicted.
pub(crate) fn value_density(hits: u8, stride: u64) -> f64 {
    (f64::from(hits) + 1.0) / stride.max(1) as f64
}

/// The eviction boundary: the highest [`value_density`] among the entries the latest
/// reclaim that evicted anything evicted (0 until then). Written by reclaimers, read by
/// writers; a relaxed `f64` in an atomic word.
#[derive(Debug, Default)]
pub(crate) struct Boundary(AtomicU64);

impl Boundary {
    pub(crate) fn set(&self, density: f64) {
        self.0.store(density.to_bits(), Ordering::Relaxed);
    }

    pub(crate) fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

/// The sketch. Pure policy: no clock, no I/O.
#[derive(Debug)]
pub(crate) struct Sketch {
    rows: Box<[AtomicU8]>,
    mask: u64,
    recorded: AtomicU64,
    window: u64,
}

impl Sketch {
    /// A sketch sized for a volume of `cap_bytes`.
    pub(crate) fn for_cap(cap_bytes: u64) -> Sketch {
        Sketch::new(cap_bytes / CAP_BYTES_PER_COUNTER)
    }

    /// A sketch of `width` counters per row (rounded up to a power of two), halving
    /// every `width` recorded accesses.
    fn new(width: u64) -> Sketch {
        let width = width.clamp(1 << 10, 1 << 24).next_power_of_two();
        Sketch {
            rows: (0..width as usize * DEPTH)
                .map(|_| AtomicU8::new(0))
                .collect(),
            mask: width - 1,
            recorded: AtomicU64::new(0),
            window: width,
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
    pub(crate) fn record(&self, hash: u64) {
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
    fn estimate(&self, hash: u64) -> u8 {
        self.slots(hash)
            .iter()
            .map(|&s| self.rows[s].load(Ordering::Relaxed))
            .min()
            .unwrap_or(0)
    }

    /// The doorkeeper alone: `hash` was counted at least `ADMIT_MISSES` times.
    pub(crate) fn admits(&self, hash: u64) -> bool {
        self.estimate(hash) >= ADMIT_MISSES
    }

    /// The full policy for a new key of `stride` bytes against the eviction boundary
    /// `boundary` (see the module doc).
    pub(crate) fn admits_sized(&self, hash: u64, stride: u64, boundary: f64) -> bool {
        let est = self.estimate(hash);
        est >= ADMIT_MISSES
            || (est >= 1
                && boundary > 0.0
                && f64::from(est) / stride.max(1) as f64 >= FIRST_MARGIN * boundary)
    }

    /// Halves every counter once a window's worth of misses was recorded. Called by
    /// writers (it is O(width)), never on the read path.
    pub(crate) fn age_if_due(&self) {
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
    fn a_first_request_passes_only_if_much_denser_than_the_boundary() {
        let s = Sketch::new(1024);
        let b = Boundary::default();
        s.record(5);
        assert!(!s.admits_sized(5, 100, b.get()), "nothing evicted yet");
        b.set(value_density(0, 8000));
        assert!(s.admits_sized(5, 100, b.get()), "80 times denser");
        assert!(!s.admits_sized(5, 4000, b.get()), "only twice as dense");
        assert!(
            !s.admits_sized(6, 100, b.get()),
            "never counted: a blind put"
        );
        s.record(5);
        assert!(
            s.admits_sized(5, 1 << 20, b.get()),
            "counted twice: any size"
        );
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
