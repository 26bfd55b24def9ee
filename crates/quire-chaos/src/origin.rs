//! The chaos origin: an HTTP/1.1 server on a real loopback socket that serves the
//! [`Catalog`] at its current versions, and shows a fault when told to.
//!
//! Key decisions:
//! - **Raw sockets and httparse, not hyper's server**: the faults it injects (a garbage
//!   head, a broken chunk, a reset mid-body) are exactly what an HTTP library will not
//!   produce, and a hand-written responder makes every byte on the wire visible here.
//! - **The version is read when the response is written**, so what the origin sends is
//!   always the version of that instant; editors bump versions before they purge.
//! - **Down means down**: the listener is dropped (connection refused) and every open
//!   connection is closed, so quire's pooled connections fail too; coming back up
//!   binds the same address again.
//! - **Conditional requests**: `If-None-Match` matching the current `ETag` gets 304,
//!   so quire's revalidations of short-lived URLs are exercised.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::content::{Catalog, SplitMix};
use crate::schedule::FaultKind;

/// Largest request head the origin reads.
const HEAD_BYTES_MAX: usize = 64 << 10;

/// A slow response's body piece and the pause after each.
const TRICKLE_BYTES: usize = 4096;
const TRICKLE_PAUSE: Duration = Duration::from_millis(15);

/// A slow response waits up to this long before its head.
const SLOW_HEAD_MS_MAX: u64 = 3000;

/// The running origin.
#[derive(Debug)]
pub(crate) struct Origin {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Debug)]
struct Shared {
    catalog: Arc<Catalog>,
    fault: Mutex<Option<FaultKind>>,
    /// Bumped to close every open connection (the origin going down).
    closer: watch::Sender<u64>,
    /// Requests answered, a source of per-request variety for faults.
    requests: AtomicU64,
    /// Sabotage: flip a byte in one body of 50, to prove the judge sees it.
    corrupt: AtomicBool,
    /// Requests that met each fault (indexed like [`FaultKind::ALL`]).
    faulted: [AtomicU64; 4],
}

/// One parsed request.
#[derive(Debug)]
struct Req {
    head_only: bool,
    path: String,
    if_none_match: Option<String>,
}

impl Origin {
    /// Starts the origin on a free loopback port.
    pub(crate) async fn start(catalog: Arc<Catalog>) -> anyhow::Result<Origin> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding the origin")?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            catalog,
            fault: Mutex::new(None),
            closer: watch::channel(0).0,
            requests: AtomicU64::new(0),
            corrupt: AtomicBool::new(false),
            faulted: Default::default(),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        Ok(Origin {
            addr,
            shared,
            accept: Mutex::new(Some(accept)),
        })
    }

    /// The origin's address.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Sabotage for the runner's self-check: from now on one body in 50 has a byte
    /// flipped (quire stores and serves it; the judge must call it wrong).
    pub(crate) fn corrupt_bodies(&self) {
        self.shared.corrupt.store(true, Ordering::Relaxed);
    }

    /// Requests that met `kind` so far (none meet `down`: they are refused).
    pub(crate) fn faulted(&self, kind: FaultKind) -> u64 {
        let k = FaultKind::ALL.iter().position(|&f| f == kind).unwrap_or(0);
        self.shared.faulted[k].load(Ordering::Relaxed)
    }

    /// Requests answered (or faulted) so far.
    pub(crate) fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// Shows `fault` from now on (`None`: healthy). Going down closes the listener and
    /// every connection; coming back up listens on the same address again.
    pub(crate) async fn set_fault(&self, fault: Option<FaultKind>) -> anyhow::Result<()> {
        let was_down = self.fault() == Some(FaultKind::Down);
        *self.shared.fault.lock().unwrap_or_else(|e| e.into_inner()) = fault;
        let down = fault == Some(FaultKind::Down);
        if down && !was_down {
            if let Some(task) = self.take_accept() {
                task.abort();
                let _ = task.await;
            }
            self.shared.closer.send_modify(|g| *g += 1);
        } else if was_down && !down {
            let listener = rebind(self.addr).await?;
            let task = tokio::spawn(accept_loop(listener, self.shared.clone()));
            *self.accept.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
        }
        Ok(())
    }

    fn fault(&self) -> Option<FaultKind> {
        *self.shared.fault.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take_accept(&self) -> Option<JoinHandle<()>> {
        self.accept.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        if let Some(task) = self.take_accept() {
            task.abort();
        }
        self.shared.closer.send_modify(|g| *g += 1);
    }
}

/// Binds `addr` again, retrying briefly (the old socket may take a moment to go).
async fn rebind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    let mut last = None;
    for _ in 0..100 {
        match TcpListener::bind(addr).await {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(anyhow::anyhow!("rebinding the origin on {addr}: {last:?}"))
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = stream.set_nodelay(true);
        tokio::spawn(connection(stream, shared.clone()));
    }
}

/// Serves requests on one keep-alive connection until either side closes it or the
/// origin goes down.
async fn connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let mut closer = shared.closer.subscribe();
    let mut buf = Vec::new();
    loop {
        let req = tokio::select! {
            r = read_request(&mut stream, &mut buf) => r,
            _ = closer.changed() => return,
        };
        let Ok(Some(req)) = req else { return };
        let fault = *shared.fault.lock().unwrap_or_else(|e| e.into_inner());
        let n = shared.requests.fetch_add(1, Ordering::Relaxed);
        if let Some(k) = fault.and_then(|f| FaultKind::ALL.iter().position(|&a| a == f)) {
            shared.faulted[k].fetch_add(1, Ordering::Relaxed);
        }
        let keep = tokio::select! {
            r = respond(&mut stream, &shared, &req, fault, n) => r,
            _ = closer.changed() => return,
        };
        if !matches!(keep, Ok(true)) {
            return;
        }
    }
}

/// Reads one request head (and discards any `Content-Length` body); `None` at a clean
/// end of the connection.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<Option<Req>> {
    loop {
        let mut fields = [httparse::EMPTY_HEADER; 64];
        let mut parsed = httparse::Request::new(&mut fields);
        if let httparse::Status::Complete(len) = parsed.parse(buf)? {
            let req = Req {
                head_only: parsed.method == Some("HEAD"),
                path: parsed.path.unwrap_or("/").to_string(),
                if_none_match: field(parsed.headers, "if-none-match"),
            };
            let body: usize = field(parsed.headers, "content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            buf.drain(..len);
            discard(stream, buf, body).await?;
            return Ok(Some(req));
        }
        anyhow::ensure!(buf.len() < HEAD_BYTES_MAX, "request head too large");
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn field(headers: &[httparse::Header<'_>], name: &str) -> Option<String> {
    headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case(name))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .map(|v| v.trim().to_string())
}

async fn discard(stream: &mut TcpStream, buf: &mut Vec<u8>, mut body: usize) -> anyhow::Result<()> {
    let have = body.min(buf.len());
    buf.drain(..have);
    body -= have;
    let mut chunk = [0u8; 8192];
    while body > 0 {
        let n = stream.read(&mut chunk[..body.min(8192)]).await?;
        anyhow::ensure!(n > 0, "request body cut");
        body -= n;
    }
    Ok(())
}

/// Writes the answer to `req` under `fault`; whether the connection may be reused.
async fn respond(
    stream: &mut TcpStream,
    shared: &Shared,
    req: &Req,
    fault: Option<FaultKind>,
    n: u64,
) -> anyhow::Result<bool> {
    let catalog = &shared.catalog;
    let Some(i) = catalog.index_of(&req.path) else {
        let head = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\ncache-control: no-store\r\n\r\n";
        stream.write_all(head.as_bytes()).await?;
        return Ok(true);
    };
    let mut rng = SplitMix(n);
    if fault == Some(FaultKind::Slow) {
        tokio::time::sleep(Duration::from_millis(rng.below(SLOW_HEAD_MS_MAX))).await;
    }
    // Read the version only now: what is sent is the version of this instant.
    let version = catalog.version(i);
    let spec = catalog.spec(i);
    let etag = spec.etag.then(|| catalog.etag(i, version));
    let mut head = format!("cache-control: {}\r\n", Catalog::cache_control(&spec));
    if let Some(e) = &etag {
        head.push_str(&format!("etag: {e}\r\n"));
    }
    if let Some(tag) = &spec.tag {
        head.push_str(&format!("surrogate-key: {tag}\r\n"));
    }
    if etag.is_some() && etag == req.if_none_match {
        stream
            .write_all(format!("HTTP/1.1 304 Not Modified\r\n{head}\r\n").as_bytes())
            .await?;
        return Ok(true);
    }
    let kind = if spec.text {
        "text/html; charset=utf-8"
    } else {
        "application/octet-stream"
    };
    head.push_str(&format!("content-type: {kind}\r\n"));
    let mut body = catalog.body(i, version);
    if shared.corrupt.load(Ordering::Relaxed) && n.is_multiple_of(50) {
        let last = body.len() - 1;
        body[last] ^= 0x20;
    }
    match fault {
        Some(FaultKind::Reset) => reset_mid_body(stream, &head, &body).await,
        Some(FaultKind::Malformed) => malformed(stream, &head, &body, n).await,
        Some(FaultKind::Slow) => trickle(stream, &head, &body, req.head_only).await,
        _ => {
            let mut out = format!(
                "HTTP/1.1 200 OK\r\n{head}content-length: {}\r\n\r\n",
                body.len()
            )
            .into_bytes();
            if !req.head_only {
                out.extend_from_slice(&body);
            }
            stream.write_all(&out).await?;
            Ok(true)
        }
    }
}

/// The head and the body in small pieces with pauses between them.
async fn trickle(
    stream: &mut TcpStream,
    head: &str,
    body: &[u8],
    head_only: bool,
) -> anyhow::Result<bool> {
    let head = format!(
        "HTTP/1.1 200 OK\r\n{head}content-length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if head_only {
        return Ok(true);
    }
    for piece in body.chunks(TRICKLE_BYTES) {
        stream.write_all(piece).await?;
        tokio::time::sleep(TRICKLE_PAUSE).await;
    }
    Ok(true)
}

/// The head (promising the whole body) and half the body, then a TCP reset.
async fn reset_mid_body(stream: &mut TcpStream, head: &str, body: &[u8]) -> anyhow::Result<bool> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\n{head}content-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(&body[..body.len() / 2]);
    stream.write_all(&out).await?;
    stream.flush().await?;
    // Linger 0: close() sends RST instead of FIN, at once (the deprecation is about a
    // non-zero linger blocking the thread on drop; zero never waits).
    #[expect(
        deprecated,
        reason = "linger 0 never blocks: close() sends RST at once"
    )]
    stream.set_linger(Some(Duration::ZERO))?;
    Ok(false)
}

/// Every other request a garbage head; the others a chunked body whose second chunk
/// has a size line that is not hex. Then the connection closes.
async fn malformed(
    stream: &mut TcpStream,
    head: &str,
    body: &[u8],
    n: u64,
) -> anyhow::Result<bool> {
    let out = if n.is_multiple_of(2) {
        format!("HTTP/1.1 2x0 Garbage\r\n{head}content-length: -5\r\n\r\n\x00\x01junk").into_bytes()
    } else {
        let half = &body[..body.len() / 2];
        let mut out = format!(
            "HTTP/1.1 200 OK\r\n{head}transfer-encoding: chunked\r\n\r\n{:x}\r\n",
            half.len()
        )
        .into_bytes();
        out.extend_from_slice(half);
        out.extend_from_slice(b"\r\nzz-not-hex\r\ngarbage\r\n0\r\n\r\n");
        out
    };
    stream.write_all(&out).await?;
    stream.flush().await?;
    Ok(false)
}
