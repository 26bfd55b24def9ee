//! Raw HTTP/1.1 on a socket for the hostile suite: requests written byte for byte
//! (so a case can send exactly the framing it attacks with), from a chosen loopback
//! address (so a case can be several clients), and answers read by their own framing.
//!
//! Key decision: no HTTP client library between the case and quire. A library would
//! normalise the very bytes the attacks depend on.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// One answer: status, head text (lower-cased names kept as sent) and body.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) head: String,
    pub(crate) body: Vec<u8>,
}

impl Answer {
    /// The value of field `name`, if present.
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// Whether quire said this was a hit.
    pub(crate) fn hit(&self) -> bool {
        self.field("cache-status")
            .is_some_and(|v| v.contains("quire; hit"))
    }
}

/// A connection to `to` from loopback address `from` (127.0.0.0/8 is all local).
pub(crate) async fn connect_from(from: Ipv4Addr, to: SocketAddr) -> anyhow::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::from((from, 0)))?;
    Ok(socket.connect(to).await?)
}

/// Writes `request` as is and reads one answer, within `within`.
pub(crate) async fn exchange(
    stream: &mut TcpStream,
    request: &[u8],
    within: Duration,
) -> anyhow::Result<Answer> {
    stream.write_all(request).await?;
    tokio::time::timeout(within, read_answer(stream))
        .await
        .context("no answer in time")?
}

/// `GET path` from `from` on a new connection, with `extra` header lines
/// (`"name: value\r\n"` each), closed after the answer.
pub(crate) async fn get(
    to: SocketAddr,
    from: Ipv4Addr,
    path: &str,
    extra: &str,
) -> anyhow::Result<Answer> {
    let mut s = connect_from(from, to).await?;
    let req =
        format!("GET {path} HTTP/1.1\r\nhost: hostile.test\r\n{extra}connection: close\r\n\r\n");
    exchange(&mut s, req.as_bytes(), Duration::from_secs(10)).await
}

/// Reads one answer: the head, then a body by `content-length`, chunks, or to the
/// end of the connection.
pub(crate) async fn read_answer(stream: &mut TcpStream) -> anyhow::Result<Answer> {
    let mut buf = Vec::new();
    let (status, head_len, head) = loop {
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut resp = httparse::Response::new(&mut fields);
        if let httparse::Status::Complete(n) = resp.parse(&buf)? {
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            break (resp.code.unwrap_or(0), n, head);
        }
        read_more(stream, &mut buf)
            .await?
            .context("closed before a head")?;
    };
    let mut answer = Answer {
        status,
        head,
        body: buf.split_off(head_len),
    };
    if status == 101 || status == 304 || status == 204 {
        return Ok(answer);
    }
    if let Some(len) = answer.field("content-length").and_then(|v| v.parse().ok()) {
        let mut body = std::mem::take(&mut answer.body);
        while body.len() < len {
            read_more(stream, &mut body)
                .await?
                .context("closed inside a body")?;
        }
        body.truncate(len);
        answer.body = body;
    } else if answer
        .field("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        answer.body = dechunk(stream, std::mem::take(&mut answer.body)).await?;
    } else {
        let mut body = std::mem::take(&mut answer.body);
        while read_more(stream, &mut body).await?.is_some() {}
        answer.body = body;
    }
    Ok(answer)
}

/// Appends what the socket has; `None` at its end.
async fn read_more(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<Option<usize>> {
    let mut chunk = [0u8; 16 * 1024];
    let n = stream.read(&mut chunk).await?;
    if n == 0 {
        return Ok(None);
    }
    buf.extend_from_slice(&chunk[..n]);
    Ok(Some(n))
}

async fn dechunk(stream: &mut TcpStream, mut raw: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let Some(line_end) = raw.windows(2).position(|w| w == b"\r\n") else {
            read_more(stream, &mut raw)
                .await?
                .context("closed inside chunks")?;
            continue;
        };
        let size_text = String::from_utf8_lossy(&raw[..line_end]).into_owned();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .context("bad chunk size")?;
        while raw.len() < line_end + 2 + size + 2 {
            read_more(stream, &mut raw)
                .await?
                .context("closed inside a chunk")?;
        }
        body.extend_from_slice(&raw[line_end + 2..line_end + 2 + size]);
        raw.drain(..line_end + 2 + size + 2);
        if size == 0 {
            return Ok(body);
        }
    }
}
