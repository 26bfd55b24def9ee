//! The human-readable table of a `quire bench store` report: one section per scenario
//! that ran, the machine's state over the run, and the checks (mismatched hits, engine
//! errors) last.

use std::fmt::Write as _;

use super::report::{
    EngineSeries, EvictionReport, MixedEngine, MixedReport, OverflowReport, RamTierRow, Report,
    RestartReport, WarmRow,
};

/// Operations per second, short: 2.72M, 601k, 84.7k, 950.
pub(crate) fn rate(v: f64) -> String {
    if v >= 9.995e5 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 9.995e4 {
        format!("{:.0}k", v / 1e3)
    } else if v >= 999.5 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Bytes, binary units: 100 B, 9.8 KiB, 16.0 MiB.
pub(crate) fn bytes(v: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if v < 1024 {
        return format!("{v} B");
    }
    let mut x = v as f64 / 1024.0;
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    format!("{x:.1} {}", UNITS[unit])
}

/// `a / b` as "4.50x", or "-" when `b` is 0.
pub(crate) fn times(a: f64, b: f64) -> String {
    if b > 0.0 && a.is_finite() {
        format!("{:.2}x", a / b)
    } else {
        "-".to_string()
    }
}

fn mixed_section(out: &mut String, title: &str, m: &MixedReport) {
    let shift = match (m.shift_every, m.shift_step) {
        (Some(every), Some(step)) => {
            format!(", the popular set moves {step} keys every {every} ops of a thread")
        }
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "\n{title}: {} threads, Zipf {}, get (cache-aside) / put / delete 80/15/5{}{shift}, \
         cap {}, working set {} ({} keys), {} measured ops after {} warm-up ops",
        m.threads,
        m.zipf_s,
        if m.scan_share > 0.0 {
            format!(", {:.0} % one-hit scan gets", m.scan_share * 100.0)
        } else {
            String::new()
        },
        bytes(m.cap_bytes),
        bytes(m.working_set_bytes),
        m.keys,
        m.measured_ops,
        m.warmup_ops,
    );
    let _ = writeln!(
        out,
        "  {:<10} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}",
        "", "ops/s", "p50 us", "p99 us", "p999 us", "hit ratio", "stored"
    );
    let row = |out: &mut String, name: &str, e: &MixedEngine| {
        let _ = writeln!(
            out,
            "  {:<10} {:>9} {:>9.1} {:>9.1} {:>9.1} {:>10.3} {:>9}",
            name,
            rate(e.ops_per_sec),
            e.p50_us,
            e.p99_us,
            e.p999_us,
            e.hit_ratio,
            e.puts_stored
        );
    };
    row(out, "quire", &m.quire);
    if let Some(b) = &m.baseline {
        row(out, "baseline", b);
    }
    for (name, ratio) in [
        ("exact LRU", m.lru_hit_ratio),
        ("W-TinyLFU", m.wtinylfu_hit_ratio),
        ("S3-FIFO", m.s3fifo_hit_ratio),
    ] {
        let _ = writeln!(
            out,
            "  {:<10} {:>9} {:>9} {:>9} {:>9} {:>10.3}",
            name, "", "", "", "", ratio
        );
    }
    if let Some(b) = &m.baseline {
        baseline_lines(out, &m.quire, b);
    }
}

/// Quire over the baseline: throughput, latency, and get hits alone.
fn baseline_lines(out: &mut String, q: &MixedEngine, b: &MixedEngine) {
    let _ = writeln!(
        out,
        "  throughput quire/baseline {}; latency baseline/quire p50 {}, p99 {}, p999 {}",
        times(q.ops_per_sec, b.ops_per_sec),
        times(b.p50_us, q.p50_us),
        times(b.p99_us, q.p99_us),
        times(b.p999_us, q.p999_us),
    );
    if let (Some(q), Some(b)) = (q.by_op.get("get_hit"), b.by_op.get("get_hit")) {
        let _ = writeln!(
            out,
            "  get hits alone: p50 {:.1} vs {:.1} us, p99 {:.1} vs {:.1} us (quire vs baseline)",
            q.p50_us, b.p50_us, q.p99_us, b.p99_us
        );
    }
}

/// The hit ratios of every stream that ran side by side, with quire's distance from
/// the best yardstick. `None` when no stream ran.
fn hit_ratio_summary(r: &Report) -> Option<String> {
    let streams = [
        ("mixed", &r.mixed),
        ("mixed_scan", &r.mixed_scan),
        ("zipf08", &r.zipf08),
        ("news", &r.news),
    ];
    let mut out = String::new();
    for (name, m) in streams {
        let Some(m) = m else { continue };
        if out.is_empty() {
            let _ = writeln!(
                out,
                "\nhit ratio at equal bytes\n  {:<11} {:>7} {:>9} {:>9} {:>9} {:>18}",
                "stream", "quire", "LRU", "W-TinyLFU", "S3-FIFO", "quire - best"
            );
        }
        let (best, who) = m.best_yardstick();
        let _ = writeln!(
            out,
            "  {:<11} {:>7.3} {:>9.3} {:>9.3} {:>9.3} {:>+8.1} pts ({who})",
            name,
            m.quire.hit_ratio,
            m.lru_hit_ratio,
            m.wtinylfu_hit_ratio,
            m.s3fifo_hit_ratio,
            (m.quire.hit_ratio - best) * 100.0,
        );
    }
    (!out.is_empty()).then_some(out)
}

/// One line reading the RAM-tier rows: the range of on/off ratios and where the best
/// and worst were; in how many rows the tier was faster (or slower) in every round,
/// which is what sets a real difference apart from noise; and how much of the timed
/// hits the tier served. `None` without rows.
pub(crate) fn ram_tier_summary(rows: &[RamTierRow]) -> Option<String> {
    let by_ratio = |a: &&RamTierRow, b: &&RamTierRow| a.ratio.total_cmp(&b.ratio);
    let lo = rows.iter().min_by(by_ratio)?;
    let hi = rows.iter().max_by(by_ratio)?;
    let where_ = |r: &RamTierRow| {
        format!(
            "{} x {} ({}), {} thread{}",
            bytes(r.size_bytes as u64),
            r.objects,
            r.case,
            r.threads,
            if r.threads == 1 { "" } else { "s" }
        )
    };
    let mut line = format!(
        "RAM tier on/off: {:.2}x-{:.2}x (best at {}, worst at {})",
        lo.ratio,
        hi.ratio,
        where_(hi),
        where_(lo)
    );
    let rounded: Vec<&RamTierRow> = rows.iter().filter(|r| r.rounds >= 2).collect();
    if !rounded.is_empty() {
        let faster = rounded.iter().filter(|r| r.round_ratio_min > 1.0).count();
        let slower = rounded.iter().filter(|r| r.round_ratio_max < 1.0).count();
        let _ = write!(
            line,
            "; on faster in every round in {faster} of {} rows, slower in every round in \
             {slower}, mixed (noise) in {}",
            rounded.len(),
            rounded.len() - faster - slower
        );
    }
    let shares = rows.iter().map(|r| r.ram_hit_share);
    let share_lo = shares.clone().fold(f64::INFINITY, f64::min);
    let share_hi = shares.fold(f64::NEG_INFINITY, f64::max);
    let _ = write!(
        line,
        "; RAM served {:.1}-{:.1} % of the timed hits",
        share_lo * 100.0,
        share_hi * 100.0
    );
    if share_lo < 0.9 {
        line.push_str(" (under 90 % somewhere: that row says little about the tier)");
    }
    Some(line)
}

fn ram_tier_section(out: &mut String, rows: &[RamTierRow]) {
    let _ = writeln!(
        out,
        "\nram tier (quire only): gets/s with the RAM tier off vs on, uniformly random keys, \
         everything cached, the tier warmed up (every object got twice first); off and on \
         alternate in rounds, \"rounds\" is the lowest-highest on/off of a round"
    );
    let _ = writeln!(
        out,
        "  {:<12} {:<9} {:>7} {:>7} {:>7} {:>9} {:>9} {:>7} {:>11} {:>9}",
        "case",
        "size",
        "objects",
        "regions",
        "threads",
        "off",
        "on",
        "on/off",
        "rounds",
        "RAM hits"
    );
    for r in rows {
        let _ = writeln!(
            out,
            "  {:<12} {:<9} {:>7} {:>7} {:>7} {:>9} {:>9} {:>6.2}x {:>11} {:>7.1} %",
            r.case,
            bytes(r.size_bytes as u64),
            r.objects,
            r.regions,
            r.threads,
            rate(r.off_ops_per_sec),
            rate(r.on_ops_per_sec),
            r.ratio,
            format!("{:.2}-{:.2}", r.round_ratio_min, r.round_ratio_max),
            r.ram_hit_share * 100.0,
        );
    }
    if let Some(line) = ram_tier_summary(rows) {
        let _ = writeln!(out, "  {line}");
    }
}

/// The human-readable table of a report: a header with the machine, one section per
/// scenario that ran, and the checks.
pub(crate) fn render(r: &Report) -> String {
    let mut out = String::new();
    header(&mut out, r);
    if let Some(rows) = &r.warm_reads {
        warm_section(&mut out, rows);
    }
    if let Some(mx) = &r.mixed {
        mixed_section(&mut out, "mixed", mx);
    }
    if let Some(mx) = &r.mixed_scan {
        mixed_section(&mut out, "mixed_scan", mx);
    }
    if let Some(mx) = &r.zipf08 {
        mixed_section(&mut out, "zipf08", mx);
    }
    if let Some(mx) = &r.news {
        mixed_section(&mut out, "news", mx);
    }
    if let Some(summary) = hit_ratio_summary(r) {
        out.push_str(&summary);
    }
    if let Some(e) = &r.eviction {
        eviction_section(&mut out, e, r.eviction_batches.as_ref());
    }
    if let Some(o) = &r.overflow {
        overflow_section(&mut out, o);
    }
    if let Some(s) = &r.restart {
        restart_section(&mut out, s);
    }
    if let Some(rows) = &r.ram_tier {
        ram_tier_section(&mut out, rows);
    }
    if let Some(per) = r.index_bytes_per_entry {
        let _ = writeln!(out, "\nquire index: {per:.1} bytes of RAM per entry");
    }
    let _ = writeln!(
        out,
        "\nchecks: {} mismatched hits, {} engine errors; puts declined with an error: {} \
         too large, {} no space",
        r.mismatches, r.errors, r.declined_too_large, r.declined_no_space
    );
    for p in &r.problems {
        let _ = writeln!(out, "  {p}");
    }
    out
}

/// The run, and the machine with its state over the run.
fn header(out: &mut String, r: &Report) {
    let m = &r.machine;
    let _ = writeln!(
        out,
        "quire bench store ({} run, seed {}, {:.1} s)",
        r.mode, r.seed, r.elapsed_secs
    );
    let _ = writeln!(
        out,
        "machine: {} cores, {}, {}{}",
        m.cores,
        m.cpu_model,
        m.os,
        match (m.busy_share, m.steal_share) {
            (Some(b), Some(s)) => format!(
                "; during the run: busy {:.0} %, steal {:.1} %",
                b * 100.0,
                s * 100.0
            ),
            _ => String::new(),
        }
    );
}

fn warm_section(out: &mut String, rows: &[WarmRow]) {
    let _ = writeln!(
        out,
        "\nwarm reads: aggregate gets/s, uniformly random keys, everything cached"
    );
    let _ = writeln!(
        out,
        "  {:<9} {:>7} {:>9} {:>10} {:>9} {:>15}",
        "size", "threads", "quire", "baseline", "ratio", "hit ratio q/b"
    );
    for w in rows {
        let _ = writeln!(
            out,
            "  {:<9} {:>7} {:>9} {:>10} {:>9} {:>8.2}/{:.2}",
            bytes(w.size_bytes as u64),
            w.threads,
            rate(w.quire_ops_per_sec),
            rate(w.baseline_ops_per_sec),
            times(w.quire_ops_per_sec, w.baseline_ops_per_sec),
            w.quire_hit_ratio,
            w.baseline_hit_ratio,
        );
    }
}

fn eviction_section(out: &mut String, e: &EvictionReport, batches: Option<&EngineSeries>) {
    let _ = writeln!(
        out,
        "\neviction sweep: {} new objects into a {} cap, one thread{}",
        e.objects,
        bytes(e.cap_bytes),
        if e.quire_admission {
            ""
        } else {
            " (quire admission off: every put is written)"
        }
    );
    let _ = writeln!(
        out,
        "  {:<10} {:>9} {:>16} {:>9} {:>18}",
        "", "puts/s", "longest put ms", "stored", "read-back hits"
    );
    let _ = writeln!(
        out,
        "  {:<10} {:>9} {:>16.2} {:>9} {:>18.3}",
        "quire",
        rate(e.quire_ops_per_sec),
        e.quire_max_stall_ms,
        e.quire_stored,
        e.quire_readback_hit_ratio
    );
    let _ = writeln!(
        out,
        "  {:<10} {:>9} {:>16.2} {:>9} {:>18.3}",
        "baseline",
        rate(e.baseline_ops_per_sec),
        e.baseline_max_stall_ms,
        e.baseline_stored,
        e.baseline_readback_hit_ratio
    );
    let _ = writeln!(
        out,
        "  throughput quire/baseline {}; longest put baseline/quire {}",
        times(e.quire_ops_per_sec, e.baseline_ops_per_sec),
        times(e.baseline_max_stall_ms, e.quire_max_stall_ms)
    );
    if let Some(s) = batches {
        let line = |v: &[f64]| v.iter().map(|x| rate(*x)).collect::<Vec<_>>().join(" ");
        let _ = writeln!(out, "  puts/s per batch of {}:", e.batch);
        let _ = writeln!(out, "    quire    {}", line(&s.quire));
        let _ = writeln!(out, "    baseline {}", line(&s.baseline));
    }
}

fn overflow_section(out: &mut String, o: &OverflowReport) {
    let _ = writeln!(
        out,
        "\noverflow: {} written into a {} cap, disk sampled after every batch",
        bytes(o.bytes_written),
        bytes(o.cap_bytes)
    );
    let _ = writeln!(
        out,
        "  {:<10} {:>14} {:>8} {:>16} {:>9}",
        "", "peak on disk", "x cap", "peak bytes_used", "puts/s"
    );
    for (name, peak, used, ops) in [
        (
            "quire",
            o.quire_peak_bytes,
            o.quire_peak_bytes_used,
            o.quire_ops_per_sec,
        ),
        (
            "baseline",
            o.baseline_peak_bytes,
            o.baseline_peak_bytes_used,
            o.baseline_ops_per_sec,
        ),
    ] {
        let _ = writeln!(
            out,
            "  {:<10} {:>14} {:>8} {:>16} {:>9}",
            name,
            bytes(peak),
            times(peak as f64, o.cap_bytes as f64),
            bytes(used),
            rate(ops)
        );
    }
    let _ = writeln!(
        out,
        "  (quire: the volume file's allocated blocks; baseline: the files' sizes)"
    );
}

fn restart_section(out: &mut String, s: &RestartReport) {
    let _ = writeln!(
        out,
        "\nrestart (quire): {} keys in a {} cap, a {}-op read-mostly segment replayed \
         after close + reopen",
        s.keys,
        bytes(s.cap_bytes),
        s.segment_ops
    );
    let _ = writeln!(
        out,
        "  hit ratio before {:.3}, after {:.3} (after/before {:.3}{}); entries {} -> {} \
         on reopen; close {:.1} ms, reopen {:.1} ms",
        s.hit_ratio_before,
        s.hit_ratio_after,
        s.after_over_before,
        if s.after_over_before >= 0.95 {
            ", warm"
        } else {
            ", COLD: below 0.95"
        },
        s.entries_before,
        s.entries_after_open,
        s.close_ms,
        s.reopen_ms
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_numbers() {
        assert_eq!(rate(2_720_000.0), "2.72M");
        assert_eq!(rate(601_000.0), "601k");
        assert_eq!(rate(84_700.0), "84.7k");
        assert_eq!(rate(950.0), "950");
        assert_eq!(bytes(100), "100 B");
        assert_eq!(bytes(16 << 20), "16.0 MiB");
        assert_eq!(bytes(10_000), "9.8 KiB");
        assert_eq!(times(9.0, 2.0), "4.50x");
        assert_eq!(times(1.0, 0.0), "-");
    }

    #[test]
    fn render_shows_what_ran_and_the_failures() {
        let mut r = Report {
            mode: "quick".into(),
            warm_reads: Some(vec![WarmRow {
                threads: 64,
                size_bytes: 100,
                quire_ops_per_sec: 2_720_000.0,
                baseline_ops_per_sec: 601_000.0,
                ..WarmRow::default()
            }]),
            mixed: Some(MixedReport {
                lru_hit_ratio: 0.6789,
                wtinylfu_hit_ratio: 0.7012,
                quire: MixedEngine {
                    hit_ratio: 0.7,
                    ..MixedEngine::default()
                },
                ..MixedReport::default()
            }),
            restart: Some(RestartReport {
                hit_ratio_before: 0.9,
                hit_ratio_after: 0.5,
                after_over_before: 0.5 / 0.9,
                ..RestartReport::default()
            }),
            mismatches: 2,
            problems: vec!["mismatch [quire mixed] object 1: body differs".into()],
            ..Report::default()
        };
        let text = render(&r);
        assert!(text.contains("4.53x"), "{text}");
        assert!(text.contains("exact LRU"));
        assert!(text.contains("0.679"));
        assert!(text.contains("W-TinyLFU"));
        assert!(text.contains("-0.1 pts (W-TinyLFU)"), "{text}");
        assert!(!text.contains("news"), "{text}");
        assert!(text.contains("COLD"));
        assert!(text.contains("2 mismatched hits"));
        assert!(text.contains("body differs"));
        assert!(!text.contains("eviction sweep"));
        assert!(!text.contains("overflow"));
        r.restart = None;
        assert!(!render(&r).contains("restart"));
        assert!(!render(&r).contains("ram tier"));
        r.ram_tier = Some(vec![tier_row("warm", 100, 8, 1.3, (1.2, 1.4), 1.0)]);
        let text = render(&r);
        assert!(text.contains("ram tier (quire only)"), "{text}");
        assert!(text.contains("1.30M"), "{text}");
        assert!(text.contains("RAM tier on/off: 1.30x-1.30x"), "{text}");
        assert!(text.contains("1.20-1.40"), "{text}");
    }

    fn tier_row(
        case: &str,
        size: usize,
        threads: usize,
        ratio: f64,
        rounds: (f64, f64),
        share: f64,
    ) -> RamTierRow {
        RamTierRow {
            case: case.into(),
            size_bytes: size,
            objects: 2000,
            threads,
            off_ops_per_sec: 1e6,
            on_ops_per_sec: 1e6 * ratio,
            ratio,
            ram_hit_share: share,
            rounds: 4,
            round_ratio_min: rounds.0,
            round_ratio_max: rounds.1,
            ..RamTierRow::default()
        }
    }

    #[test]
    fn ram_tier_summary_reads_the_rows() {
        assert_eq!(ram_tier_summary(&[]), None);
        let rows = [
            tier_row("warm", 100, 1, 0.97, (0.8, 1.1), 1.0),
            tier_row("warm", 10_000, 8, 1.04, (1.01, 1.09), 0.999),
            tier_row("few_regions", 100, 2, 0.9, (0.85, 0.95), 1.0),
            tier_row("few_regions", 100, 8, 1.5, (0.99, 2.0), 1.0),
        ];
        let line = ram_tier_summary(&rows).expect("rows");
        assert!(line.starts_with("RAM tier on/off: 0.90x-1.50x"), "{line}");
        assert!(
            line.contains("best at 100 B x 2000 (few_regions), 8 threads"),
            "{line}"
        );
        assert!(
            line.contains("worst at 100 B x 2000 (few_regions), 2 threads"),
            "{line}"
        );
        assert!(
            line.contains(
                "on faster in every round in 1 of 4 rows, slower in every round in 1, \
                 mixed (noise) in 2"
            ),
            "{line}"
        );
        assert!(
            line.contains("RAM served 99.9-100.0 % of the timed hits"),
            "{line}"
        );
        assert!(!line.contains("under 90 %"), "{line}");

        let mut one = tier_row("warm", 10_000, 1, 0.8, (0.8, 0.8), 0.5);
        one.rounds = 1;
        let line = ram_tier_summary(&[one]).expect("rows");
        assert!(
            line.contains("0.80x-0.80x (best at 9.8 KiB x 2000"),
            "{line}"
        );
        assert!(!line.contains("every round"), "{line}");
        assert!(line.contains("(warm), 1 thread, worst"), "{line}");
        assert!(line.contains("under 90 %"), "{line}");
    }
}
