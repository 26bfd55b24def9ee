//! The log's queue and the thread that writes it.
//!
//! A request formats its line and appends it to a queue; one dedicated thread
//! writes the queue out. The request side never waits on the file:
//! - **The queue is one buffer of bytes**, bounded by `queue_bytes` (a line can be
//!   kilobytes long: a long target, a long user agent). A line that would pass the
//!   bound is dropped and counted (`quire_log_dropped_total`); the request goes on.
//!   Appending takes a lock for the copy of one line (a few hundred bytes) and
//!   nothing else: no allocation, no system call. The writer takes the same lock
//!   only to swap the full buffer for an empty one, never for a write. (A channel
//!   of one allocated line each cost a third more CPU per hit than no log at all:
//!   each line was allocated on a request thread and freed on the writer's.)
//! - **No system call per line**: the writer is not woken for each line (a futex
//!   wake per request would cost more than the line). It wakes every
//!   [`WRITE_EVERY`] on its own, or early when the queue passes half its bound, and
//!   writes everything queued with one `write`.
//! - **A write that blocks blocks only the writer**: a full disk, a slow NFS mount
//!   or a FIFO nobody reads stops this thread in `write`; requests keep going and
//!   their lines are dropped once the queue is full.
//! - **A line is whole or alone.** A write that fails part-way (a full disk takes
//!   some bytes of a batch, then `ENOSPC`) can leave a line cut in the file; the
//!   writer remembers where its bytes stopped, and when they stopped inside a line
//!   the next batch starts with a newline, so the torn fragment stays a line of its
//!   own and never glues onto the next one (which a reader would then misparse).
//!   Lines wholly written before the failure count as written, the rest dropped.
//! - **Reopen** (`SIGUSR1`, logrotate's convention): the writer opens the path again
//!   after writing what is queued, so lines go to the new file from then on; if the
//!   open fails, it keeps the old file and says so.
//! - The file is opened without blocking (`O_NONBLOCK`, so a FIFO with no reader is
//!   an error at start-up instead of a hang), then switched to blocking writes for
//!   the writer thread.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

/// How often the writer wakes on its own to write what is queued.
pub(crate) const WRITE_EVERY: Duration = Duration::from_millis(100);

/// Counters shared by the request side and the writer.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Lines written.
    pub(crate) lines: AtomicU64,
    /// Lines dropped: the queue was full, or their write failed.
    pub(crate) dropped: AtomicU64,
    /// Writes (and reopens) that failed.
    pub(crate) errors: AtomicU64,
    reopen: AtomicBool,
    stop: AtomicBool,
    /// Set when a line was dropped for want of room, cleared when the writer takes
    /// the queue: while set, lines are dropped before they are even formatted.
    full: AtomicBool,
}

/// Lines waiting for the writer.
#[derive(Debug, Default)]
struct Pending {
    bytes: Vec<u8>,
    lines: u64,
}

/// What the request side and the writer share.
#[derive(Debug)]
struct Shared {
    pending: Mutex<Pending>,
    max_bytes: usize,
    counters: Counters,
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The request side of the log: a queue bounded by bytes.
#[derive(Debug)]
pub(crate) struct Queue {
    shared: Arc<Shared>,
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
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let shared = Arc::new(Shared {
            pending: Mutex::new(Pending::default()),
            max_bytes,
            counters: Counters::default(),
        });
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("quire-access-log".into())
            .spawn(move || {
                Writer {
                    shared: s,
                    out: sink,
                    output,
                    spare: Vec::new(),
                    torn: false,
                }
                .run();
                let _ = done_tx.send(());
            })?;
        Ok(Queue {
            shared,
            writer: handle.thread().clone(),
            handle: Mutex::new(Some((handle, done_rx))),
        })
    }

    /// The counters.
    pub(crate) fn counters(&self) -> &Counters {
        &self.shared.counters
    }

    /// Bytes queued and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.shared.pending().bytes.len()
    }

    /// Queues `line`, or drops it (counted) when the queue is full. Never waits
    /// on the writer's I/O.
    pub(crate) fn push(&self, line: &[u8]) {
        let c = &self.shared.counters;
        let max = self.shared.max_bytes;
        let mut p = self.shared.pending();
        let before = p.bytes.len();
        if before + line.len() > max || c.stop.load(Ordering::Relaxed) {
            drop(p);
            c.full.store(true, Ordering::Relaxed);
            c.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        p.bytes.extend_from_slice(line);
        p.lines += 1;
        drop(p);
        // Crossing half the bound wakes the writer early; below it, it wakes alone.
        if before <= max / 2 && before + line.len() > max / 2 {
            self.writer.unpark();
        }
    }

    /// Drops a line (counted) without looking at it when the queue was full the
    /// last time a line came and the writer has not taken it since: `true` then.
    pub(crate) fn drop_if_full(&self) -> bool {
        let c = &self.shared.counters;
        if c.full.load(Ordering::Relaxed) {
            c.dropped.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Asks the writer to reopen the output after what is queued.
    pub(crate) fn reopen(&self) {
        self.shared.counters.reopen.store(true, Ordering::Relaxed);
        self.writer.unpark();
    }

    /// Writes what is queued and stops the writer, waiting at most `wait` for it
    /// (a write blocked on a FIFO nobody reads is left behind). Lines queued after
    /// this are dropped.
    pub(crate) fn finish(&self, wait: Duration) -> bool {
        self.shared.counters.stop.store(true, Ordering::Relaxed);
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

/// A log replaced by a reload: its writer writes what is queued and ends (lines
/// of requests still in flight then hold the log, and the queue, until they end).
impl Drop for Queue {
    fn drop(&mut self) {
        self.shared.counters.stop.store(true, Ordering::Relaxed);
        self.writer.unpark();
    }
}

/// One `write`, retried when a signal interrupted it.
fn write_some(out: &mut Box<dyn Write + Send>, buf: &[u8]) -> io::Result<usize> {
    loop {
        match out.write(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// The writer thread's state.
struct Writer {
    shared: Arc<Shared>,
    out: Box<dyn Write + Send>,
    output: Output,
    /// The buffer swapped in for the queue's (its capacity kept between rounds).
    spare: Vec<u8>,
    /// The output ends inside a line (a write failed part-way).
    torn: bool,
}

impl Writer {
    fn run(mut self) {
        loop {
            let stopping = self.shared.counters.stop.load(Ordering::Relaxed);
            self.write_pending();
            if self.shared.counters.reopen.swap(false, Ordering::Relaxed) {
                self.reopen();
            }
            if stopping {
                return;
            }
            std::thread::park_timeout(WRITE_EVERY);
        }
    }

    /// Takes what is queued (swapping buffers under the lock) and writes it.
    fn write_pending(&mut self) {
        self.spare.clear();
        let lines = {
            let mut p = self.shared.pending();
            std::mem::swap(&mut p.bytes, &mut self.spare);
            self.shared.counters.full.store(false, Ordering::Relaxed);
            std::mem::take(&mut p.lines)
        };
        if lines == 0 {
            return;
        }
        let (written, result) = self.write_spare();
        let c = &self.shared.counters;
        let whole = self.spare[..written]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        c.lines.fetch_add(whole.min(lines), Ordering::Relaxed);
        if let Err(e) = result {
            c.dropped
                .fetch_add(lines.saturating_sub(whole), Ordering::Relaxed);
            if c.errors
                .fetch_add(1, Ordering::Relaxed)
                .is_multiple_of(1000)
            {
                tracing::warn!(error = %e, "access log: write failed; lines are dropped");
            }
        }
        if self.spare.capacity() > 4 * self.shared.max_bytes.max(1 << 16) {
            self.spare = Vec::new();
        }
    }

    /// Writes the batch in `spare` (after the newline that ends a torn line, if
    /// one is owed); how many of its bytes went out, and how it ended.
    fn write_spare(&mut self) -> (usize, io::Result<()>) {
        if self.torn {
            match write_some(&mut self.out, b"\n") {
                Ok(1) => self.torn = false,
                Ok(_) => return (0, Err(io::ErrorKind::WriteZero.into())),
                Err(e) => return (0, Err(e)),
            }
        }
        let mut off = 0;
        while off < self.spare.len() {
            match write_some(&mut self.out, &self.spare[off..]) {
                Ok(0) => {
                    self.torn = off > 0 && self.spare[off - 1] != b'\n';
                    return (off, Err(io::ErrorKind::WriteZero.into()));
                }
                Ok(n) => off += n,
                Err(e) => {
                    self.torn = off > 0 && self.spare[off - 1] != b'\n';
                    return (off, Err(e));
                }
            }
        }
        (off, self.out.flush())
    }

    fn reopen(&mut self) {
        match self.output.open() {
            Ok(sink) => {
                self.out = sink;
                tracing::info!("access log reopened");
            }
            Err(e) => {
                self.shared.counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "access log: reopen failed; still writing the old file");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink whose first write takes `partial` bytes and whose next one fails
    /// (a disk filling up), then works again.
    struct FillingDisk {
        out: Arc<Mutex<Vec<u8>>>,
        partial: Option<usize>,
        fail_next: bool,
    }

    impl Write for FillingDisk {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if let Some(n) = self.partial.take() {
                self.fail_next = true;
                self.out.lock().unwrap().extend_from_slice(&buf[..n]);
                return Ok(n);
            }
            if std::mem::take(&mut self.fail_next) {
                return Err(io::Error::from(io::ErrorKind::StorageFull));
            }
            self.out.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn wait_until(cond: impl Fn() -> bool) {
        for _ in 0..400 {
            if cond() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn a_torn_line_after_a_failed_write_never_glues_onto_the_next() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = FillingDisk {
            out: out.clone(),
            partial: Some(11),
            fail_next: false,
        };
        let q = Queue::start(Output::Stdout, Box::new(sink), 1 << 20).unwrap();
        q.push(b"first line\n");
        q.push(b"second line\n");
        wait_until(|| q.counters().errors.load(Ordering::Relaxed) > 0);
        q.push(b"third line\n");
        assert!(q.finish(Duration::from_secs(5)));
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "first line\nthird line\n");
        let c = q.counters();
        assert_eq!(
            c.lines.load(Ordering::Relaxed),
            2,
            "the first and the third"
        );
        assert_eq!(c.dropped.load(Ordering::Relaxed), 1, "the second");
    }

    #[test]
    fn a_line_cut_inside_is_ended_before_the_next_batch() {
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = FillingDisk {
            out: out.clone(),
            partial: Some(4),
            fail_next: false,
        };
        let q = Queue::start(Output::Stdout, Box::new(sink), 1 << 20).unwrap();
        q.push(b"cut here\n");
        wait_until(|| q.counters().errors.load(Ordering::Relaxed) > 0);
        q.push(b"whole\n");
        assert!(q.finish(Duration::from_secs(5)));
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        assert_eq!(text, "cut \nwhole\n", "the fragment is a line of its own");
        assert_eq!(q.counters().dropped.load(Ordering::Relaxed), 1);
    }
}
