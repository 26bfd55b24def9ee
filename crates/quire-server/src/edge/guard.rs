//! The framing guard: refuses HTTP/1.1 requests whose framing is ambiguous before
//! hyper sees them.
//!
//! hyper handles `Content-Length` together with `Transfer-Encoding` the way RFC 9112
//! §6.3 allows (chunked wins, the length is dropped, the connection closes after) and
//! folds duplicate equal `Content-Length` lines into one. Both are what request
//! smuggling is built from when two parsers disagree, and quire's contract is
//! stricter: such a request gets **400 and the connection closes**, nothing of it
//! reaches the origin. Since hyper hides the original lines, this wrapper watches the
//! bytes as hyper reads them.
//!
//! How: [`Scanner`] follows the request stream — head, then body by its framing
//! (length, or chunk sizes and trailers) — so it always knows where the next head
//! starts, pipelined or not. On a bad head, [`Guarded`] hands hyper only the bytes
//! before it, then end-of-stream; hyper finishes what it was doing and shuts the
//! connection down, and the 400 is written just before the shutdown (or, when hyper
//! just drops the connection, when it is dropped). Anything the
//! scanner does not understand (an HTTP/2 preface, an upgrade, a malformed chunk
//! line) turns it off and leaves the judgement to hyper, which rejects malformed input
//! itself.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::edge::wire::Wire;

/// Longest chunk-size or trailer line followed; longer turns the scanner off (hyper
/// rejects such lines).
const LINE_BYTES_MAX: usize = 4096;

/// Most header lines parsed.
const HEADERS_MAX: usize = 256;

#[derive(Debug)]
enum State {
    /// Accumulating a request head.
    Head(Vec<u8>),
    /// `n` bytes to pass over (a body, or chunk data with its CRLF), then `next`.
    Skip(u64, Next),
    /// Accumulating a chunk-size line.
    ChunkSize(Vec<u8>),
    /// Trailer lines until an empty one; the current line.
    Trailer(Vec<u8>),
    /// Not followed any more.
    Off,
}

/// Where a [`State::Skip`] leads.
#[derive(Debug, Clone, Copy)]
enum Next {
    Head,
    ChunkSize,
}

/// Reading a line byte by byte.
enum Line {
    /// Not ended yet.
    More,
    /// Ended (the `\n` is not kept).
    Done,
    /// Longer than [`LINE_BYTES_MAX`].
    TooLong,
}

fn line_byte(line: &mut Vec<u8>, b: u8) -> Line {
    if b == b'\n' {
        return Line::Done;
    }
    line.push(b);
    if line.len() > LINE_BYTES_MAX {
        Line::TooLong
    } else {
        Line::More
    }
}

/// Follows an HTTP/1.1 request stream and finds the first request whose framing is
/// ambiguous.
#[derive(Debug)]
pub struct Scanner {
    state: State,
    head_limit: usize,
}

impl Scanner {
    /// A scanner for a new connection; heads over `head_limit` bytes are left to
    /// hyper (which answers 431).
    pub fn new(head_limit: usize) -> Scanner {
        Scanner {
            state: State::Head(Vec::new()),
            head_limit,
        }
    }

    /// Feeds the next bytes read. `Err((offset, why))`: the request whose head ends in
    /// `bytes` must be refused; it starts at `offset` in `bytes`, or before `bytes`
    /// (then `offset` is 0).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), (usize, &'static str)> {
        let mut i = 0;
        // Where the head being accumulated started, relative to `bytes` (may be
        // "before" this call: then 0).
        let mut head_start = 0;
        while i < bytes.len() {
            match &mut self.state {
                State::Off => return Ok(()),
                State::Head(buf) => {
                    if buf.is_empty() {
                        head_start = i;
                        // RFC 9112 §2.2: empty lines before a request line are ignored.
                        if bytes[i] == b'\r' || bytes[i] == b'\n' {
                            i += 1;
                            continue;
                        }
                    }
                    match head_step(buf, &bytes[i..], self.head_limit) {
                        HeadStep::More => return Ok(()),
                        HeadStep::Off => {
                            self.state = State::Off;
                            return Ok(());
                        }
                        HeadStep::Judged(consumed, judgement) => {
                            i += consumed;
                            match judgement {
                                Judgement::Refuse(why) => return Err((head_start, why)),
                                Judgement::Off => self.state = State::Off,
                                Judgement::Next(s) => self.state = s,
                            }
                        }
                    }
                }
                State::Skip(n, next) => {
                    let take = (*n).min((bytes.len() - i) as u64);
                    *n -= take;
                    i += take as usize;
                    if *n == 0 {
                        self.state = match next {
                            Next::Head => State::Head(Vec::new()),
                            Next::ChunkSize => State::ChunkSize(Vec::new()),
                        };
                    }
                }
                State::ChunkSize(line) => {
                    let b = bytes[i];
                    i += 1;
                    match line_byte(line, b) {
                        Line::More => continue,
                        Line::TooLong => {
                            self.state = State::Off;
                            continue;
                        }
                        Line::Done => {}
                    }
                    self.state = after_chunk_size(line);
                }
                State::Trailer(line) => {
                    let b = bytes[i];
                    i += 1;
                    match line_byte(line, b) {
                        Line::More => {}
                        Line::TooLong => self.state = State::Off,
                        Line::Done if line.is_empty() || line == b"\r" => {
                            self.state = State::Head(Vec::new());
                        }
                        Line::Done => line.clear(),
                    }
                }
            }
        }
        Ok(())
    }
}

/// What accumulating bytes into a request head came to.
enum HeadStep {
    /// No end of head yet: wait for more.
    More,
    /// Over the head limit: hyper's to answer (431); stop watching.
    Off,
    /// A complete head, judged, after taking this many of the new bytes.
    Judged(usize, Judgement),
}

/// Appends `rest` to the head in `buf` and judges the head once it is complete.
/// The same verdict however the bytes were split into reads: a head over the limit
/// is hyper's (431) whether or not its end arrived in the same read.
fn head_step(buf: &mut Vec<u8>, rest: &[u8], head_limit: usize) -> HeadStep {
    let before = buf.len();
    buf.extend_from_slice(rest);
    let Some(end) = find_head_end(buf, before.saturating_sub(3)) else {
        return if buf.len() > head_limit {
            HeadStep::Off
        } else {
            HeadStep::More
        };
    };
    if end > head_limit {
        return HeadStep::Off;
    }
    buf.truncate(end);
    let head = std::mem::take(buf);
    HeadStep::Judged(end - before, judge(&head))
}

/// The state after a complete chunk-size line: the chunk's data and CRLF, the
/// trailer after the last chunk, or off for a line that is not a size.
fn after_chunk_size(line: &[u8]) -> State {
    let size = std::str::from_utf8(line)
        .ok()
        .map(|l| l.trim_end_matches('\r'))
        .map(|l| l.split(';').next().unwrap_or("").trim())
        .and_then(|hex| u64::from_str_radix(hex, 16).ok());
    match size {
        None => State::Off,
        Some(0) => State::Trailer(Vec::new()),
        // The data, then its CRLF.
        Some(n) => State::Skip(n.saturating_add(2), Next::ChunkSize),
    }
}

fn find_head_end(buf: &[u8], from: usize) -> Option<usize> {
    crate::edge::wire::head_end(buf.get(from..)?).map(|end| from + end)
}

enum Judgement {
    Refuse(&'static str),
    Off,
    Next(State),
}

fn judge(head: &[u8]) -> Judgement {
    if head.starts_with(b"PRI * HTTP/2.0") {
        return Judgement::Off;
    }
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        // Malformed or too many fields: hyper answers it (400/431) and closes.
        _ => return Judgement::Off,
    }
    let mut lengths = 0usize;
    let mut length: Option<u64> = None;
    let mut te = false;
    let mut chunked_last = false;
    let mut upgrade = req.method == Some("CONNECT");
    for h in req.headers.iter() {
        if h.name.eq_ignore_ascii_case("content-length") {
            for v in h.value.split(|&b| b == b',') {
                lengths += 1;
                length = std::str::from_utf8(v)
                    .ok()
                    .and_then(|s| s.trim().parse().ok());
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            te = true;
            chunked_last = h
                .value
                .rsplit(|&b| b == b',')
                .next()
                .is_some_and(|v| v.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if h.name.eq_ignore_ascii_case("upgrade") {
            upgrade = true;
        }
    }
    if te && lengths > 0 {
        return Judgement::Refuse("both Transfer-Encoding and Content-Length");
    }
    if lengths > 1 {
        return Judgement::Refuse("several Content-Length values");
    }
    if upgrade {
        return Judgement::Off;
    }
    if te {
        return if chunked_last {
            Judgement::Next(State::ChunkSize(Vec::new()))
        } else {
            // hyper refuses it (400).
            Judgement::Off
        };
    }
    match (lengths, length) {
        (0, _) | (1, Some(0)) => Judgement::Next(State::Head(Vec::new())),
        (1, Some(n)) => Judgement::Next(State::Skip(n, Next::Head)),
        // An unparsable length: hyper answers 400.
        _ => Judgement::Off,
    }
}

/// A client connection whose reads pass through a [`Scanner`]. Its writes are plain
/// writes: hyper drops a body as soon as its write returns, too early for sendfile's
/// page references ([`crate::edge::sendfile`]).
#[derive(Debug)]
pub(crate) struct Guarded {
    inner: Wire,
    /// Bytes already read from `inner` (by the fast path) that hyper must see first.
    prefix: Bytes,
    scan: Scanner,
    /// Set once a request was refused: reads end, the 400 goes out before shutdown.
    refused: Option<Vec<u8>>,
    /// Why, for the access log once the connection ends (see `server`).
    pub(crate) refusal: std::sync::Arc<std::sync::OnceLock<&'static str>>,
    written: usize,
    /// How long a write may wait for the client to take bytes.
    send_timeout: std::time::Duration,
    /// Set while a write waits; fires the send timeout.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
    /// Where a send timeout is counted.
    on_stall: Option<std::sync::Arc<crate::state::Ctx>>,
}

impl Guarded {
    /// Wraps a connection whose unanswered bytes so far are `prefix` (empty for a
    /// fresh one).
    ///
    /// A write that cannot progress for `send_timeout` fails: a client that stops
    /// reading cannot hold a response (and the store region its body is pinned in)
    /// forever.
    pub(crate) fn new(
        inner: Wire,
        prefix: Bytes,
        head_limit: usize,
        send_timeout: std::time::Duration,
    ) -> Guarded {
        Guarded {
            inner,
            prefix,
            scan: Scanner::new(head_limit),
            refused: None,
            refusal: std::sync::Arc::default(),
            written: 0,
            send_timeout,
            stalled: None,
            on_stall: None,
        }
    }

    /// Counts send timeouts in `ctx`'s `quire_send_stalls_total{scope="connection"}`.
    pub(crate) fn on_stall(mut self, ctx: std::sync::Arc<crate::state::Ctx>) -> Guarded {
        self.on_stall = Some(ctx);
        self
    }

    /// Passes a write's result through, arming the send timeout while it is pending
    /// and failing it once the timeout fires.
    fn watch_write<T>(
        &mut self,
        cx: &mut Context<'_>,
        r: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(r) => {
                self.stalled = None;
                Poll::Ready(r)
            }
            Poll::Pending => {
                let timeout = self.send_timeout;
                let timer = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        if let Some(ctx) = self.on_stall.take() {
                            ctx.metrics.record_send_stalls(0, 1);
                        }
                        Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "client did not read the response in time",
                        )))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

fn response_400(why: &str) -> Vec<u8> {
    let body = format!("bad request: {why}\n");
    format!(
        "HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\ncache-status: quire; detail=bad-request\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

impl AsyncRead for Guarded {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.refused.is_some() {
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let this = &mut *self;
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix.split_to(n));
        } else {
            ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        }
        if let Err((offset, why)) = this.scan.feed(&buf.filled()[before..]) {
            tracing::debug!(why, "refusing an ambiguously framed request");
            buf.set_filled(before + offset);
            this.refused = Some(response_400(why));
            let _ = this.refusal.set(why);
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Guarded {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, b);
        self.watch_write(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch_write(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Some(resp) = &this.refused {
            while this.written < resp.len() {
                let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &resp[this.written..]))?;
                if n == 0 {
                    break;
                }
                this.written += n;
            }
            ready!(Pin::new(&mut this.inner).poll_flush(cx))?;
        }
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl Drop for Guarded {
    /// hyper may drop a connection whose reads ended without shutting it down (at the
    /// very first read, say): the 400 still goes out, best effort and without
    /// blocking — it is a few hundred bytes into an idle socket's send buffer.
    fn drop(&mut self) {
        if let Some(resp) = &self.refused {
            if self.written < resp.len() {
                self.written += self.inner.try_write_now(&resp[self.written..]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(input: &[u8], step: usize) -> Result<(), (usize, &'static str)> {
        let mut s = Scanner::new(64 << 10);
        let mut base = 0;
        for chunk in input.chunks(step) {
            s.feed(chunk).map_err(|(o, w)| (base + o, w))?;
            base += chunk.len();
        }
        Ok(())
    }

    #[test]
    fn well_framed_pipelines_pass_in_any_split() {
        let stream = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n\
POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello\
POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n\
GET /last HTTP/1.1\r\nHost: a\r\n\r\n";
        for step in [1, 2, 3, 7, 64, stream.len()] {
            assert_eq!(scan_all(stream, step), Ok(()), "step {step}");
        }
    }

    #[test]
    fn ambiguous_framing_is_found_where_its_head_starts() {
        let good = b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc".to_vec();
        for (bad, why) in [
            (
                &b"POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
                "both",
            ),
            (
                &b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"[..],
                "both",
            ),
            (
                &b"POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n"[..],
                "several",
            ),
            (
                &b"POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n"[..],
                "several",
            ),
        ] {
            let mut stream = good.clone();
            stream.extend_from_slice(bad);
            for step in [1, 5, stream.len()] {
                let r = scan_all(&stream, step);
                let (off, w) = r.expect_err("refused");
                // The bad head ends the stream; it is reported from where it starts,
                // or from the start of the read that completed it.
                let last_read_start = (stream.len() - 1) / step * step;
                assert_eq!(off, good.len().max(last_read_start), "step {step}");
                assert!(w.starts_with(why), "{w}");
            }
        }
    }

    #[test]
    fn body_bytes_that_look_like_heads_are_not_judged() {
        let body = b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        let mut stream =
            format!("POST / HTTP/1.1\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        stream.extend_from_slice(body);
        assert_eq!(scan_all(&stream, 3), Ok(()));
    }

    #[test]
    fn what_it_does_not_follow_turns_it_off() {
        assert_eq!(
            scan_all(
                b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                4
            ),
            Ok(())
        );
        assert_eq!(
            scan_all(
                b"GARBAGE\r\n\r\nPOST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                4
            ),
            Ok(())
        );
    }
}
