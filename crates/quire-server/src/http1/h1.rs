//! HTTP/1.1 responses written by the fast path itself: any `Response<Body>` the
//! service produced (a miss as its fill streams, a pass-through, a stale or ranged
//! answer, an error), serialised and framed as hyper frames it.
//!
//! Why: a connection whose first non-hit request went to hyper stayed there for good,
//! so a keep-alive client — a browser, or a TLS terminator's pooled connections in
//! front of quire — lost the fast path after its first miss. The fast path now hands a
//! plain request (`GET`/`HEAD`, HTTP/1.1, no body, no connection-level fields) to
//! [`crate::request::service`] itself and writes the answer here; only what needs hyper's
//! protocol machinery (bodies, upgrades, `Expect`, HTTP/1.0, HTTP/2, malformed heads)
//! still goes to hyper for the rest of the connection.
//!
//! Framing follows hyper's server (`proto::h1::role`): no body for `HEAD`, 1xx, 204
//! and 304; else the response's own `Content-Length`; else the body's exact size
//! hint as `Content-Length`; else `Transfer-Encoding: chunked`. A `Date` field is
//! added when the response has none. A body that fails or ends short of its length
//! closes the connection (the client must not take a cut body for a whole one).

use std::io;
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

use http::header::{self, HeaderValue};
use http::{Response, StatusCode};
use http_body::Body as _;

use crate::edge::wire::Wire;
use crate::request::body::Body;

/// Whether the connection stays open after a response.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum After {
    /// Keep-alive: read the next request.
    KeepAlive,
    /// Close it (the response said so, or its body was cut short).
    Close,
}

/// How the body goes on the wire.
enum Framing {
    None,
    Length(u64),
    Chunked,
}

/// Writes `resp` to `stream`; `head_only` for a `HEAD` request. `head` is scratch
/// space for the response head. A socket that stays full for `stall`
/// (`limits.send_stall`: no byte taken) is a `TimedOut` error.
pub(crate) async fn write_response(
    stream: &mut Wire,
    resp: Response<Body>,
    head_only: bool,
    head: &mut Vec<u8>,
    stall: Duration,
) -> io::Result<After> {
    let (parts, mut body) = resp.into_parts();
    head.clear();
    let (framing, close) = serialise_head(&parts, &body, head_only, head);
    let mut out = Out { stream, stall };
    let whole = out.body(head, &mut body, &framing).await?;
    Ok(if close || !whole {
        After::Close
    } else {
        After::KeepAlive
    })
}

/// Appends the response head to `head`: status line, fields, `Date` when missing,
/// and the framing field hyper would add. Returns the framing and whether the
/// response asked to close the connection.
fn serialise_head(
    parts: &http::response::Parts,
    body: &Body,
    head_only: bool,
    head: &mut Vec<u8>,
) -> (Framing, bool) {
    let status = parts.status;
    status_line(head, status);
    let mut close = false;
    for (name, value) in &parts.headers {
        if name == header::CONNECTION && has_close(value) {
            close = true;
        }
        field(head, name.as_str(), value.as_bytes());
    }
    if !parts.headers.contains_key(header::DATE) {
        let now = httpdate::fmt_http_date(std::time::SystemTime::now());
        field(head, "date", now.as_bytes());
    }
    let bodiless = head_only
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let framing = if bodiless {
        Framing::None
    } else if let Some(v) = parts.headers.get(header::CONTENT_LENGTH) {
        match v.to_str().ok().and_then(|v| v.trim().parse().ok()) {
            Some(n) => Framing::Length(n),
            // The service never writes a bad length; if it did, the end of the body
            // can only be told by closing.
            None => {
                close = true;
                Framing::Length(u64::MAX)
            }
        }
    } else if let Some(n) = body.size_hint().exact() {
        number_field(head, "content-length", n);
        Framing::Length(n)
    } else {
        field(head, "transfer-encoding", b"chunked");
        Framing::Chunked
    };
    head.extend_from_slice(b"\r\n");
    (framing, close)
}

/// The socket a response goes out on, with the longest wait for room in it.
struct Out<'a> {
    stream: &'a mut Wire,
    stall: Duration,
}

impl Out<'_> {
    /// Writes the head and the body as `framing` says; `false` when the body failed
    /// or ended short of its length (only a close then tells the client).
    async fn body(&mut self, head: &[u8], body: &mut Body, framing: &Framing) -> io::Result<bool> {
        // The head goes out with the first chunk while that chunk is ready at once;
        // a slow fill still gets its head out first.
        let mut head: &[u8] = head;
        let mut sent: u64 = 0;
        if !matches!(framing, Framing::None) {
            loop {
                let frame = match ready_frame(body) {
                    Some(f) => f,
                    None => {
                        self.write(&[std::mem::take(&mut head)]).await?;
                        std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await
                    }
                };
                let data = match frame {
                    None => break,
                    // A fill that failed part-way: the client must see a cut connection.
                    Some(Err(_)) => return Ok(false),
                    Some(Ok(f)) => match f.into_data() {
                        Ok(d) if !d.is_empty() => d,
                        _ => continue,
                    },
                };
                let h = std::mem::take(&mut head);
                if self.chunk(h, &data, framing, &mut sent).await? {
                    break;
                }
            }
        }
        match framing {
            Framing::Chunked => self.write(&[head, b"0\r\n\r\n"]).await?,
            Framing::Length(n) => {
                self.write(&[head]).await?;
                // Ended short of its length: only a close tells the client.
                return Ok(sent >= *n);
            }
            Framing::None => self.write(&[head]).await?,
        }
        Ok(true)
    }

    /// Writes one chunk of body data (after what is left of the head) as `framing`
    /// frames it; `true` once a sized body is complete.
    async fn chunk(
        &mut self,
        head: &[u8],
        data: &[u8],
        framing: &Framing,
        sent: &mut u64,
    ) -> io::Result<bool> {
        match framing {
            Framing::Length(n) => {
                let room = usize::try_from(n - *sent).unwrap_or(usize::MAX);
                let take = &data[..data.len().min(room)];
                *sent += take.len() as u64;
                self.write(&[head, take]).await?;
                Ok(*sent >= *n)
            }
            _ => {
                let mut size = [0u8; 18];
                let size = chunk_size(&mut size, data.len());
                self.write(&[head, size, data, b"\r\n"]).await?;
                Ok(false)
            }
        }
    }

    async fn write(&mut self, parts: &[&[u8]]) -> io::Result<()> {
        self.stream.write_all(parts, self.stall).await
    }
}

/// The body's next frame if it is ready now; `None` when it is not.
fn ready_frame(
    body: &mut Body,
) -> Option<Option<Result<http_body::Frame<bytes::Bytes>, crate::request::body::BodyError>>> {
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    match Pin::new(body).poll_frame(&mut cx) {
        Poll::Ready(f) => Some(f),
        Poll::Pending => None,
    }
}

/// Whether a `Connection` field value lists `close`.
fn has_close(v: &HeaderValue) -> bool {
    v.as_bytes()
        .split(|&b| b == b',')
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
}

/// Appends the status line `HTTP/1.1 <code> <reason>`.
pub(crate) fn status_line(out: &mut Vec<u8>, status: StatusCode) {
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(status.canonical_reason().unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
}

/// Appends the field line `name: n`.
pub(crate) fn number_field(out: &mut Vec<u8>, name: &str, n: u64) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    quire_http::syntax::push_decimal(out, n);
    out.extend_from_slice(b"\r\n");
}

/// Appends the field line `name: value`.
pub(crate) fn field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// `len` as a chunk-size line (hex, CRLF) in `buf`.
fn chunk_size(buf: &mut [u8; 18], mut len: usize) -> &[u8] {
    let mut i = 16;
    loop {
        i -= 1;
        buf[i] = b"0123456789abcdef"[len & 15];
        len >>= 4;
        if len == 0 {
            break;
        }
    }
    buf[16] = b'\r';
    buf[17] = b'\n';
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_are_lowercase_hex_lines() {
        let mut b = [0u8; 18];
        for n in [1usize, 9, 10, 15, 16, 255, 4096, 65_535, usize::MAX] {
            assert_eq!(chunk_size(&mut b, n), format!("{n:x}\r\n").as_bytes());
        }
    }

    #[test]
    fn connection_close_is_found_in_a_list() {
        assert!(has_close(&HeaderValue::from_static("close")));
        assert!(has_close(&HeaderValue::from_static("keep-alive, Close")));
        assert!(!has_close(&HeaderValue::from_static("keep-alive")));
        assert!(!has_close(&HeaderValue::from_static("closed")));
    }
}
