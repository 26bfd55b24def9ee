//! Write coalescing for HTTP/2 connections: the frames one turn of the connection
//! task produces leave in as few writes as fit, instead of one write per frame.
//!
//! Why: the h2 crate keeps at most one DATA frame queued in its encoder and flushes
//! its transport before it takes the next, so every response (HEADERS, then a DATA
//! frame of up to 16 KiB) cost one `writev` through rustls: one TLS record, one TCP
//! segment, one wake-up of the reader. Measured with h2load over HTTPS (64
//! connections, 10 streams each, hits of the peer corpus): 23,265 `writev` for
//! 20,000 responses, and the kernel's transmit path (`tcp_write_xmit` and the
//! loopback delivery under it) was about 15 % of the server's CPU.
//!
//! How: [`Cork`] is the transport hyper (or h2) is given. Its writes are copied
//! into a buffer of at most [`CORK_BYTES`] (a write that would overflow it first
//! sends what is held), and its flushes are no-ops while bytes are held; the
//! connection's task is wrapped in [`Corked`], which sends what is held after every
//! poll of the connection, with that poll's waker. So a turn that answers ten
//! streams writes their frames once, and nothing is held past the turn that wrote
//! it: when the socket is full, the socket's readiness wakes the task and the next
//! turn sends the rest (the transport's own send timeout still bounds that wait).
//! The copy costs less than the write it saves (about 14 KB per response here).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Most bytes held before they are sent: four responses of the peer corpus. Chosen
/// by measurement (h2load as above, main thread's CPU per hit, three rounds each):
/// 16 KiB saved nothing over writing through, 64 KiB about 15 %, and 128 or
/// 256 KiB no more than 64 (the kernel's copy into the socket grows with the
/// write). Allocated on a turn's first write and released once sent, so it is
/// held only while a connection's socket is full: at most `limits.connections`
/// times this, and only for connections that stopped reading.
pub(crate) const CORK_BYTES: usize = 64 * 1024;

/// The transport and the bytes written to it but not yet sent.
#[derive(Debug)]
struct Held<T> {
    io: T,
    buf: Vec<u8>,
    /// How much of `buf` has been sent.
    sent: usize,
}

impl<T: AsyncWrite + Unpin> Held<T> {
    /// Sends what is held; `Ready(Ok)` once all of it went.
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        // Released, not kept: a connection holds the buffer only while bytes wait
        // for its socket, so idle connections cost nothing here (one allocation per
        // turn that writes, against a write saved per frame).
        self.buf = Vec::new();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }

    fn held(&self) -> usize {
        self.buf.len() - self.sent
    }
}

/// The transport side: what hyper reads from and writes to.
#[derive(Debug)]
pub(crate) struct Cork<T> {
    shared: Arc<Mutex<Held<T>>>,
}

/// The task side: sends what the connection's last turn left held.
#[derive(Debug)]
pub(crate) struct Corked<F, T> {
    fut: Pin<Box<F>>,
    shared: Arc<Mutex<Held<T>>>,
}

/// Makes [`Corked`] futures for one [`Cork`] (taken before the cork is handed over).
#[derive(Debug)]
pub(crate) struct Flusher<T> {
    shared: Arc<Mutex<Held<T>>>,
}

impl<T> Flusher<T> {
    /// `fut` (which drives the connection on the cork) sending what each of its
    /// turns left held.
    pub(crate) fn around<F: Future>(self, fut: F) -> Corked<F, T> {
        Corked {
            fut: Box::pin(fut),
            shared: self.shared,
        }
    }
}

impl<T> Cork<T> {
    /// `io`, corked.
    pub(crate) fn new(io: T) -> Cork<T> {
        Cork {
            shared: Arc::new(Mutex::new(Held {
                io,
                buf: Vec::new(),
                sent: 0,
            })),
        }
    }

    /// The task side of this cork.
    pub(crate) fn flusher(&self) -> Flusher<T> {
        Flusher {
            shared: self.shared.clone(),
        }
    }
}

fn lock<T>(m: &Mutex<Held<T>>) -> MutexGuard<'_, Held<T>> {
    // A panic while holding the lock leaves plain bytes behind: still usable.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl<F, T> Future for Corked<F, T>
where
    F: Future,
    T: AsyncWrite + Unpin,
{
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let done = self.fut.as_mut().poll(cx);
        let mut held = lock(&self.shared);
        if held.held() > 0 {
            // A failed send surfaces at the connection's next write.
            if let Poll::Ready(Ok(())) = held.poll_send(cx) {
                let _ = Pin::new(&mut held.io).poll_flush(cx);
            }
        }
        done
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Cork<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut lock(&self.shared).io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> Cork<T> {
    /// Holds `bufs` (their total `len`), sending what is held first when they
    /// would not fit.
    fn hold(
        &self,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
        len: usize,
    ) -> Poll<io::Result<usize>> {
        let mut held = lock(&self.shared);
        if held.held() + len > CORK_BYTES {
            ready!(held.poll_send(cx))?;
            if len >= CORK_BYTES {
                // Too big to hold: straight through.
                return Pin::new(&mut held.io).poll_write_vectored(cx, bufs);
            }
        }
        if held.buf.capacity() == 0 {
            held.buf.reserve_exact(CORK_BYTES);
        }
        for b in bufs {
            held.buf.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Cork<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.hold(cx, &[io::IoSlice::new(buf)], buf.len())
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let len = bufs.iter().map(|b| b.len()).sum();
        self.hold(cx, bufs, len)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// A no-op while bytes are held: [`Corked`] sends them at the end of the turn.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut held = lock(&self.shared);
        if held.held() > 0 {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut held.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut held = lock(&self.shared);
        ready!(held.poll_send(cx))?;
        Pin::new(&mut held.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Counts the writes that reach the transport.
    struct Counting<W> {
        inner: W,
        writes: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl<W: AsyncWrite + Unpin> AsyncWrite for Counting<W> {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            b: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.writes
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Pin::new(&mut self.inner).poll_write(cx, b)
        }
        fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_flush(cx)
        }
        fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            Pin::new(&mut self.inner).poll_shutdown(cx)
        }
    }

    #[tokio::test]
    async fn one_turns_writes_leave_together_in_order_and_none_stays_behind() {
        let (client, mut server) = tokio::io::duplex(1 << 20);
        let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut cork = Cork::new(Counting {
            inner: client,
            writes: writes.clone(),
        });
        let flusher = cork.flusher();
        let frames: Vec<Vec<u8>> = (0..10u8).map(|i| vec![i; 1000 + usize::from(i)]).collect();
        let expected: Vec<u8> = frames.concat();
        let w = writes.clone();
        let turn = async move {
            for f in &frames {
                cork.write_all(f).await.unwrap();
                cork.flush().await.unwrap();
            }
            assert_eq!(
                w.load(std::sync::atomic::Ordering::SeqCst),
                0,
                "held in the turn"
            );
            cork
        };
        // One turn of the task: everything written in it is sent at its end.
        let cork = flusher.around(turn).await;
        assert_eq!(writes.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(
            lock(&cork.shared).buf.capacity(),
            0,
            "no buffer kept once sent"
        );
        let mut got = vec![0; expected.len()];
        server.read_exact(&mut got).await.unwrap();
        assert_eq!(got, expected);
        drop(cork);
    }

    #[tokio::test]
    async fn what_would_overflow_the_buffer_sends_first_and_big_writes_pass_through() {
        let (client, mut server) = tokio::io::duplex(1 << 20);
        let writes = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut cork = Cork::new(Counting {
            inner: client,
            writes: writes.clone(),
        });
        let small = vec![1u8; CORK_BYTES - 10];
        let big = vec![2u8; CORK_BYTES + 1];
        cork.write_all(&small).await.unwrap();
        assert_eq!(writes.load(std::sync::atomic::Ordering::SeqCst), 0);
        cork.write_all(&big).await.unwrap();
        // The held bytes, then the big write straight through.
        assert_eq!(writes.load(std::sync::atomic::Ordering::SeqCst), 2);
        cork.write_all(b"tail").await.unwrap();
        cork.shutdown().await.unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).await.unwrap();
        assert_eq!(got.len(), small.len() + big.len() + 4);
        assert!(
            got.ends_with(b"\x02tail"),
            "in order, shutdown sent the rest"
        );
    }
}
