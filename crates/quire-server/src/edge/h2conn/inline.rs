//! The executor hyper runs each HTTP/2 stream on: the stream's future is polled
//! once at once, in the connection's task, and becomes a task of its own only if
//! it is not finished by then.
//!
//! Why: hyper hands every HTTP/2 request to its executor as a future of its own. A
//! cache hit is answered without waiting for anything, so its future completes on
//! the first poll; spawning it cost a task allocation, a trip through the
//! scheduler and a move of the whole future into the task, for work that takes
//! less time than the spawn. A miss or a pass waits on the origin: its first poll
//! returns `Pending` and it is spawned as before, so a slow origin never holds the
//! connection's task. Measured with h2load over HTTPS (64 connections, 10 streams
//! each, hits of the peer corpus, the server on one core), four paired rounds:
//! server CPU per request 30.3, 22.9, 24.0, 29.0 µs spawning every stream against
//! 23.9, 24.9, 22.6, 21.0 µs polling first (medians 26.5 and 23.4); the machine's
//! noise is as large as the gain in single rounds.
//!
//! The first poll uses a waker that does nothing. That is sound: a future that
//! returns `Pending` is polled again as soon as it is spawned (a new task is
//! scheduled at once), and the `Future` contract has only the waker of the most
//! recent poll be woken, so nothing waits on the first one.

use std::future::Future;
use std::task::{Context, Waker};

/// See the module doc.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct InlineFirst;

impl<F> hyper::rt::Executor<F> for InlineFirst
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, fut: F) {
        let mut fut = Box::pin(fut);
        let mut cx = Context::from_waker(Waker::noop());
        if fut.as_mut().poll(&mut cx).is_pending() {
            tokio::spawn(fut);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::rt::Executor;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn a_ready_future_runs_inline_and_a_pending_one_is_spawned_and_finishes() {
        let done = Arc::new(AtomicUsize::new(0));
        let d = done.clone();
        InlineFirst.execute(async move {
            d.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(
            done.load(Ordering::SeqCst),
            1,
            "ran before execute returned"
        );
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let d = done.clone();
        InlineFirst.execute(async move {
            let _ = rx.await;
            d.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(done.load(Ordering::SeqCst), 1, "waits for its sender");
        tx.send(()).unwrap();
        for _ in 0..100 {
            if done.load(Ordering::SeqCst) == 2 {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the spawned future was never woken");
    }
}
