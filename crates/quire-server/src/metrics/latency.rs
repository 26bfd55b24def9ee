//! How long quire took to answer: `quire_request_duration_seconds{cache=…}`, one
//! histogram per outcome (`hit`, `miss`, …) of the time from a request's head being
//! read to its response head being ready. For a hit that is the lookup and the
//! response head written into the connection's buffer; for a miss it includes the
//! origin exchange or the render. Body streaming is not in it (a slow client does not
//! make quire look slow), nor the time a request waited before its head was read.
//!
//! Key decisions:
//! - **Per-thread stripes**, like the request counters: a hit adds to one bucket and
//!   the sum of its own thread's stripe, so two cores answering hits never bounce a
//!   line between them. A scrape adds the stripes up; it never blocks an observation.
//! - **Bounds from 25 µs**: a hit is tens of microseconds, a miss milliseconds to
//!   seconds, so the buckets run 25 µs to 10 s in 1–2.5–5 steps; past 10 s is `+Inf`.
//! - The sum is kept in nanoseconds (a `u64` holds 584 years of them).
//! - [`Buckets`] and [`write_series`] also make the origin's histogram
//!   (`quire_origin_request_duration_seconds`, one unstriped [`Buckets`]): one
//!   histogram type, one set of bounds, in the server.

//!
//! A leaf: outcomes come in as their index and label (`metrics` owns `Outcome`), and
//! the stripe as its index, so this file imports nothing of the module it serves.

use std::fmt::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets: nanoseconds and the `le` label.
pub(super) const BOUNDS: [(u64, &str); 18] = [
    (25_000, "0.000025"),
    (50_000, "0.00005"),
    (100_000, "0.0001"),
    (250_000, "0.00025"),
    (500_000, "0.0005"),
    (1_000_000, "0.001"),
    (2_500_000, "0.0025"),
    (5_000_000, "0.005"),
    (10_000_000, "0.01"),
    (25_000_000, "0.025"),
    (50_000_000, "0.05"),
    (100_000_000, "0.1"),
    (250_000_000, "0.25"),
    (500_000_000, "0.5"),
    (1_000_000_000, "1"),
    (2_500_000_000, "2.5"),
    (5_000_000_000, "5"),
    (10_000_000_000, "10"),
];

/// Stripes: as many as the request counters' (a stripe index is taken modulo it).
const STRIPES: usize = 16;

/// Outcomes kept apart: `metrics::Outcome::ALL.len()` (asserted there).
pub(super) const OUTCOMES: usize = 8;

/// One histogram (an outcome's in one stripe, or the origin's): per-bucket (not
/// cumulative) counts, the last slot the overflow past the largest bound, and the
/// sum in nanoseconds.
#[derive(Debug, Default)]
pub(super) struct Buckets {
    counts: [AtomicU64; BOUNDS.len() + 1],
    sum_nanos: AtomicU64,
}

impl Buckets {
    /// One observation of `took`.
    pub(super) fn observe(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let slot = BOUNDS
            .iter()
            .position(|&(bound, _)| nanos <= bound)
            .unwrap_or(BOUNDS.len());
        if let Some(c) = self.counts.get(slot) {
            c.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Adds this histogram's counts and sum into `counts` and `sum`.
    pub(super) fn add_to(&self, counts: &mut [u64; BOUNDS.len() + 1], sum: &mut u64) {
        for (total, c) in counts.iter_mut().zip(&self.counts) {
            *total = total.wrapping_add(c.load(Ordering::Relaxed));
        }
        *sum = sum.wrapping_add(self.sum_nanos.load(Ordering::Relaxed));
    }
}

/// One histogram's series in the Prometheus text format: `labels` (`cache="hit",`,
/// or empty) go before `le` and make the `_sum` and `_count` labels.
pub(super) fn write_series(
    out: &mut String,
    name: &str,
    labels: &str,
    counts: &[u64; BOUNDS.len() + 1],
    sum_nanos: u64,
) -> fmt::Result {
    let mut cumulative = 0u64;
    for ((_, le), n) in BOUNDS.iter().zip(counts) {
        cumulative = cumulative.wrapping_add(*n);
        writeln!(out, "{name}_bucket{{{labels}le=\"{le}\"}} {cumulative}")?;
    }
    let total = counts.iter().fold(0u64, |a, n| a.wrapping_add(*n));
    writeln!(out, "{name}_bucket{{{labels}le=\"+Inf\"}} {total}")?;
    let own = labels.trim_end_matches(',');
    let own = if own.is_empty() {
        String::new()
    } else {
        format!("{{{own}}}")
    };
    writeln!(out, "{name}_sum{own} {}", sum_nanos as f64 / 1e9)?;
    writeln!(out, "{name}_count{own} {total}")
}

/// The request duration histograms (see the module doc).
#[derive(Debug)]
pub(super) struct Latency {
    stripes: Box<[[Buckets; OUTCOMES]]>,
}

impl Default for Latency {
    fn default() -> Latency {
        Latency {
            stripes: (0..STRIPES).map(|_| Default::default()).collect(),
        }
    }
}

impl Latency {
    /// One request of outcome `outcome` (its index) answered in `took`, counted in
    /// stripe `stripe`.
    pub(super) fn observe(&self, stripe: usize, outcome: usize, took: Duration) {
        if let Some(b) = self.stripes[stripe % STRIPES].get(outcome) {
            b.observe(took);
        }
    }

    /// The counts of `outcome` per bucket (not cumulative, overflow last) and the
    /// sum in nanoseconds, over every stripe.
    pub(super) fn totals(&self, outcome: usize) -> ([u64; BOUNDS.len() + 1], u64) {
        let mut counts = [0u64; BOUNDS.len() + 1];
        let mut sum = 0u64;
        for stripe in self.stripes.iter() {
            if let Some(b) = stripe.get(outcome) {
                b.add_to(&mut counts, &mut sum);
            }
        }
        (counts, sum)
    }

    /// The family in the Prometheus text format, every outcome present: `labels[i]`
    /// is outcome `i`'s `cache` label.
    pub(super) fn write(&self, out: &mut String, labels: &[&str; OUTCOMES]) -> fmt::Result {
        const NAME: &str = "quire_request_duration_seconds";
        writeln!(
            out,
            "# HELP {NAME} Time from a request's head read to its response head ready, by what the cache did."
        )?;
        writeln!(out, "# TYPE {NAME} histogram")?;
        for (o, label) in labels.iter().enumerate() {
            let (counts, sum) = self.totals(o);
            write_series(out, NAME, &format!("cache=\"{label}\","), &counts, sum)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABELS: [&str; OUTCOMES] = [
        "hit",
        "stale",
        "revalidated",
        "miss",
        "bypass",
        "pass",
        "error",
        "admin",
    ];
    const HIT: usize = 0;
    const MISS: usize = 3;

    #[test]
    fn an_observation_lands_in_its_bucket_and_every_series_is_present() {
        let l = Latency::default();
        l.observe(0, HIT, Duration::from_micros(20));
        l.observe(1, HIT, Duration::from_micros(25));
        l.observe(2, HIT, Duration::from_micros(26));
        l.observe(3, MISS, Duration::from_secs(11));
        let (hit, sum) = l.totals(HIT);
        assert_eq!(&hit[..2], &[2, 1], "bounds are inclusive");
        assert_eq!(sum, 71_000);
        let mut out = String::new();
        l.write(&mut out, &LABELS).unwrap();
        assert!(
            out.contains(
                "quire_request_duration_seconds_bucket{cache=\"hit\",le=\"0.000025\"} 2\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("quire_request_duration_seconds_bucket{cache=\"hit\",le=\"0.00005\"} 3\n")
        );
        assert!(out.contains("quire_request_duration_seconds_bucket{cache=\"miss\",le=\"10\"} 0\n"));
        assert!(
            out.contains("quire_request_duration_seconds_bucket{cache=\"miss\",le=\"+Inf\"} 1\n")
        );
        assert!(out.contains("quire_request_duration_seconds_count{cache=\"admin\"} 0\n"));
        assert!(
            out.contains("quire_request_duration_seconds_sum{cache=\"hit\"} 0.000071\n"),
            "{out}"
        );
    }

    #[test]
    fn observations_from_many_threads_all_count() {
        let l = std::sync::Arc::new(Latency::default());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        l.observe(t, HIT, Duration::from_micros(40));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(l.totals(HIT).0[1], 8000);
    }
}
