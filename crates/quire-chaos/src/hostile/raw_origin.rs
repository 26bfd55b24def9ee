//! A hand-written HTTP/1.1 origin for the hostile suite: it behaves as real origins do
//! when a request is odd (answers before reading a body, then discards the body's bytes
//! the way nginx's lingering close does; switches protocols; stalls), which the chaos
//! origin, built to be correct, never does.
//!
//! Key decision: the body of every ordinary answer names the request path it answers
//! (`path=/victim`), so a client can tell at once whether the answer it got is the
//! answer to its own request: the whole point of a framing attack is to break that.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What the origin does with one request.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    /// 200 with `path=<path>\n` padded to `size` bytes, `Cache-Control: max-age=600`.
    Page { size: usize },
    /// An error page sent before the request body is read; the body's bytes (by its
    /// `Content-Length`) are then read and thrown away, as nginx's `return` does.
    AnswerEarly,
    /// `101 Switching Protocols`, then the connection echoes what it reads.
    Upgrade,
    /// Waits this long, then answers as `Page`.
    Slow(Duration, usize),
    /// Reflects the request's `X-Forwarded-Host` and `X-Original-URL` fields into a
    /// cacheable body: an origin a poisoning attack would use.
    Reflect,
}

/// The origin's behaviour: an action for each request path.
pub(crate) type Behaviour = Arc<dyn Fn(&str) -> Action + Send + Sync>;

/// A running origin.
#[derive(Debug)]
pub(crate) struct RawOrigin {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl RawOrigin {
    /// Binds a loopback port and serves `behaviour` on it.
    pub(crate) async fn start(behaviour: Behaviour) -> anyhow::Result<RawOrigin> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let requests = Arc::new(AtomicU64::new(0));
        let count = requests.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (b, c) = (behaviour.clone(), count.clone());
                tokio::spawn(async move {
                    let _ = connection(stream, b, c).await;
                });
            }
        });
        Ok(RawOrigin {
            addr,
            requests,
            task,
        })
    }

    /// Its `http://` URL.
    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests it has read so far.
    pub(crate) fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

impl Drop for RawOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request head, as far as the origin cares.
struct Head {
    path: String,
    content_length: usize,
    forwarded_host: Option<String>,
    original_url: Option<String>,
}

async fn connection(
    mut stream: TcpStream,
    behaviour: Behaviour,
    count: Arc<AtomicU64>,
) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    loop {
        let Some((head, used)) = read_head(&mut stream, &mut buf).await? else {
            return Ok(());
        };
        buf.drain(..used);
        count.fetch_add(1, Ordering::Relaxed);
        match behaviour(&head.path) {
            Action::Page { size } => {
                discard(&mut stream, &mut buf, head.content_length).await?;
                stream.write_all(&page(&head.path, size)).await?;
            }
            Action::Slow(wait, size) => {
                discard(&mut stream, &mut buf, head.content_length).await?;
                tokio::time::sleep(wait).await;
                stream.write_all(&page(&head.path, size)).await?;
            }
            Action::AnswerEarly => {
                let body = format!("early answer to {}\n", head.path);
                let resp = format!(
                    "HTTP/1.1 400 Bad Request\r\ncontent-length: {}\r\ncache-control: no-store\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(resp.as_bytes()).await?;
                discard(&mut stream, &mut buf, head.content_length).await?;
            }
            Action::Upgrade => return upgraded(stream, buf).await,
            Action::Reflect => {
                discard(&mut stream, &mut buf, head.content_length).await?;
                let body = format!(
                    "path={} xfh={} xou={}\n",
                    head.path,
                    head.forwarded_host.as_deref().unwrap_or("-"),
                    head.original_url.as_deref().unwrap_or("-")
                );
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncache-control: max-age=600\r\n\
                     content-type: text/plain\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(resp.as_bytes()).await?;
            }
        }
    }
}

/// `path=<path>\n` padded with `.` to `size` bytes, as a cacheable 200.
pub(crate) fn page_body(path: &str, size: usize) -> Vec<u8> {
    let mut body = format!("path={path}\n").into_bytes();
    if body.len() < size {
        body.resize(size, b'.');
    }
    body
}

fn page(path: &str, size: usize) -> Vec<u8> {
    let body = page_body(path, size);
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncache-control: max-age=600\r\n\
         content-type: text/plain\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body);
    out
}

async fn upgraded(mut stream: TcpStream, pending: Vec<u8>) -> anyhow::Result<()> {
    stream
        .write_all(
            b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n\r\n",
        )
        .await?;
    stream.write_all(&pending).await?;
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        stream.write_all(&chunk[..n]).await?;
    }
}

/// Reads one request head; `None` at a clean end of the connection.
async fn read_head(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> anyhow::Result<Option<(Head, usize)>> {
    loop {
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut fields);
        if let httparse::Status::Complete(used) = req.parse(buf)? {
            let field = |name: &str| {
                req.headers
                    .iter()
                    .find(|h| h.name.eq_ignore_ascii_case(name))
                    .map(|h| String::from_utf8_lossy(h.value).into_owned())
            };
            let head = Head {
                path: req.path.unwrap_or("/").to_string(),
                content_length: field("content-length")
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0),
                forwarded_host: field("x-forwarded-host"),
                original_url: field("x-original-url"),
            };
            return Ok(Some((head, used)));
        }
        anyhow::ensure!(buf.len() < 256 * 1024, "request head too large");
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Reads and drops `len` body bytes, taking those already buffered first.
async fn discard(stream: &mut TcpStream, buf: &mut Vec<u8>, len: usize) -> anyhow::Result<()> {
    let from_buf = len.min(buf.len());
    buf.drain(..from_buf);
    let mut left = len - from_buf;
    let mut chunk = [0u8; 8192];
    while left > 0 {
        let want = left.min(chunk.len());
        let n = stream.read(&mut chunk[..want]).await?;
        anyhow::ensure!(n > 0, "connection closed inside a body");
        left -= n;
    }
    Ok(())
}
