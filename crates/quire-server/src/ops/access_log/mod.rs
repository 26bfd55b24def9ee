//! The access log (`[log] access`, `--access-log`): one line per answered request,
//! in nginx's `combined` format plus the cache outcome, or as JSON ([`line`]).
//!
//! Off the hit path's critical section: a request formats its line (a few hundred
//! bytes, no lock) and queues it; a dedicated thread writes ([`writer`]). A full
//! queue drops lines and counts them; nothing a log file does (fill the disk,
//! block, disappear) can make a request wait.
//!
//! When a line is written:
//! - a fast-path hit, after its answer was written to the socket;
//! - everything else, when its response body ends or is dropped ([`Ticket`] rides
//!   in the body, see [`crate::request::body::Body::Logged`]): `bytes` are the body bytes
//!   that were handed to the connection, `duration` runs to the end of the body, as
//!   nginx's `$body_bytes_sent` and `$request_time` do. A client that left
//!   mid-body is logged with the bytes it got.

mod line;
mod writer;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use http::{HeaderMap, HeaderValue, Method, Uri};

pub use crate::config::{Format, LogSection};
pub(crate) use line::Entry;
pub use line::Upstream;

use crate::edge::client::{Client, TrustedProxies};
use writer::{Output, Queue};

/// The access log cannot be opened.
#[derive(Debug, thiserror::Error)]
#[error("access log {path}: {source}")]
pub struct LogError {
    path: String,
    source: std::io::Error,
}

/// A running access log.
#[derive(Debug)]
pub struct AccessLog {
    format: Format,
    queue: Queue,
}

impl AccessLog {
    /// Opens the log `section` names, and starts its writer; `None` when the log is
    /// off.
    pub fn open(section: &LogSection) -> Result<Option<Arc<AccessLog>>, LogError> {
        let Some(path) = &section.access else {
            return Ok(None);
        };
        let output = if path.as_os_str() == "-" {
            Output::Stdout
        } else {
            Output::File(path.clone())
        };
        let err = |source| LogError {
            path: path.display().to_string(),
            source,
        };
        let sink = output.open().map_err(err)?;
        let max = usize::try_from(section.queue_bytes.0).unwrap_or(usize::MAX);
        let queue = Queue::start(output, sink, max).map_err(err)?;
        Ok(Some(Arc::new(AccessLog {
            format: section.format,
            queue,
        })))
    }

    /// Opens the file `section` names as [`AccessLog::open`] would (creating it),
    /// and closes it again: whether the log can be opened.
    pub fn check(section: &LogSection) -> Result<(), LogError> {
        match &section.access {
            Some(path) if path.as_os_str() != "-" => {
                let output = Output::File(path.clone());
                output.open().map(drop).map_err(|source| LogError {
                    path: path.display().to_string(),
                    source,
                })
            }
            _ => Ok(()),
        }
    }

    /// Formats `e` and queues it (or drops it, counted, when the queue is full).
    pub(crate) fn record(&self, e: &Entry<'_>) {
        if self.queue.drop_if_full() {
            return;
        }
        // Formatted outside the queue's lock, into this thread's scratch buffer.
        thread_local! {
            static LINE: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        LINE.with_borrow_mut(|line| {
            line.clear();
            e.write(self.format, line);
            self.queue.push(line);
            if line.capacity() > 64 << 10 {
                *line = Vec::new();
            }
        });
    }

    /// Reopens the file after what is queued (`SIGUSR1`, after logrotate moved it).
    pub fn reopen(&self) {
        self.queue.reopen();
    }

    /// Writes what is queued and stops, waiting at most `wait`; `false` when the
    /// writer was still blocked then.
    pub fn finish(&self, wait: Duration) -> bool {
        self.queue.finish(wait)
    }

    /// The log's counters in Prometheus text format.
    pub fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let c = self.queue.counters();
        let rows = [
            (
                "quire_log_lines_total",
                "counter",
                "Access-log lines written.",
                c.lines.load(Ordering::Relaxed),
            ),
            (
                "quire_log_dropped_total",
                "counter",
                "Access-log lines dropped: the queue was full (the writer could not keep up or its write blocked) or the write failed.",
                c.dropped.load(Ordering::Relaxed),
            ),
            (
                "quire_log_write_errors_total",
                "counter",
                "Access-log writes and reopens that failed.",
                c.errors.load(Ordering::Relaxed),
            ),
            (
                "quire_log_queue_bytes",
                "gauge",
                "Access-log bytes queued for the writer.",
                self.queue.queued() as u64,
            ),
        ];
        for (name, kind, help, v) in rows {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        }
    }
}

/// The client a log line names: the peer, or whom a trusted proxy names — the
/// client the limits count ([`Client::ip_or_peer`]).
pub(crate) fn client_ip(peer: SocketAddr, headers: &HeaderMap, trusted: &TrustedProxies) -> IpAddr {
    Client::ip_or_peer(peer, headers, trusted)
}

/// The line of a request refused before it was routed — by the framing guard
/// (ambiguous framing) or by hyper (a malformed or oversized head: 400 or 431) —
/// whose head was never parsed into a request: the peer as client, `-` for the
/// method and target.
pub(crate) fn refused_before_routing(log: &AccessLog, peer: SocketAddr, status: u16) {
    log.record(&Entry {
        time: SystemTime::now(),
        client: peer.ip().to_canonical(),
        method: "-",
        target: "-",
        version: http::Version::HTTP_11,
        status,
        bytes: 0,
        duration: std::time::Duration::ZERO,
        cache: "error",
        upstream: None,
        user_agent: None,
        referer: None,
    });
}

/// What a request's log line needs from the request, taken before the request is
/// handed on; completed with the answer and logged when dropped (at the end of the
/// response body).
#[derive(Debug)]
pub struct Ticket {
    log: Arc<AccessLog>,
    start: Instant,
    client: IpAddr,
    method: Method,
    target: Uri,
    version: http::Version,
    user_agent: Option<HeaderValue>,
    referer: Option<HeaderValue>,
    status: u16,
    cache: &'static str,
    upstream: Option<Upstream>,
    /// Body bytes handed to the connection so far.
    pub(crate) bytes: u64,
}

impl Ticket {
    /// A ticket for `req` (header values are shared, not copied).
    pub(crate) fn new<B>(
        log: Arc<AccessLog>,
        req: &http::Request<B>,
        client: IpAddr,
        start: Instant,
    ) -> Ticket {
        let h = req.headers();
        Ticket {
            log,
            start,
            client,
            method: req.method().clone(),
            target: req.uri().clone(),
            version: req.version(),
            user_agent: h.get(http::header::USER_AGENT).cloned(),
            referer: h.get(http::header::REFERER).cloned(),
            status: 0,
            cache: "error",
            upstream: None,
            bytes: 0,
        }
    }

    /// Completes the ticket with the answer's status, outcome and upstream.
    pub(crate) fn answered(&mut self, status: u16, cache: &'static str, up: Option<Upstream>) {
        self.status = status;
        self.cache = cache;
        self.upstream = up;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let target = self.target.path_and_query().map_or("/", |p| p.as_str());
        self.log.record(&Entry {
            time: SystemTime::now(),
            client: self.client,
            method: self.method.as_str(),
            target,
            version: self.version,
            status: self.status,
            bytes: self.bytes,
            duration: self.start.elapsed(),
            cache: self.cache,
            upstream: self.upstream,
            user_agent: self.user_agent.as_ref().map(HeaderValue::as_bytes),
            referer: self.referer.as_ref().map(HeaderValue::as_bytes),
        });
    }
}
