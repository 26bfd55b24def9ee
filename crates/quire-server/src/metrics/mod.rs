//! Server metrics: the counters and gauges quire keeps about requests, origin
//! exchanges, fills and purges, and their rendering in the Prometheus text
//! exposition format (0.0.4) together with the store's [`Stats`].
//!
//! Key decisions:
//! - **Lock-free.** Every recording is a relaxed atomic add. The per-request counters
//!   (outcome, status class, body bytes) live in cache-line-padded stripes, one chosen
//!   per thread, so two cores answering requests do not bounce one line between them.
//!   The rarer events (origin exchanges, fills, purges) use plain [`AtomicU64`]s.
//!   Rendering only loads atomics: a scrape never blocks a request, and nothing on the
//!   request path takes a lock an exporter could hold. No metrics crate is used for
//!   that reason.
//! - **Snapshots are not transactional.** A render running while requests are recorded
//!   may see one counter updated and another not yet; each counter is still exact and
//!   monotone. The origin histogram's `+Inf` bucket and `_count` are computed from the
//!   same loads, so they always agree.
//! - **Every label value is always present**, zero included, so series do not appear
//!   out of nowhere and `rate()` works from the first scrape.
//! - **Statuses outside 100..=599** are counted under `code="other"` rather than
//!   clamped into a class or dropped.
//! - **The origin histogram observes successful exchanges only**: a failed one (connect
//!   error, timeout, malformed response) counts in `quire_origin_errors_total`, so a
//!   burst of refused connects does not make the origin look fast, nor timeouts make it
//!   look uniformly slow. Bucket bounds are inclusive (`le`) and compared in
//!   nanoseconds; the sum is kept in whole microseconds and rendered in seconds.

use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use quire_store::Stats;

/// What the cache did with a request: the `cache` label of `quire_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Served from the store, fresh.
    Hit,
    /// Served stale (stale-while-revalidate, stale-if-error, max-stale).
    Stale,
    /// The origin answered 304 to a revalidation; the stored copy was served.
    Revalidated,
    /// Fetched from the origin, coalesced or not.
    Miss,
    /// Not cacheable for this request: credentials, cookie, over size, no-store.
    Bypass,
    /// An unsafe or unknown method, forwarded to the origin.
    Pass,
    /// quire answered an error itself: 4xx for bad requests, 502/504 origin failure.
    Error,
    /// The `/_quire/` admin endpoints.
    Admin,
}

impl Outcome {
    /// Every outcome, in the order they are rendered.
    pub const ALL: [Outcome; 8] = [
        Outcome::Hit,
        Outcome::Stale,
        Outcome::Revalidated,
        Outcome::Miss,
        Outcome::Bypass,
        Outcome::Pass,
        Outcome::Error,
        Outcome::Admin,
    ];

    /// The `cache` label value: `"hit"`, `"stale"`, `"revalidated"`, `"miss"`,
    /// `"bypass"`, `"pass"`, `"error"` or `"admin"`.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Hit => "hit",
            Outcome::Stale => "stale",
            Outcome::Revalidated => "revalidated",
            Outcome::Miss => "miss",
            Outcome::Bypass => "bypass",
            Outcome::Pass => "pass",
            Outcome::Error => "error",
            Outcome::Admin => "admin",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// How a TLS handshake ended: the `result` label of `quire_tls_handshakes_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// Completed; the client chose HTTP/2.
    H2,
    /// Completed; HTTP/1.1 (by ALPN, or no ALPN at all).
    Http1,
    /// Failed: not TLS, no shared version or cipher, a bad record.
    Failed,
    /// Not completed within `tls.handshake_timeout`.
    TimedOut,
}

impl Handshake {
    const ALL: [Handshake; 4] = [
        Handshake::H2,
        Handshake::Http1,
        Handshake::Failed,
        Handshake::TimedOut,
    ];

    fn label(self) -> &'static str {
        match self {
            Handshake::H2 => "h2",
            Handshake::Http1 => "http1",
            Handshake::Failed => "failed",
            Handshake::TimedOut => "timeout",
        }
    }
}

/// What a fill did with the origin's response: the `result` label of
/// `quire_fills_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FillResult {
    /// The response was stored.
    Stored,
    /// The response was not storable (status, Cache-Control, Vary: *, ...).
    NotStorable,
    /// The body was larger than the largest object quire stores.
    TooLarge,
    /// The store declined it: admission policy or no reclaimable space.
    Rejected,
    /// The origin exchange failed.
    Failed,
    /// An invalidation matched while the fill was in flight: not stored.
    Invalidated,
    /// Every client left before the body ended: the fill was stopped.
    Abandoned,
    /// The body was still arriving at `limits.fill_deadline`: not stored.
    PastDeadline,
}

impl FillResult {
    /// Every fill result, in the order they are rendered.
    pub const ALL: [FillResult; 8] = [
        FillResult::Stored,
        FillResult::NotStorable,
        FillResult::TooLarge,
        FillResult::Rejected,
        FillResult::Failed,
        FillResult::Invalidated,
        FillResult::Abandoned,
        FillResult::PastDeadline,
    ];

    /// The `result` label value: `"stored"`, `"not_storable"`, `"too_large"`,
    /// `"rejected"`, `"failed"`, `"invalidated"`, `"abandoned"` or `"past_deadline"`.
    pub fn label(self) -> &'static str {
        match self {
            FillResult::Stored => "stored",
            FillResult::NotStorable => "not_storable",
            FillResult::TooLarge => "too_large",
            FillResult::Rejected => "rejected",
            FillResult::Failed => "failed",
            FillResult::Invalidated => "invalidated",
            FillResult::Abandoned => "abandoned",
            FillResult::PastDeadline => "past_deadline",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// The `Cache-Status` detail for a response that ended this way without being
    /// stored (`None` for `Stored`).
    pub fn detail(self) -> Option<&'static str> {
        match self {
            FillResult::Stored => None,
            FillResult::NotStorable => Some("not-storable"),
            FillResult::TooLarge => Some("too-large"),
            FillResult::Rejected => Some("rejected"),
            FillResult::Failed => Some("store-failed"),
            FillResult::Invalidated => Some("invalidated"),
            FillResult::Abandoned => Some("abandoned"),
            FillResult::PastDeadline => Some("fill-deadline"),
        }
    }
}

/// Stripes for the per-request counters; a thread keeps the one it first drew.
const STRIPES: usize = 16;

/// Status classes `1xx`..`5xx` and `other`.
const CLASSES: usize = 6;
const CLASS_LABELS: [&str; CLASSES] = ["1xx", "2xx", "3xx", "4xx", "5xx", "other"];

fn class_index(status: u16) -> usize {
    match status {
        100..=199 => 0,
        200..=299 => 1,
        300..=399 => 2,
        400..=499 => 3,
        500..=599 => 4,
        _ => 5,
    }
}

/// One thread's per-request counters: 15 words, padded to their own 128 bytes (two
/// lines on x86, where the adjacent-line prefetcher pairs them).
#[repr(align(128))]
#[derive(Debug, Default)]
struct Stripe {
    outcomes: [AtomicU64; Outcome::ALL.len()],
    classes: [AtomicU64; CLASSES],
    body_bytes: AtomicU64,
}

fn stripe_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    MINE.with(|m| *m)
}

/// Upper bounds of the origin latency buckets: nanoseconds and the `le` label.
const BUCKETS: [(u128, &str); 14] = [
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

/// The origin latency histogram: per-bucket (not cumulative) counts, the last slot
/// being the overflow past the largest bound; cumulated when rendered.
#[derive(Debug, Default)]
struct Histogram {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
}

impl Histogram {
    fn observe(&self, latency: Duration) {
        let nanos = latency.as_nanos();
        let slot = BUCKETS
            .iter()
            .position(|&(bound, _)| nanos <= bound)
            .unwrap_or(BUCKETS.len());
        if let Some(b) = self.buckets.get(slot) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

/// The server's metrics. Shared by reference (`Arc<Metrics>`) between the
/// connections that record and the admin endpoint that renders; every method takes
/// `&self` and is lock-free.
#[derive(Debug)]
pub struct Metrics {
    stripes: [Stripe; STRIPES],
    origin: Histogram,
    origin_errors: AtomicU64,
    fills: [AtomicU64; FillResult::ALL.len()],
    coalesced: AtomicU64,
    fills_busy: AtomicU64,
    handovers: AtomicU64,
    purged: AtomicU64,
    connections: AtomicI64,
    connections_refused: AtomicU64,
    connections_reaped: AtomicU64,
    send_stalls: [AtomicU64; 2],
    fills_in_flight: AtomicI64,
    handshakes: [AtomicU64; Handshake::ALL.len()],
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All counters and gauges at zero.
    pub fn new() -> Metrics {
        Metrics {
            stripes: Default::default(),
            origin: Histogram::default(),
            origin_errors: AtomicU64::new(0),
            fills: Default::default(),
            coalesced: AtomicU64::new(0),
            fills_busy: AtomicU64::new(0),
            handovers: AtomicU64::new(0),
            purged: AtomicU64::new(0),
            connections: AtomicI64::new(0),
            connections_refused: AtomicU64::new(0),
            connections_reaped: AtomicU64::new(0),
            send_stalls: Default::default(),
            fills_in_flight: AtomicI64::new(0),
            handshakes: Default::default(),
        }
    }

    fn stripe(&self) -> &Stripe {
        // `stripe_index()` is always below STRIPES; the fallback is never taken.
        self.stripes.get(stripe_index()).unwrap_or(&self.stripes[0])
    }

    /// One response sent: its outcome, HTTP status and body bytes written. Statuses
    /// outside 100..=599 count under `code="other"`.
    pub fn record_request(&self, outcome: Outcome, status: u16, body_bytes: u64) {
        let s = self.stripe();
        s.outcomes[outcome.index()].fetch_add(1, Ordering::Relaxed);
        s.classes[class_index(status)].fetch_add(1, Ordering::Relaxed);
        if body_bytes != 0 {
            s.body_bytes.fetch_add(body_bytes, Ordering::Relaxed);
        }
    }

    /// One origin exchange: time to response head, and whether it failed (connect
    /// error, timeout, malformed). A failed exchange counts in
    /// `quire_origin_errors_total` and is not observed in the latency histogram.
    pub fn record_origin(&self, latency: Duration, failed: bool) {
        if failed {
            self.origin_errors.fetch_add(1, Ordering::Relaxed);
        } else {
            self.origin.observe(latency);
        }
    }

    /// One fill finished with `result`.
    pub fn record_fill(&self, result: FillResult) {
        self.fills[result.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Requests that joined an in-flight fill instead of starting one.
    pub fn record_coalesced(&self) {
        self.coalesced.fetch_add(1, Ordering::Relaxed);
    }

    /// A miss found no fill slot (in all, or for its client) and was passed through.
    pub fn record_fill_busy(&self) {
        self.fills_busy.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection left the HTTP/1.1 fast path for the general one.
    pub fn record_handover(&self) {
        self.handovers.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections handed over so far.
    pub fn handovers(&self) -> u64 {
        self.handovers.load(Ordering::Relaxed)
    }

    /// A purge removed `removed` entries.
    pub fn record_purge(&self, removed: u64) {
        self.purged.fetch_add(removed, Ordering::Relaxed);
    }

    /// A connection was refused: its client held `limits.connections_per_client`.
    pub fn record_connection_refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// An idle keep-alive connection was closed to make room (the server was at
    /// `limits.connections`).
    pub fn record_connection_reaped(&self) {
        self.connections_reaped.fetch_add(1, Ordering::Relaxed);
    }

    /// Responses dropped, and connections closed, because their bytes did not
    /// move for `limits.send_stall` (see `crate::edge::stall`).
    pub fn record_send_stalls(&self, streams: u64, connections: u64) {
        if streams > 0 {
            self.send_stalls[0].fetch_add(streams, Ordering::Relaxed);
        }
        if connections > 0 {
            self.send_stalls[1].fetch_add(connections, Ordering::Relaxed);
        }
    }

    /// Send stalls so far: (responses dropped, connections closed).
    pub fn send_stalls(&self) -> (u64, u64) {
        (
            self.send_stalls[0].load(Ordering::Relaxed),
            self.send_stalls[1].load(Ordering::Relaxed),
        )
    }

    /// A TLS handshake ended with `result`.
    pub fn record_handshake(&self, result: Handshake) {
        self.handshakes[result as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Handshakes so far that ended with `result`.
    pub fn handshakes(&self, result: Handshake) -> u64 {
        self.handshakes[result as usize].load(Ordering::Relaxed)
    }

    /// Connections refused and reaped so far.
    pub fn connections_refused_reaped(&self) -> (u64, u64) {
        (
            self.connections_refused.load(Ordering::Relaxed),
            self.connections_reaped.load(Ordering::Relaxed),
        )
    }

    /// Gauge set by the server: open client connections.
    pub fn connections(&self) -> &AtomicI64 {
        &self.connections
    }

    /// Gauge set by the server: fills in flight.
    pub fn fills_in_flight(&self) -> &AtomicI64 {
        &self.fills_in_flight
    }

    /// Requests recorded with `outcome` so far (a snapshot for tests and the bench).
    pub fn requests(&self, outcome: Outcome) -> u64 {
        let i = outcome.index();
        self.stripes
            .iter()
            .map(|s| s.outcomes[i].load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }

    /// The hit ratio: (hit + stale + revalidated) / (hit + stale + revalidated + miss);
    /// `None` while the denominator is 0.
    pub fn hit_ratio(&self) -> Option<f64> {
        let served = [Outcome::Hit, Outcome::Stale, Outcome::Revalidated]
            .iter()
            .fold(0u64, |a, &o| a.saturating_add(self.requests(o)));
        let total = served.saturating_add(self.requests(Outcome::Miss));
        (total != 0).then(|| served as f64 / total as f64)
    }

    fn sum_stripes(&self, f: impl Fn(&Stripe) -> &AtomicU64) -> u64 {
        self.stripes
            .iter()
            .map(|s| f(s).load(Ordering::Relaxed))
            .fold(0u64, u64::wrapping_add)
    }

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
        self.write_origin(out)?;
        self.write_fills(out)?;
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
        counter(
            out,
            "quire_fills_busy_total",
            "Misses that found no fill slot (in all, or for their client) and were passed to the origin unstored.",
            self.fills_busy.load(Ordering::Relaxed),
        )?;
        counter(
            out,
            "quire_fastpath_handovers_total",
            "Connections handed from the HTTP/1.1 fast path (fresh hits) to the general path.",
            self.handovers.load(Ordering::Relaxed),
        )?;
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
        let counts: Vec<u64> = self
            .origin
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let mut cumulative = 0u64;
        for ((_, le), n) in BUCKETS.iter().zip(&counts) {
            cumulative = cumulative.wrapping_add(*n);
            writeln!(out, "{NAME}_bucket{{le=\"{le}\"}} {cumulative}")?;
        }
        let total = counts.iter().fold(0u64, |a, n| a.wrapping_add(*n));
        writeln!(out, "{NAME}_bucket{{le=\"+Inf\"}} {total}")?;
        let sum = self.origin.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        writeln!(out, "{NAME}_sum {}", float(sum))?;
        writeln!(out, "{NAME}_count {total}")?;

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
    let gauges: [(&str, &str, u64); 7] = [
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
fn float(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        format!("{v}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
        for (_, le) in BUCKETS {
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
        for (i, &(bound, le)) in BUCKETS.iter().enumerate() {
            let m = Metrics::new();
            let nanos = u64::try_from(bound).unwrap();
            m.record_origin(Duration::from_nanos(nanos), false);
            // One nanosecond past the bound goes to the next bucket.
            m.record_origin(Duration::from_nanos(nanos + 1), false);
            let t = render(&m);
            assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"{le}\"}}")), "1");
            if i > 0 {
                let below = BUCKETS[i - 1].1;
                assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"{below}\"}}")), "0");
            }
            if let Some(&(_, above)) = BUCKETS.get(i + 1) {
                assert_eq!(sample(&t, &format!("{name}_bucket{{le=\"{above}\"}}")), "2");
            }
        }
    }

    #[test]
    fn bucket_labels_match_bounds() {
        for (nanos, le) in BUCKETS {
            let secs: f64 = le.parse().unwrap();
            assert_eq!((secs * 1e9).round() as u128, nanos, "{le}");
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
            "quire_fills_busy_total",
            "quire_fastpath_handovers_total",
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
        ] {
            assert!(sampled.contains(name), "missing family {name}");
        }
        assert_eq!(types.len(), 32);

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
        assert_eq!(m.origin.sum_micros.load(Ordering::Relaxed), micros);
    }

    #[test]
    fn metrics_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<Metrics>();
    }
}
