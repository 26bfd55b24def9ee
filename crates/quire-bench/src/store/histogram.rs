//! A log-bucketed latency histogram (HDR-style: exact below 64, then 32 sub-buckets per
//! power of two, so any value is reported within 1/32 ≈ 3 % of itself) and its
//! percentiles. Each worker thread records into its own and the results are merged.

use std::time::Duration;

const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Values below this are their own bucket.
const EXACT: u64 = 2 * SUB;
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// Counts of values (nanoseconds, or any `u64`) in logarithmic buckets.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    max: u64,
    sum: u128,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Self::new()
    }
}

fn bucket_of(v: u64) -> usize {
    if v < EXACT {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS + 1
    let shift = e - SUB_BITS;
    ((shift as u64 + 1) * SUB + ((v >> shift) - SUB)) as usize
}

/// The largest value that lands in bucket `i`.
fn bucket_high(i: usize) -> u64 {
    let i = i as u64;
    if i < EXACT {
        return i;
    }
    let shift = i / SUB - 1;
    let sub = i % SUB + SUB;
    // For the very last bucket this would overflow; saturate.
    ((sub + 1) as u128 * (1u128 << shift) - 1).min(u64::MAX as u128) as u64
}

impl Histogram {
    pub fn new() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            max: 0,
            sum: 0,
        }
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[bucket_of(v)] += 1;
        self.total += 1;
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    /// Records a duration in nanoseconds.
    #[inline]
    pub fn record_duration(&mut self, d: Duration) {
        self.record(d.as_nanos().min(u128::from(u64::MAX)) as u64);
    }

    /// Adds `other`'s counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += *b;
        }
        self.total += other.total;
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The largest value recorded (exact), 0 when empty.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The mean (exact), 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.sum as f64 / self.total as f64
        }
    }

    /// The `q`-quantile (0 < q <= 1): the smallest bucket value such that at least
    /// `ceil(q * count)` values are at or below it, never above the exact maximum.
    /// 0 when empty.
    pub fn percentile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return bucket_high(i).min(self.max);
            }
        }
        self.max
    }

    /// The `q`-quantile of nanosecond values, in microseconds.
    pub fn percentile_us(&self, q: f64) -> f64 {
        self.percentile(q) as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_tight() {
        let mut prev = 0usize;
        for v in 0..100_000u64 {
            let b = bucket_of(v);
            assert!(b == prev || b == prev + 1, "gap at {v}");
            prev = b;
            let hi = bucket_high(b);
            assert!(hi >= v, "{v} above its bucket's top {hi}");
            assert!((hi - v) as f64 <= v as f64 / SUB as f64, "{v} -> {hi}");
        }
        assert!(bucket_of(u64::MAX) < BUCKETS);
        assert_eq!(bucket_high(bucket_of(u64::MAX)), u64::MAX);
    }

    #[test]
    fn percentiles_of_a_known_set() {
        let mut h = Histogram::new();
        for v in 1..=1000u64 {
            h.record(v * 1000); // 1 µs .. 1 ms
        }
        let near = |got: u64, want: u64| {
            let err = (got as f64 - want as f64).abs() / want as f64;
            assert!(err <= 0.04, "got {got}, want {want}");
        };
        near(h.percentile(0.5), 500_000);
        near(h.percentile(0.99), 990_000);
        near(h.percentile(0.999), 999_000);
        assert_eq!(h.percentile(1.0), 1_000_000);
        assert_eq!(h.max(), 1_000_000);
        assert_eq!(h.count(), 1000);
        assert!((h.mean() - 500_500.0).abs() < 1e-6);
        assert!((h.percentile_us(0.5) - 500.0).abs() < 20.0);
    }

    #[test]
    fn small_values_are_exact_and_tails_are_seen() {
        let mut h = Histogram::new();
        for _ in 0..990 {
            h.record(10);
        }
        for _ in 0..10 {
            h.record(5_000_000);
        }
        assert_eq!(h.percentile(0.5), 10);
        assert_eq!(h.percentile(0.99), 10);
        let p999 = h.percentile(0.999);
        assert!((4_800_000..=5_000_000).contains(&p999), "{p999}");
    }

    #[test]
    fn merge_adds_up() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        for v in 0..100 {
            a.record(v);
            b.record(v + 100);
        }
        a.merge(&b);
        assert_eq!(a.count(), 200);
        assert_eq!(a.max(), 199);
        assert_eq!(a.percentile(0.5), 99);
        assert_eq!(Histogram::new().percentile(0.5), 0);
    }
}
