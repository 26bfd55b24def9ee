//! The Prometheus text exposition (0.0.4) of the server's counters, the store's
//! [`Stats`] and the fill path's shared parts: every family the `metrics` floor
//! owns, written in one pass that only loads atomics.

use std::fmt::{self, Write as _};
use std::sync::atomic::Ordering;
use std::time::Duration;

use quire_store::Stats;

use super::*;

impl Metrics {
    /// The metrics in the Prometheus text exposition format 0.0.4 (with `# HELP` and
    /// `# TYPE` lines), including the store's `store` stats and the process
    /// `uptime`.
    pub fn render(&self, store: &Stats, uptime: Duration) -> String {
        let mut out = String::with_capacity(8 * 1024);
        // Writing to a String cannot fail.
        let _ = self.write_to(&mut out, store, uptime);
        out
    }

    fn write_to(&self, out: &mut String, store: &Stats, uptime: Duration) -> fmt::Result {
        self.write_requests(out)?;
        self.latency.write(out, &Outcome::ALL.map(Outcome::label))?;
        self.write_origin(out)?;
        self.write_fills(out)?;
        self.write_cold(out)?;
        self.write_gauges(out, uptime)?;
        write_store(out, store)
    }

    /// Requests by outcome and status class, body bytes, the hit ratio.
    fn write_requests(&self, out: &mut String) -> fmt::Result {
        family(
            out,
            "quire_requests_total",
            "counter",
            "Responses sent, by what the cache did with the request.",
        )?;
        for o in Outcome::ALL {
            let i = o.index();
            let n = self.sum_stripes(|s| &s.outcomes[i]);
            writeln!(out, "quire_requests_total{{cache=\"{}\"}} {n}", o.label())?;
        }

        family(
            out,
            "quire_responses_total",
            "counter",
            "Responses sent, by HTTP status class (other: outside 100-599).",
        )?;
        for (i, label) in CLASS_LABELS.iter().enumerate() {
            let n = self.sum_stripes(|s| &s.classes[i]);
            writeln!(out, "quire_responses_total{{code=\"{label}\"}} {n}")?;
        }

        family(
            out,
            "quire_response_body_bytes_total",
            "counter",
            "Response body bytes written to clients.",
        )?;
        let body = self.sum_stripes(|s| &s.body_bytes);
        writeln!(out, "quire_response_body_bytes_total {body}")?;

        family(
            out,
            "quire_hit_ratio",
            "gauge",
            "(hit+stale+revalidated)/(hit+stale+revalidated+miss) since start; NaN before any.",
        )?;
        match self.hit_ratio() {
            Some(r) => writeln!(out, "quire_hit_ratio {}", float(r))?,
            None => writeln!(out, "quire_hit_ratio NaN")?,
        }
        Ok(())
    }

    /// What `quire serve` adds: prefills by result, audience requests, answers from
    /// a previous version.
    fn write_publishing(&self, out: &mut String) -> fmt::Result {
        family(
            out,
            "quire_prefills_total",
            "counter",
            "URLs filled before anyone asked (quire serve after a change), by result.",
        )?;
        for p in Prefilled::ALL {
            let n = self.prefills[p as usize].load(Ordering::Relaxed);
            writeln!(out, "quire_prefills_total{{result=\"{}\"}} {n}", p.label())?;
        }
        counter(
            out,
            "quire_audience_requests_total",
            "Signed-in readers' requests served from (or filling) their audience's cache entries instead of bypassing the cache.",
            self.sum_stripes(|s| &s.audience_requests),
        )?;
        counter(
            out,
            "quire_prefetches_refused_total",
            "Browser prefetches (Sec-Purpose: prefetch) answered 503 because the store held no usable response: a prefetch never makes a render, a fill or a pass.",
            self.prefetches_refused.load(Ordering::Relaxed),
        )?;
        counter(
            out,
            "quire_agents_refused_total",
            "Requests from AI crawlers named in [agents] refuse, answered 403 (or 402) before the cache.",
            self.agents_refused.load(Ordering::Relaxed),
        )?;
        counter(
            out,
            "quire_previous_version_hits_total",
            "Misses answered from the page's previous version (the site's templates changed, the page did not) while the current one was made in the background.",
            self.previous_hits.load(Ordering::Relaxed),
        )?;
        writeln!(
            out,
            "# HELP quire_refresh_ahead_total Hits in the last share of their lifetime (storage.refresh_ahead): a background revalidation started, or skipped for want of a free budget slot.\n\
             # TYPE quire_refresh_ahead_total counter\n\
             quire_refresh_ahead_total{{result=\"started\"}} {}\n\
             quire_refresh_ahead_total{{result=\"skipped_busy\"}} {}",
            self.refresh_ahead[0].load(Ordering::Relaxed),
            self.refresh_ahead[1].load(Ordering::Relaxed),
        )
    }

    /// Entries read into memory off the workers (a volume bigger than memory).
    fn write_cold(&self, out: &mut String) -> fmt::Result {
        counter(
            out,
            "quire_cold_reads_total",
            "Hits whose entry was not in memory, read in on the blocking pool instead of faulting on a request worker.",
            self.cold_reads.load(Ordering::Relaxed),
        )
    }

    /// The HTTP/1.1 fast path: hand-overs to hyper, and repeated heads.
    fn write_fastpath(&self, out: &mut String) -> fmt::Result {
        counter(
            out,
            "quire_fastpath_handovers_total",
            "Connections handed from the HTTP/1.1 fast path (fresh hits) to the general path.",
            self.handovers.load(Ordering::Relaxed),
        )?;
        counter(
            out,
            "quire_fastpath_handoffs_total",
            "Connections the hit loops handed to a task of their own (a request the service answers, a 429, a write the socket did not take whole, a long pipeline, hyper).",
            self.handoffs.load(Ordering::Relaxed),
        )?;
        gauge(
            out,
            "quire_fastpath_parked",
            "Idle HTTP/1.1 connections held by the hit loops (one task per worker, no task per connection).",
            self.parked.load(Ordering::Relaxed).max(0) as u64,
        )?;
        gauge(
            out,
            "quire_fastpath_repeat_bytes",
            "Bytes held by the request heads the fast path keeps to answer again without a parse, over all worker threads.",
            super::REPEAT_BYTES.load(Ordering::Relaxed),
        )?;
        counter(
            out,
            "quire_fastpath_repeats_total",
            "Fresh hits on the HTTP/1.1 fast path answered from what an identical request head decided before (no parse, no key made).",
            self.sum_stripes(|s| &s.repeats),
        )
    }

    /// Fills by result, and the counters of what the limits turned away.
    fn write_fills(&self, out: &mut String) -> fmt::Result {
        family(
            out,
            "quire_fills_total",
            "counter",
            "Fills finished, by what became of the origin's response.",
        )?;
        for f in FillResult::ALL {
            let n = self.fills[f.index()].load(Ordering::Relaxed);
            writeln!(out, "quire_fills_total{{result=\"{}\"}} {n}", f.label())?;
        }

        family(
            out,
            "quire_tls_handshakes_total",
            "counter",
            "TLS handshakes, by how they ended (the protocol chosen, or why they failed).",
        )?;
        for h in Handshake::ALL {
            let n = self.handshakes(h);
            writeln!(
                out,
                "quire_tls_handshakes_total{{result=\"{}\"}} {n}",
                h.label()
            )?;
        }
        counter(
            out,
            "quire_fills_coalesced_total",
            "Requests that joined an in-flight fill instead of starting one.",
            self.coalesced.load(Ordering::Relaxed),
        )?;
        self.write_publishing(out)?;
        counter(
            out,
            "quire_fills_busy_total",
            "Misses that found no fill slot (in all, or for their client) and were passed to the origin unstored.",
            self.fills_busy.load(Ordering::Relaxed),
        )?;
        self.write_fastpath(out)?;
        counter(
            out,
            "quire_connections_refused_total",
            "Connections answered 429 and closed: their client already held limits.connections_per_client.",
            self.connections_refused.load(Ordering::Relaxed),
        )?;
        counter(
            out,
            "quire_connections_reaped_total",
            "Idle keep-alive connections closed to make room at limits.connections.",
            self.connections_reaped.load(Ordering::Relaxed),
        )?;
        let (streams, conns) = self.send_stalls();
        writeln!(
            out,
            "# HELP quire_send_stalls_total Responses whose bytes did not move for limits.send_stall: dropped (stream: an HTTP/2 stream reset, its pins released) and connections closed for it (connection).\n\
             # TYPE quire_send_stalls_total counter\n\
             quire_send_stalls_total{{scope=\"stream\"}} {streams}\n\
             quire_send_stalls_total{{scope=\"connection\"}} {conns}"
        )?;
        counter(
            out,
            "quire_purged_entries_total",
            "Entries removed by purges.",
            self.purged.load(Ordering::Relaxed),
        )?;
        Ok(())
    }

    /// Open connections, fills in flight, uptime.
    fn write_gauges(&self, out: &mut String, uptime: Duration) -> fmt::Result {
        family(
            out,
            "quire_connections_open",
            "gauge",
            "Open client connections.",
        )?;
        let conns = self.connections.load(Ordering::Relaxed);
        writeln!(out, "quire_connections_open {conns}")?;
        family(out, "quire_fills_in_flight", "gauge", "Fills in flight.")?;
        let fills = self.fills_in_flight.load(Ordering::Relaxed);
        writeln!(out, "quire_fills_in_flight {fills}")?;

        family(
            out,
            "quire_uptime_seconds",
            "gauge",
            "Seconds since the server started.",
        )?;
        writeln!(out, "quire_uptime_seconds {}", float(uptime.as_secs_f64()))?;
        Ok(())
    }

    fn write_origin(&self, out: &mut String) -> fmt::Result {
        const NAME: &str = "quire_origin_request_duration_seconds";
        family(
            out,
            NAME,
            "histogram",
            "Time from sending an origin request to its response head, successful exchanges only.",
        )?;
        let mut counts = [0u64; latency::BOUNDS.len() + 1];
        let mut sum = 0u64;
        self.origin.add_to(&mut counts, &mut sum);
        latency::write_series(out, NAME, "", &counts, sum)?;

        counter(
            out,
            "quire_origin_errors_total",
            "Origin exchanges that failed: connect error, timeout, malformed response.",
            self.origin_errors.load(Ordering::Relaxed),
        )
    }
}

fn write_store(out: &mut String, s: &Stats) -> fmt::Result {
    let counters: [(&str, &str, u64); 7] = [
        (
            "quire_store_hits_total",
            "Store lookups that found the key.",
            s.hits,
        ),
        (
            "quire_store_misses_total",
            "Store lookups that did not.",
            s.misses,
        ),
        (
            "quire_store_admitted_total",
            "Puts the store wrote.",
            s.admitted,
        ),
        (
            "quire_store_rejected_total",
            "Puts the store declined (admission policy or no reclaimable space).",
            s.rejected,
        ),
        (
            "quire_store_evicted_total",
            "Entries dropped to make room.",
            s.evicted,
        ),
        (
            "quire_store_carried_total",
            "Live entries carried forward by reclaim.",
            s.carried,
        ),
        (
            "quire_store_ram_hits_total",
            "Store hits served from the RAM tier.",
            s.ram_hits,
        ),
    ];
    for (name, help, v) in counters {
        counter(out, name, help, v)?;
    }
    write_store_gauges(out, s)
}

/// The store's gauges: space, entries, the indexes' RAM, the RAM tier, huge pages.
fn write_store_gauges(out: &mut String, s: &Stats) -> fmt::Result {
    let gauges: [(&str, &str, u64); 8] = [
        (
            "quire_store_bytes_used",
            "Bytes the store occupies for data.",
            s.bytes_used,
        ),
        (
            "quire_store_bytes_live",
            "Bytes of live entries, headers included.",
            s.bytes_live,
        ),
        (
            "quire_store_capacity_bytes",
            "The store's configured cap.",
            s.cap_bytes,
        ),
        ("quire_store_entries", "Live entries.", s.entries),
        (
            "quire_store_index_bytes",
            "RAM taken by the key index.",
            s.index_bytes,
        ),
        (
            "quire_store_tag_index_bytes",
            "RAM taken by the tag index.",
            s.tag_index_bytes,
        ),
        (
            "quire_store_ram_bytes",
            "Bytes held by the RAM tier.",
            s.ram_bytes,
        ),
        (
            "quire_store_huge_pages",
            "1 when the volume's mapping asks for 2 MiB pages (cache.huge_pages).",
            u64::from(s.huge_pages),
        ),
    ];
    for (name, help, v) in gauges {
        family(out, name, "gauge", help)?;
        writeln!(out, "{name} {v}")?;
    }
    Ok(())
}

/// The fill path's shared parts, read where they live (fills, compression pool,
/// invalidation log) when `/_quire/metrics` renders.
#[derive(Debug, Clone, Copy, Default)]
pub struct FillPath {
    /// Fill slots held.
    pub slots_used: u64,
    /// Body bytes queued or being compressed.
    pub compress_held_bytes: u64,
    /// The compression budget.
    pub compress_budget_bytes: u64,
    /// Compression jobs finished.
    pub compress_jobs: u64,
    /// Compression jobs refused for the budget.
    pub compress_refused: u64,
    /// Writers that found the invalidation log trimmed past their start.
    pub log_overruns: u64,
}

/// Appends the fill path's families.
pub fn write_fill_path(out: &mut String, f: &FillPath) {
    // Writing to a String cannot fail.
    let _ = fill_path_families(out, f);
}

fn fill_path_families(out: &mut String, f: &FillPath) -> fmt::Result {
    gauge(
        out,
        "quire_fill_slots_used",
        "Fill slots held now (limits.fills).",
        f.slots_used,
    )?;
    gauge(
        out,
        "quire_compress_held_bytes",
        "Body bytes queued or being compressed (encodings.budget).",
        f.compress_held_bytes,
    )?;
    gauge(
        out,
        "quire_compress_budget_bytes",
        "The compression pool's byte budget.",
        f.compress_budget_bytes,
    )?;
    counter(
        out,
        "quire_compress_jobs_total",
        "Compression jobs finished.",
        f.compress_jobs,
    )?;
    counter(
        out,
        "quire_compress_refused_total",
        "Compression jobs refused for the budget (stored without those codings).",
        f.compress_refused,
    )?;
    counter(
        out,
        "quire_invalidation_log_overruns_total",
        "Writers that found the invalidation log trimmed past their start (not stored).",
        f.log_overruns,
    )
}

fn gauge(out: &mut String, name: &str, help: &str, v: u64) -> fmt::Result {
    family(out, name, "gauge", help)?;
    writeln!(out, "{name} {v}")
}

/// The `# HELP` and `# TYPE` lines of one family. `help` must not hold `\` or a
/// newline (all callers pass literals).
fn family(out: &mut String, name: &str, kind: &str, help: &str) -> fmt::Result {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} {kind}")
}

/// A counter family with one unlabelled sample.
fn counter(out: &mut String, name: &str, help: &str, v: u64) -> fmt::Result {
    family(out, name, "counter", help)?;
    writeln!(out, "{name} {v}")
}

/// A float as Prometheus parses it: Rust's shortest round-trip decimal (never an
/// exponent, `1` not `1.0`), with `NaN`, `+Inf` and `-Inf` spelled as Prometheus does.
pub(super) fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{v}")
    }
}
