//! The metrics' unit tests: counts recorded appear in the rendering, every label
//! value is present at zero, and the text is well-formed Prometheus exposition.

use super::render::float;
use super::*;
use quire_store::Stats;
use std::collections::HashSet;
use std::sync::Arc;

fn render(m: &Metrics) -> String {
    m.render(&Stats::default(), Duration::from_secs(7))
}

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

fn has_line(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

fn sample(text: &str, series: &str) -> String {
    let prefix = format!("{series} ");
    let found: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix(prefix.as_str()))
        .collect();
    assert_eq!(found.len(), 1, "{series} appears {} times", found.len());
    found[0].to_owned()
}

#[test]
fn fill_path_families_are_written_with_their_values() {
    let mut out = String::new();
    write_fill_path(
        &mut out,
        &FillPath {
            slots_used: 3,
            compress_held_bytes: 4096,
            compress_budget_bytes: 1 << 20,
            compress_jobs: 7,
            compress_refused: 2,
            log_overruns: 1,
        },
    );
    for line in [
        "# TYPE quire_fill_slots_used gauge",
        "quire_fill_slots_used 3",
        "quire_compress_held_bytes 4096",
        "quire_compress_budget_bytes 1048576",
        "# TYPE quire_compress_jobs_total counter",
        "quire_compress_jobs_total 7",
        "quire_compress_refused_total 2",
        "quire_invalidation_log_overruns_total 1",
    ] {
        assert!(out.lines().any(|l| l == line), "missing {line:?} in\n{out}");
    }
}

#[test]
fn labels_are_distinct_and_in_all_order() {
    let labels: HashSet<_> = Outcome::ALL.iter().map(|o| o.label()).collect();
    assert_eq!(labels.len(), 8);
    for (i, o) in Outcome::ALL.iter().enumerate() {
        assert_eq!(o.index(), i);
    }
    let labels: HashSet<_> = FillResult::ALL.iter().map(|f| f.label()).collect();
    assert_eq!(labels.len(), 8);
    for (i, f) in FillResult::ALL.iter().enumerate() {
        assert_eq!(f.index(), i);
    }
}

#[test]
fn recorded_counts_appear_in_render() {
    let m = Metrics::new();
    for _ in 0..3 {
        m.record_request(Outcome::Hit, 200, 100);
    }
    m.record_request(Outcome::Miss, 200, 50);
    m.record_request(Outcome::Error, 502, 7);
    m.record_request(Outcome::Revalidated, 304, 0);
    m.record_fill(FillResult::Stored);
    m.record_fill(FillResult::Stored);
    m.record_fill(FillResult::TooLarge);
    m.record_coalesced();
    m.record_purge(4);
    m.record_purge(5);
    m.connections().store(12, Ordering::Relaxed);
    m.fills_in_flight().store(-1, Ordering::Relaxed);
    let t = render(&m);
    for line in [
        "quire_requests_total{cache=\"hit\"} 3",
        "quire_requests_total{cache=\"miss\"} 1",
        "quire_requests_total{cache=\"error\"} 1",
        "quire_requests_total{cache=\"revalidated\"} 1",
        "quire_requests_total{cache=\"stale\"} 0",
        "quire_responses_total{code=\"2xx\"} 4",
        "quire_responses_total{code=\"3xx\"} 1",
        "quire_responses_total{code=\"5xx\"} 1",
        "quire_responses_total{code=\"4xx\"} 0",
        "quire_response_body_bytes_total 357",
        "quire_hit_ratio 0.8",
        "quire_fills_total{result=\"stored\"} 2",
        "quire_fills_total{result=\"too_large\"} 1",
        "quire_fills_total{result=\"failed\"} 0",
        "quire_fills_coalesced_total 1",
        "quire_purged_entries_total 9",
        "quire_connections_open 12",
        "quire_fills_in_flight -1",
        "quire_uptime_seconds 7",
    ] {
        assert!(has_line(&t, line), "missing {line:?} in\n{t}");
    }
    assert_eq!(m.requests(Outcome::Hit), 3);
    assert_eq!(m.requests(Outcome::Admin), 0);
}

#[test]
fn every_label_present_at_zero() {
    let t = render(&Metrics::default());
    for o in Outcome::ALL {
        let line = format!("quire_requests_total{{cache=\"{}\"}} 0", o.label());
        assert!(has_line(&t, &line), "missing {line}");
    }
    for f in FillResult::ALL {
        let line = format!("quire_fills_total{{result=\"{}\"}} 0", f.label());
        assert!(has_line(&t, &line), "missing {line}");
    }
    for c in CLASS_LABELS {
        let line = format!("quire_responses_total{{code=\"{c}\"}} 0");
        assert!(has_line(&t, &line), "missing {line}");
    }
    assert!(has_line(&t, "quire_hit_ratio NaN"));
    assert!(has_line(&t, "quire_origin_errors_total 0"));
    assert!(has_line(
        &t,
        "quire_origin_request_duration_seconds_bucket{le=\"+Inf\"} 0"
    ));
}

#[test]
fn status_classes_and_out_of_range() {
    assert_eq!(class_index(100), 0);
    assert_eq!(class_index(199), 0);
    assert_eq!(class_index(200), 1);
    assert_eq!(class_index(399), 2);
    assert_eq!(class_index(404), 3);
    assert_eq!(class_index(599), 4);
    assert_eq!(class_index(0), 5);
    assert_eq!(class_index(99), 5);
    assert_eq!(class_index(600), 5);
    assert_eq!(class_index(u16::MAX), 5);

    let m = Metrics::new();
    m.record_request(Outcome::Pass, 99, 0);
    m.record_request(Outcome::Pass, 600, 0);
    m.record_request(Outcome::Pass, 101, 0);
    let t = render(&m);
    assert!(has_line(&t, "quire_responses_total{code=\"other\"} 2"));
    assert!(has_line(&t, "quire_responses_total{code=\"1xx\"} 1"));
    assert!(has_line(&t, "quire_requests_total{cache=\"pass\"} 3"));
}

#[test]
fn histogram_is_cumulative_and_consistent() {
    let m = Metrics::new();
    m.record_origin(Duration::from_millis(1), false);
    m.record_origin(Duration::from_millis(3), false);
    m.record_origin(Duration::from_secs(60), false);
    m.record_origin(Duration::from_micros(10), false);
    // Failures count as errors, not as observations.
    m.record_origin(Duration::from_secs(30), true);
    let t = render(&m);
    let name = "quire_origin_request_duration_seconds";

    let mut prev = 0u64;
    for (_, le) in latency::BOUNDS {
        let n: u64 = sample(&t, &format!("{name}_bucket{{le=\"{le}\"}}"))
            .parse()
            .unwrap();
        assert!(n >= prev, "bucket {le} = {n} < {prev}");
        prev = n;
    }
    let inf: u64 = sample(&t, &format!("{name}_bucket{{le=\"+Inf\"}}"))
        .parse()
        .unwrap();
    let count: u64 = sample(&t, &format!("{name}_count")).parse().unwrap();
    assert!(inf >= prev);
    assert_eq!(inf, count);
    assert_eq!(count, 4);
    assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"0.0005\"}}")), "1");
    assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"0.001\"}}")), "2");
    assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"0.0025\"}}")), "2");
    assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"0.005\"}}")), "3");
    assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"10\"}}")), "3");
    assert_eq!(sample(&t, &format!("{name}_sum")), "60.00401");
    assert!(has_line(&t, "quire_origin_errors_total 1"));
}

#[test]
fn histogram_sum_in_seconds() {
    let m = Metrics::new();
    m.record_origin(Duration::from_millis(1), false);
    m.record_origin(Duration::from_millis(3), false);
    let t = render(&m);
    assert!(has_line(
        &t,
        "quire_origin_request_duration_seconds_sum 0.004"
    ));
    assert!(has_line(
        &t,
        "quire_origin_request_duration_seconds_count 2"
    ));
}

#[test]
fn bucket_bounds_are_inclusive() {
    let name = "quire_origin_request_duration_seconds";
    for (i, &(bound, le)) in latency::BOUNDS.iter().enumerate() {
        let m = Metrics::new();
        let nanos = bound;
        m.record_origin(Duration::from_nanos(nanos), false);
        // One nanosecond past the bound goes to the next bucket.
        m.record_origin(Duration::from_nanos(nanos + 1), false);
        let t = render(&m);
        assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"{le}\"}}")), "1");
        if i > 0 {
            let below = latency::BOUNDS[i - 1].1;
            assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"{below}\"}}")), "0");
        }
        if let Some(&(_, above)) = latency::BOUNDS.get(i + 1) {
            assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"{above}\"}}")), "2");
        }
    }
}

#[test]
fn bucket_labels_match_bounds() {
    for (nanos, le) in latency::BOUNDS {
        let secs: f64 = le.parse().unwrap();
        assert_eq!((secs * 1e9).round() as u64, nanos, "{le}");
        assert_eq!(float(nanos as f64 / 1e9), le);
    }
}

#[test]
fn hit_ratio_none_then_some() {
    let m = Metrics::new();
    assert_eq!(m.hit_ratio(), None);
    m.record_request(Outcome::Bypass, 200, 0);
    m.record_request(Outcome::Admin, 200, 0);
    assert_eq!(m.hit_ratio(), None, "bypass and admin do not count");
    m.record_request(Outcome::Miss, 200, 0);
    assert_eq!(m.hit_ratio(), Some(0.0));
    m.record_request(Outcome::Hit, 200, 0);
    m.record_request(Outcome::Stale, 200, 0);
    m.record_request(Outcome::Revalidated, 304, 0);
    assert_eq!(m.hit_ratio(), Some(0.75));
    assert!(has_line(&render(&m), "quire_hit_ratio 0.75"));
}

#[test]
fn floats_render_as_prometheus_parses() {
    assert_eq!(float(0.0005), "0.0005");
    assert_eq!(float(1.0), "1");
    assert_eq!(float(2.5), "2.5");
    assert_eq!(float(0.0), "0");
    assert_eq!(float(f64::NAN), "NaN");
    assert_eq!(float(f64::INFINITY), "+Inf");
    assert_eq!(float(f64::NEG_INFINITY), "-Inf");
    assert!(!float(1e300).contains('e'));
}

fn is_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

fn is_name_char(c: char) -> bool {
    is_name_start(c) || c.is_ascii_digit()
}

/// Checks `^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [^ ]+$` and returns the name.
fn parse_sample(line: &str) -> Option<&str> {
    let end = line.find(|c: char| !is_name_char(c)).unwrap_or(line.len());
    let name = &line[..end];
    if !name.starts_with(is_name_start) {
        return None;
    }
    let mut rest = &line[end..];
    if let Some(labels) = rest.strip_prefix('{') {
        let close = labels.find('}')?;
        rest = &labels[close + 1..];
    }
    let value = rest.strip_prefix(' ')?;
    if value.is_empty() || value.contains(' ') {
        return None;
    }
    Some(name)
}

#[test]
fn parse_sample_checks_the_pattern() {
    assert_eq!(parse_sample("a_b:c 1"), Some("a_b:c"));
    assert_eq!(parse_sample("a{x=\"y\"} NaN"), Some("a"));
    assert_eq!(parse_sample("1a 1"), None);
    assert_eq!(parse_sample("a  1"), None);
    assert_eq!(parse_sample("a 1 2"), None);
    assert_eq!(parse_sample("a{x=\"y\" 1"), None);
    assert_eq!(parse_sample("a"), None);
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario: every family recorded, rendered, then checked line by line"
)]
fn render_is_well_formed() {
    let m = Metrics::new();
    m.record_request(Outcome::Hit, 200, 10);
    m.record_origin(Duration::from_millis(2), false);
    let store = Stats {
        hits: 1,
        misses: 2,
        admitted: 3,
        rejected: 4,
        evicted: 5,
        carried: 6,
        ram_hits: 7,
        bytes_used: 8,
        bytes_live: 9,
        cap_bytes: 10,
        entries: 11,
        index_bytes: 12,
        tag_index_bytes: 13,
        ram_bytes: 14,
        huge_pages: true,
    };
    let t = m.render(&store, Duration::from_millis(1500));
    assert!(t.ends_with('\n'));

    let mut help: HashSet<String> = HashSet::new();
    let mut types: Vec<(String, String)> = Vec::new();
    let mut sampled: HashSet<String> = HashSet::new();
    for line in lines(&t) {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap().to_owned();
            assert!(help.insert(name.clone()), "HELP twice for {name}");
            assert!(!sampled.contains(&name), "HELP after samples of {name}");
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut parts = rest.split(' ');
            let name = parts.next().unwrap().to_owned();
            let kind = parts.next().unwrap().to_owned();
            assert!(parts.next().is_none());
            assert!(["counter", "gauge", "histogram"].contains(&kind.as_str()));
            assert!(help.contains(&name), "TYPE before HELP for {name}");
            assert!(types.iter().all(|(n, _)| *n != name), "TYPE twice: {name}");
            types.push((name, kind));
            continue;
        }
        assert!(!line.starts_with('#'), "unexpected comment {line:?}");
        let name = parse_sample(line).unwrap_or_else(|| panic!("malformed {line:?}"));
        // The family this sample belongs to is the last TYPE declared.
        let (family, kind) = types.last().expect("sample before any TYPE");
        let ok = match kind.as_str() {
            "histogram" => ["_bucket", "_sum", "_count"]
                .iter()
                .any(|s| name.strip_suffix(s) == Some(family.as_str())),
            _ => name == family,
        };
        assert!(ok, "{name} is not in family {family}");
        if kind == "counter" {
            assert!(name.ends_with("_total"), "{name}");
        }
        let value = line.rsplit(' ').next().unwrap();
        assert!(
            value.parse::<f64>().is_ok() || ["NaN", "+Inf", "-Inf"].contains(&value),
            "value {value:?}"
        );
        sampled.insert(family.clone());
    }
    // Every family declared has samples, and every expected family is there.
    for (name, _) in &types {
        assert!(sampled.contains(name), "{name} has no samples");
    }
    for name in [
        "quire_requests_total",
        "quire_responses_total",
        "quire_response_body_bytes_total",
        "quire_hit_ratio",
        "quire_origin_request_duration_seconds",
        "quire_origin_errors_total",
        "quire_fills_total",
        "quire_fills_coalesced_total",
        "quire_audience_requests_total",
        "quire_previous_version_hits_total",
        "quire_prefetches_refused_total",
        "quire_agents_refused_total",
        "quire_refresh_ahead_total",
        "quire_cold_reads_total",
        "quire_prefills_total",
        "quire_fills_busy_total",
        "quire_fastpath_handovers_total",
        "quire_fastpath_repeats_total",
        "quire_fastpath_repeat_bytes",
        "quire_fastpath_parked",
        "quire_fastpath_handoffs_total",
        "quire_tls_handshakes_total",
        "quire_connections_refused_total",
        "quire_connections_reaped_total",
        "quire_send_stalls_total",
        "quire_purged_entries_total",
        "quire_connections_open",
        "quire_fills_in_flight",
        "quire_uptime_seconds",
        "quire_store_hits_total",
        "quire_store_misses_total",
        "quire_store_admitted_total",
        "quire_store_rejected_total",
        "quire_store_evicted_total",
        "quire_store_carried_total",
        "quire_store_ram_hits_total",
        "quire_store_bytes_used",
        "quire_store_bytes_live",
        "quire_store_capacity_bytes",
        "quire_store_entries",
        "quire_store_index_bytes",
        "quire_store_tag_index_bytes",
        "quire_store_ram_bytes",
        "quire_store_huge_pages",
        "quire_request_duration_seconds",
    ] {
        assert!(sampled.contains(name), "missing family {name}");
    }
    assert_eq!(types.len(), 45);

    for line in [
        "quire_store_hits_total 1",
        "quire_store_misses_total 2",
        "quire_store_admitted_total 3",
        "quire_store_rejected_total 4",
        "quire_store_evicted_total 5",
        "quire_store_carried_total 6",
        "quire_store_ram_hits_total 7",
        "quire_store_bytes_used 8",
        "quire_store_bytes_live 9",
        "quire_store_capacity_bytes 10",
        "quire_store_entries 11",
        "quire_store_index_bytes 12",
        "quire_store_tag_index_bytes 13",
        "quire_store_ram_bytes 14",
        "quire_store_huge_pages 1",
        "quire_uptime_seconds 1.5",
        "# TYPE quire_origin_request_duration_seconds histogram",
        "# TYPE quire_hit_ratio gauge",
        "# TYPE quire_store_entries gauge",
    ] {
        assert!(has_line(&t, line), "missing {line:?}");
    }
}

#[test]
fn concurrent_recording_is_exact() {
    const THREADS: u64 = 8;
    const ADDS: u64 = 10_000;
    let m = Arc::new(Metrics::new());
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let m = Arc::clone(&m);
            std::thread::spawn(move || {
                for i in 0..ADDS {
                    m.record_request(Outcome::Hit, 200, 3);
                    m.record_fill(FillResult::Stored);
                    m.record_origin(Duration::from_micros(i % 2000), false);
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let total = THREADS * ADDS;
    assert_eq!(m.requests(Outcome::Hit), total);
    let t = render(&m);
    assert!(has_line(
        &t,
        &format!("quire_requests_total{{cache=\"hit\"}} {total}")
    ));
    assert!(has_line(
        &t,
        &format!("quire_responses_total{{code=\"2xx\"}} {total}")
    ));
    assert!(has_line(
        &t,
        &format!("quire_response_body_bytes_total {}", total * 3)
    ));
    assert!(has_line(
        &t,
        &format!("quire_fills_total{{result=\"stored\"}} {total}")
    ));
    assert!(has_line(
        &t,
        &format!("quire_origin_request_duration_seconds_count {total}")
    ));
    // Sum of 0..2000 µs, five times per thread.
    let micros = THREADS * (ADDS / 2000) * (1999 * 2000 / 2);
    let (mut counts, mut nanos) = ([0u64; latency::BOUNDS.len() + 1], 0u64);
    m.origin.add_to(&mut counts, &mut nanos);
    assert_eq!(nanos, micros * 1000);
}

#[test]
fn metrics_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<Metrics>();
}
