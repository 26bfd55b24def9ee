//! Threads for uncached work that a reader waits for: an upstream's renders (a page,
//! a search, a 404 in `quire serve`) and password checks, run at a lower CPU priority
//! than the request workers, so that a crowd making such work cannot slow the hits.
//!
//! Key decisions:
//! - **Priority, not a smaller share of threads.** The budget for uncached work
//!   (`crate::edge::budget`) already bounds how much of it runs at once, and queues
//!   the rest fairly; what it cannot do is keep the running renders off the core a
//!   request worker needs. On tokio's blocking pool a render runs at the workers'
//!   priority, and the scheduler splits a core evenly between them: with a crowd of
//!   2,000 addresses asking for new searches and missing pages of `quire serve` on one
//!   core (`scripts/crowd-figures.py --mode serve --spread few`), a reader's hit p99
//!   went from 2.6 ms alone to 15.3 ms. The same run with the renders at nice 10: 4.7
//!   ms (3.0 ms alone), and more renders a second, not fewer (3,123 against 2,731),
//!   since the workers are no longer preempted while they hold a connection's turn.
//!   The work that is waited for still gets the whole machine when no hit wants it.
//! - **Tokio's blocking pool, on a runtime of its own.** [`spawn`] runs a job on the
//!   blocking pool of a small runtime (one worker, which stays idle) whose threads
//!   lower their own priority as they start ([`NICE`], Linux applies a thread's
//!   niceness to that thread alone), so the pool keeps tokio's growth, idle reaping
//!   and `JoinHandle`; awaiting it from the request runtime is an ordinary wake-up.
//!   A job runs inside the caller's runtime context, so one that uses tokio (a
//!   spawned task, a timer, `Handle::current().block_on`) behaves as it would on the
//!   request runtime's pool. (The first version ran jobs in this runtime's context,
//!   which has no I/O or timer driver: a cluster node's sign-out, which blocks on
//!   the request runtime's Redis client, failed with a 502. The cluster tests found
//!   it.)
//! - **Bounded by what feeds it.** At most [`THREADS_MAX`] threads; the budget's
//!   slots and the sign-in gate bound the jobs in flight well below that, and past
//!   it jobs wait their turn in tokio's queue. If the runtime cannot start (no thread
//!   can be made), jobs run on the caller's blocking pool, at normal priority.
//!
//! Work nobody waits for (prefills, background compression) runs at the same
//! niceness on threads of its own (`quire-site`'s `behind`, [`super::compress_pool`]).

use std::sync::OnceLock;
use std::time::Duration;

use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

/// The niceness the threads give themselves (that of background work too).
pub const NICE: i32 = super::compress_pool::BACKGROUND_NICE;
/// Threads at most.
pub const THREADS_MAX: usize = 64;
/// How long an idle thread is kept.
const KEEP_ALIVE: Duration = Duration::from_secs(10);

static RUNTIME: OnceLock<Option<Runtime>> = OnceLock::new();

fn runtime() -> Option<&'static Runtime> {
    RUNTIME
        .get_or_init(|| {
            let built = Builder::new_multi_thread()
                .worker_threads(1)
                .max_blocking_threads(THREADS_MAX)
                .thread_keep_alive(KEEP_ALIVE)
                .thread_name("quire-uncached")
                .on_thread_start(super::compress_pool::lower_priority)
                .build();
            match built {
                Ok(rt) => Some(rt),
                Err(e) => {
                    tracing::warn!(error = %e, "no threads for uncached work; it runs at normal priority");
                    None
                }
            }
        })
        .as_ref()
}

/// Runs `f` on a thread of lower priority than the request workers, as
/// `tokio::task::spawn_blocking` would run it (whose pool it falls back to).
///
/// # Panics
/// On the fallback only, outside a tokio runtime (as `spawn_blocking`).
pub fn spawn<T, F>(f: F) -> JoinHandle<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let Some(rt) = runtime() else {
        return tokio::task::spawn_blocking(f);
    };
    // The job runs in the caller's runtime context, as on the caller's own pool: a
    // job that asks for `Handle::current()` (a cluster's sign-out blocks on the
    // request runtime's Redis client) gets the runtime it was spawned from, with
    // its I/O and timers, not this pool's runtime, which drives neither.
    let caller = tokio::runtime::Handle::try_current().ok();
    rt.spawn_blocking(move || {
        let _entered = caller.as_ref().map(tokio::runtime::Handle::enter);
        f()
    })
}

#[cfg(test)]
mod tests {
    /// A job runs at [`super::NICE`] or nicer, and its result comes back to a caller
    /// on another runtime.
    #[tokio::test(flavor = "current_thread")]
    async fn a_job_runs_at_the_lower_priority_and_answers_the_caller() {
        let nice = super::spawn(|| {
            let me = rustix::thread::gettid();
            rustix::process::getpriority_process(Some(me)).unwrap()
        })
        .await
        .unwrap();
        assert!(nice >= super::NICE, "nice {nice}");
    }

    /// A job that uses tokio (spawns a task and waits for it; blocks on the
    /// caller's runtime with a timer) runs in the caller's runtime context.
    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_job_may_use_the_callers_runtime() {
        let got = super::spawn(move || {
            // This pool's own runtime has no timer: the sleep needs the caller's.
            let (tx, rx) = std::sync::mpsc::channel();
            tokio::spawn(async move { tx.send(7).unwrap() });
            let slept = tokio::runtime::Handle::current().block_on(async {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                true
            });
            (
                rx.recv_timeout(std::time::Duration::from_secs(5)).unwrap(),
                slept,
            )
        })
        .await
        .unwrap();
        assert_eq!(got, (7, true));
    }
}
