//! The exporter: a bounded queue that requests offer finished spans to, and one
//! thread that drains it in batches and posts them to the collector.
//!
//! A request never waits here. `offer` is a `try_send` on a bounded channel: when
//! the queue is full the span is dropped and counted, and the call returns. The
//! thread holds no lock a request takes while it sends (it owns the receiver and
//! its connection alone), and a batch the collector does not take within
//! `tracing.timeout` (down, refusing, accepting and never reading) is dropped
//! and counted too. So a stalled collector costs the exporter its batches and
//! costs requests nothing — the test in `tests/tracing.rs` holds it to that.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::otlp;
use super::post::{Endpoint, Poster};
use super::record::SpanData;

/// What the exporter did with the spans offered to it.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    /// Spans the collector accepted.
    exported: AtomicU64,
    /// Spans dropped: the queue was full.
    queue_full: AtomicU64,
    /// Spans dropped: their batch failed (unreachable, refused, too slow).
    export_failed: AtomicU64,
    /// Batches posted, and those that failed.
    batches: AtomicU64,
    batches_failed: AtomicU64,
    /// Spans in the queue now.
    queued: AtomicU64,
}

/// The exporter's side the spans go into.
#[derive(Debug)]
pub struct Exporter {
    tx: SyncSender<SpanData>,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    /// Closed by the thread when it has sent what was queued at the stop.
    done: std::sync::Mutex<Option<Receiver<()>>>,
}

/// How batches are made and sent.
#[derive(Debug, Clone)]
pub(crate) struct Batching {
    /// Spans queued at most.
    pub(crate) queue: usize,
    /// Spans a batch holds at most.
    pub(crate) batch: usize,
    /// Longest a batch waits to be sent.
    pub(crate) delay: Duration,
    /// Longest one export may take.
    pub(crate) timeout: Duration,
    /// `service.name`.
    pub(crate) service: String,
}

impl Exporter {
    /// Starts the export thread posting to `endpoint`.
    pub(crate) fn start(endpoint: Endpoint, b: Batching) -> std::io::Result<Exporter> {
        let (tx, rx) = mpsc::sync_channel(b.queue);
        let counts = Arc::new(Counts::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (done_tx, done_rx) = mpsc::channel();
        let worker = Worker {
            rx,
            counts: counts.clone(),
            stop: stop.clone(),
            poster: Poster::new(endpoint),
            b,
        };
        std::thread::Builder::new()
            .name("quire-trace".into())
            .spawn(move || {
                worker.run();
                drop(done_tx);
            })?;
        Ok(Exporter {
            tx,
            counts,
            stop,
            done: std::sync::Mutex::new(Some(done_rx)),
        })
    }

    /// An exporter with no thread and a queue of one that nothing drains, for
    /// tests of spans themselves.
    #[cfg(test)]
    pub(crate) fn dropping() -> Exporter {
        let (tx, rx) = mpsc::sync_channel(1);
        std::mem::forget(rx);
        Exporter {
            tx,
            counts: Arc::new(Counts::default()),
            stop: Arc::new(AtomicBool::new(false)),
            done: std::sync::Mutex::new(None),
        }
    }

    /// Queues a finished span, or drops and counts it when the queue is full.
    /// Never blocks.
    pub(crate) fn offer(&self, span: SpanData) {
        match self.tx.try_send(span) {
            Ok(()) => {
                self.counts.queued.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counts.queue_full.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Asks the thread to send what is queued and stop; waits for it at most
    /// `wait` (the server's drain calls this last).
    pub fn shutdown(&self, wait: Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let done = self.done.lock().ok().and_then(|mut d| d.take());
        if let Some(done) = done {
            let _ = done.recv_timeout(wait);
        }
    }

    /// The `quire_trace_*` families.
    pub fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let c = &self.counts;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        // Writing to a String cannot fail.
        let _ = write!(
            out,
            "# HELP quire_trace_spans_total Spans finished, by what became of them.\n\
             # TYPE quire_trace_spans_total counter\n\
             quire_trace_spans_total{{result=\"exported\"}} {}\n\
             quire_trace_spans_total{{result=\"dropped_queue_full\"}} {}\n\
             quire_trace_spans_total{{result=\"dropped_export_failed\"}} {}\n\
             # HELP quire_trace_exports_total Batches posted to the collector.\n\
             # TYPE quire_trace_exports_total counter\n\
             quire_trace_exports_total{{result=\"ok\"}} {}\n\
             quire_trace_exports_total{{result=\"failed\"}} {}\n\
             # HELP quire_trace_queue_spans Spans waiting for the exporter.\n\
             # TYPE quire_trace_queue_spans gauge\n\
             quire_trace_queue_spans {}\n",
            load(&c.exported),
            load(&c.queue_full),
            load(&c.export_failed),
            load(&c.batches) - load(&c.batches_failed),
            load(&c.batches_failed),
            load(&c.queued),
        );
    }
}

/// The export thread's state.
struct Worker {
    rx: Receiver<SpanData>,
    counts: Arc<Counts>,
    stop: Arc<AtomicBool>,
    poster: Poster,
    b: Batching,
}

/// How often the thread looks at the stop flag while the queue is quiet.
const STOP_POLL: Duration = Duration::from_millis(200);

impl Worker {
    fn run(mut self) {
        let mut batch = Vec::with_capacity(self.b.batch);
        let mut since = Instant::now();
        loop {
            let stopping = self.stop.load(Ordering::Relaxed);
            let due = since + self.b.delay;
            // With nothing waiting to be sent, sleep until a span comes (or it is
            // time to look at the stop flag again): a thread that woke on a past
            // deadline here would spin a core.
            let wait = match batch.is_empty() {
                true => STOP_POLL,
                false => due.saturating_duration_since(Instant::now()).min(STOP_POLL),
            };
            match self.rx.recv_timeout(wait) {
                Ok(span) => {
                    if batch.is_empty() {
                        since = Instant::now();
                    }
                    batch.push(span);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.send(&mut batch);
                    return;
                }
            }
            let full = batch.len() >= self.b.batch;
            if full || (!batch.is_empty() && Instant::now() >= due) {
                self.send(&mut batch);
            }
            if stopping {
                while let Ok(span) = self.rx.try_recv() {
                    batch.push(span);
                    if batch.len() >= self.b.batch {
                        self.send(&mut batch);
                    }
                }
                self.send(&mut batch);
                return;
            }
        }
    }

    /// Posts `batch` (and empties it), counting what became of it.
    fn send(&mut self, batch: &mut Vec<SpanData>) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        self.counts.queued.fetch_sub(n, Ordering::Relaxed);
        let body = otlp::encode(&self.b.service, batch);
        batch.clear();
        self.counts.batches.fetch_add(1, Ordering::Relaxed);
        match self.poster.post(&body, self.b.timeout) {
            Ok(status) if (200..300).contains(&status) => {
                self.counts.exported.fetch_add(n, Ordering::Relaxed);
            }
            outcome => {
                self.counts.batches_failed.fetch_add(1, Ordering::Relaxed);
                self.counts.export_failed.fetch_add(n, Ordering::Relaxed);
                tracing::debug!(?outcome, spans = n, "a trace batch was not exported");
            }
        }
    }
}
