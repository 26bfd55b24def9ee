//! The latency histogram of every benchmark here (the store's op latencies in
//! nanoseconds, the load generator's response times in microseconds): log-linear
//! buckets, HdrHistogram's layout with 64 to 128 buckets per power of two, so a
//! percentile read at its bucket's middle is within 0.8 % of the true value; exact
//! below 128. It covers all of `u64`, so no unit clamps.
//!
//! Key decision: fixed size, allocated once, so recording is an index computation and
//! an increment; each worker records into its own and the results are merged. Of the
//! two histograms the store and HTTP benchmarks had, this is the finer one (the
//! store's had 32 buckets per power of two and read percentiles at a bucket's top,
//! within about 3 %).

use std::time::Duration;

/// Sub-bucket bits: values below `1 << SUB` are exact.
const SUB: u32 = 7;
const HALF: u64 = 1 << (SUB - 1);
/// Buckets: the exact ones, then `HALF` per power of two up to `u64::MAX`.
const BUCKETS: usize = index(u64::MAX) + 1;

/// Counts of values (nanoseconds, microseconds, or any `u64`) in log-linear buckets.
#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
    min: u64,
    max: u64,
    sum: u128,
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("total", &self.total)
            .field("min", &self.min)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

const fn index(v: u64) -> usize {
    if v < 1 << SUB {
        return v as usize;
    }
    let shift = (63 - v.leading_zeros()) - (SUB - 1);
    (shift as u64 * HALF + (v >> shift)) as usize
}

/// Lowest value and width of bucket `i`.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 1 << SUB {
        return (i, 1);
    }
    let shift = i / HALF - 1;
    let top = i - shift * HALF;
    (top << shift, 1 << shift)
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram {
            counts: vec![0; BUCKETS],
            total: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }

    /// Records one value.
    #[inline]
    pub fn record(&mut self, v: u64) {
        self.counts[index(v)] += 1;
        self.total += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum += u128::from(v);
    }

    /// Records a duration in nanoseconds.
    #[inline]
    pub fn record_nanos(&mut self, d: Duration) {
        self.record(d.as_nanos().min(u128::from(u64::MAX)) as u64);
    }

    /// Adds `other`'s counts to this one.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += *b;
        }
        self.total += other.total;
        self.min = self.min.min(other.min);
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

    /// The value at percentile `p` (0-100): the middle of the bucket holding the
    /// ceil(p % of n)-th smallest value, kept within the recorded minimum and maximum.
    /// 0 when empty.
    pub fn percentile(&self, p: f64) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        let rank = ((p / 100.0 * self.total as f64).ceil() as u64).clamp(1, self.total);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, width) = bounds(i);
                let mid = if width == 1 {
                    lo as f64
                } else {
                    lo as f64 + (width - 1) as f64 / 2.0
                };
                return mid.clamp(self.min as f64, self.max as f64);
            }
        }
        self.max as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_whole_range() {
        let mut next = 0u128;
        for i in 0..BUCKETS {
            let (lo, w) = bounds(i);
            assert_eq!(u128::from(lo), next, "bucket {i}");
            assert_eq!(index(lo), i);
            assert_eq!(index(lo + (w - 1)), i);
            next = u128::from(lo) + u128::from(w);
        }
        assert_eq!(next, u128::from(u64::MAX) + 1);
    }

    #[test]
    fn percentiles_are_within_one_percent() {
        let mut h = Histogram::new();
        assert_eq!(h.percentile(99.0), 0.0);
        for v in 1..=1_000_000u64 {
            h.record(v);
        }
        assert_eq!(h.count(), 1_000_000);
        for p in [50.0, 90.0, 99.0, 99.9, 99.99] {
            let want = p / 100.0 * 1e6;
            let got = h.percentile(p);
            assert!(((got - want) / want).abs() < 0.01, "p{p}: {got} vs {want}");
        }
        assert_eq!(h.percentile(100.0), 1e6);
        assert_eq!(h.percentile(0.0), 1.0);
        assert!((h.mean() - 500_000.5).abs() < 1e-6);
        // Small values are exact; a single value is itself.
        let mut h = Histogram::new();
        for v in [5, 5, 7, 100] {
            h.record(v);
        }
        assert_eq!(h.percentile(50.0), 5.0);
        assert_eq!(h.percentile(75.0), 7.0);
        assert_eq!(h.percentile(99.0), 100.0);
        let mut h = Histogram::new();
        h.record(123_456);
        assert_eq!(h.percentile(50.0), 123_456.0);
        h.record(u64::MAX);
        assert_eq!(h.max(), u64::MAX);
        // The top bucket's middle, within 0.8 % of the largest value there is.
        let top = h.percentile(100.0);
        assert!(
            top <= u64::MAX as f64 && top >= u64::MAX as f64 * 0.992,
            "{top}"
        );
    }

    #[test]
    fn nanoseconds_from_a_microsecond_to_a_millisecond() {
        let mut h = Histogram::new();
        for v in 1..=1000u64 {
            h.record_nanos(Duration::from_micros(v));
        }
        let near = |got: f64, want: f64| {
            assert!((got - want).abs() / want <= 0.008, "got {got}, want {want}");
        };
        near(h.percentile(50.0), 500_000.0);
        near(h.percentile(99.0), 990_000.0);
        near(h.percentile(99.9), 999_000.0);
        assert_eq!(h.percentile(100.0), 1_000_000.0);
        assert_eq!(h.max(), 1_000_000);
        assert!((h.mean() - 500_500.0).abs() < 1e-6);
    }

    #[test]
    fn tails_are_seen_and_merge_adds_up() {
        let mut h = Histogram::new();
        for _ in 0..990 {
            h.record(10);
        }
        for _ in 0..10 {
            h.record(5_000_000);
        }
        assert_eq!(h.percentile(50.0), 10.0);
        assert_eq!(h.percentile(99.0), 10.0);
        let p999 = h.percentile(99.9);
        assert!((4_960_000.0..=5_000_000.0).contains(&p999), "{p999}");

        let mut a = Histogram::new();
        let mut b = Histogram::new();
        for v in 0..100 {
            a.record(v);
            b.record(v + 100);
        }
        a.merge(&b);
        assert_eq!(a.count(), 200);
        assert_eq!(a.max(), 199);
        assert_eq!(a.percentile(50.0), 99.0);
        assert_eq!(a.percentile(0.0), 0.0);
        let mut empty = Histogram::new();
        empty.merge(&Histogram::new());
        assert_eq!((empty.count(), empty.percentile(50.0)), (0, 0.0));
    }
}
