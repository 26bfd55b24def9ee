//! Renders nobody waits for, on one thread of low priority.
//!
//! A fill quire-server marks as background (`FillMark::background`: a page rendered
//! before anyone asks, or the fill behind an answer from a page's previous version)
//! is rendered here instead of with a reader's renders (`quire_server::uncached_work`,
//! at the same priority but with as many threads as the budget lets run): one thread, started on first
//! use, that lowers its own priority (nice 10, as quire-server's background
//! compression threads do). So after a template change, re-rendering the whole site
//! takes what the request workers leave, not a share the scheduler splits evenly
//! with them. A request that joins such a fill meanwhile waits for it at that
//! priority; with nothing else to run, that is full speed.
//!
//! Bounded: [`QUEUE`] renders wait at most; past that a background render runs with a
//! reader's renders (the caller falls back), so a burst never queues
//! without end.

use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Mutex, OnceLock};

/// Background renders waiting for the thread, at most.
pub(crate) const QUEUE: usize = 64;

type Job = Box<dyn FnOnce() + Send>;

/// The thread's queue, once started (`None` if it could not be).
static SENDER: OnceLock<Option<SyncSender<Job>>> = OnceLock::new();

fn sender() -> Option<&'static SyncSender<Job>> {
    SENDER
        .get_or_init(|| {
            let (tx, rx) = sync_channel::<Job>(QUEUE);
            let started = std::thread::Builder::new()
                .name("quire-render-behind".into())
                .spawn(move || {
                    quire_server::prefill::lower_thread_priority();
                    while let Ok(job) = rx.recv() {
                        job();
                    }
                });
            match started {
                Ok(_) => Some(tx),
                Err(e) => {
                    tracing::warn!(error = %e, "no background render thread; renders stay on the blocking pool");
                    None
                }
            }
        })
        .as_ref()
}

/// Runs `f` on the background render thread and waits for its result; `f` back
/// when the thread's queue is full (or the thread could not start), for the caller
/// to run elsewhere.
pub(crate) async fn render<T, F>(f: F) -> Result<Option<T>, F>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let Some(tx) = sender() else {
        return Err(f);
    };
    let (done, result) = tokio::sync::oneshot::channel();
    // The job owns `f` until it runs; a full queue hands it back through the slot.
    let slot = std::sync::Arc::new(Mutex::new(Some(f)));
    let job_slot = slot.clone();
    let job: Job = Box::new(move || {
        let f = job_slot.lock().ok().and_then(|mut s| s.take());
        if let Some(f) = f {
            let _ = done.send(f());
        }
    });
    let sent = match tx.try_send(job) {
        Ok(()) => true,
        Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
    };
    if !sent {
        // Not queued: the job was dropped unrun, so `f` is still in the slot.
        if let Some(f) = slot.lock().ok().and_then(|mut s| s.take()) {
            return Err(f);
        }
    }
    Ok(result.await.ok())
}

#[cfg(test)]
mod tests {
    /// The render thread is one per process: its tests take turns.
    static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    /// Past [`super::QUEUE`] waiting renders, a render is handed back to run
    /// elsewhere: a burst never queues without end.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_full_queue_hands_the_render_back() {
        let _turn = SERIAL.lock().await;
        let (release, gate) = std::sync::mpsc::channel::<()>();
        let gate = std::sync::Mutex::new(gate);
        // Holds the thread until released.
        let busy = tokio::spawn(super::render(move || {
            let _ = gate.lock().unwrap().recv();
        }));
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let mut queued = Vec::new();
        let mut handed_back = 0;
        for i in 0..super::QUEUE + 8 {
            match tokio::time::timeout(
                std::time::Duration::from_millis(20),
                super::render(move || i),
            )
            .await
            {
                Ok(Err(_)) => handed_back += 1,
                Ok(Ok(_)) => panic!("answered while the thread is held"),
                Err(_) => queued.push(i),
            }
        }
        assert!(handed_back >= 8, "{handed_back} handed back");
        assert!(queued.len() <= super::QUEUE);
        release.send(()).unwrap();
        assert!(matches!(busy.await.unwrap(), Ok(Some(()))));
    }

    #[tokio::test]
    async fn a_background_render_runs_and_answers() {
        let _turn = SERIAL.lock().await;
        let out = super::render(|| 6 * 7).await;
        assert!(matches!(out, Ok(Some(42))));
        // On the thread of its own, at a lower priority.
        let nice = super::render(|| {
            let me = rustix::thread::gettid();
            rustix::process::getpriority_process(Some(me)).unwrap_or(0)
        })
        .await
        .ok()
        .flatten();
        assert!(nice.is_some_and(|n| n >= 10), "{nice:?}");
    }
}
