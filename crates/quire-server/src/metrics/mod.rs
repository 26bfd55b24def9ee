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
//!   nanoseconds; the sum is kept in nanoseconds and rendered in seconds. It is the
//!   request histograms' type and bounds (`latency`: 25 µs to 10 s).

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

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

const _: () = assert!(
    latency::OUTCOMES == Outcome::ALL.len(),
    "the latency histograms keep every outcome apart"
);

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

/// Bytes the fast path's kept recipes hold, over every worker thread of the process
/// (`crate::http1::repeat`; the tables are per thread, not per server).
pub(crate) static REPEAT_BYTES: AtomicU64 = AtomicU64::new(0);

/// One thread's per-request counters: 17 words, padded to their own 256 bytes
/// (whole pairs of lines on x86, where the adjacent-line prefetcher pairs them).
#[repr(align(128))]
#[derive(Debug, Default)]
struct Stripe {
    outcomes: [AtomicU64; Outcome::ALL.len()],
    classes: [AtomicU64; CLASSES],
    body_bytes: AtomicU64,
    /// Signed-in requests under their audience's keys (counted on the hit path).
    audience_requests: AtomicU64,
    /// Fast-path hits answered from a recipe kept for the same head.
    repeats: AtomicU64,
}

const _: () = assert!(
    std::mem::size_of::<Stripe>() == 256,
    "a stripe is four lines"
);

fn stripe_index() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES;
    }
    MINE.with(|m| *m)
}

/// What became of a URL queued to be filled before anyone asks
/// (`crate::request::prefill`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefilled {
    /// Filled and stored.
    Stored,
    /// Stored under its current key already: nothing to do.
    Fresh,
    /// Answered, but not stored (not storable, or no fill slot).
    NotStored,
    /// The fill failed.
    Failed,
    /// The queue was full.
    Dropped,
}

impl Prefilled {
    /// Every result, in label order.
    pub const ALL: [Prefilled; 5] = [
        Prefilled::Stored,
        Prefilled::Fresh,
        Prefilled::NotStored,
        Prefilled::Failed,
        Prefilled::Dropped,
    ];

    /// The `result` label.
    pub const fn label(self) -> &'static str {
        match self {
            Prefilled::Stored => "stored",
            Prefilled::Fresh => "fresh",
            Prefilled::NotStored => "not_stored",
            Prefilled::Failed => "failed",
            Prefilled::Dropped => "dropped",
        }
    }
}

/// The server's metrics. Shared by reference (`Arc<Metrics>`) between the
/// connections that record and the admin endpoint that renders; every method takes
/// `&self` and is lock-free.
#[derive(Debug)]
pub struct Metrics {
    stripes: [Stripe; STRIPES],
    latency: latency::Latency,
    top: top_urls::TopUrls,
    /// The origin's latency: bounds as the request histograms' (see `latency`).
    origin: latency::Buckets,
    origin_errors: AtomicU64,
    fills: [AtomicU64; FillResult::ALL.len()],
    coalesced: AtomicU64,
    prefills: [AtomicU64; Prefilled::ALL.len()],
    previous_hits: AtomicU64,
    prefetches_refused: AtomicU64,
    agents_refused: AtomicU64,
    cold_reads: AtomicU64,
    /// Refresh-ahead revalidations: started, skipped (no free budget slot).
    refresh_ahead: [AtomicU64; 2],
    fills_busy: AtomicU64,
    handovers: AtomicU64,
    /// Connections the hit loops hold (`crate::http1::hit_loop`).
    parked: AtomicI64,
    /// Connections the hit loops handed to a task of their own.
    handoffs: AtomicU64,
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
            latency: latency::Latency::default(),
            top: top_urls::TopUrls::default(),
            origin: latency::Buckets::default(),
            origin_errors: AtomicU64::new(0),
            fills: Default::default(),
            coalesced: AtomicU64::new(0),
            prefills: Default::default(),
            previous_hits: AtomicU64::new(0),
            prefetches_refused: AtomicU64::new(0),
            agents_refused: AtomicU64::new(0),
            cold_reads: AtomicU64::new(0),
            refresh_ahead: Default::default(),
            fills_busy: AtomicU64::new(0),
            handovers: AtomicU64::new(0),
            parked: AtomicI64::new(0),
            handoffs: AtomicU64::new(0),
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

    /// How long one request of `outcome` took, from its head read to its response
    /// head ready (`quire_request_duration_seconds`, see `latency`).
    pub fn record_duration(&self, outcome: Outcome, took: Duration) {
        self.latency.observe(stripe_index(), outcome.index(), took);
    }

    /// A hit on `url` (path and query), for the hottest URLs (sampled, never waits:
    /// see `top_urls`).
    pub fn record_hot(&self, url: &str) {
        self.top.hit(url);
    }

    /// A miss on `url`, for the URLs missing most (never waits).
    pub fn record_missing(&self, url: &str) {
        self.top.miss(url);
    }

    /// The `n` URLs missing most and the `n` hottest, lately, with estimated counts.
    pub fn top_urls(&self, n: usize) -> (top_urls::Counted, top_urls::Counted) {
        self.top.top(n)
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

    /// One URL the prefill task took (or could not queue).
    pub fn record_prefill(&self, result: Prefilled) {
        self.prefills[result as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// URLs the prefill task took with `result` so far.
    pub fn prefills(&self, result: Prefilled) -> u64 {
        self.prefills[result as usize].load(Ordering::Relaxed)
    }

    /// A miss was answered from a previous version of its page while the current
    /// one is made (`Upstream::previous_version`).
    pub fn record_previous_hit(&self) {
        self.previous_hits.fetch_add(1, Ordering::Relaxed);
    }

    /// A hit near the end of its lifetime started a background revalidation
    /// (`started`), or found no free budget slot for one.
    pub fn record_refresh_ahead(&self, started: bool) {
        self.refresh_ahead[usize::from(!started)].fetch_add(1, Ordering::Relaxed);
    }

    /// Refresh-ahead revalidations started so far.
    pub fn refresh_ahead_started(&self) -> u64 {
        self.refresh_ahead[0].load(Ordering::Relaxed)
    }

    /// A hit's entry was not in memory and was read in off the worker.
    pub fn record_cold_read(&self) {
        self.cold_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// Entries read in off the worker so far.
    pub fn cold_reads(&self) -> u64 {
        self.cold_reads.load(Ordering::Relaxed)
    }

    /// A prefetch the store could not serve as it was was answered 503
    /// (`crate::request::prefetch`).
    pub fn record_prefetch_refused(&self) {
        self.prefetches_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// A request from an AI crawler `[agents]` names was refused.
    pub fn record_agent_refused(&self) {
        self.agents_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests from refused AI crawlers so far.
    pub fn agents_refused(&self) -> u64 {
        self.agents_refused.load(Ordering::Relaxed)
    }

    /// Prefetches refused so far.
    pub fn prefetches_refused(&self) -> u64 {
        self.prefetches_refused.load(Ordering::Relaxed)
    }

    /// Misses answered from a previous version so far.
    pub fn previous_hits(&self) -> u64 {
        self.previous_hits.load(Ordering::Relaxed)
    }

    /// Signed-in requests looked up under their audience's keys so far.
    pub fn audience_requests(&self) -> u64 {
        self.sum_stripes(|s| &s.audience_requests)
    }

    /// A signed-in reader's request was looked up under its audience's keys.
    pub fn record_audience_request(&self) {
        self.stripe()
            .audience_requests
            .fetch_add(1, Ordering::Relaxed);
    }

    /// A fast-path hit was answered from a recipe kept for its head
    /// (`crate::http1::repeat`).
    pub fn record_repeat(&self) {
        self.stripe().repeats.fetch_add(1, Ordering::Relaxed);
    }

    /// Fast-path hits answered from a kept recipe so far.
    pub fn repeats(&self) -> u64 {
        self.sum_stripes(|s| &s.repeats)
    }

    /// A miss found no fill slot (in all, or for its client) and was passed through.
    pub fn record_fill_busy(&self) {
        self.fills_busy.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection left the HTTP/1.1 fast path for the general one.
    pub fn record_handover(&self) {
        self.handovers.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections held by the hit loops: into (`by` 1) and out of (-1) a loop.
    pub(crate) fn record_parked(&self, by: i64) {
        self.parked.fetch_add(by, Ordering::Relaxed);
    }

    /// A hit loop handed a connection to a task of its own.
    pub(crate) fn record_loop_handoff(&self) {
        self.handoffs.fetch_add(1, Ordering::Relaxed);
    }

    /// Connections the hit loops handed to tasks so far.
    pub fn loop_handoffs(&self) -> u64 {
        self.handoffs.load(Ordering::Relaxed)
    }

    /// Connections the hit loops hold now.
    pub fn parked(&self) -> i64 {
        self.parked.load(Ordering::Relaxed)
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
}

mod latency;
mod render;
#[cfg(test)]
mod tests;
pub mod top_urls;

pub use render::{write_fill_path, FillPath};
