//! One frame of `quire top`: what changed between two scrapes, as rates, a hit
//! ratio and latency quantiles, and what the gauges say now; drawn as plain text
//! lines (the same lines `--once` prints and the live view shows).
//!
//! Quantiles come from the `quire_request_duration_seconds` buckets' growth between
//! the scrapes, interpolated inside a bucket as Prometheus' `histogram_quantile`
//! does: a figure within the bucket's bounds, not an exact order statistic.

use super::scrape::{Counted, Samples};

/// Outcomes shown, in order, as the server labels them.
const OUTCOMES: [&str; 6] = ["hit", "stale", "revalidated", "miss", "bypass", "error"];

/// What one interval looked like.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Frame {
    /// Seconds between the scrapes.
    pub(crate) seconds: f64,
    /// Requests per second, every outcome but the admin API's.
    pub(crate) rps: f64,
    /// Requests per second by outcome, in [`OUTCOMES`] order.
    pub(crate) by_outcome: Vec<(&'static str, f64)>,
    /// Answered from the store (fresh, stale or revalidated) of those that could be.
    pub(crate) hit_ratio: Option<f64>,
    /// p50, p99, p99.9 in seconds, of hits and of misses (`None`: none in the interval).
    pub(crate) hit_latency: Option<[f64; 3]>,
    pub(crate) miss_latency: Option<[f64; 3]>,
    /// Gauges, now.
    pub(crate) connections: f64,
    pub(crate) fills_in_flight: f64,
    pub(crate) renders_per_s: f64,
    pub(crate) compress_held_bytes: f64,
    pub(crate) origin_errors_per_s: f64,
    pub(crate) limited_per_s: f64,
    pub(crate) store_entries: f64,
    pub(crate) store_used: f64,
    pub(crate) store_capacity: f64,
    /// Each origin: its URL, whether it is taken for requests (with `[[origins]]`),
    /// and its answered and failed (error, timeout) requests per second.
    pub(crate) origins: Vec<OriginRow>,
    /// The URLs missing most and the hottest, lately (estimates, from the server).
    pub(crate) missing: Counted,
    pub(crate) hot: Counted,
}

/// One origin's line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OriginRow {
    pub(crate) url: String,
    pub(crate) up: Option<bool>,
    pub(crate) ok_per_s: f64,
    pub(crate) failed_per_s: f64,
}

/// Each origin of `quire_origin_requests_total{origin=…,result=…}`, in URL order.
fn origins(a: &Samples, b: &Samples, seconds: f64) -> Vec<OriginRow> {
    const NAME: &str = "quire_origin_requests_total";
    let mut rows: Vec<OriginRow> = Vec::new();
    for (labels, v) in b.family(NAME) {
        let Some((origin, result)) = labels
            .strip_prefix("origin=\"")
            .and_then(|l| l.split_once("\",result=\""))
        else {
            continue;
        };
        let result = result.trim_end_matches('"');
        let grown = (v - a.get(&format!("{NAME}{{{labels}}}")).unwrap_or(0.0)).max(0.0) / seconds;
        let i = match rows.iter().position(|r| r.url == origin) {
            Some(i) => i,
            None => {
                let up = b
                    .get(&format!("quire_origin_up{{origin=\"{origin}\"}}"))
                    .map(|u| u > 0.0);
                rows.push(OriginRow {
                    url: origin.to_owned(),
                    up,
                    ok_per_s: 0.0,
                    failed_per_s: 0.0,
                });
                rows.len() - 1
            }
        };
        match result {
            "ok" => rows[i].ok_per_s += grown,
            "error" | "timeout" => rows[i].failed_per_s += grown,
            _ => {}
        }
    }
    rows.sort_by(|x, y| x.url.cmp(&y.url));
    rows
}

/// How much `series` grew from `a` to `b` (0 if missing; a counter reset counts as 0).
fn grew(a: &Samples, b: &Samples, series: &str) -> f64 {
    (b.get(series).unwrap_or(0.0) - a.get(series).unwrap_or(0.0)).max(0.0)
}

/// The sum of every series of family `name` whose labels contain `with`.
fn family_grew(a: &Samples, b: &Samples, name: &str, with: &str) -> f64 {
    b.family(name)
        .filter(|(labels, _)| labels.contains(with))
        .map(|(labels, v)| {
            let series = format!("{name}{{{labels}}}");
            (v - a.get(&series).unwrap_or(0.0)).max(0.0)
        })
        .sum()
}

/// The frame of the interval from `a` to `b`.
pub(crate) fn frame(a: &Samples, b: &Samples) -> Frame {
    let seconds = match (a.at, b.at) {
        (Some(x), Some(y)) => y.duration_since(x).as_secs_f64().max(1e-3),
        _ => 1.0,
    };
    let count = |o: &str| grew(a, b, &format!("quire_requests_total{{cache=\"{o}\"}}"));
    let by_outcome: Vec<(&'static str, f64)> =
        OUTCOMES.iter().map(|&o| (o, count(o) / seconds)).collect();
    let total: f64 = OUTCOMES.iter().map(|o| count(o)).sum::<f64>() + count("pass");
    let stored = count("hit") + count("stale") + count("revalidated");
    let could = stored + count("miss");
    Frame {
        seconds,
        rps: total / seconds,
        by_outcome,
        hit_ratio: (could > 0.0).then(|| stored / could),
        hit_latency: quantiles(a, b, "hit"),
        miss_latency: quantiles(a, b, "miss"),
        connections: b.get("quire_connections_open").unwrap_or(0.0),
        fills_in_flight: b.get("quire_fills_in_flight").unwrap_or(0.0),
        renders_per_s: grew(a, b, "quire_site_renders_total") / seconds,
        compress_held_bytes: b.get("quire_compress_held_bytes").unwrap_or(0.0),
        origin_errors_per_s: grew(a, b, "quire_origin_errors_total") / seconds,
        limited_per_s: family_grew(
            a,
            b,
            "quire_rate_limit_requests_total",
            "result=\"limited\"",
        ) / seconds,
        store_entries: b.get("quire_store_entries").unwrap_or(0.0),
        store_used: b.get("quire_store_bytes_used").unwrap_or(0.0),
        store_capacity: b.get("quire_store_capacity_bytes").unwrap_or(0.0),
        origins: origins(a, b, seconds),
        missing: Vec::new(),
        hot: Vec::new(),
    }
}

/// p50, p99 and p99.9 of outcome `cache` over the interval.
fn quantiles(a: &Samples, b: &Samples, cache: &str) -> Option<[f64; 3]> {
    let name = "quire_request_duration_seconds_bucket";
    let prefix = format!("cache=\"{cache}\",le=\"");
    // (upper bound, cumulative count grown)
    let mut buckets: Vec<(f64, f64)> = b
        .family(name)
        .filter_map(|(labels, v)| {
            let le = labels.strip_prefix(&prefix)?.strip_suffix('"')?;
            let bound = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            let before = a.get(&format!("{name}{{{labels}}}")).unwrap_or(0.0);
            Some((bound, (v - before).max(0.0)))
        })
        .collect();
    buckets.sort_by(|x, y| x.0.total_cmp(&y.0));
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    Some([0.5, 0.99, 0.999].map(|q| quantile(&buckets, total, q)))
}

/// The `q` quantile of cumulative `buckets` holding `total`, interpolated linearly
/// inside its bucket (the last finite bound where it falls past them all).
fn quantile(buckets: &[(f64, f64)], total: f64, q: f64) -> f64 {
    let rank = q * total;
    let mut lower = (0.0, 0.0);
    for &(bound, cum) in buckets {
        if cum >= rank {
            if bound.is_infinite() {
                return lower.0;
            }
            let inside = cum - lower.1;
            let frac = if inside > 0.0 {
                (rank - lower.1) / inside
            } else {
                1.0
            };
            return lower.0 + (bound - lower.0) * frac;
        }
        lower = (bound, cum);
    }
    lower.0
}

/// A duration in seconds, in the unit that reads best.
fn time(s: f64) -> String {
    if s < 1e-3 {
        format!("{:.0} µs", s * 1e6)
    } else if s < 1.0 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// Bytes in the binary unit that reads best.
fn bytes(n: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

fn latency_line(what: &str, l: Option<[f64; 3]>) -> String {
    match l {
        Some([p50, p99, p999]) => format!(
            "{what:<7} p50 {:>9}   p99 {:>9}   p99.9 {:>9}",
            time(p50),
            time(p99),
            time(p999)
        ),
        None => format!("{what:<7} (none in this interval)"),
    }
}

impl Frame {
    /// The frame as text lines, for a terminal or a script.
    pub(crate) fn lines(&self, server: &str) -> Vec<String> {
        let ratio = self
            .hit_ratio
            .map_or("-".to_owned(), |r| format!("{:.1} %", r * 100.0));
        let mut out = vec![
            format!("quire top: {server}, over {:.1} s", self.seconds),
            String::new(),
            format!("requests {:>10.0}/s   hit ratio {ratio:>7}", self.rps),
            self.by_outcome
                .iter()
                .map(|(o, r)| format!("{o} {r:.0}/s"))
                .collect::<Vec<_>>()
                .join("   "),
            String::new(),
            latency_line("hits", self.hit_latency),
            latency_line("misses", self.miss_latency),
            String::new(),
            format!(
                "fills in flight {:.0}   renders {:.0}/s   compression held {}",
                self.fills_in_flight,
                self.renders_per_s,
                bytes(self.compress_held_bytes)
            ),
            format!(
                "origin errors {:.1}/s   rate-limited {:.1}/s   connections {:.0}",
                self.origin_errors_per_s, self.limited_per_s, self.connections
            ),
            format!(
                "store {:.0} entries, {} of {}",
                self.store_entries,
                bytes(self.store_used),
                bytes(self.store_capacity)
            ),
        ];
        if !self.origins.is_empty() {
            out.push(String::new());
        }
        for o in &self.origins {
            let state = match o.up {
                Some(true) => "up   ",
                Some(false) => "DOWN ",
                None => "",
            };
            out.push(format!(
                "origin {state}{}   {:.0}/s answered   {:.1}/s failed",
                o.url, o.ok_per_s, o.failed_per_s
            ));
        }
        for (title, list) in [("missing most", &self.missing), ("hottest", &self.hot)] {
            if list.is_empty() {
                continue;
            }
            out.push(String::new());
            out.push(format!("{title} (estimated, lately)"));
            for (url, n) in list {
                out.push(format!("{n:>9}  {url}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::scrape::parse;
    use super::*;

    /// `text` as scraped `secs` after one fixed instant.
    fn at(text: &str, secs: u64) -> Samples {
        static T0: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        let t0 = *T0.get_or_init(std::time::Instant::now);
        let mut s = parse(text);
        s.at = Some(t0 + std::time::Duration::from_secs(secs));
        s
    }

    #[test]
    fn rates_ratio_and_quantiles_come_from_what_grew() {
        let h = "quire_request_duration_seconds_bucket{cache=\"hit\",le=";
        let a = at(
            &format!("quire_requests_total{{cache=\"hit\"}} 100\nquire_requests_total{{cache=\"miss\"}} 10\n{h}\"0.000025\"}} 50\n{h}\"0.00005\"}} 100\n{h}\"+Inf\"}} 100\n"),
            0,
        );
        // 1,000 more hits in 2 s: 900 under 25 µs, 100 between 25 and 50 µs; 0 misses.
        let b = at(
            &format!("quire_requests_total{{cache=\"hit\"}} 1100\nquire_requests_total{{cache=\"miss\"}} 10\n{h}\"0.000025\"}} 950\n{h}\"0.00005\"}} 1100\n{h}\"+Inf\"}} 1100\nquire_fills_in_flight 3\n"),
            2,
        );
        let f = frame(&a, &b);
        assert!((f.rps - 500.0).abs() < 1e-6, "{f:?}");
        assert_eq!(f.hit_ratio, Some(1.0));
        let [p50, p99, _] = f.hit_latency.unwrap();
        // p50: rank 500 of 1000, inside the first bucket: 25 µs × 500/900.
        assert!((p50 - 25e-6 * 500.0 / 900.0).abs() < 1e-9, "{p50}");
        // p99: rank 990, inside the second: 25 + 25 × 90/100 µs.
        assert!((p99 - 47.5e-6).abs() < 1e-9, "{p99}");
        assert_eq!(f.miss_latency, None);
        assert_eq!(f.fills_in_flight, 3.0);
        let text = f.lines("http://x").join("\n");
        assert!(text.contains("requests        500/s"), "{text}");
        assert!(text.contains("misses  (none in this interval)"), "{text}");
    }

    #[test]
    fn each_origin_has_its_line_with_its_health() {
        let r = "quire_origin_requests_total{origin=";
        let a = at(
            &format!(
                "{r}\"http://a:1/\",result=\"ok\"}} 10\n{r}\"http://a:1/\",result=\"error\"}} 0\n"
            ),
            0,
        );
        let b = at(
            &format!("{r}\"http://a:1/\",result=\"ok\"}} 30\n{r}\"http://a:1/\",result=\"error\"}} 4\n{r}\"http://a:1/\",result=\"timeout\"}} 2\nquire_origin_up{{origin=\"http://a:1/\"}} 0\n"),
            2,
        );
        let f = frame(&a, &b);
        assert_eq!(
            f.origins,
            vec![OriginRow {
                url: "http://a:1/".into(),
                up: Some(false),
                ok_per_s: 10.0,
                failed_per_s: 3.0
            }]
        );
        let text = f.lines("http://x").join("\n");
        assert!(
            text.contains("origin DOWN http://a:1/   10/s answered   3.0/s failed"),
            "{text}"
        );
    }
}
