//! What a benchmark reports: one [`Run`] per server and round (the JSON shape other
//! tools read, plus the machine's state and the run's own figures over
//! time), the table on the terminal, and the ratios of medians. Over TLS a subject
//! is a server and a protocol (`quire/tls-h2`): ratios compare servers within one
//! protocol, and the report adds what TLS negotiated and the handshakes per second.
//! With the machine's floor among the subjects (`--peer floor`), every run's CPU per
//! request is also a multiple of the floor's median (`x floor`).

use super::load::LoadResult;
use super::plot;
use super::procstat::Quiet;
use super::tls::{self, Negotiated, Protocol};

/// One run of one server.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Run {
    /// `quire`, `uncached`, `signed-in`, `nginx`, `varnish`, `target`.
    pub server: String,
    /// Which round (1-based).
    pub round: usize,
    /// Requests completed per second.
    pub requests_per_sec: f64,
    /// Latency percentiles, milliseconds.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th.
    pub p99_ms: f64,
    /// 99.9th.
    pub p999_ms: f64,
    /// 99.99th.
    pub p9999_ms: f64,
    /// Largest latency seen (the built-in generator only; 0 with wrk).
    pub max_ms: f64,
    /// Connect, read, write, timeout and parse errors.
    pub errors: u64,
    /// Answers other than 2xx/3xx.
    pub non_2xx: u64,
    /// Response bytes per second.
    pub bytes_per_sec: f64,
    /// Server CPU, percent of one core.
    pub server_cpu_pct: f64,
    /// Server CPU per request, microseconds (what a request costs, whatever the
    /// generator could deliver).
    pub server_us_per_request: f64,
    /// Server CPU per request over the floor's median (`--peer floor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_x_floor: Option<f64>,
    /// Load generator CPU, percent of one core.
    pub loadgen_cpu_pct: f64,
    /// Everything else's CPU, percent of one core.
    pub other_cpu_pct: f64,
    /// Steal, percent of all CPU time.
    pub steal_pct: f64,
    /// Open loop: the target rate; `None`: closed loop.
    pub rate: Option<f64>,
    /// Open loop: requests due but never sent.
    pub unsent: u64,
    /// Requests per second in each whole second (empty with wrk).
    pub per_second: Vec<f64>,
    /// `[percentile, microseconds]` of the latency distribution.
    pub latency: Vec<(f64, f64)>,
    /// Over TLS: what was measured (`HTTP/2 over TLS`); absent in cleartext runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Over TLS: what the generator saw negotiated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<Negotiated>,
    /// Why the figures may not be the server's.
    pub warnings: Vec<String>,
    #[serde(skip)]
    timeline: Vec<u64>,
}

/// Length of a timeline interval of the built-in generator, milliseconds.
const STEP_MS: u64 = 100;

impl Run {
    /// The run of `server` in `round` from the generator's result and the machine's.
    pub(crate) fn new(
        server: &str,
        round: usize,
        r: &LoadResult,
        q: &Quiet,
        mut warnings: Vec<String>,
    ) -> Run {
        let secs = (r.duration_us as f64 / 1e6).max(1e-9);
        let rps = r.requests as f64 / secs;
        if r.errors > 0 || r.non_2xx > 0 {
            warnings.push(format!(
                "{} errors and {} non-2xx/3xx answers",
                r.errors, r.non_2xx
            ));
        }
        if r.unsent > 0 {
            warnings.push(format!(
                "{} requests were due but no connection was free: the server did not keep up with the rate",
                r.unsent
            ));
        }
        Run {
            server: server.into(),
            round,
            requests_per_sec: rps,
            p50_ms: r.p50_us / 1e3,
            p90_ms: r.p90_us / 1e3,
            p99_ms: r.p99_us / 1e3,
            p999_ms: r.p999_us / 1e3,
            p9999_ms: r.p9999_us / 1e3,
            max_ms: r.max_us / 1e3,
            errors: r.errors,
            non_2xx: r.non_2xx,
            bytes_per_sec: r.bytes as f64 / secs,
            server_cpu_pct: q.server_cpu_pct,
            server_us_per_request: if r.requests > 0 {
                q.server_cpu_pct / 100.0 * secs * 1e6 / r.requests as f64
            } else {
                0.0
            },
            cpu_x_floor: None,
            loadgen_cpu_pct: q.loadgen_cpu_pct,
            other_cpu_pct: q.other_cpu_pct,
            steal_pct: q.steal_pct,
            rate: r.rate,
            unsent: r.unsent,
            per_second: plot::per_second(&r.timeline, STEP_MS),
            latency: r.latency.clone(),
            protocol: None,
            tls: r.tls.clone(),
            warnings,
            timeline: r.timeline.clone(),
        }
    }

    /// The run as a line on the plot.
    pub(crate) fn series(&self) -> plot::Series {
        plot::Series {
            server: self.server.clone(),
            latency: self.latency.clone(),
            timeline: self.timeline.clone(),
            step_ms: STEP_MS,
        }
    }
}

/// The median of `server`'s values of `f`.
pub(crate) fn median(runs: &[Run], server: &str, f: impl Fn(&Run) -> f64) -> Option<f64> {
    let mut v: Vec<f64> = runs.iter().filter(|r| r.server == server).map(f).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// The subject name of the machine's floor.
pub(crate) const FLOOR: &str = "floor";

/// The floor's median CPU per request, when it ran and used some.
fn floor_us(runs: &[Run]) -> Option<f64> {
    median(runs, FLOOR, |r| r.server_us_per_request).filter(|us| *us > 0.0)
}

/// Sets every run's CPU per request as a multiple of the floor's median (nothing
/// without a floor).
pub(crate) fn against_floor(runs: &mut [Run]) {
    let Some(floor) = floor_us(runs) else {
        return;
    };
    for r in runs {
        r.cpu_x_floor = Some(r.server_us_per_request / floor);
    }
}

/// Each subject's median CPU per request over the floor's, keyed by name (empty
/// without a floor).
pub(crate) fn floor_multiples(
    runs: &[Run],
    names: &[&str],
) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    let Some(floor) = floor_us(runs) else {
        return out;
    };
    for name in names {
        if let Some(us) = median(runs, name, |r| r.server_us_per_request) {
            out.insert((*name).into(), (us / floor).into());
        }
    }
    out
}

/// Prints the CPU per request of every subject as a multiple of the floor's.
pub(crate) fn print_floor(runs: &[Run], names: &[&str]) {
    let x = floor_multiples(runs, names);
    let Some(floor) = floor_us(runs) else {
        return;
    };
    let parts: Vec<String> = names
        .iter()
        .filter(|n| **n != FLOOR)
        .filter_map(|n| Some(format!("{n} {:.2}x", x.get(*n)?.as_f64()?)))
        .collect();
    println!(
        "server CPU per request over the floor's ({floor:.1} us, medians): {}",
        parts.join(", ")
    );
}

/// The protocol label of a subject's name (`quire/tls-h2` → `tls-h2`); `None` in
/// cleartext runs.
fn label_of(name: &str) -> Option<&str> {
    name.split_once('/').map(|(_, p)| p)
}

/// The subject `name` is compared with: the first of `names` measured the same way
/// (in cleartext runs, the first of all).
fn reference_of<'a>(names: &[&'a str], name: &str) -> Option<&'a str> {
    names
        .iter()
        .copied()
        .find(|n| label_of(n) == label_of(name))
}

/// The first server's median requests/s over each other's (`uncached`: cached over
/// uncached), keyed by the other's name; over TLS, within each protocol
/// (`nginx/tls-h2`: quire's over nginx's, both over HTTP/2).
pub(crate) fn ratios(runs: &[Run], names: &[&str]) -> serde_json::Map<String, serde_json::Value> {
    let mut out = serde_json::Map::new();
    for name in names {
        let Some(reference) = reference_of(names, name).filter(|r| r != name) else {
            continue;
        };
        let rps = |n| median(runs, n, |r| r.requests_per_sec);
        if let (Some(a), Some(b)) = (rps(reference), rps(name)) {
            out.insert((*name).into(), (a / b.max(1e-9)).into());
        }
    }
    out
}

/// Prints the ratios: `quire/nginx: 1.70x`, `cached/uncached: 25.1x`; over TLS one
/// line per protocol, with both servers' p99 and CPU per request.
pub(crate) fn print_ratios(
    runs: &[Run],
    names: &[&str],
    ratios: &serde_json::Map<String, serde_json::Value>,
) {
    // Cleartext: the map's order, as always; over TLS the subjects' order.
    let order: Vec<&str> = if names.iter().any(|n| n.contains('/')) {
        names.to_vec()
    } else {
        ratios.keys().map(String::as_str).collect()
    };
    for peer in order {
        let Some(x) = ratios.get(peer) else {
            continue;
        };
        let x = x.as_f64().unwrap_or(0.0);
        let (Some((server, label)), Some(reference)) =
            (peer.split_once('/'), reference_of(names, peer))
        else {
            match peer {
                "uncached" => println!("cached/uncached: {x:.1}x (medians of requests/s)"),
                p => println!("{}/{p}: {x:.2}x (medians of requests/s)", names[0]),
            }
            continue;
        };
        let p = Protocol::from_label(label).unwrap_or(Protocol::Https1);
        let first = reference.split_once('/').map_or(reference, |(s, _)| s);
        if server == "uncached" {
            println!(
                "cached/uncached, {}: {x:.1}x (medians of requests/s)",
                p.describe()
            );
            continue;
        }
        let m = |n: &str, f: fn(&Run) -> f64| median(runs, n, f).unwrap_or(0.0);
        println!(
            "{first}/{server}, {}: {x:.2}x (medians of {unit}/s); p99 {:.2} vs {:.2} ms; server CPU {:.1} vs {:.1} us per {}",
            p.describe(),
            m(reference, |r| r.p99_ms),
            m(peer, |r| r.p99_ms),
            m(reference, |r| r.server_us_per_request),
            m(peer, |r| r.server_us_per_request),
            p.unit().trim_end_matches('s'),
            unit = p.unit(),
        );
    }
}

/// What is wrong with what a TLS run negotiated (`None`: what the clients offered,
/// and the ALPN protocol `p` needs).
pub(crate) fn tls_warning(p: Protocol, seen: Option<&Negotiated>) -> Option<String> {
    let Some(n) = seen else {
        return Some("the generator did not say what TLS negotiated".into());
    };
    if n.alpn != p.alpn() {
        return Some(format!(
            "ALPN selected {:?}, not {:?}: the run did not measure {}",
            n.alpn,
            p.alpn(),
            p.describe()
        ));
    }
    (n.cipher != tls::CIPHER || n.group != tls::GROUP).then(|| {
        format!(
            "negotiated {} with {}, not {} with {}",
            n.cipher,
            n.group,
            tls::CIPHER,
            tls::GROUP
        )
    })
}

/// Prints what TLS negotiated (one line when every run agrees) and the handshakes
/// per second of each server.
pub(crate) fn print_tls(runs: &[Run]) {
    let mut seen: Vec<(String, String)> = Vec::new();
    for r in runs {
        let n = r.tls.as_ref().map_or("nothing reported".into(), |n| {
            format!("{}, {}, {}", n.version, n.cipher, n.group)
        });
        if !seen.iter().any(|(s, m)| *s == r.server && *m == n) {
            seen.push((r.server.clone(), n));
        }
    }
    match seen.first() {
        Some((_, n)) if seen.iter().all(|(_, m)| m == n) => {
            println!("TLS: every run negotiated {n} (the clients offer only these)");
        }
        _ => {
            for (server, n) in &seen {
                println!("TLS: {server} negotiated {n}");
            }
        }
    }
    let mut hs = Vec::new();
    for r in runs {
        let Some((server, label)) = r.server.split_once('/') else {
            continue;
        };
        if Protocol::from_label(label) == Some(Protocol::Handshake) && !hs.contains(&server) {
            let rate = median(runs, &r.server, |r| r.requests_per_sec).unwrap_or(0.0);
            let us = median(runs, &r.server, |r| r.server_us_per_request).unwrap_or(0.0);
            println!(
                "handshakes: {server} {rate:.0}/s, {us:.1} us of server CPU each (medians; a new \
                 connection, a full TLS 1.3 handshake without resumption and one GET each)"
            );
            hs.push(server);
        }
    }
}

/// How a sustained run's rate moved, from its requests per second in each second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Spread {
    /// Slowest second.
    pub min: f64,
    /// Median second.
    pub median: f64,
    /// Fastest second.
    pub max: f64,
    /// Mean of the first 60 seconds.
    pub first_minute: f64,
    /// Mean of the last 60 seconds.
    pub last_minute: f64,
}

impl Spread {
    /// The spread of a run of a minute or more; `None` for a shorter one.
    pub(crate) fn of(per_second: &[f64]) -> Option<Spread> {
        if per_second.len() < 60 {
            return None;
        }
        let mut v = per_second.to_vec();
        v.sort_by(f64::total_cmp);
        let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
        Some(Spread {
            min: v[0],
            median: v[v.len() / 2],
            max: v[v.len() - 1],
            first_minute: mean(&per_second[..60]),
            last_minute: mean(&per_second[per_second.len() - 60..]),
        })
    }
}

/// Prints the table: one line per run, medians per server, and each run's
/// warnings; a sustained run (a minute or more) also gets its per-second spread.
pub(crate) fn print(runs: &[Run], names: &[&str]) {
    // The run column fits `name round`: 12 wide, wider for TLS subjects' names.
    let w = names.iter().map(|n| n.len() + 3).max().unwrap_or(0).max(12);
    let floor = runs.iter().any(|r| r.cpu_x_floor.is_some());
    let x_floor = |r: &Run| match (floor, r.cpu_x_floor) {
        (false, _) => String::new(),
        (true, Some(x)) => format!(" {x:>7.2}"),
        (true, None) => format!(" {:>7}", "-"),
    };
    println!(
        "{:>w$} {:>11} {:>8} {:>8} {:>8} {:>9} {:>10} {:>7} {:>9} {:>8}{} {:>8} {:>7} {:>6}",
        "run",
        "requests/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "p99.99 ms",
        "errors",
        "server",
        "us/req",
        if floor { " x floor" } else { "" },
        "loadgen",
        "others",
        "steal"
    );
    for r in runs {
        println!(
            "{:>w$} {:>11.0} {:>8.2} {:>8.2} {:>8.2} {:>9.2} {:>10.2} {:>7} {:>8.0}% {:>8.1}{} {:>7.0}% {:>6.0}% {:>5.1}%",
            format!("{} {}", r.server, r.round),
            r.requests_per_sec,
            r.p50_ms,
            r.p90_ms,
            r.p99_ms,
            r.p999_ms,
            r.p9999_ms,
            r.errors + r.non_2xx,
            r.server_cpu_pct,
            r.server_us_per_request,
            x_floor(r),
            r.loadgen_cpu_pct,
            r.other_cpu_pct,
            r.steal_pct
        );
        if let Some(sp) = Spread::of(&r.per_second) {
            println!(
                "{:>w$} per second: min {:.0}, median {:.0}, max {:.0}; first minute {:.0}/s, last minute {:.0}/s",
                "", sp.min, sp.median, sp.max, sp.first_minute, sp.last_minute
            );
        }
        for warning in &r.warnings {
            println!("{:>w$} warning: {warning}", "");
        }
    }
    if runs.len() > names.len() {
        for n in names {
            if let (Some(rps), Some(p99)) = (
                median(runs, n, |r| r.requests_per_sec),
                median(runs, n, |r| r.p99_ms),
            ) {
                let us = median(runs, n, |r| r.server_us_per_request).unwrap_or(0.0);
                let x = match floor_us(runs) {
                    Some(f) if *n != FLOOR => format!(" ({:.2}x the floor's)", us / f),
                    _ => String::new(),
                };
                let worst = runs
                    .iter()
                    .filter(|r| r.server == *n)
                    .map(|r| r.p9999_ms)
                    .fold(0.0, f64::max);
                // (The median round's too: a host's hiccup lands in one round of any
                // server, the floor's included, and the worst alone reads it as the
                // server's.)
                let p9999 = median(runs, n, |r| r.p9999_ms).unwrap_or(0.0);
                println!(
                    "{:>w$} {rps:>11.0} requests/s (median), p99 {p99:.2} ms, p99.99 {p9999:.2} ms (median), {worst:.2} ms at worst, {us:.1} us of server CPU per request{x}",
                    n,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(server: &str, rps: f64) -> Run {
        let r = LoadResult {
            requests: (rps * 10.0) as u64,
            duration_us: 10_000_000,
            timeline: vec![rps as u64 / 10; 100],
            ..LoadResult::default()
        };
        let q = Quiet {
            server_cpu_pct: 50.0,
            loadgen_cpu_pct: 10.0,
            ..Quiet::default()
        };
        Run::new(server, 1, &r, &q, Vec::new())
    }

    #[test]
    fn medians_and_ratios_of_rounds() {
        let runs = [
            run("quire", 300.0),
            run("quire", 100.0),
            run("quire", 200.0),
            run("nginx", 100.0),
            run("nginx", 50.0),
        ];
        assert_eq!(median(&runs, "quire", |r| r.requests_per_sec), Some(200.0));
        assert_eq!(median(&runs, "nginx", |r| r.requests_per_sec), Some(75.0));
        assert_eq!(median(&runs, "varnish", |r| r.requests_per_sec), None);
        let x = ratios(&runs, &["quire", "nginx", "varnish"]);
        assert!((x["nginx"].as_f64().unwrap() - 200.0 / 75.0).abs() < 1e-9);
        assert!(!x.contains_key("varnish"), "no runs, no ratio");
        // Half a core for 10 s over 3,000 requests: 1,666.7 us each.
        let r = &runs[0];
        assert!((r.server_us_per_request - 5e6 / 3000.0).abs() < 1e-6);
        assert_eq!(r.per_second.len(), 10);
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn cpu_per_request_is_a_multiple_of_the_floors_median() {
        // `run` gives half a core over 10 s: 5e6 us over rps * 10 requests.
        let mut runs = [
            run("quire", 1000.0),
            run("quire", 500.0),
            run("nginx", 250.0),
            run("floor", 2000.0),
            run("floor", 1000.0),
            run("floor", 4000.0),
        ];
        assert!(floor_multiples(&runs[..3], &["quire", "nginx"]).is_empty());
        against_floor(&mut runs[..2]);
        assert_eq!(runs[0].cpu_x_floor, None, "no floor, no multiple");
        against_floor(&mut runs);
        // The floor's median: 2,000/s, 250 us; quire's median 750 us (of 500 and
        // 1,000 us); nginx 2,000 us.
        let x = floor_multiples(&runs, &["quire", "nginx", "floor"]);
        assert!((x["quire"].as_f64().unwrap() - 3.0).abs() < 1e-9);
        assert!((x["nginx"].as_f64().unwrap() - 8.0).abs() < 1e-9);
        assert!((x["floor"].as_f64().unwrap() - 1.0).abs() < 1e-9);
        assert!((runs[0].cpu_x_floor.unwrap() - 2.0).abs() < 1e-9);
        assert!((runs[4].cpu_x_floor.unwrap() - 2.0).abs() < 1e-9);
        let json = serde_json::to_value(&runs[0]).unwrap();
        assert!((json["cpu_x_floor"].as_f64().unwrap() - 2.0).abs() < 1e-9);
    }

    #[test]
    fn a_sustained_run_reports_its_spread() {
        assert_eq!(Spread::of(&[100.0; 59]), None, "under a minute");
        // Two minutes: 100/s, then 200/s, with one slow second.
        let mut secs = vec![100.0; 60];
        secs.extend([200.0; 60]);
        secs[70] = 10.0;
        let sp = Spread::of(&secs).unwrap();
        // Sorted: 10, sixty 100s, fifty-nine 200s; the median is the 61st.
        assert_eq!((sp.min, sp.median, sp.max), (10.0, 100.0, 200.0));
        assert_eq!(sp.first_minute, 100.0);
        assert!((sp.last_minute - (59.0 * 200.0 + 10.0) / 60.0).abs() < 1e-9);
    }

    #[test]
    fn errors_and_unsent_requests_warn() {
        let r = LoadResult {
            requests: 10,
            duration_us: 1_000_000,
            errors: 2,
            unsent: 5,
            ..LoadResult::default()
        };
        let run = Run::new("quire", 1, &r, &Quiet::default(), vec!["cold".into()]);
        assert_eq!(run.warnings.len(), 3);
    }
}
