//! The compression pool: every compression a fill causes runs here, on a fixed number
//! of threads, within a byte budget.
//!
//! Before it, each fill compressed its body into three codings on tokio's blocking
//! pool (up to 512 threads): 48 concurrent misses of a 6 MB page with unique query
//! strings ran 144 compressions at once and took the process past 5 GB. Now:
//!
//! - **Fixed threads** (`compression.threads`): the working memory of the codecs
//!   (zstd 19 holds tens of MiB per context) is bounded by the thread count.
//! - **A byte budget** (`compression.budget`): a job holds its input's size from the
//!   moment it is queued until it ends; a job that would take the total past the
//!   budget is refused at once, never queued. A refused commit stores identity only;
//!   a refused background job leaves the entry as it is (counted in
//!   `quire_compress_refused_total`). So the queue is bounded too: at most budget /
//!   [`JOB_COST_MIN`] jobs.
//! - **Two priorities.** A commit's gzip ([`Priority::Commit`]) decides when a
//!   response becomes a hit and goes first; the slower codings added to an entry
//!   afterwards ([`Priority::Background`]) never run on the first thread, which is
//!   kept for commits, so a long brotli or zstd job never stands between a finished
//!   response and its commit (with one thread, it does both).
//! - **Background threads yield to requests**: the threads that may run background
//!   jobs lower their own priority (nice [`BACKGROUND_NICE`]), so a backlog of
//!   brotli-11 after a burst of new pages uses what the request workers leave. Found
//!   by the hit-path A/B (`scripts/hit-ab.sh`): at normal priority, the brotli and
//!   zstd of 2,000 freshly stored pages took CPU from the hits for a minute after.
//!
//! - **A CPU budget, not just a byte budget.** The byte budget bounds memory, not
//!   time: 48 concurrent misses of a 6 MB page with unique query strings fitted in
//!   it and kept the threads busy for over a minute after the burst (zstd 19 on
//!   6 MB alone is seconds). Two mechanisms bound the CPU a burst can buy:
//!   - *large bodies get cheap levels* ([`LARGE_LEVELS`]: gzip 6, brotli 4, zstd 3,
//!     or the configured ones where lower) from `encodings.large_bytes` (1 MiB) up,
//!     counted in `quire_compress_downgraded_total`: the strong levels gain a few
//!     percent on megabytes at tens of times the CPU;
//!   - *background jobs draw on a CPU bucket*: every job's thread CPU time is
//!     measured (`CLOCK_THREAD_CPUTIME_ID`) and debited from a bucket of
//!     `encodings.background_cpu_burst` CPU-seconds (10) that refills at
//!     `encodings.background_cpu_share` CPU-seconds per second (0.25). A background
//!     job that finds the bucket empty when its turn comes is shed — the entry
//!     keeps identity and gzip — and counted in `quire_compress_shed_total`.
//!     Commit jobs are never shed (they decide when a response becomes a hit) but
//!     are debited, so a burst of commits leaves the background less. In any
//!     `t` seconds, background compression therefore spends at most
//!     `burst + share × t` CPU-seconds, plus the job each thread has in hand.
//!     Measured CPU is exported as `quire_compress_cpu_seconds_total`.
//!
//! The pool never runs on a request's worker; waiting for a job is a channel receive.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::fill::compress::Levels;

use tokio::sync::oneshot;

/// Smallest cost a job is counted at, so tiny bodies cannot queue without bound.
pub(crate) const JOB_COST_MIN: u64 = 4096;

/// The niceness threads that run background jobs give themselves.
pub(crate) const BACKGROUND_NICE: i32 = 10;

/// Which queue a job goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// The coding a response is committed with: first.
    Commit,
    /// Codings added to a stored entry later.
    Background,
}

/// The levels a large body gets at most (see the module doc).
pub(crate) const LARGE_LEVELS: Levels = Levels {
    gzip: 6,
    brotli: 4,
    zstd: 3,
};

/// What bounds the pool's CPU: `encodings.large_bytes`,
/// `encodings.background_cpu_burst`, `encodings.background_cpu_share`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuLimits {
    /// Bodies this long or longer are compressed at [`LARGE_LEVELS`].
    pub large_bytes: u64,
    /// CPU time background jobs may spend at once.
    pub burst: Duration,
    /// CPU-seconds per second the background earns back.
    pub share: f64,
}

impl Default for CpuLimits {
    fn default() -> Self {
        CpuLimits {
            large_bytes: 1 << 20,
            burst: Duration::from_secs(10),
            share: 0.25,
        }
    }
}

type Job = Box<dyn FnOnce() + Send>;

struct Queued {
    cost: u64,
    background: bool,
    job: Job,
}

struct Queues {
    commit: VecDeque<Queued>,
    background: VecDeque<Queued>,
    held_bytes: u64,
    shutdown: bool,
    /// CPU nanoseconds the background may still spend (negative: in debt).
    cpu_left_ns: i64,
    /// When `cpu_left_ns` was last refilled.
    cpu_at: Instant,
}

impl Queues {
    /// Refills the CPU bucket to `now`; whether it holds anything.
    fn cpu_left(&mut self, limits: &CpuLimits, now: Instant) -> bool {
        let earned = now.saturating_duration_since(self.cpu_at).as_secs_f64() * limits.share * 1e9;
        let cap = i64::try_from(limits.burst.as_nanos()).unwrap_or(i64::MAX);
        self.cpu_left_ns = (self.cpu_left_ns as f64 + earned).min(cap as f64) as i64;
        self.cpu_at = now;
        self.cpu_left_ns > 0
    }
}

struct Inner {
    queues: Mutex<Queues>,
    ready: Condvar,
    budget_bytes: u64,
    limits: CpuLimits,
    done: AtomicU64,
    refused: AtomicU64,
    shed: AtomicU64,
    downgraded: AtomicU64,
    cpu_ns: AtomicU64,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompressPool")
            .field("budget_bytes", &self.budget_bytes)
            .finish_non_exhaustive()
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The pool (one per server, in [`crate::Ctx`]). Dropping it stops its threads once
/// the queued jobs are done.
#[derive(Debug)]
pub struct CompressPool {
    inner: Arc<Inner>,
}

impl CompressPool {
    /// A pool of `threads` threads (at least 1) and a budget of `budget_bytes`,
    /// with the default CPU limits.
    pub fn new(threads: usize, budget_bytes: u64) -> CompressPool {
        CompressPool::with_limits(threads, budget_bytes, CpuLimits::default())
    }

    /// A pool of `threads` threads (at least 1), a budget of `budget_bytes` and
    /// the CPU `limits`.
    pub fn with_limits(threads: usize, budget_bytes: u64, limits: CpuLimits) -> CompressPool {
        let threads = threads.max(1);
        let queues = Queues {
            commit: VecDeque::new(),
            background: VecDeque::new(),
            held_bytes: 0,
            shutdown: false,
            cpu_left_ns: i64::try_from(limits.burst.as_nanos()).unwrap_or(i64::MAX),
            cpu_at: Instant::now(),
        };
        let inner = Arc::new(Inner {
            queues: Mutex::new(queues),
            ready: Condvar::new(),
            budget_bytes,
            limits,
            done: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            shed: AtomicU64::new(0),
            downgraded: AtomicU64::new(0),
            cpu_ns: AtomicU64::new(0),
        });
        for i in 0..threads {
            let inner = inner.clone();
            // The first of several threads is kept for commits.
            let background = i > 0 || threads == 1;
            let spawned = std::thread::Builder::new()
                .name(format!("quire-compress-{i}"))
                .spawn(move || {
                    if background {
                        lower_priority();
                    }
                    work(&inner, background)
                });
            if let Err(e) = spawned {
                tracing::error!(error = %e, "could not start a compression thread");
            }
        }
        CompressPool { inner }
    }

    /// Queues `job` at `priority`, counted at `cost_bytes` (its input's size) until
    /// it ends; false (and nothing queued) when that would exceed the budget.
    pub fn try_spawn(
        &self,
        priority: Priority,
        cost_bytes: u64,
        job: impl FnOnce() + Send + 'static,
    ) -> bool {
        let cost = cost_bytes.max(JOB_COST_MIN);
        let mut q = self.inner.lock();
        if q.shutdown || q.held_bytes + cost > self.inner.budget_bytes {
            drop(q);
            self.inner.refused.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        q.held_bytes += cost;
        let queued = Queued {
            cost,
            background: priority == Priority::Background,
            job: Box::new(traced(job, cost_bytes)),
        };
        match priority {
            Priority::Commit => q.commit.push_back(queued),
            Priority::Background => q.background.push_back(queued),
        }
        drop(q);
        self.inner.ready.notify_all();
        true
    }

    /// Runs `job` on the pool and waits for its result; `None` when the budget
    /// refused it (or the pool stopped before running it).
    pub async fn run<R: Send + 'static>(
        &self,
        priority: Priority,
        cost_bytes: u64,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> Option<R> {
        let (tx, rx) = oneshot::channel();
        if !self.try_spawn(priority, cost_bytes, move || {
            let _ = tx.send(job());
        }) {
            return None;
        }
        rx.await.ok()
    }

    /// Bytes held by queued and running jobs.
    pub fn held_bytes(&self) -> u64 {
        self.inner.lock().held_bytes
    }

    /// The budget.
    pub fn budget_bytes(&self) -> u64 {
        self.inner.budget_bytes
    }

    /// Jobs finished.
    pub fn done(&self) -> u64 {
        self.inner.done.load(Ordering::Relaxed)
    }

    /// Jobs refused for the budget.
    pub fn refused(&self) -> u64 {
        self.inner.refused.load(Ordering::Relaxed)
    }

    /// Background jobs shed for the CPU budget.
    pub fn shed(&self) -> u64 {
        self.inner.shed.load(Ordering::Relaxed)
    }

    /// `levels` for a body of `len` bytes: [`LARGE_LEVELS`] at most from
    /// `encodings.large_bytes` up (counted when that lowers anything).
    pub fn levels_for(&self, levels: Levels, len: usize) -> Levels {
        if (len as u64) < self.inner.limits.large_bytes {
            return levels;
        }
        let cheap = Levels {
            gzip: levels.gzip.min(LARGE_LEVELS.gzip),
            brotli: levels.brotli.min(LARGE_LEVELS.brotli),
            zstd: levels.zstd.min(LARGE_LEVELS.zstd),
        };
        if cheap != levels {
            self.inner.downgraded.fetch_add(1, Ordering::Relaxed);
        }
        cheap
    }

    /// The CPU families in Prometheus text format.
    pub fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let i = &self.inner;
        let _ = writeln!(
            out,
            "# HELP quire_compress_cpu_seconds_total CPU time the compression threads spent on jobs.\n\
             # TYPE quire_compress_cpu_seconds_total counter\n\
             quire_compress_cpu_seconds_total {:.3}\n\
             # HELP quire_compress_shed_total Background compression jobs dropped: the CPU budget (encodings.background_cpu_burst, background_cpu_share) was spent; the entry keeps identity and gzip.\n\
             # TYPE quire_compress_shed_total counter\n\
             quire_compress_shed_total {}\n\
             # HELP quire_compress_downgraded_total Bodies compressed at the cheaper levels of large objects (encodings.large_bytes).\n\
             # TYPE quire_compress_downgraded_total counter\n\
             quire_compress_downgraded_total {}",
            i.cpu_ns.load(Ordering::Relaxed) as f64 / 1e9,
            i.shed.load(Ordering::Relaxed),
            i.downgraded.load(Ordering::Relaxed),
        );
    }
}

impl Drop for CompressPool {
    fn drop(&mut self) {
        self.inner.lock().shutdown = true;
        self.inner.ready.notify_all();
    }
}

/// Lowers the calling thread's scheduling priority to at least [`BACKGROUND_NICE`]
/// (Linux applies a TID's niceness to that thread alone; a process already nicer
/// keeps its own). A failure costs only priority.
pub(crate) fn lower_priority() {
    let me = rustix::thread::gettid();
    let now = rustix::process::getpriority_process(Some(me)).unwrap_or(0);
    if let Err(e) = rustix::process::setpriority_process(Some(me), now.max(BACKGROUND_NICE)) {
        tracing::debug!(error = %e, "could not lower a background thread's priority");
    }
}

/// One thread's loop: commit jobs first; background jobs too on a `background`
/// thread.
fn work(inner: &Inner, background: bool) {
    let mut q = inner.lock();
    loop {
        let next = match q.commit.pop_front() {
            Some(j) => Some(j),
            None if background => q.background.pop_front(),
            None => None,
        };
        let Some(Queued {
            cost,
            background: bg,
            job,
        }) = next
        else {
            if q.shutdown {
                return;
            }
            q = inner.ready.wait(q).unwrap_or_else(|p| p.into_inner());
            continue;
        };
        if bg && !q.cpu_left(&inner.limits, Instant::now()) {
            // Shed: the entry keeps what it has (see the module doc).
            q.held_bytes -= cost;
            drop(q);
            drop(job);
            inner.shed.fetch_add(1, Ordering::Relaxed);
            q = inner.lock();
            continue;
        }
        drop(q);
        let t0 = thread_cpu_ns();
        // A panicking codec must not take the thread (and the budget) with it.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
        let spent = thread_cpu_ns().saturating_sub(t0);
        inner.cpu_ns.fetch_add(spent, Ordering::Relaxed);
        inner.done.fetch_add(1, Ordering::Relaxed);
        q = inner.lock();
        q.held_bytes -= cost;
        q.cpu_left_ns = q
            .cpu_left_ns
            .saturating_sub(i64::try_from(spent).unwrap_or(i64::MAX));
    }
}

/// The calling thread's CPU time, in nanoseconds.
fn thread_cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    u64::try_from(t.tv_sec)
        .unwrap_or(0)
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0))
}

/// `job`, traced as a `compress` span under the request that queued it, when that
/// request is traced (`crate::trace`): from the moment a thread takes it, with the
/// time it waited in the queue.
fn traced(job: impl FnOnce() + Send + 'static, bytes: u64) -> impl FnOnce() + Send + 'static {
    let parent = crate::trace::current();
    let queued = std::time::Instant::now();
    move || {
        let Some(parent) = parent else {
            return job();
        };
        let mut span = parent.child("compress", crate::trace::Kind::Internal);
        let waited = u64::try_from(queued.elapsed().as_micros()).unwrap_or(u64::MAX);
        span.set("quire.queued_us", waited);
        span.set("quire.bytes", bytes);
        job();
        span.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn the_budget_refuses_instead_of_queueing() {
        let pool = CompressPool::new(1, 100_000);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        assert!(pool.try_spawn(Priority::Commit, 60_000, move || {
            started_tx.send(()).unwrap();
            release_rx.recv().unwrap();
        }));
        started_rx.recv().unwrap();
        assert_eq!(pool.held_bytes(), 60_000);
        assert!(
            !pool.try_spawn(Priority::Commit, 50_000, || {}),
            "over budget"
        );
        assert!(
            pool.try_spawn(Priority::Background, 10, || {}),
            "counted at 4 KiB"
        );
        assert_eq!(pool.held_bytes(), 60_000 + JOB_COST_MIN);
        assert_eq!(pool.refused(), 1);
        release_tx.send(()).unwrap();
        for _ in 0..200 {
            if pool.held_bytes() == 0 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(pool.held_bytes(), 0);
        assert_eq!(pool.done(), 2);
    }

    #[test]
    fn commits_pass_background_jobs_and_one_thread_stays_free_for_them() {
        let pool = CompressPool::new(2, 1 << 30);
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let (order_tx, order_rx) = mpsc::channel::<&'static str>();
        // Two background jobs that block: only one may run (threads - 1).
        for _ in 0..2 {
            let (rx, tx) = (release_rx.clone(), order_tx.clone());
            assert!(pool.try_spawn(Priority::Background, 1, move || {
                tx.send("background").unwrap();
                let _ = rx.lock().unwrap().recv();
            }));
        }
        assert_eq!(order_rx.recv().unwrap(), "background");
        let tx = order_tx.clone();
        assert!(pool.try_spawn(Priority::Commit, 1, move || tx.send("commit").unwrap()));
        assert_eq!(
            order_rx.recv_timeout(Duration::from_secs(5)).unwrap(),
            "commit",
            "the commit ran while a background job held a thread"
        );
        release_tx.send(()).unwrap();
        assert_eq!(order_rx.recv().unwrap(), "background");
        release_tx.send(()).unwrap();
    }

    #[test]
    fn background_jobs_run_at_a_lower_priority() {
        let pool = CompressPool::new(2, 1 << 20);
        let (tx, rx) = mpsc::channel();
        assert!(pool.try_spawn(Priority::Background, 1, move || {
            let me = rustix::thread::gettid();
            tx.send(rustix::process::getpriority_process(Some(me)))
                .unwrap();
        }));
        let nice = rx.recv_timeout(Duration::from_secs(5)).unwrap().unwrap();
        assert!(nice >= BACKGROUND_NICE, "nice {nice}");
    }

    #[test]
    fn a_burst_of_background_work_past_the_cpu_budget_is_shed() {
        let limits = CpuLimits {
            large_bytes: 1 << 20,
            burst: Duration::from_millis(50),
            share: 1e-6,
        };
        let pool = CompressPool::with_limits(1, 1 << 30, limits);
        let ran = Arc::new(AtomicU64::new(0));
        // Each job burns ~30 ms of CPU; with 50 ms in the bucket, two run at most.
        for _ in 0..10 {
            let ran = ran.clone();
            assert!(pool.try_spawn(Priority::Background, 1, move || {
                let t0 = thread_cpu_ns();
                while thread_cpu_ns() - t0 < 30_000_000 {
                    std::hint::black_box(0u64);
                }
                ran.fetch_add(1, Ordering::Relaxed);
            }));
        }
        for _ in 0..2000 {
            if pool.done() + pool.shed() == 10 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(pool.done() + pool.shed(), 10);
        let ran = ran.load(Ordering::Relaxed);
        assert!((1..=2).contains(&ran), "{ran} ran");
        assert_eq!(pool.shed(), 10 - ran);
        assert_eq!(pool.held_bytes(), 0, "shed jobs give their bytes back");
        let mut text = String::new();
        pool.write_metrics(&mut text);
        assert!(text.contains(&format!("quire_compress_shed_total {}", 10 - ran)));
    }

    #[test]
    fn large_bodies_get_cheap_levels_and_are_counted() {
        let pool = CompressPool::new(1, 1 << 20);
        let strong = Levels::default();
        assert_eq!(pool.levels_for(strong, 1000), strong);
        let cheap = pool.levels_for(strong, 6 << 20);
        assert_eq!(cheap, LARGE_LEVELS);
        let low = Levels {
            gzip: 1,
            brotli: 1,
            zstd: 1,
        };
        assert_eq!(pool.levels_for(low, 6 << 20), low, "never raised");
        let mut text = String::new();
        pool.write_metrics(&mut text);
        assert!(text.contains("quire_compress_downgraded_total 1"), "{text}");
    }

    #[test]
    fn a_panicking_job_gives_its_budget_back() {
        let pool = CompressPool::new(1, 1 << 20);
        assert!(pool.try_spawn(Priority::Commit, 1000, || panic!("codec bug")));
        for _ in 0..200 {
            if pool.done() == 1 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(pool.done(), 1);
        assert_eq!(pool.held_bytes(), 0);
    }
}
