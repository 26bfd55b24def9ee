//! Every response makes progress or ends: the send-stall deadline of the
//! connections hyper serves (HTTP/2, and HTTP/1.1 after the fast path handed over).
//!
//! A response body pins what it reads from — a store region for a hit, an origin
//! connection and its permit for a pass — for as long as it lives. Two things can
//! keep one alive without a byte moving: a socket the client stopped reading (the
//! transport's write waits; [`crate::edge::guard::Guarded`] fails such a write after
//! `limits.send_stall`), and an HTTP/2 stream whose flow-control window the client
//! keeps shut (`SETTINGS_INITIAL_WINDOW_SIZE = 0`, no `WINDOW_UPDATE`, PINGs
//! answered): then nothing is written at all, hyper simply never asks the body for
//! its next frame, and no transport timeout can see it. This module sees it.
//!
//! How: each response body hyper is given is wrapped in a [`Watched`] registered
//! with its connection's [`Watch`]. The wrapper notes when it last handed hyper a
//! frame; from then until hyper asks again, the send clock runs. (While the body
//! itself is waiting — an origin still sending, a fill — the clock stops: that is the
//! origin's read timeout's business, not the client's.) The connection task sweeps
//! its watch every half `limits.send_stall`:
//! - a body whose clock passed `limits.send_stall` is **taken out of its wrapper and
//!   dropped**: its store pins, origin connection and permit go at once, and its
//!   access-log line is written. The stream itself ends with `RST_STREAM` when hyper
//!   next polls the wrapper (it gets an error: the client opened its window) or
//!   with its connection. Counted in
//!   `quire_send_stalls_total{scope="stream"}`.
//! - when every open response of the connection has stalled, **the connection
//!   closes** (its slot frees for other clients): a client that holds nothing but
//!   shut windows holds nothing for longer than `limits.send_stall`. Counted in
//!   `quire_send_stalls_total{scope="connection"}`.
//! - when the server is full ([`crate::edge::conns`]), a connection whose open responses
//!   have all been still for [`crate::edge::conns::REAP_IDLE_MIN`] closes at once instead
//!   of waiting for them: stalled clients never keep the health check or a new
//!   client out.
//!
//! Limits of the mechanism: it measures whether bytes move, not how fast, so a
//! client that opens its window one byte at a time just inside the deadline keeps
//! its responses alive (each still bounded by the connection and per-client caps);
//! and the one frame hyper already handed to the HTTP/2 library before the window
//! shut stays queued there (with its pin) until the stream is reset or the
//! connection closes.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use tokio::time::Instant;

use crate::request::body::{Body, BodyError};

/// The send clock is not running: the body is waiting on its source, or done.
const STOPPED: u64 = u64::MAX;

/// One response body as the watch sees it.
#[derive(Debug)]
struct Cell {
    /// The body; `None` once it was dropped for stalling.
    body: Mutex<Option<Body>>,
    /// When (ms since the watch's epoch) the send clock started, or [`STOPPED`].
    since: AtomicU64,
    /// Dropped for stalling.
    stalled: AtomicBool,
}

impl Cell {
    fn lock(&self) -> MutexGuard<'_, Option<Body>> {
        self.body.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One connection's response bodies.
#[derive(Debug, Clone)]
pub(crate) struct Watch {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    epoch: Instant,
    bodies: Mutex<Vec<Weak<Cell>>>,
}

/// What a sweep found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Sweep {
    /// Bodies alive (stalled ones included).
    pub(crate) open: usize,
    /// Of those, dropped for stalling (now or before).
    pub(crate) stalled: usize,
    /// Dropped by this sweep.
    pub(crate) newly: usize,
    /// Of the open ones, how many have not moved for the sweep's `still`.
    pub(crate) still: usize,
}

impl Sweep {
    /// Every open response stalled: nothing on the connection is worth keeping.
    pub(crate) fn all_stalled(&self) -> bool {
        self.open > 0 && self.stalled == self.open
    }
}

impl Watch {
    /// An empty watch.
    pub(crate) fn new() -> Watch {
        Watch {
            shared: Arc::new(Shared {
                epoch: Instant::now(),
                bodies: Mutex::new(Vec::new()),
            }),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.shared.epoch.elapsed().as_millis()).unwrap_or(STOPPED - 1)
    }

    /// `body`, watched (an empty one needs no watching: hyper never polls it).
    pub(crate) fn wrap(&self, body: Body) -> Watched {
        use http_body::Body as _;
        if body.is_end_stream() {
            return Watched(Inner::Done(body));
        }
        let cell = Arc::new(Cell {
            body: Mutex::new(Some(body)),
            since: AtomicU64::new(self.now_ms()),
            stalled: AtomicBool::new(false),
        });
        let mut bodies = self.lock();
        bodies.retain(|w| w.strong_count() > 0);
        bodies.push(Arc::downgrade(&cell));
        drop(bodies);
        Watched(Inner::Watched {
            cell,
            epoch: self.shared.epoch,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Weak<Cell>>> {
        self.shared.bodies.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Drops every body whose send clock passed `stall`, and reports how many are
    /// open, stalled, and still for at least `still`.
    pub(crate) fn sweep(&self, stall: Duration, still: Duration) -> Sweep {
        let now = self.now_ms();
        let stall = u64::try_from(stall.as_millis()).unwrap_or(u64::MAX);
        let still = u64::try_from(still.as_millis()).unwrap_or(u64::MAX);
        let mut dropped = Vec::new();
        let mut s = Sweep::default();
        let mut bodies = self.lock();
        bodies.retain(|w| {
            let Some(cell) = w.upgrade() else {
                return false;
            };
            s.open += 1;
            let since = cell.since.load(Ordering::Relaxed);
            let waited = (since != STOPPED).then(|| now.saturating_sub(since));
            if cell.stalled.load(Ordering::Relaxed) {
                s.stalled += 1;
                s.still += 1;
            } else if waited.is_some_and(|w| w >= stall) {
                cell.stalled.store(true, Ordering::Relaxed);
                dropped.extend(cell.lock().take());
                s.stalled += 1;
                s.newly += 1;
                s.still += 1;
            } else if waited.is_some_and(|w| w >= still) {
                s.still += 1;
            }
            true
        });
        drop(bodies);
        // Dropped outside the lock: a body's drop may write an access-log line.
        drop(dropped);
        s
    }
}

/// A response body under a [`Watch`].
#[derive(Debug)]
pub(crate) struct Watched(Inner);

#[derive(Debug)]
enum Inner {
    /// An empty body, not watched.
    Done(Body),
    /// A body the watch may drop.
    Watched {
        /// The shared state.
        cell: Arc<Cell>,
        /// The watch's epoch, for the clock.
        epoch: Instant,
    },
}

/// The error a stalled body ends with (hyper resets the stream).
#[derive(Debug, thiserror::Error)]
#[error("the response made no progress for limits.send_stall")]
pub(crate) struct Stalled;

impl http_body::Body for Watched {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let (cell, epoch) = match &mut self.get_mut().0 {
            Inner::Done(b) => return Pin::new(b).poll_frame(cx),
            Inner::Watched { cell, epoch } => (cell, *epoch),
        };
        let mut body = cell.lock();
        let Some(b) = body.as_mut() else {
            return Poll::Ready(Some(Err(Box::new(Stalled))));
        };
        let polled = Pin::new(b).poll_frame(cx);
        let since = match &polled {
            // hyper holds a frame: the clock runs until it asks for the next.
            Poll::Ready(Some(Ok(_))) => {
                u64::try_from(epoch.elapsed().as_millis()).unwrap_or(STOPPED - 1)
            }
            _ => STOPPED,
        };
        cell.since.store(since, Ordering::Relaxed);
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.0 {
            Inner::Done(b) => http_body::Body::is_end_stream(b),
            Inner::Watched { cell, .. } => cell
                .lock()
                .as_ref()
                .is_none_or(http_body::Body::is_end_stream),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            Inner::Done(b) => http_body::Body::size_hint(b),
            Inner::Watched { cell, .. } => cell
                .lock()
                .as_ref()
                .map_or_else(SizeHint::default, http_body::Body::size_hint),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn a_body_hyper_stops_asking_for_is_dropped_after_the_stall() {
        let watch = Watch::new();
        let mut moving = watch.wrap(Body::full("a"));
        let mut stuck = watch.wrap(Body::full("b"));
        // Both handed a frame; only one is asked again (and ends).
        assert!(stuck.frame().await.is_some());
        assert!(moving.frame().await.is_some());
        assert!(moving.frame().await.is_none(), "ended");
        let never = watch.sweep(Duration::MAX, Duration::MAX);
        assert_eq!((never.open, never.stalled, never.still), (2, 0, 0));
        let s = watch.sweep(Duration::ZERO, Duration::ZERO);
        assert_eq!((s.open, s.stalled, s.newly, s.still), (2, 1, 1, 1));
        assert!(!s.all_stalled(), "the ended one is not stalled");
        drop(moving);
        let s = watch.sweep(Duration::ZERO, Duration::ZERO);
        assert_eq!((s.open, s.stalled, s.newly), (1, 1, 0), "counted once");
        assert!(s.all_stalled());
        let err = stuck.frame().await.unwrap().unwrap_err();
        assert!(err.is::<Stalled>(), "{err}");
    }

    #[tokio::test]
    async fn a_body_waiting_on_its_source_is_not_stalled() {
        let watch = Watch::new();
        let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(1);
        let pending = http_body_util::StreamBody::new(futures_stream(rx));
        let mut w = watch.wrap(Body::Origin(pending.boxed_unsync()));
        let poll = futures_poll(&mut w);
        assert!(poll.is_pending(), "the source has nothing yet");
        let s = watch.sweep(Duration::ZERO, Duration::ZERO);
        assert_eq!((s.open, s.stalled, s.still), (1, 0, 0));
        drop(tx);
    }

    #[tokio::test]
    async fn a_body_never_asked_for_stalls_from_its_start() {
        let watch = Watch::new();
        let _w = watch.wrap(Body::full("never polled"));
        assert_eq!(watch.sweep(Duration::ZERO, Duration::ZERO).newly, 1);
        let _empty = watch.wrap(Body::Empty);
        assert_eq!(
            watch.sweep(Duration::ZERO, Duration::ZERO).open,
            1,
            "not watched"
        );
    }

    fn futures_poll(w: &mut Watched) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        Pin::new(w).poll_frame(&mut cx)
    }

    /// A stream of frames from `rx`.
    fn futures_stream(
        rx: tokio::sync::mpsc::Receiver<Bytes>,
    ) -> impl futures_core::Stream<Item = Result<Frame<Bytes>, crate::upstream::BoxError>> {
        struct S(tokio::sync::mpsc::Receiver<Bytes>);
        impl futures_core::Stream for S {
            type Item = Result<Frame<Bytes>, crate::upstream::BoxError>;
            fn poll_next(
                mut self: Pin<&mut Self>,
                cx: &mut Context<'_>,
            ) -> Poll<Option<Self::Item>> {
                self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
            }
        }
        S(rx)
    }
}
