//! How many requests one origin has in flight, and what became of them.
//!
//! Each [`Origin`](super::Origin) owns a [`Slots`]: a semaphore of
//! `limits.origin_connections` permits (or the `[[origins]]` entry's
//! `max_connections`). A request takes a permit before it is sent and keeps it until
//! its response body has ended or is dropped ([`Permitted`]), so the number of
//! requests in flight — and with HTTP/1.1 the number of open connections, since a
//! pooled connection carries one request at a time — never exceeds the limit. A
//! request that finds no permit waits at most the connect timeout, then fails as
//! "busy": quire never queues without bound in front of a slow origin, and with
//! several origins a busy one is skipped for the next.
//!
//! [`OriginStats`] counts outcomes for `/_quire/metrics` (see [`write_families`]).

use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::upstream::{BoxError, UpBody};

/// The in-flight limit of one origin.
#[derive(Debug)]
pub(crate) struct Slots {
    permits: Arc<Semaphore>,
    max: usize,
}

impl Slots {
    /// `max` requests at once (at least one).
    pub(crate) fn new(max: usize) -> Slots {
        let max = max.max(1);
        Slots {
            permits: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// A permit, waiting at most `wait` for one; `None` when the origin stayed busy.
    pub(crate) async fn take(&self, wait: Duration) -> Option<OwnedSemaphorePermit> {
        if let Ok(p) = self.permits.clone().try_acquire_owned() {
            return Some(p);
        }
        match tokio::time::timeout(wait, self.permits.clone().acquire_owned()).await {
            Ok(Ok(p)) => Some(p),
            // Timed out, or closed (never: the semaphore is not closed).
            _ => None,
        }
    }

    /// The limit.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Requests in flight now.
    pub(crate) fn in_flight(&self) -> usize {
        self.max - self.permits.available_permits()
    }
}

/// A response body that holds its request's permit until it ends or is dropped.
pub(crate) struct Permitted {
    body: UpBody,
    permit: Option<OwnedSemaphorePermit>,
}

impl Permitted {
    /// `body`, releasing `permit` when it ends.
    pub(crate) fn wrap(body: UpBody, permit: OwnedSemaphorePermit) -> Permitted {
        Permitted {
            body,
            permit: Some(permit),
        }
    }
}

impl Body for Permitted {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, Poll::Ready(None | Some(Err(_)))) {
            // Ended or failed: the connection is back in the pool or gone.
            self.permit = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// What one origin's requests came to.
#[derive(Debug, Default)]
pub(crate) struct OriginStats {
    ok: AtomicU64,
    failed: AtomicU64,
    timed_out: AtomicU64,
    busy: AtomicU64,
}

/// One request's outcome, for [`OriginStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// A response head arrived.
    Ok,
    /// Connection or protocol failure.
    Failed,
    /// No response head in time.
    TimedOut,
    /// No permit free in time.
    Busy,
}

impl OriginStats {
    /// Counts one request.
    pub(crate) fn count(&self, o: Outcome) {
        let c = match o {
            Outcome::Ok => &self.ok,
            Outcome::Failed => &self.failed,
            Outcome::TimedOut => &self.timed_out,
            Outcome::Busy => &self.busy,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self, o: Outcome) -> u64 {
        match o {
            Outcome::Ok => &self.ok,
            Outcome::Failed => &self.failed,
            Outcome::TimedOut => &self.timed_out,
            Outcome::Busy => &self.busy,
        }
        .load(Ordering::Relaxed)
    }
}

/// One origin as the metrics show it.
pub(crate) struct Row<'a> {
    /// Its URL (the `origin` label).
    pub(crate) url: String,
    /// Its counters.
    pub(crate) stats: &'a OriginStats,
    /// Its in-flight limit.
    pub(crate) slots: &'a Slots,
}

/// Writes the per-origin request families for `rows`.
pub(crate) fn write_families(out: &mut String, rows: &[Row<'_>]) {
    out.push_str(
        "# HELP quire_origin_requests_total Requests sent to each origin, by result: ok (a response head came), error (connection or protocol failure), timeout (no head in time), busy (no connection free within the connect timeout; not sent).\n\
         # TYPE quire_origin_requests_total counter\n",
    );
    let results = [
        (Outcome::Ok, "ok"),
        (Outcome::Failed, "error"),
        (Outcome::TimedOut, "timeout"),
        (Outcome::Busy, "busy"),
    ];
    for r in rows {
        for (o, name) in results {
            let n = r.stats.get(o);
            let _ = writeln!(
                out,
                "quire_origin_requests_total{{origin=\"{}\",result=\"{name}\"}} {n}",
                label(&r.url)
            );
        }
    }
    family(
        out,
        "quire_origin_in_flight",
        "gauge",
        "Requests to each origin whose response has not ended.",
        rows.iter()
            .map(|r| (r.url.as_str(), r.slots.in_flight() as u64)),
    );
    family(
        out,
        "quire_origin_connections_max",
        "gauge",
        "Requests each origin may have in flight at once.",
        rows.iter().map(|r| (r.url.as_str(), r.slots.max() as u64)),
    );
}

/// One family with a value per origin (`origin="<url>"`).
pub(crate) fn family<S: AsRef<str>>(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    values: impl Iterator<Item = (S, u64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (url, v) in values {
        let _ = writeln!(out, "{name}{{origin=\"{}\"}} {v}", label(url.as_ref()));
    }
}

/// `s` as a Prometheus label value.
pub(crate) fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_permit_is_held_until_the_body_ends() {
        let slots = Slots::new(1);
        let p = slots.take(Duration::ZERO).await.expect("a free slot");
        assert_eq!(slots.in_flight(), 1);
        assert!(
            slots.take(Duration::from_millis(10)).await.is_none(),
            "the only slot is taken"
        );
        let body = http_body_util::Full::new(Bytes::from_static(b"abc"))
            .map_err(|never| -> BoxError { match never {} })
            .boxed_unsync();
        let mut b = Permitted::wrap(body, p);
        let data = b.frame().await.expect("a frame").expect("no error");
        assert_eq!(data.into_data().expect("data"), "abc");
        assert!(b.frame().await.is_none());
        assert_eq!(slots.in_flight(), 0, "released at the end, before the drop");
        drop(b);
        assert!(slots.take(Duration::ZERO).await.is_some());
    }

    #[tokio::test]
    async fn a_dropped_body_releases_its_permit() {
        let slots = Slots::new(2);
        let p = slots.take(Duration::ZERO).await.expect("a free slot");
        let body = http_body_util::Empty::<Bytes>::new()
            .map_err(|never| -> BoxError { match never {} })
            .boxed_unsync();
        let b = Permitted::wrap(body, p);
        assert_eq!(slots.in_flight(), 1);
        drop(b);
        assert_eq!(slots.in_flight(), 0);
    }

    #[test]
    fn metrics_name_each_origin_and_result() {
        let stats = OriginStats::default();
        stats.count(Outcome::Ok);
        stats.count(Outcome::Ok);
        stats.count(Outcome::Busy);
        let slots = Slots::new(8);
        let mut out = String::new();
        write_families(
            &mut out,
            &[Row {
                url: "http://a:1".into(),
                stats: &stats,
                slots: &slots,
            }],
        );
        assert!(
            out.contains("quire_origin_requests_total{origin=\"http://a:1\",result=\"ok\"} 2\n")
        );
        assert!(
            out.contains("quire_origin_requests_total{origin=\"http://a:1\",result=\"busy\"} 1\n")
        );
        assert!(out.contains("quire_origin_connections_max{origin=\"http://a:1\"} 8\n"));
        assert_eq!(label("a\"b\\c"), "a\\\"b\\\\c");
    }
}
