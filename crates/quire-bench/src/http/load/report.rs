//! The result of a run as the `quire bench load` process prints it: one line
//! `QUIRE-LOAD {json}` on stdout, with the counts and percentiles wrk's script prints
//! too (its line parses into the same [`LoadResult`], the other fields at their
//! defaults), plus the target and achieved rate, errors by kind, completions per
//! 100 ms and a latency distribution for plotting.

use super::stats::{Errors, Stats};

/// The prefix of the result line.
pub(crate) const PREFIX: &str = "QUIRE-LOAD ";

/// Percentiles of the latency distribution reported for plots.
pub(crate) const POINTS: &[f64] = &[
    0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 75.0, 80.0, 85.0, 90.0, 95.0, 97.5, 99.0, 99.5,
    99.75, 99.9, 99.95, 99.975, 99.99, 99.995, 99.999, 100.0,
];

/// What one run of a load generator measured.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(default)]
pub struct LoadResult {
    /// Requests completed.
    pub requests: u64,
    /// Run length (to the last answer awaited at the end), microseconds.
    pub duration_us: u64,
    /// Bytes of the completed responses, heads and bodies.
    pub bytes: u64,
    /// Connect, read, write, timeout and parse errors.
    pub errors: u64,
    /// Responses with a status other than 2xx/3xx.
    pub non_2xx: u64,
    /// Latency percentiles, microseconds (open loop: from when each request was due).
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th.
    pub p99_us: f64,
    /// 99.9th.
    pub p999_us: f64,
    /// 99.99th (from wrk: its own percentile too).
    #[serde(default)]
    pub p9999_us: f64,
    /// Largest latency, microseconds.
    pub max_us: f64,
    /// Target rate (open loop), requests/s; `None`: closed loop.
    pub rate: Option<f64>,
    /// Requests completed per second.
    pub achieved_rate: f64,
    /// Open loop: requests due but never sent because no connection was free.
    pub unsent: u64,
    /// Keep-alive connections.
    pub connections: usize,
    /// Errors by kind.
    pub error_kinds: Errors,
    /// Completions per 100 ms from the start.
    pub timeline: Vec<u64>,
    /// `[percentile, microseconds]` points of the latency distribution.
    pub latency: Vec<(f64, f64)>,
    /// The generator's own CPU time at the end (utime + stime, jiffies), when known.
    pub cpu_jiffies: Option<u64>,
    /// Over TLS: what the generator saw negotiated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::http::tls::Negotiated>,
}

impl LoadResult {
    /// The result of a run from its counts.
    pub fn from_stats(s: &Stats, rate: Option<f64>, connections: usize) -> LoadResult {
        let duration_us = s.elapsed.as_micros() as u64;
        let h = &s.latency;
        LoadResult {
            requests: s.requests,
            duration_us,
            bytes: s.bytes,
            errors: s.errors.total(),
            non_2xx: s.non_2xx,
            p50_us: h.percentile(50.0),
            p90_us: h.percentile(90.0),
            p99_us: h.percentile(99.0),
            p999_us: h.percentile(99.9),
            p9999_us: h.percentile(99.99),
            max_us: h.max() as f64,
            rate,
            achieved_rate: s.requests as f64 / (duration_us.max(1) as f64 / 1e6),
            unsent: s.unsent,
            connections,
            error_kinds: s.errors,
            timeline: s.timeline.clone(),
            latency: POINTS.iter().map(|&p| (p, h.percentile(p))).collect(),
            cpu_jiffies: None,
            tls: None,
        }
    }

    /// The line the `quire bench load` process prints.
    pub fn line(&self) -> String {
        format!(
            "{PREFIX}{}",
            serde_json::to_string(self).unwrap_or_else(|_| "{}".into())
        )
    }
}

/// Reads the result line from a `quire bench load` process's output.
pub(crate) fn parse(stdout: &str) -> Option<LoadResult> {
    let line = stdout.lines().find_map(|l| l.strip_prefix(PREFIX))?;
    serde_json::from_str(line).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_line_round_trips() {
        let mut s = Stats::new(Duration::from_secs(1));
        s.complete(
            200,
            100,
            Duration::from_micros(100),
            Duration::from_millis(50),
        );
        s.complete(
            404,
            50,
            Duration::from_micros(120),
            Duration::from_millis(250),
        );
        s.errors.read = 2;
        s.elapsed = Duration::from_millis(500);
        let r = LoadResult::from_stats(&s, Some(4.0), 3);
        assert_eq!((r.requests, r.bytes, r.non_2xx, r.errors), (2, 150, 1, 2));
        assert_eq!(r.timeline, [1, 0, 1]);
        assert_eq!(r.p50_us, 100.0);
        assert_eq!(r.latency.last(), Some(&(100.0, 120.0)));
        assert!((r.achieved_rate - 4.0).abs() < 1e-9);
        let line = format!("noise\n{}\n", r.line());
        assert!(line.contains("\"rate\":4.0") && line.contains("\"timeline\":[1,0,1]"));
        let back = parse(&line).unwrap();
        assert_eq!(back, r);
        assert_eq!(parse("QUIRE-LOAD {"), None);
        let closed = LoadResult::from_stats(&s, None, 3);
        assert!(closed.line().contains("\"rate\":null"));
    }
}
