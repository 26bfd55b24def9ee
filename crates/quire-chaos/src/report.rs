//! The end of a run: every part's figures in one value, printed as text for a person
//! and written as JSON for a machine, and the list of reasons the run failed.
//!
//! Key decision: the pass/fail verdict is the list of failures each part states about
//! itself ([`proxy_run::Report::failures`] and the others), gathered once here, so the
//! text, the JSON and the exit status can never disagree.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use crate::schedule::FaultKind;
use crate::tally::Counts;
use crate::{disk_full, proxy_run, serve_run};

/// Everything a `run` or `soak` found.
#[derive(Debug, Serialize)]
pub(crate) struct RunOutput {
    /// `run` or `soak`.
    pub(crate) command: &'static str,
    /// The seed.
    pub(crate) seed: u64,
    /// Seconds of load in all.
    pub(crate) duration_s: f64,
    /// SIGKILLs asked for.
    pub(crate) kills: usize,
    /// The proxy-mode run.
    pub(crate) proxy: Option<proxy_run::Report>,
    /// The serve-mode run.
    pub(crate) serve: Option<serve_run::Report>,
    /// The disk-full check.
    pub(crate) disk_full: Option<disk_full::Report>,
    /// Why the run failed; empty when it passed.
    pub(crate) failures: Vec<String>,
    /// Whether it passed.
    pub(crate) pass: bool,
}

impl RunOutput {
    /// An empty output.
    pub(crate) fn new(
        command: &'static str,
        seed: u64,
        duration: Duration,
        kills: usize,
    ) -> RunOutput {
        RunOutput {
            command,
            seed,
            duration_s: duration.as_secs_f64(),
            kills,
            proxy: None,
            serve: None,
            disk_full: None,
            failures: Vec::new(),
            pass: false,
        }
    }

    /// Gathers the parts' failures (`strict`: every error fails, as in a soak).
    pub(crate) fn finish(&mut self, strict: bool) {
        let mut f = Vec::new();
        if let Some(p) = &self.proxy {
            f.extend(p.failures(strict));
        }
        if let Some(s) = &self.serve {
            f.extend(s.failures());
        }
        if let Some(d) = &self.disk_full {
            f.extend(d.failures());
        }
        self.pass = f.is_empty();
        self.failures = f;
    }
}

/// Writes `out` as JSON to `path`, if given.
pub(crate) fn write_json(out: &RunOutput, path: Option<&Path>) -> anyhow::Result<()> {
    if let Some(p) = path {
        std::fs::write(p, serde_json::to_string_pretty(out)? + "\n")?;
        println!("figures written to {}", p.display());
    }
    Ok(())
}

fn ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_string(), |r| format!("{:.1} %", r * 100.0))
}

/// One line of counts.
fn counts_line(c: &Counts) -> String {
    let mut line = format!(
        "{} requests, {} checked ({} current, {} previous), wrong {}, lost {}, hits {}",
        c.requests,
        c.checked,
        c.current,
        c.previous,
        c.wrong,
        c.lost_invalidations,
        ratio(c.hit_ratio())
    );
    if c.stale_if_error > 0 {
        line.push_str(&format!(", stale-if-error {}", c.stale_if_error));
    }
    for (code, n) in &c.statuses {
        line.push_str(&format!(", {code}: {n}"));
    }
    for (what, n) in &c.failures {
        line.push_str(&format!(", {what}: {n}"));
    }
    line
}

/// Prints `out` for a person.
pub(crate) fn print(out: &RunOutput) {
    if let Some(p) = &out.proxy {
        print_proxy(p);
    }
    if let Some(s) = &out.serve {
        print_serve(s);
    }
    if let Some(d) = &out.disk_full {
        print_disk_full(d);
    }
}

fn print_proxy(p: &proxy_run::Report) {
    println!("\n== proxy mode ({:.0} s)", p.duration_s);
    println!("{}", p.kills.line(p.stopped_cleanly));
    println!("all:             {}", counts_line(&p.totals));
    println!("outside windows: {}", counts_line(&p.outside_windows));
    println!("final sweep:     {}", counts_line(&p.sweep));
    println!("slow readers:    {}", counts_line(&p.slow_readers));
    println!(
        "reclaim: {} entries evicted, {} carried forward",
        p.reclaim_evicted, p.reclaim_carried
    );
    println!(
        "just-purged URLs asked right after restarts: {}",
        p.checked_after_restart
    );
    let e = &p.edits;
    println!(
        "edits acked {:?}, urls bumped {}, purge retries {}, unacked {}, slowest ack {} ms",
        e.acked, e.urls_bumped, e.purge_retries, e.unacked, e.ack_ms_max
    );
    println!(
        "warm probe: {} URLs hit right before a kill, {} hits again first thing after the restart",
        p.warm_probe_asked, p.warm_probe_hit
    );
    let w = &p.warmth;
    println!(
        "hit ratio 5 s before kills {}, 5 s after restarts {}; warm URLs asked again {}, hit again {}",
        ratio(w.hit_ratio_before_kill),
        ratio(w.hit_ratio_after_restart),
        w.warm_urls_asked_again,
        w.warm_urls_hit_again
    );
    print_faults(&p.faults);
    if let Some(r) = &p.rss {
        println!(
            "RSS after warm-up ({} samples): VmRSS {}-{} MiB (flat within 5 %: {}), RssAnon {}-{} MiB (flat: {})",
            r.samples,
            r.total_min_kib / 1024,
            r.total_max_kib / 1024,
            r.total_flat,
            r.anon_min_kib / 1024,
            r.anon_max_kib / 1024,
            r.anon_flat
        );
        let quarters: Vec<String> = (1..=4)
            .filter_map(|q| r.series.get((r.series.len() * q / 4).saturating_sub(1)))
            .map(|&(s, total, anon)| format!("{s} s: {} / {} MiB", total / 1024, anon / 1024))
            .collect();
        println!(
            "RSS (VmRSS / RssAnon) at each quarter after warm-up: {}",
            quarters.join(", ")
        );
        println!(
            "RssAnon trend: last quarter's median {:+.1} % against the first quarter's",
            r.anon_trend_pct
        );
    }
    println!("origin requests {}", p.origin_requests);
    print_examples(&p.wrong_examples, &p.lost_examples, &p.panics);
}

/// Each fault kind's windows added up (the JSON has every window).
fn print_faults(faults: &[proxy_run::FaultOutcome]) {
    if faults.is_empty() {
        return;
    }
    println!("faults, each kind's windows added up (window + 3 s grace; 'after' = the next 5 s):");
    for kind in FaultKind::ALL {
        let mine: Vec<&proxy_run::FaultOutcome> =
            faults.iter().filter(|f| f.kind == kind).collect();
        if mine.is_empty() {
            continue;
        }
        let (mut during, mut after) = (Counts::default(), Counts::default());
        for f in &mine {
            during.merge(&f.during);
            after.merge(&f.after);
        }
        let met: u64 = mine.iter().map(|f| f.origin_requests).sum();
        println!(
            "  {:<9} {} windows, {met} origin requests met the fault",
            kind.name(),
            mine.len()
        );
        println!("            during: {}", counts_line(&during));
        println!("            after:  {}", counts_line(&after));
    }
}

fn print_serve(s: &serve_run::Report) {
    println!("\n== serve mode ({:.0} s)", s.duration_s);
    println!("{}", s.kills.line(s.stopped_cleanly));
    println!("all:              {}", counts_line(&s.totals));
    println!("outside restarts: {}", counts_line(&s.outside_restarts));
    println!("final sweep:      {}", counts_line(&s.sweep));
    println!(
        "edits {} ({} while quire was down), never visible {}, slowest to show {} ms",
        s.edits, s.edits_while_down, s.edits_never_visible, s.visible_ms_max
    );
    println!(
        "hit ratio 5 s before kills {}, 5 s after restarts {}",
        ratio(s.warmth.hit_ratio_before_kill),
        ratio(s.warmth.hit_ratio_after_restart)
    );
    print_examples(&s.wrong_examples, &s.lost_examples, &s.panics);
}

fn print_disk_full(d: &disk_full::Report) {
    println!("\n== disk full");
    if let Some(why) = &d.skipped {
        println!("skipped: {why}");
        return;
    }
    println!(
        "64 MiB on a 16 MiB tmpfs: refused {}, file left {}: {}",
        d.too_big_refused, d.too_big_file_left, d.too_big_error
    );
    println!(
        "8 MiB on it: started {}, served right bytes {}",
        d.fits_started, d.fits_served_right
    );
}

fn print_examples(wrong: &[String], lost: &[String], panics: &[String]) {
    for w in wrong {
        println!("  WRONG: {w}");
    }
    for l in lost {
        println!("  LOST: {l}");
    }
    for p in panics {
        println!("  PANIC: {p}");
    }
}
