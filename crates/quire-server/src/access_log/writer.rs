//! The log's queue and the thread that writes it.
//!
//! A request formats its line and hands it to a queue; one dedicated thread writes
//! the queue out. The request side never waits:
//! - **Bounded by bytes, not lines**: a line can be kilobytes long (a long target,
//!   a long user agent), so the bound is `queue_bytes` of queued lines. A line that
//!   would pass it is dropped and counted (`quire_log_dropped_total`); the request
//!   goes on.
//! - **No system call per line**: the writer is not woken for each line (a futex
//!   wake per request would cost more than the line). It wakes every
//!   [`WRITE_EVERY`] on its own, or early when the queue passes half its bound, and
//!   writes everything queued through one buffer: a few `write`s a second.
//! - **A write that blocks blocks only the writer**: a full disk, a slow NFS mount
//!   or a FIFO nobody reads stops this thread in `write`; requests keep going and
//!   their lines are dropped once the queue is full.
//! - **Reopen** (`SIGUSR1`, logrotate's convention): the writer opens the path again
//!   after writing what is queued, so lines go to the new file from then on; if the
//!   open fails, it keeps the old file and says so.
//! - The file is opened without blocking (`O_NONBLOCK`, so a FIFO with no reader is
//!   an error at start-up instead of a hang), then switched to blocking writes for
//!   the writer thread.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

/// How often the writer wakes on its own to write what is queued.
pub(crate) const WRITE_EVERY: Duration = Duration::from_millis(100);

/// Counters shared by the request side and the writer.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Bytes queued and not yet written.
    pub(crate) queued: AtomicUsize,
    /// Lines written (counted when the buffer holding them is flushed).
    pub(crate) lines: AtomicU64,
    /// Lines dropped: the queue was full, or their write failed.
    pub(crate) dropped: AtomicU64,
    /// Writes (and reopens) that failed.
    pub(crate) errors: AtomicU64,
    reopen: AtomicBool,
    stop: AtomicBool,
}

/// The request side of the log: a queue bounded by bytes.
#[derive(Debug)]
pub(crate) struct Queue {
    tx: Sender<Vec<u8>>,
    max_bytes: usize,
    pub(crate) counters: Arc<Counters>,
    writer: Thread,
    handle: Mutex<Option<(JoinHandle<()>, Receiver<()>)>>,
}

/// Where lines go.
#[derive(Debug)]
pub(crate) enum Output {
    /// Standard output (`-`).
    Stdout,
    /// A file (or FIFO), reopened by path.
    File(PathBuf),
}

impl Output {
    /// Opens the output: see the module doc.
    pub(crate) fn open(&self) -> io::Result<Box<dyn Write + Send>> {
        match self {
            Output::Stdout => Ok(Box::new(io::stdout())),
            Output::File(p) => Ok(Box::new(open_file(p)?)),
        }
    }
}

fn open_file(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(code) if code == rustix::io::Errno::NXIO.raw_os_error() => io::Error::new(
                e.kind(),
                "it is a FIFO and no process has it open for reading",
            ),
            _ => e,
        })?;
    let flags = rustix::fs::fcntl_getfl(&file)?;
    rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)?;
    Ok(file)
}

impl Queue {
    /// Starts the writer thread on `sink` (already open), reopening `output` when
    /// asked.
    pub(crate) fn start(
        output: Output,
        sink: Box<dyn Write + Send>,
        max_bytes: usize,
    ) -> io::Result<Queue> {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let counters = Arc::new(Counters::default());
        let c = counters.clone();
        let handle = std::thread::Builder::new()
            .name("quire-access-log".into())
            .spawn(move || {
                Writer {
                    rx,
                    out: io::BufWriter::with_capacity(64 << 10, sink),
                    output,
                    counters: c,
                    pending: 0,
                }
                .run();
                let _ = done_tx.send(());
            })?;
        Ok(Queue {
            tx,
            max_bytes,
            counters,
            writer: handle.thread().clone(),
            handle: Mutex::new(Some((handle, done_rx))),
        })
    }

    /// Queues `line`, or drops it (counted) when the queue is full. Never waits.
    pub(crate) fn push(&self, line: Vec<u8>) {
        let len = line.len();
        let before = self.counters.queued.fetch_add(len, Ordering::Relaxed);
        if before + len > self.max_bytes || self.counters.stop.load(Ordering::Relaxed) {
            self.counters.queued.fetch_sub(len, Ordering::Relaxed);
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self.tx.send(line).is_err() {
            // The writer is gone (shut down).
            self.counters.queued.fetch_sub(len, Ordering::Relaxed);
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // Crossing half the bound wakes the writer early; below it, it wakes alone.
        if before <= self.max_bytes / 2 && before + len > self.max_bytes / 2 {
            self.writer.unpark();
        }
    }

    /// Asks the writer to reopen the output after what is queued.
    pub(crate) fn reopen(&self) {
        self.counters.reopen.store(true, Ordering::Relaxed);
        self.writer.unpark();
    }

    /// Writes what is queued and stops the writer, waiting at most `wait` for it
    /// (a write blocked on a FIFO nobody reads is left behind). Lines queued after
    /// this are dropped.
    pub(crate) fn finish(&self, wait: Duration) -> bool {
        self.counters.stop.store(true, Ordering::Relaxed);
        self.writer.unpark();
        let Some((handle, done)) = self.handle.lock().ok().and_then(|mut h| h.take()) else {
            return true;
        };
        if done.recv_timeout(wait).is_ok() {
            let _ = handle.join();
            true
        } else {
            false
        }
    }
}

/// The writer thread's state.
struct Writer {
    rx: Receiver<Vec<u8>>,
    out: io::BufWriter<Box<dyn Write + Send>>,
    output: Output,
    counters: Arc<Counters>,
    /// Lines in `out`'s buffer, not yet known to be written.
    pending: u64,
}

impl Writer {
    fn run(mut self) {
        loop {
            let stopping = self.counters.stop.load(Ordering::Relaxed);
            self.drain();
            self.flush();
            if self.counters.reopen.swap(false, Ordering::Relaxed) {
                self.reopen();
            }
            if stopping {
                return;
            }
            std::thread::park_timeout(WRITE_EVERY);
        }
    }

    /// Moves every queued line into the buffer (which writes as it fills).
    fn drain(&mut self) {
        while let Ok(line) = self.rx.try_recv() {
            self.counters
                .queued
                .fetch_sub(line.len(), Ordering::Relaxed);
            if let Err(e) = self.out.write_all(&line) {
                self.failed(&e);
                continue;
            }
            self.pending += 1;
        }
    }

    fn flush(&mut self) {
        match self.out.flush() {
            Ok(()) => self.written(),
            Err(e) => self.failed(&e),
        }
    }

    fn written(&mut self) {
        self.counters
            .lines
            .fetch_add(std::mem::take(&mut self.pending), Ordering::Relaxed);
    }

    /// A failed write loses what the buffer held: counted as dropped (the lines
    /// since the last flush: an upper bound, as part of them may have gone out),
    /// and said in the log once per thousand failures, not once per line.
    fn failed(&mut self, e: &io::Error) {
        let lost = std::mem::take(&mut self.pending) + 1;
        self.counters.dropped.fetch_add(lost, Ordering::Relaxed);
        if self.counters.errors.fetch_add(1, Ordering::Relaxed) % 1000 == 0 {
            tracing::warn!(error = %e, "access log: write failed; lines are dropped");
        }
        // Whatever part of the buffer did not go is dropped with it.
        let out = std::mem::replace(
            &mut self.out,
            io::BufWriter::new(Box::new(io::sink()) as Box<dyn Write + Send>),
        );
        let (sink, _unwritten) = out.into_parts();
        self.out = io::BufWriter::with_capacity(64 << 10, sink);
    }

    fn reopen(&mut self) {
        match self.output.open() {
            Ok(sink) => {
                self.flush();
                self.out = io::BufWriter::with_capacity(64 << 10, sink);
                tracing::info!("access log reopened");
            }
            Err(e) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "access log: reopen failed; still writing the old file");
            }
        }
    }
}
