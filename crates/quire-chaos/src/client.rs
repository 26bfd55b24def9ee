//! The runner's HTTP client: one keep-alive connection to quire over a real socket,
//! HTTP/1.1 or HTTP/2 with prior knowledge (h2c), on hyper's client connections, and
//! the decoding of the codings quire serves.
//!
//! Key decisions:
//! - **One connection per client, reused until it fails**, as a browser or a TLS
//!   terminator would; a connection that has closed is replaced before the next
//!   request instead of counting an error.
//! - **Failures say where they happened** ([`Failure`]): connecting, before the head,
//!   in the body (a cut connection), or too slow; the chaos report tallies them apart.
//! - **A slow reader** takes body frames with a pause between them on a socket with a
//!   small receive buffer, so quire's writes block and whatever it is sending from
//!   stays pinned while the reader crawls.
//! - **A body that does not decode is not a failure of the connection** but bytes the
//!   judge will call wrong: quire sent a complete response with a broken coding.

use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpSocket;

/// Largest body a client reads (the catalogue's largest is 300 KB; serve pages are
/// smaller).
const BODY_BYTES_MAX: usize = 8 << 20;

/// The protocol of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    /// HTTP/1.1 with keep-alive.
    H1,
    /// HTTP/2 with prior knowledge (h2c).
    H2,
}

/// Where a request failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Failure {
    /// The TCP connection or the handshake failed.
    Connect,
    /// The request failed before a response head arrived.
    Head,
    /// The body was cut after the head arrived.
    Body,
    /// No complete answer in time.
    Timeout,
}

impl Failure {
    /// The failure's name in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Failure::Connect => "connect",
            Failure::Head => "no-head",
            Failure::Body => "body-cut",
            Failure::Timeout => "timeout",
        }
    }
}

/// A complete response, its body decoded.
#[derive(Debug)]
pub(crate) struct Response {
    /// The status code.
    pub(crate) status: u16,
    /// The header fields.
    pub(crate) headers: HeaderMap,
    /// The body with its `Content-Encoding` undone, or why it would not decode.
    pub(crate) body: Result<Vec<u8>, String>,
}

impl Response {
    /// A header field as text.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Whether quire's `Cache-Status` member says `hit`.
    pub(crate) fn hit(&self) -> bool {
        self.header("cache-status")
            .is_some_and(|s| s.split(';').any(|p| p.trim() == "hit"))
    }

    /// Whether quire served a stale copy because the origin failed.
    pub(crate) fn stale_if_error(&self) -> bool {
        self.header("cache-status")
            .is_some_and(|s| s.contains("stale-if-error"))
    }
}

enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

/// One connection to quire.
pub(crate) struct Conn {
    sender: Sender,
    proto: Proto,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Conn({:?})", self.proto)
    }
}

impl Conn {
    /// Connects to `addr`; `recv_buffer` shrinks the socket's receive buffer.
    pub(crate) async fn connect(
        addr: SocketAddr,
        proto: Proto,
        recv_buffer: Option<u32>,
    ) -> Result<Conn, Failure> {
        let socket = TcpSocket::new_v4().map_err(|_| Failure::Connect)?;
        if let Some(bytes) = recv_buffer {
            socket
                .set_recv_buffer_size(bytes)
                .map_err(|_| Failure::Connect)?;
        }
        let stream = tokio::time::timeout(Duration::from_secs(5), socket.connect(addr))
            .await
            .map_err(|_| Failure::Connect)?
            .map_err(|_| Failure::Connect)?;
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(stream);
        let sender = match proto {
            Proto::H1 => {
                let (tx, conn) = http1::handshake(io).await.map_err(|_| Failure::Connect)?;
                tokio::spawn(conn);
                Sender::H1(tx)
            }
            Proto::H2 => {
                let (tx, conn) = http2::handshake(TokioExecutor::new(), io)
                    .await
                    .map_err(|_| Failure::Connect)?;
                tokio::spawn(conn);
                Sender::H2(tx)
            }
        };
        Ok(Conn { sender, proto })
    }

    /// Whether the connection can take another request.
    pub(crate) fn is_open(&self) -> bool {
        match &self.sender {
            Sender::H1(s) => !s.is_closed(),
            Sender::H2(s) => !s.is_closed(),
        }
    }

    /// Sends `method path` with `fields` and reads the whole answer; `pause` between
    /// body frames makes a slow reader.
    pub(crate) async fn send(
        &mut self,
        method: Method,
        path: &str,
        host: &str,
        fields: &[(&str, String)],
        body: Bytes,
        pause: Option<Duration>,
    ) -> Result<Response, Failure> {
        let req = self.request(method, path, host, fields, body)?;
        let resp = match &mut self.sender {
            Sender::H1(s) => {
                s.ready().await.map_err(|_| Failure::Head)?;
                s.send_request(req).await
            }
            Sender::H2(s) => {
                s.ready().await.map_err(|_| Failure::Head)?;
                s.send_request(req).await
            }
        }
        .map_err(|_| Failure::Head)?;
        let (parts, mut incoming) = resp.into_parts();
        let mut raw = Vec::new();
        while let Some(frame) = incoming.frame().await {
            let frame = frame.map_err(|_| Failure::Body)?;
            if let Ok(data) = frame.into_data() {
                raw.extend_from_slice(&data);
                if raw.len() > BODY_BYTES_MAX {
                    return Err(Failure::Body);
                }
                if let Some(p) = pause {
                    tokio::time::sleep(p).await;
                }
            }
        }
        let coding = parts
            .headers
            .get("content-encoding")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("identity")
            .to_string();
        Ok(Response {
            status: parts.status.as_u16(),
            body: decode(&coding, raw),
            headers: parts.headers,
        })
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        host: &str,
        fields: &[(&str, String)],
        body: Bytes,
    ) -> Result<Request<Full<Bytes>>, Failure> {
        // HTTP/2 takes the authority from the URI; HTTP/1.1 from Host.
        let uri = match self.proto {
            Proto::H1 => path.to_string(),
            Proto::H2 => format!("http://{host}{path}"),
        };
        let mut b = Request::builder().method(method).uri(uri);
        if self.proto == Proto::H1 {
            b = b.header("host", host);
        }
        for (k, v) in fields {
            b = b.header(*k, v.as_str());
        }
        b.body(Full::new(body)).map_err(|_| Failure::Head)
    }
}

/// `raw` with `coding` undone.
fn decode(coding: &str, raw: Vec<u8>) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let r = match coding.trim() {
        "" | "identity" => return Ok(raw),
        "gzip" => flate2::read::GzDecoder::new(&raw[..]).read_to_end(&mut out),
        "br" => brotli::Decompressor::new(&raw[..], 4096).read_to_end(&mut out),
        "zstd" => {
            zstd::stream::read::Decoder::new(&raw[..]).and_then(|mut d| d.read_to_end(&mut out))
        }
        other => return Err(format!("unknown coding {other}")),
    };
    r.map(|_| out)
        .map_err(|e| format!("{coding} body ({} bytes) does not decode: {e}", raw.len()))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn codings_decode_and_broken_ones_say_so() {
        let text = b"quire chaos quire chaos quire chaos".repeat(20);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        assert_eq!(decode("gzip", gz.clone()).unwrap(), text);
        let z = zstd::encode_all(&text[..], 3).unwrap();
        assert_eq!(decode("zstd", z).unwrap(), text);
        let mut cut = gz;
        cut.truncate(cut.len() / 2);
        assert!(decode("gzip", cut).is_err());
        assert_eq!(decode("identity", text.clone()).unwrap(), text);
    }
}
