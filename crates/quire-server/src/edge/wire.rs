//! The bytes under a connection: cleartext TCP, or TLS over it.
//!
//! The fast path ([`crate::http1::fastpath`], [`crate::http1::h1`]) and hyper both run on a
//! [`Wire`], so HTTPS/1.1 hits are answered off the connection without hyper just as
//! cleartext ones are. The differences stay here:
//! - **Cleartext** reads with one `recv` into the buffer's spare room and writes
//!   with `writev` (or sendfile, for large bodies: [`crate::edge::sendfile`]).
//! - **TLS** reads decrypt through rustls; a response's head and body are handed to
//!   rustls as one vectored write, sealed into records (up to 16 KiB each) and sent
//!   with one `writev` of those records when the socket has room. No sendfile: the
//!   kernel cannot encrypt for rustls.
//!
//! Both wait for a full socket at most `limits.send_stall` without a byte taken: a
//! client that stops reading cannot hold a response (and the store region its body
//! is pinned in), while one that reads slowly is served to the end.
//!
//! Every reader of request heads finds where one ends by [`head_end`].

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;

/// A client connection's transport.
#[derive(Debug)]
pub(crate) enum Wire {
    /// Cleartext HTTP.
    Plain(TcpStream),
    /// HTTPS: rustls over the socket (boxed: the session state is a few KiB).
    Tls(Box<TlsStream<TcpStream>>),
}

impl Wire {
    /// The socket underneath.
    pub(crate) fn tcp(&self) -> &TcpStream {
        match self {
            Wire::Plain(s) => s,
            Wire::Tls(t) => t.get_ref().0,
        }
    }

    /// The socket, when bytes written to it reach the client as they are (what
    /// sendfile needs).
    pub(crate) fn plain(&self) -> Option<&TcpStream> {
        match self {
            Wire::Plain(s) => Some(s),
            Wire::Tls(_) => None,
        }
    }

    /// Reads what has arrived into `buf` (growing it when nearly full); 0 at the end
    /// of the stream. Cancel-safe: a read dropped before it completes loses nothing.
    pub(crate) async fn read_some(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(8192);
        }
        match self {
            Wire::Plain(s) => read_plain(s, buf).await,
            Wire::Tls(t) => t.read_buf(buf).await,
        }
    }

    /// Writes every byte of `parts`; a socket that takes no byte for `stall` is a
    /// `TimedOut` error.
    pub(crate) async fn write_all(&mut self, parts: &[&[u8]], stall: Duration) -> io::Result<()> {
        match self {
            Wire::Plain(s) => write_all(s, parts, stall).await,
            Wire::Tls(t) => write_tls(t, parts, stall).await,
        }
    }

    /// Ends the sending side after a last response: FIN, preceded on TLS by a
    /// `close_notify` alert (sent if the socket has room; never waited for long).
    pub(crate) async fn close_write(&mut self) {
        match self {
            Wire::Plain(s) => {
                let _ = rustix::net::shutdown(&*s, rustix::net::Shutdown::Write);
            }
            Wire::Tls(t) => {
                let _ = tokio::time::timeout(Duration::from_secs(1), t.shutdown()).await;
            }
        }
    }

    /// Writes what the socket takes of `b` now, without waiting (a refusal written
    /// as a connection is dropped). On TLS, `b` is sealed whole and as much of the
    /// records as fits is sent. The write goes to the socket whatever tokio last
    /// saw of its readiness: a socket registered a moment ago (a connection the hit
    /// loop handed over) has no readiness yet, and tokio's `try_write` would give
    /// up on it without a system call.
    pub(crate) fn try_write_now(&mut self, b: &[u8]) -> usize {
        match self {
            Wire::Plain(s) => rustix::io::write(&*s, b).unwrap_or(0),
            Wire::Tls(t) => {
                let (tcp, session) = t.get_mut();
                if io::Write::write_all(&mut session.writer(), b).is_err() {
                    return 0;
                }
                while session.wants_write() {
                    match session.write_tls(&mut TryWriter(tcp)) {
                        Ok(n) if n > 0 => {}
                        _ => return 0,
                    }
                }
                b.len()
            }
        }
    }
}

/// A non-blocking `io::Write` over a tokio socket (for rustls' `write_tls`),
/// straight to the socket (see [`Wire::try_write_now`]).
struct TryWriter<'a>(&'a TcpStream);

impl io::Write for TryWriter<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        Ok(rustix::io::write(self.0, b)?)
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        Ok(rustix::io::writev(self.0, bufs)?)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// One `recv` into the spare room of `buf`. A read that leaves room has drained the
/// socket, so it also clears the socket's readiness (as nginx does after a short
/// read): otherwise the next call would spend a `recv` only to learn `EAGAIN`, one
/// system call in three of a keep-alive hit. Edge-triggered epoll reports bytes that
/// arrive after the read, so none is missed.
async fn read_plain(stream: &TcpStream, buf: &mut BytesMut) -> io::Result<usize> {
    loop {
        stream.readable().await?;
        let mut got = 0;
        let r = stream.try_io(tokio::io::Interest::READABLE, || {
            let (n, room) = crate::edge::sys::recv_into_spare(stream, buf)?;
            got = n;
            if got > 0 && got < room {
                // Drained: tokio clears readiness on `WouldBlock`.
                Err(io::ErrorKind::WouldBlock.into())
            } else {
                Ok(got)
            }
        });
        match r {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && got > 0 => return Ok(got),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Hands `parts` to rustls as vectored writes (sealed into records as they go) and
/// flushes the records to the socket.
async fn write_tls(
    t: &mut TlsStream<TcpStream>,
    parts: &[&[u8]],
    stall: Duration,
) -> io::Result<()> {
    let stalled = |_| io::Error::new(io::ErrorKind::TimedOut, "client stopped reading");
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut done = 0;
    while done < total {
        let mut slices = [IoSlice::new(&[]); 4];
        let n = slices_from(parts, done, &mut slices);
        let write = t.write_vectored(&slices[..n]);
        match tokio::time::timeout(stall, write)
            .await
            .map_err(stalled)??
        {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            k => done += k,
        }
    }
    tokio::time::timeout(stall, t.flush())
        .await
        .map_err(stalled)?
}

/// Fills `slices` with the non-empty parts of `parts` from byte `done` on (as many
/// as fit); returns how many it filled.
pub(crate) fn slices_from<'a>(
    parts: &[&'a [u8]],
    done: usize,
    slices: &mut [IoSlice<'a>],
) -> usize {
    let mut skip = done;
    let mut n = 0;
    for p in parts {
        if skip >= p.len() {
            skip -= p.len();
            continue;
        }
        if n == slices.len() {
            break;
        }
        slices[n] = IoSlice::new(&p[skip..]);
        skip = 0;
        n += 1;
    }
    n
}

impl AsyncRead for Wire {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Wire::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Wire::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Wire {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Wire::Plain(s) => Pin::new(s).poll_write(cx, b),
            Wire::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, b),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Wire::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Wire::Tls(t) => Pin::new(t.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Wire::Plain(s) => Pin::new(s).poll_flush(cx),
            Wire::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Wire::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Wire::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Writes every byte of `parts`, trying at once and waiting for room only when the
/// socket is full: a socket that takes no byte for `stall` (`limits.send_stall`) is
/// an error of kind `TimedOut` (the write is unfinished). The wait starts over
/// whenever bytes move, so a slow reader is served to the end.
pub(crate) async fn write_all(
    stream: &TcpStream,
    parts: &[&[u8]],
    stall: Duration,
) -> io::Result<()> {
    write_all_with(stream, parts, stall, |s| Ok(rustix::io::writev(stream, s)?)).await
}

/// [`write_all`] with `write` doing each non-blocking write of the slices left (at
/// most four): the fast path's hits pass one that may use sendfile.
pub(crate) async fn write_all_with(
    stream: &TcpStream,
    parts: &[&[u8]],
    stall: Duration,
    mut write: impl FnMut(&[IoSlice<'_>]) -> io::Result<usize>,
) -> io::Result<()> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut done = 0;
    while done < total {
        let mut slices = [IoSlice::new(&[]); 4];
        let n = slices_from(parts, done, &mut slices);
        match stream.try_io(Interest::WRITABLE, || write(&slices[..n])) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(k) => done += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                tokio::time::timeout(stall, stream.writable())
                    .await
                    .map_err(|_| {
                        io::Error::new(io::ErrorKind::TimedOut, "client stopped reading")
                    })??;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The end of the first request head in `b` (after its blank line). Leading empty
/// lines are not skipped here: such a request fails to parse and goes to hyper.
pub(crate) fn head_end(b: &[u8]) -> Option<usize> {
    // (A finder made once: by `memchr`'s vector search, a browser's head of half a
    // kilobyte is scanned several times faster than byte by byte.)
    static BLANK_LINE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\r\n\r\n"));
    BLANK_LINE.find(b).map(|p| p + 4)
}

#[cfg(test)]
mod tests {
    use super::head_end;
    use rand::{Rng, SeedableRng};

    #[test]
    fn a_head_ends_after_its_first_blank_line_as_a_byte_by_byte_scan_finds() {
        // The model: the plain scan `head_end` replaced, on buffers of every length up
        // to a browser's head, made mostly of the bytes a blank line is made of.
        let model = |b: &[u8]| b.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..20_000 {
            let len = rng.random_range(0..600);
            let b: Vec<u8> = (0..len)
                .map(|_| b"\r\n\r\nab"[rng.random_range(0..6)])
                .collect();
            assert_eq!(head_end(&b), model(&b), "{:?}", String::from_utf8_lossy(&b));
        }
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\n\r\n";
        assert_eq!(head_end(head), Some(27));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\nHost: a\r\n\r"), None);
    }
}
