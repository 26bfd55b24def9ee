//! View counts per note, kept off the read path: a profile of the note server quire grew
//! from found view-tracking writes and other per-request queries at ~32 % of its CPU,
//! serialised on its connection-pool lock, so writes a read causes leave the read path.
//!
//! A page view costs the reader one [`Views::record_shared`]: a `try_send` into a bounded
//! queue and two relaxed atomic adds (the writer polls the queue, so a send never
//! wakes a thread). It never waits: when the queue is full the view
//! is dropped and [`Views::dropped`] counts it. One writer thread drains the queue,
//! sums views per note in memory and writes a batch every `BATCH_INTERVAL` or
//! `BATCH_EVENTS_MAX` events, in one SQLite transaction
//! (`INSERT .. ON CONFLICT DO UPDATE SET count = count + excluded.count`). The database
//! is in WAL mode; admin pages read through a separate read-only connection, so they
//! never wait on the writer, and the writer never waits on them.
//!
//! Lifecycle: `open` → `record`/`flush`/`counts` → `close` (or drop). Closing hangs up
//! the queue; the writer drains everything already queued, writes a final batch and
//! exits, and `close` joins it. So a graceful stop (SIGTERM) loses no recorded view:
//! call `close` (or drop the last owner) before the process exits.
//!
//! On a cluster node a [`ViewSink`] set with [`Views::share_with`] also gets every
//! view once, summed per note, each time the writer writes a batch (whether or not
//! this node's database took it), so the cluster's totals do not depend on any one
//! node's disk.
//!
//! Counts are keyed by the note's vault-relative path ([`crate::Note::path`]): the
//! stable identifier, unlike URLs, which follow slugs. Record only paths of existing
//! notes; arbitrary request paths would let strangers fill the table.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, SyncSender, TryRecvError, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};

/// How often the writer looks at the queue (see `Writer::run`); also the longest a
/// `flush` waits before its batch is written.
const TICK: Duration = Duration::from_millis(20);

/// Longest batch wait: a recorded view is on disk within about this long.
const BATCH_INTERVAL: Duration = Duration::from_millis(200);
/// Views that make the writer write before the interval is up. Views are summed per
/// note before they are written, so a batch's cost follows the notes it touches, not
/// its views: writing early only adds transactions. This bounds how many views a
/// crash can lose, not memory.
const BATCH_EVENTS_MAX: u64 = 100_000;
/// Longest note path counted, bytes; longer ones are dropped.
const PATH_LEN_MAX: usize = 1024;
/// Distinct notes held in memory while the database refuses writes; views of further
/// notes are dropped until a write succeeds.
const BATCH_KEYS_MAX: usize = 100_000;
/// Wait after a failed write before trying again.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Attempts at the final write on close.
const FINAL_ATTEMPTS: u32 = 3;
const SCHEMA_VERSION: i64 = 1;
const UPSERT: &str = "INSERT INTO views(path, count) VALUES (?1, ?2) \
                      ON CONFLICT(path) DO UPDATE SET count = count + excluded.count";

/// Why the view counts cannot be opened or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewsError {
    /// SQLite refused (a file that is not a database, a full disk, permissions).
    #[error("views database {}: {source}", path.display())]
    Db {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: rusqlite::Error,
    },
    /// The database is not one this version of quire can use.
    #[error("views database {}: {message}", path.display())]
    Schema {
        /// The database file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The writer thread could not be started.
    #[error("views database {}: cannot start the writer thread: {source}", path.display())]
    Thread {
        /// The database file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl quire_http::Fault for ViewsError {
    /// The views database is this server's own.
    fn side(&self) -> quire_http::Side {
        quire_http::Side::Internal
    }

    /// A busy or locked database, or a thread that could not start for now.
    fn retry(&self) -> bool {
        match self {
            ViewsError::Db { source, .. } => crate::fault::sqlite_busy(source),
            ViewsError::Thread { source, .. } => crate::fault::transient(source),
            ViewsError::Schema { .. } => false,
        }
    }
}

/// What goes through the queue. Views carry an `Arc<str>`: [`Views::record_shared`]
/// sends a clone of the caller's (no allocation), [`Views::record`] allocates one
/// path-sized string.
enum Msg {
    View(Arc<str>),
    /// Write what is pending, then answer.
    Flush(SyncSender<()>),
    /// Tests: answer on the first, then stop until the second hangs up.
    #[cfg(test)]
    Hold(mpsc::Sender<()>, Receiver<()>),
}

/// Where a cluster node's views go besides its own database (see the module doc).
pub trait ViewSink: Send + Sync {
    /// Takes views summed per note (vault-relative path, views). Called on the
    /// writer's thread once per batch: it must not block.
    fn add(&self, batch: &[(Arc<str>, u64)]);
}

/// The sink, once set.
type Sink = Arc<OnceLock<Arc<dyn ViewSink>>>;

#[derive(Debug, Default)]
struct Counters {
    recorded: AtomicU64,
    dropped: AtomicU64,
    written: AtomicU64,
    write_errors: AtomicU64,
}

/// View counts: a bounded queue in front of a SQLite table. Share it behind an `Arc`;
/// at shutdown, `Arc::into_inner(views).map(Views::close)`.
pub struct Views {
    path: PathBuf,
    /// `None` only while dropping: hanging up is what stops the writer.
    tx: Option<SyncSender<Msg>>,
    writer: Option<JoinHandle<()>>,
    /// Read-only; admin pages only, never the read path.
    reader: Mutex<Connection>,
    counters: Arc<Counters>,
    sink: Sink,
}

impl std::fmt::Debug for Views {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Views")
            .field("path", &self.path)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl Views {
    /// Opens (creating if missing) the counts database at `db_path`, with a queue of
    /// `capacity` views (at least 1), and starts the writer.
    pub fn open(db_path: &Path, capacity: usize) -> Result<Views, ViewsError> {
        let db = |source| ViewsError::Db {
            path: db_path.to_owned(),
            source,
        };
        let conn = Connection::open(db_path).map_err(db)?;
        prepare(&conn, db_path)?;
        let reader = Connection::open_with_flags(
            db_path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(db)?;
        reader.busy_timeout(Duration::from_secs(5)).map_err(db)?;
        let (tx, rx) = mpsc::sync_channel(capacity.max(1));
        let counters = Arc::new(Counters::default());
        let sink = Sink::default();
        let writer = Writer {
            conn,
            rx,
            counters: Arc::clone(&counters),
            path: db_path.to_owned(),
            batch: HashMap::new(),
            pending: 0,
            sink: Arc::clone(&sink),
            unsent: HashMap::new(),
        };
        let handle = std::thread::Builder::new()
            .name("quire-views".into())
            .spawn(move || writer.run())
            .map_err(|source| ViewsError::Thread {
                path: db_path.to_owned(),
                source,
            })?;
        Ok(Views {
            path: db_path.to_owned(),
            tx: Some(tx),
            writer: Some(handle),
            reader: Mutex::new(reader),
            counters,
            sink,
        })
    }

    /// Sends every view counted from now on to `sink` as well (a cluster's totals).
    /// `false` if a sink was set already.
    pub fn share_with(&self, sink: Arc<dyn ViewSink>) -> bool {
        self.sink.set(sink).is_ok()
    }

    /// Counts a view of the note at vault-relative `path`. Never blocks: when the queue
    /// is full (or the path is over [`PATH_LEN_MAX`]) the view is dropped and counted
    /// in [`Views::dropped`]. Allocates one string the size of `path`.
    #[cfg(test)]
    fn record(&self, path: &str) {
        if path.len() > PATH_LEN_MAX {
            self.counters.dropped.fetch_add(1, Relaxed);
            return;
        }
        self.send(Arc::from(path));
    }

    /// Counts a view of the note at vault-relative `path`. Never blocks: when the queue
    /// is full (or the path is over `PATH_LEN_MAX`) the view is dropped and counted
    /// in [`Views::dropped`]. Allocates nothing: callers hold note paths as `Arc<str>`
    /// (built once per vault load).
    pub fn record_shared(&self, path: &Arc<str>) {
        if path.len() > PATH_LEN_MAX {
            self.counters.dropped.fetch_add(1, Relaxed);
            return;
        }
        self.send(Arc::clone(path));
    }

    fn send(&self, path: Arc<str>) {
        let sent = self.tx.as_ref().map(|tx| tx.try_send(Msg::View(path)));
        match sent {
            Some(Ok(())) => self.counters.recorded.fetch_add(1, Relaxed),
            Some(Err(TrySendError::Full(_) | TrySendError::Disconnected(_))) | None => {
                self.counters.dropped.fetch_add(1, Relaxed)
            }
        };
    }

    /// Views accepted into the queue.
    pub fn recorded(&self) -> u64 {
        self.counters.recorded.load(Relaxed)
    }

    /// Views not counted: queue full, path too long, or lost because the database
    /// refused the final write on close (logged).
    pub fn dropped(&self) -> u64 {
        self.counters.dropped.load(Relaxed)
    }

    /// Views committed to the database.
    pub fn written(&self) -> u64 {
        self.counters.written.load(Relaxed)
    }

    /// Batches the database refused (each is retried; see the log).
    #[cfg(test)]
    fn write_errors(&self) -> u64 {
        self.counters.write_errors.load(Relaxed)
    }

    /// Waits until every view recorded before the call is written (or its write has
    /// failed, and was logged). Blocks while the queue is full: for tests,
    /// admin pages and shutdown, never the read path.
    pub fn flush(&self) {
        let (ack, done) = mpsc::sync_channel(1);
        if let Some(tx) = &self.tx {
            if tx.send(Msg::Flush(ack)).is_ok() {
                let _ = done.recv();
            }
        }
    }

    /// Every note's count, most viewed first. Only views already written are included
    /// (at most `BATCH_INTERVAL` behind); call [`Views::flush`] first for exact
    /// numbers.
    pub fn counts(&self) -> Result<Vec<(String, u64)>, ViewsError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        let rows = (|| {
            let mut st =
                conn.prepare_cached("SELECT path, count FROM views ORDER BY count DESC, path")?;
            let rows = st.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?;
            rows.map(|r| r.map(|(p, n)| (p, u64::try_from(n).unwrap_or(0))))
                .collect::<Result<Vec<_>, _>>()
        })();
        rows.map_err(|source| self.db_error(source))
    }

    /// One note's count (0 if never viewed), written views only as for
    /// [`Views::counts`].
    pub fn count(&self, path: &str) -> Result<u64, ViewsError> {
        let conn = self.reader.lock().unwrap_or_else(|e| e.into_inner());
        let n = (|| {
            let mut st = conn.prepare_cached("SELECT count FROM views WHERE path = ?1")?;
            let mut rows = st.query([path])?;
            rows.next()?.map(|r| r.get::<_, i64>(0)).transpose()
        })();
        n.map(|n| n.map_or(0, |n| u64::try_from(n).unwrap_or(0)))
            .map_err(|source| self.db_error(source))
    }

    /// Stops the writer after it has written everything queued, and waits for it.
    #[cfg(test)]
    fn close(self) {
        drop(self);
    }

    fn db_error(&self, source: rusqlite::Error) -> ViewsError {
        ViewsError::Db {
            path: self.path.clone(),
            source,
        }
    }

    /// Stops the writer until the returned sender is dropped; returns once it has
    /// stopped, with the queue empty.
    #[cfg(test)]
    fn hold(&self) -> mpsc::Sender<()> {
        let (held, is_held) = mpsc::channel();
        let (release, released) = mpsc::channel();
        let tx = self.tx.as_ref().expect("open");
        tx.send(Msg::Hold(held, released)).expect("writer alive");
        is_held.recv().expect("writer holds");
        release
    }
}

impl Drop for Views {
    fn drop(&mut self) {
        // Hanging up ends the writer's loop once the queue is empty.
        drop(self.tx.take());
        if let Some(h) = self.writer.take() {
            if h.join().is_err() {
                tracing::error!(path = %self.path.display(), "the view-count writer panicked");
            }
        }
    }
}

/// WAL, the table, and the schema version.
fn prepare(conn: &Connection, path: &Path) -> Result<(), ViewsError> {
    let db = |source| ViewsError::Db {
        path: path.to_owned(),
        source,
    };
    conn.busy_timeout(Duration::from_secs(5)).map_err(db)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(db)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(ViewsError::Schema {
            path: path.to_owned(),
            message: format!("cannot switch to WAL mode (journal mode is {mode})"),
        });
    }
    // WAL + NORMAL: a commit survives a process crash; a power cut may lose the last
    // batches, which is fine for view counts.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(db)?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(db)?;
    if version > SCHEMA_VERSION {
        return Err(ViewsError::Schema {
            path: path.to_owned(),
            message: format!(
                "schema version {version} is newer than this quire's {SCHEMA_VERSION}"
            ),
        });
    }
    conn.execute_batch(&format!(
        "CREATE TABLE IF NOT EXISTS views(path TEXT PRIMARY KEY, count INTEGER NOT NULL);
         PRAGMA user_version = {SCHEMA_VERSION};"
    ))
    .map_err(db)
}

/// The writer thread's state: one connection, the batch being summed.
struct Writer {
    conn: Connection,
    rx: Receiver<Msg>,
    counters: Arc<Counters>,
    path: PathBuf,
    batch: HashMap<Arc<str>, u64>,
    /// Views in `batch`.
    pending: u64,
    sink: Sink,
    /// Views not yet given to the sink (only while one is set).
    unsent: HashMap<Arc<str>, u64>,
}

impl Writer {
    fn run(mut self) {
        // The writer polls: it sleeps a tick, then drains the queue without blocking.
        // A writer blocked in `recv` would be woken by every send — a futex wake and a
        // context switch per page view, on the hit path's core; measured, that cost
        // the hit path about a third of its throughput. Polling costs one wake-up per
        // tick whatever the rate.
        // When the batch is due; `None` while it is empty.
        let mut due: Option<Instant> = None;
        // Set after a failed write: no early writes until the retry time.
        let mut failing = false;
        loop {
            let mut hung_up = false;
            loop {
                match self.rx.try_recv() {
                    Ok(Msg::View(path)) => {
                        self.add(path);
                        due.get_or_insert_with(|| Instant::now() + BATCH_INTERVAL);
                        if self.pending >= BATCH_EVENTS_MAX && !failing {
                            failing = !self.write();
                            due = self.next_due(failing);
                        }
                    }
                    Ok(Msg::Flush(ack)) => {
                        failing = !self.write();
                        due = self.next_due(failing);
                        let _ = ack.send(());
                    }
                    #[cfg(test)]
                    Ok(Msg::Hold(held, release)) => {
                        let _ = held.send(());
                        let _ = release.recv();
                    }
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => {
                        hung_up = true;
                        break;
                    }
                }
            }
            if hung_up {
                break;
            }
            if due.is_some_and(|d| Instant::now() >= d) {
                failing = !self.write();
                due = self.next_due(failing);
            }
            std::thread::sleep(TICK);
        }
        self.finish();
    }

    fn add(&mut self, path: Arc<str>) {
        if self.batch.len() >= BATCH_KEYS_MAX && !self.batch.contains_key(&path) {
            self.counters.dropped.fetch_add(1, Relaxed);
            return;
        }
        if self.sink.get().is_some() {
            *self.unsent.entry(Arc::clone(&path)).or_insert(0) += 1;
        }
        *self.batch.entry(path).or_insert(0) += 1;
        self.pending += 1;
    }

    /// Gives the views not yet sent to the sink.
    fn send_unsent(&mut self) {
        if let (Some(sink), false) = (self.sink.get(), self.unsent.is_empty()) {
            let batch: Vec<(Arc<str>, u64)> = self.unsent.drain().collect();
            sink.add(&batch);
        }
    }

    fn next_due(&self, failing: bool) -> Option<Instant> {
        match (self.pending, failing) {
            (0, _) => None,
            (_, true) => Some(Instant::now() + RETRY_AFTER),
            (_, false) => Some(Instant::now() + BATCH_INTERVAL),
        }
    }

    /// Writes the batch in one transaction; on success empties it. Returns whether it
    /// succeeded (an empty batch always does).
    fn write(&mut self) -> bool {
        self.send_unsent();
        if self.pending == 0 {
            return true;
        }
        let result = (|| {
            let tx = self.conn.transaction()?;
            {
                let mut st = tx.prepare_cached(UPSERT)?;
                for (path, n) in &self.batch {
                    st.execute(rusqlite::params![
                        &**path,
                        i64::try_from(*n).unwrap_or(i64::MAX)
                    ])?;
                }
            }
            tx.commit()
        })();
        match result {
            Ok(()) => {
                self.counters.written.fetch_add(self.pending, Relaxed);
                self.batch.clear();
                self.pending = 0;
                true
            }
            Err(e) => {
                self.counters.write_errors.fetch_add(1, Relaxed);
                tracing::warn!(
                    path = %self.path.display(),
                    views = self.pending,
                    error = %e,
                    "view counts not written; retrying"
                );
                false
            }
        }
    }

    /// The queue is empty and hung up: the last batch, with a few tries.
    fn finish(mut self) {
        for attempt in 1..=FINAL_ATTEMPTS {
            if self.write() {
                return;
            }
            if attempt < FINAL_ATTEMPTS {
                std::thread::sleep(RETRY_AFTER / 4);
            }
        }
        self.counters.dropped.fetch_add(self.pending, Relaxed);
        tracing::error!(
            path = %self.path.display(),
            views = self.pending,
            "view counts lost on close: the database refused the final write"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("views.db");
        (dir, path)
    }

    fn total(v: &Views) -> u64 {
        v.counts().unwrap().iter().map(|(_, n)| n).sum()
    }

    #[test]
    fn views_are_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Views>();
    }

    #[test]
    fn every_view_recorded_before_close_is_on_disk_after() {
        let (_d, path) = db();
        let v = Views::open(&path, 10_000).unwrap();
        let notes = ["Home.md", "Caching/SWR.md", "a/b/c.md"];
        for i in 0..5000 {
            v.record(notes[i % 3]);
        }
        assert_eq!(v.recorded() + v.dropped(), 5000);
        assert_eq!(v.dropped(), 0, "the queue holds them all");
        v.close();
        let v = Views::open(&path, 16).unwrap();
        assert_eq!(total(&v), 5000);
        assert_eq!(v.count("Home.md").unwrap(), 1667);
        assert_eq!(v.count("Caching/SWR.md").unwrap(), 1667);
        assert_eq!(v.count("a/b/c.md").unwrap(), 1666);
        assert_eq!(v.count("nowhere.md").unwrap(), 0);
        assert_eq!(v.counts().unwrap()[0].1, 1667, "most viewed first");
    }

    /// A sink that sums what it is given.
    #[derive(Default)]
    struct Summing(Mutex<HashMap<String, u64>>);

    impl ViewSink for Summing {
        fn add(&self, batch: &[(Arc<str>, u64)]) {
            let mut m = self.0.lock().unwrap();
            for (path, n) in batch {
                *m.entry(path.to_string()).or_insert(0) += n;
            }
        }
    }

    #[test]
    fn a_sink_gets_every_view_counted_after_it_was_set_exactly_once() {
        let (_d, path) = db();
        let v = Views::open(&path, 10_000).unwrap();
        v.record("before.md");
        v.flush();
        let sink = Arc::new(Summing::default());
        assert!(v.share_with(sink.clone()));
        assert!(!v.share_with(Arc::new(Summing::default())), "set once");
        for round in 0..4 {
            for i in 0..1000 {
                v.record(if i % 4 == 0 { "a.md" } else { "b.md" });
            }
            if round % 2 == 0 {
                v.flush();
            }
        }
        v.close();
        let got = sink.0.lock().unwrap().clone();
        assert_eq!(
            got,
            HashMap::from([("a.md".to_owned(), 1000), ("b.md".to_owned(), 3000)])
        );
    }

    #[test]
    fn a_full_queue_drops_and_counts_without_blocking() {
        let (_d, path) = db();
        let v = Views::open(&path, 4).unwrap();
        let release = v.hold();
        let start = Instant::now();
        for _ in 0..1000 {
            v.record("Home.md");
        }
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "record never waits"
        );
        assert_eq!(v.recorded(), 4);
        assert_eq!(v.dropped(), 996);
        drop(release);
        v.flush();
        assert_eq!(v.written(), 4);
        assert_eq!(v.count("Home.md").unwrap(), 4);
        v.record(&"x".repeat(PATH_LEN_MAX + 1));
        assert_eq!(v.dropped(), 997, "over-long paths are dropped");
        v.close();
        assert_eq!(total(&Views::open(&path, 1).unwrap()), 4);
    }

    #[test]
    fn concurrent_recorders_sum_exactly() {
        let (_d, path) = db();
        let v = Arc::new(Views::open(&path, 40_000).unwrap());
        let shared: Arc<str> = Arc::from("Shared.md");
        std::thread::scope(|s| {
            for t in 0..4 {
                let (v, shared) = (&v, &shared);
                s.spawn(move || {
                    let own = format!("t{t}.md");
                    for i in 0..10_000 {
                        if i % 2 == 0 {
                            v.record_shared(shared);
                        } else {
                            v.record(&own);
                        }
                    }
                });
            }
        });
        assert_eq!(v.recorded(), 40_000);
        Arc::into_inner(v).map(Views::close).unwrap();
        let v = Views::open(&path, 1).unwrap();
        assert_eq!(v.count("Shared.md").unwrap(), 20_000);
        assert_eq!(v.count("t3.md").unwrap(), 5_000);
        assert_eq!(total(&v), 40_000);
    }

    #[test]
    fn flush_writes_what_was_recorded_and_batches_go_out_by_themselves() {
        let (_d, path) = db();
        let v = Views::open(&path, 64).unwrap();
        v.record("a.md");
        let start = Instant::now();
        while v.written() < 1 {
            assert!(start.elapsed() < Duration::from_secs(10), "no timed batch");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(v.count("a.md").unwrap(), 1, "visible to the reader");
        v.record("a.md");
        v.flush();
        assert_eq!(v.count("a.md").unwrap(), 2);
        assert_eq!(v.write_errors(), 0);
    }

    #[test]
    fn a_corrupt_database_is_a_clear_error() {
        let (_d, path) = db();
        std::fs::write(&path, "not a database at all. ".repeat(200)).unwrap();
        let e = Views::open(&path, 8).unwrap_err().to_string();
        assert!(e.contains(&*path.to_string_lossy()), "{e}");
        assert!(e.contains("not a database"), "{e}");
    }
}
