//! Hits whose entry is not in memory: read in on the blocking pool, never on a
//! request worker.
//!
//! When the cache volume is bigger than the memory the process may use, some
//! entries' pages have been evicted, and reading one through the mapping is a major
//! fault that blocks the thread until the disk answers: on a worker, every other
//! connection on it waits too, hot hits included. Under memory pressure the store
//! checks an entry's residency before touching it (`quire_store::Store::get_resident`,
//! see its `residency` module) and a lookup that finds a cold entry reads nothing
//! (`Lookup::cold`); the fast path hands such a request to the service, which warms
//! the entry here, on the blocking pool, while its worker serves others, then looks
//! it up again.
//!
//! Bounded: at most [`crate::state::COLD_READS_MAX`] warms run at once; more wait
//! for a slot (asynchronously: no worker blocks). Counted in `quire_cold_reads_total`.
//!
//! The reads run on threads of their own at low priority (nice 10), not on tokio's
//! blocking pool: under a memory limit a cold read also reclaims pages (the kernel
//! charges that work to the thread that faults), and on a core it shares with a
//! request worker the worker should win it. The blocking pool's threads also render
//! and compress for readers, so they cannot be lowered for this. Started at the
//! first cold read; if no thread can be started, the blocking pool does the reads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex, OnceLock};

use quire_store::Cold;

use crate::state::{Ctx, COLD_READS_MAX};

/// One read for the cold readers.
type Job = Box<dyn FnOnce() + Send>;

/// Cold-reader threads that started (0: the blocking pool reads instead).
static STARTED: AtomicUsize = AtomicUsize::new(0);

/// The cold readers' queue, their threads started on first use.
fn readers() -> &'static Sender<Job> {
    static READERS: OnceLock<Sender<Job>> = OnceLock::new();
    READERS.get_or_init(|| {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        for i in 0..COLD_READS_MAX {
            let rx = rx.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("quire-cold-{i}"))
                .spawn(move || read_loop(&rx));
            if spawned.is_ok() {
                STARTED.fetch_add(1, Ordering::Relaxed);
            }
        }
        tx
    })
}

/// One cold reader: lowers its own priority, then runs reads until the queue is
/// gone. A read that panics ends only itself (its requester sees it as done).
fn read_loop(rx: &Mutex<Receiver<Job>>) {
    crate::fill::compress_pool::lower_priority();
    loop {
        let job = match rx.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(job) = job else { return };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
    }
}

/// Reads a cold entry into memory off the worker. The slot goes with the read, not
/// the request: a client that leaves while it runs does not free a slot early.
pub(crate) async fn warm(ctx: &Arc<Ctx>, cold: Cold) {
    let Ok(slot) = ctx.cold_reads.clone().acquire_owned().await else {
        return;
    };
    ctx.metrics.record_cold_read();
    let c = ctx.clone();
    let read = move || {
        c.store.warm(&cold);
        drop(slot);
    };
    let queue = readers();
    if STARTED.load(Ordering::Relaxed) == 0 {
        let _ = tokio::task::spawn_blocking(read).await;
        return;
    }
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let job: Job = Box::new(move || {
        read();
        let _ = done.send(());
    });
    if let Err(back) = queue.send(job) {
        // The readers are gone (cannot happen while the process runs): read here,
        // off the worker, as before.
        let _ = tokio::task::spawn_blocking(back.0).await;
        return;
    }
    // Done, or the read panicked and dropped the sender: either way it is over.
    let _ = finished.await;
}
