//! Whether an origin is taken for requests: passive checks (requests' failures),
//! active checks (a GET of `health_path` every `health_interval`), and the
//! transitions between up and down.
//!
//! Key decisions:
//! - **Down after `max_fails` failed requests in a row** (connection failures and
//!   timeouts; an answer of any status is a working origin — a 500 is the origin's
//!   to give), **or after one failed active check**, which runs on a schedule
//!   of its own and so is never a fluke of one client's request.
//! - **With active checks, only a passing check brings an origin back**; a request
//!   already in flight that succeeds does not undo a failed check.
//! - **Without them, a down origin is tried again by one request** every
//!   `health_interval` (a compare-and-swap picks the one): its success brings the
//!   origin back, its failure keeps it down for another interval. No request waits
//!   for that: the others go elsewhere meanwhile, or fail fast when no origin of
//!   their pool is up, which is when `stale-if-error` copies are served.
//! - **Active checks run on their own thread**, with a runtime and connections of
//!   their own: a stalled check never takes a worker thread or a connection slot of
//!   the request path, and a probe opens the connection a request would.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Weak;
use std::time::{Duration, Instant};

use crate::error::{Fault, Side};
use crate::upstream::error::OriginError;

/// One origin's health.
#[derive(Debug)]
pub(crate) struct Health {
    name: String,
    up: AtomicBool,
    fails: AtomicU32,
    max_fails: u32,
    /// Whether active checks decide when it comes back.
    active: bool,
    interval: Duration,
    since: Instant,
    /// Milliseconds since `since` after which one request may try a down origin.
    retry_at_ms: AtomicU64,
    marked_down: AtomicU64,
    checks_passed: AtomicU64,
    checks_failed: AtomicU64,
    /// A probe after a suspicion is in flight (one at a time).
    probing: AtomicBool,
}

impl Health {
    /// An origin named `name` (for the log), up until it fails.
    pub(crate) fn new(name: String, max_fails: u32, active: bool, interval: Duration) -> Health {
        Health {
            name,
            up: AtomicBool::new(true),
            fails: AtomicU32::new(0),
            max_fails: max_fails.max(1),
            active,
            interval,
            since: Instant::now(),
            retry_at_ms: AtomicU64::new(0),
            marked_down: AtomicU64::new(0),
            checks_passed: AtomicU64::new(0),
            checks_failed: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    /// Whether requests are sent to it.
    pub(crate) fn is_up(&self) -> bool {
        self.up.load(Ordering::Acquire)
    }

    /// For a down origin without active checks: whether this request is the one
    /// that tries it again now (at most one per `health_interval`).
    pub(crate) fn try_again(&self) -> bool {
        if self.active || self.is_up() {
            return false;
        }
        let now = self.now_ms();
        let at = self.retry_at_ms.load(Ordering::Acquire);
        now >= at
            && self
                .retry_at_ms
                .compare_exchange(
                    at,
                    now + self.interval_ms(),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
    }

    /// A request got a response head.
    pub(crate) fn request_ok(&self) {
        self.fails.store(0, Ordering::Relaxed);
        if !self.active && !self.is_up() {
            self.mark_up("a request succeeded");
        }
    }

    /// A request failed (`why`, for the log).
    pub(crate) fn request_failed(&self, why: &str) {
        let n = self.fails.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= self.max_fails {
            self.mark_down(&format!("{n} requests failed in a row, the last: {why}"));
        }
    }

    /// Whether this caller starts the one probe in flight (see
    /// [`crate::upstream::origins`]); `end_probe` when it is over.
    pub(crate) fn start_probe(&self) -> bool {
        !self.probing.swap(true, Ordering::AcqRel)
    }

    /// The probe started by `start_probe` is over.
    pub(crate) fn end_probe(&self) {
        self.probing.store(false, Ordering::Release);
    }

    /// An active check passed.
    pub(crate) fn check_passed(&self) {
        self.checks_passed.fetch_add(1, Ordering::Relaxed);
        self.fails.store(0, Ordering::Relaxed);
        if !self.is_up() {
            self.mark_up("its health check passed");
        }
    }

    /// An active check failed (`why`, for the log).
    pub(crate) fn check_failed(&self, why: &str) {
        self.checks_failed.fetch_add(1, Ordering::Relaxed);
        self.mark_down(&format!("health check failed: {why}"));
    }

    fn mark_down(&self, why: &str) {
        self.retry_at_ms
            .store(self.now_ms() + self.interval_ms(), Ordering::Release);
        if self.up.swap(false, Ordering::AcqRel) {
            self.marked_down.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(origin = %self.name, "origin marked down: {why}");
        }
    }

    fn mark_up(&self, why: &str) {
        if !self.up.swap(true, Ordering::AcqRel) {
            tracing::info!(origin = %self.name, "origin back up: {why}");
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX / 2)
    }

    fn interval_ms(&self) -> u64 {
        u64::try_from(self.interval.as_millis()).unwrap_or(u64::MAX / 4)
    }

    /// `(checks passed, checks failed, times marked down)`.
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (
            self.checks_passed.load(Ordering::Relaxed),
            self.checks_failed.load(Ordering::Relaxed),
            self.marked_down.load(Ordering::Relaxed),
        )
    }
}

/// What an active check of one origin needs.
#[derive(Debug)]
pub(crate) struct Check {
    /// The member it checks (an index into the origins' members).
    pub(crate) member: usize,
    /// A client of its own for the origin (see the module doc).
    pub(crate) origin: crate::upstream::origin::Origin,
    /// The request target.
    pub(crate) path: String,
    /// The `Host` it sends.
    pub(crate) host: String,
    /// The status it expects; `None`: any 2xx or 3xx.
    pub(crate) status: Option<u16>,
    pub(crate) interval: Duration,
    pub(crate) timeout: Duration,
    /// A probe after a suspicion: `HEAD`, and any answer in time passes.
    pub(crate) head_any_status: bool,
}

impl Check {
    /// One check: `Ok` when the origin answered as expected in time.
    pub(crate) async fn run(&self) -> Result<(), CheckError> {
        let mut req = http::Request::new(crate::upstream::origin::empty_body());
        if self.head_any_status {
            *req.method_mut() = http::Method::HEAD;
        }
        *req.uri_mut() = self.path.parse().map_err(|_| CheckError::BadPath)?;
        let h = req.headers_mut();
        if let Ok(v) = http::HeaderValue::from_str(&self.host) {
            h.insert(http::header::HOST, v);
        }
        h.insert(
            http::header::USER_AGENT,
            http::HeaderValue::from_static("quire-health-check"),
        );
        let sent = tokio::time::timeout(self.timeout, self.origin.exchange(req)).await;
        let resp = match sent {
            Err(_) => return Err(CheckError::Timeout(self.timeout)),
            Ok(Err(e)) => return Err(CheckError::Origin(OriginError::from(e))),
            Ok(Ok(r)) => r,
        };
        let got = resp.status().as_u16();
        let ok = match self.status {
            _ if self.head_any_status => true,
            Some(want) => got == want,
            None => (200..400).contains(&got),
        };
        if ok {
            Ok(())
        } else {
            Err(CheckError::Status {
                path: self.path.clone(),
                got,
            })
        }
    }
}

/// Why an active check (or a probe) of an origin failed; the message goes to the
/// log line that marks the origin down.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum CheckError {
    /// `health_path` is not a request target (the configuration's fault).
    #[error("bad health_path")]
    BadPath,
    /// No response head within `health_timeout`.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The request failed: no connection, or no usable answer.
    #[error(transparent)]
    Origin(OriginError),
    /// The origin answered with a status the check does not take.
    #[error("{path} answered {got}")]
    Status {
        /// The request target.
        path: String,
        /// The status it answered.
        got: u16,
    },
}

/// A check is a `GET` or `HEAD` of one path, safe to send again: the next check
/// may pass where this one failed unless the configuration or the answer says
/// otherwise.
impl Fault for CheckError {
    fn side(&self) -> Side {
        match self {
            CheckError::BadPath => Side::Internal,
            CheckError::Origin(e) => e.side(),
            CheckError::Timeout(_) | CheckError::Status { .. } => Side::Upstream,
        }
    }

    fn retry(&self) -> bool {
        match self {
            CheckError::BadPath | CheckError::Status { .. } => false,
            CheckError::Timeout(_) => true,
            CheckError::Origin(e) => e.retry(),
        }
    }
}

/// Runs `checks` until `health` (each member's) is dropped, on a thread named
/// `quire-health` with a one-thread runtime of its own.
pub(crate) fn spawn<H>(checks: Vec<Check>, health: Weak<H>) -> std::io::Result<()>
where
    H: HealthOf + Send + Sync + 'static,
{
    if checks.is_empty() {
        return Ok(());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("quire-health".into())
        .spawn(move || {
            rt.block_on(async move {
                let mut tasks = tokio::task::JoinSet::new();
                for c in checks {
                    tasks.spawn(check_loop(c, health.clone()));
                }
                while tasks.join_next().await.is_some() {}
            });
        })?;
    Ok(())
}

/// Who holds the members' health (the origins, held weakly by the checks).
pub(crate) trait HealthOf {
    /// Member `i`'s health.
    fn health(&self, i: usize) -> &Health;
}

async fn check_loop<H: HealthOf>(c: Check, health: Weak<H>) {
    loop {
        let outcome = c.run().await;
        let Some(owner) = health.upgrade() else {
            return;
        };
        match outcome {
            Ok(()) => owner.health(c.member).check_passed(),
            Err(why) => owner.health(c.member).check_failed(&why.to_string()),
        }
        drop(owner);
        tokio::time::sleep(c.interval).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passive_failures_mark_down_after_max_fails_and_a_success_resets() {
        let h = Health::new("o".into(), 3, false, Duration::from_secs(60));
        h.request_failed("refused");
        h.request_failed("refused");
        h.request_ok();
        h.request_failed("refused");
        h.request_failed("refused");
        assert!(h.is_up(), "two in a row since the success");
        h.request_failed("refused");
        assert!(!h.is_up());
        assert_eq!(h.counts().2, 1);
        assert!(!h.try_again(), "not before the interval");
    }

    #[test]
    fn one_request_at_a_time_tries_a_down_origin_again() {
        let h = Health::new("o".into(), 1, false, Duration::from_millis(100));
        h.request_failed("refused");
        assert!(!h.is_up());
        std::thread::sleep(Duration::from_millis(120));
        assert!(h.try_again(), "the interval has passed");
        assert!(!h.try_again(), "one request per interval");
        h.request_ok();
        assert!(h.is_up(), "its success brings it back");
    }

    #[test]
    fn with_active_checks_only_a_check_brings_it_back() {
        let h = Health::new("o".into(), 3, true, Duration::from_millis(1));
        h.check_failed("503");
        assert!(!h.is_up(), "one failed check is enough");
        std::thread::sleep(Duration::from_millis(5));
        assert!(
            !h.try_again(),
            "requests never probe an actively checked origin"
        );
        h.request_ok();
        assert!(!h.is_up(), "a late success does not undo the check");
        h.check_passed();
        assert!(h.is_up());
        assert_eq!(h.counts(), (1, 1, 1));
    }
}
