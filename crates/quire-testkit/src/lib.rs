//! Test harness for quire-server's integration tests: a scripted origin on a real
//! loopback socket, quire in-process in front of it, and a real HTTP client. Every
//! exchange crosses real sockets.
//!
//! A crate of its own (dev-only) rather than a `tests/common` module, so each test
//! file takes what it uses and the kit's items are its API, documented like any
//! other.
//!
//! [`https_origin`] adds an origin behind TLS, with a CA and certificates made in
//! the test.

#![forbid(unsafe_code)]

pub mod https_origin;
pub mod raw_h1;
pub mod redis;
pub mod tools;

mod crowd;
pub use crowd::{direct_crowd, forwarded_crowd, get_from, run_crowd, Answer, Crowd};

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use quire_server::{Config, Ctx, Server};
use tokio::net::TcpListener;

/// The admin token every test server uses.
pub const TOKEN: &str = "test-admin-token-0123456789";

/// One scripted origin response.
#[derive(Debug, Clone)]
pub struct Route {
    /// The status code.
    pub status: u16,
    /// The fields, in order.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
    /// Wait this long before the head.
    pub delay: Duration,
    /// Answer `If-None-Match` with 304 when it matches this ETag.
    pub etag: Option<String>,
    /// Send this many body bytes, then reset the connection.
    pub cut_after: Option<usize>,
    /// Answer any `If-None-Match` with a 304 carrying this (other) ETag.
    pub not_modified_as: Option<String>,
    /// After the body, send one more byte at this interval, forever (no
    /// `Content-Length`: the body never ends).
    pub endless: Option<Duration>,
}

impl Route {
    /// A 200 with `body` and the fields `headers`.
    pub fn ok(body: impl Into<Vec<u8>>, headers: &[(&str, &str)]) -> Route {
        Route {
            status: 200,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            body: body.into(),
            delay: Duration::ZERO,
            etag: None,
            cut_after: None,
            not_modified_as: None,
            endless: None,
        }
    }
    /// A body that never ends: a chunk every `every`.
    pub fn endless(mut self, every: Duration) -> Route {
        self.endless = Some(every);
        self
    }
    /// With status `s`.
    pub fn status(mut self, s: u16) -> Route {
        self.status = s;
        self
    }
    /// Answered after `d`.
    pub fn delay(mut self, d: Duration) -> Route {
        self.delay = d;
        self
    }
    /// With `ETag: e`; a matching `If-None-Match` gets a 304.
    pub fn etag(mut self, e: &str) -> Route {
        self.etag = Some(e.to_string());
        self.headers.push(("etag".into(), e.to_string()));
        self
    }
    /// Any `If-None-Match` gets a 304 carrying the ETag `e` (which may match nothing stored).
    pub fn not_modified_as(mut self, e: &str) -> Route {
        self.not_modified_as = Some(e.to_string());
        self
    }
    /// The body cut off (the connection dropped) after `n` bytes.
    pub fn cut_after(mut self, n: usize) -> Route {
        self.cut_after = Some(n);
        self
    }
}

/// What the origin saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The method.
    pub method: Method,
    /// The request target.
    pub uri: String,
    /// The fields.
    pub headers: HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// What an origin serves and what it has seen, shared with its tasks.
#[derive(Debug, Default)]
pub struct OriginState {
    routes: Mutex<HashMap<String, Route>>,
    seen: Mutex<Vec<Seen>>,
    /// The SNI names of the TLS connections an https origin accepted.
    server_names: Mutex<Vec<Option<String>>>,
    /// Turns true when the origin is stopped (see [`Origin::stop`]).
    stopped: tokio::sync::watch::Sender<bool>,
    /// Requests being answered now (until their head is sent), and the most ever.
    in_flight: std::sync::atomic::AtomicUsize,
    in_flight_max: std::sync::atomic::AtomicUsize,
}

/// The key of the route for any path without its own (see [`Origin::fallback`]).
const FALLBACK: &str = "*";

/// Counts a request in flight at the origin until dropped.
struct Answering<'a>(&'a OriginState);

impl<'a> Answering<'a> {
    fn new(st: &'a OriginState) -> Answering<'a> {
        use std::sync::atomic::Ordering::SeqCst;
        let now = st.in_flight.fetch_add(1, SeqCst) + 1;
        st.in_flight_max.fetch_max(now, SeqCst);
        Answering(st)
    }
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A scripted origin on 127.0.0.1.
#[derive(Debug, Clone)]
pub struct Origin {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its routes and what it has seen.
    pub state: Arc<OriginState>,
}

impl Origin {
    /// Starts an origin on a free loopback port.
    pub async fn start() -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(OriginState::default());
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                let Some(stream) = accept_until_stopped(&listener, &st).await else {
                    return;
                };
                let st = st.clone();
                tokio::spawn(async move {
                    let for_svc = st.clone();
                    let svc = service_fn(move |req| answer(for_svc.clone(), req));
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc);
                    until_stopped(&st, conn).await;
                });
            }
        });
        Origin { addr, state }
    }

    /// Stops it as a killed process would: the listener closes (connections are
    /// refused) and every open connection is dropped mid-exchange.
    pub fn stop(&self) {
        self.state.stopped.send_replace(true);
    }

    /// Scripts `path` (path and query, as the origin receives it).
    pub fn route(&self, path: &str, r: Route) {
        self.state
            .routes
            .lock()
            .unwrap()
            .insert(path.to_string(), r);
    }

    /// Scripts every path that has no route of its own (instead of a 404).
    pub fn fallback(&self, r: Route) {
        self.route(FALLBACK, r);
    }

    /// The most requests the origin was answering at once (from arrival to head).
    pub fn in_flight_max(&self) -> usize {
        self.state
            .in_flight_max
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Requests the origin received for `path` (path and query).
    pub fn seen(&self, path: &str) -> Vec<Seen> {
        self.state
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.uri == path)
            .cloned()
            .collect()
    }

    /// Every request the origin received.
    pub fn seen_all(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// How many requests for `path` it has answered.
    pub fn hits(&self, path: &str) -> usize {
        self.seen(path).len()
    }

    /// Its base URL (`http://addr`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

type OriginBody = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

/// The next connection, or `None` once the origin is stopped (the listener is then
/// dropped by the caller's return).
async fn accept_until_stopped(
    listener: &TcpListener,
    st: &OriginState,
) -> Option<tokio::net::TcpStream> {
    let mut stopped = st.stopped.subscribe();
    if *stopped.borrow() {
        return None;
    }
    tokio::select! {
        a = listener.accept() => a.ok().map(|(s, _)| s),
        _ = stopped.wait_for(|s| *s) => None,
    }
}

/// Runs `conn` until it ends or the origin is stopped (then drops it).
async fn until_stopped(st: &OriginState, conn: impl std::future::Future) {
    let mut stopped = st.stopped.subscribe();
    tokio::select! {
        _ = conn => {}
        _ = stopped.wait_for(|s| *s) => {}
    }
}

/// The route scripted for `uri`, or the fallback.
fn route_for(st: &OriginState, uri: &str) -> Option<Route> {
    let routes = st.routes.lock().unwrap();
    routes.get(uri).or_else(|| routes.get(FALLBACK)).cloned()
}

async fn answer(
    st: Arc<OriginState>,
    req: Request<hyper::body::Incoming>,
) -> Result<Response<OriginBody>, Infallible> {
    let _answering = Answering::new(&st);
    let (parts, body) = req.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let uri = parts
        .uri
        .path_and_query()
        .map_or("/".to_string(), |p| p.to_string());
    st.seen.lock().unwrap().push(Seen {
        method: parts.method.clone(),
        uri: uri.clone(),
        headers: parts.headers.clone(),
        body,
    });
    let Some(r) = route_for(&st, &uri) else {
        let mut resp = Response::new(full(b"no such route".to_vec()));
        *resp.status_mut() = StatusCode::NOT_FOUND;
        return Ok(resp);
    };
    if !r.delay.is_zero() {
        tokio::time::sleep(r.delay).await;
    }
    let not_modified = r.etag.as_deref().is_some_and(|e| {
        parts
            .headers
            .get("if-none-match")
            .is_some_and(|v| v.to_str().unwrap_or("").contains(e))
    });
    if let (Some(other), true) = (
        &r.not_modified_as,
        parts.headers.contains_key("if-none-match"),
    ) {
        let mut resp = Response::new(full(Vec::new()));
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
        resp.headers_mut().insert("etag", other.parse().unwrap());
        return Ok(resp);
    }
    let mut resp = if not_modified {
        let mut resp = Response::new(full(Vec::new()));
        *resp.status_mut() = StatusCode::NOT_MODIFIED;
        resp
    } else if let Some(every) = r.endless {
        let stream = Endless {
            first: Some(Bytes::from(r.body.clone())),
            tick: tokio::time::interval_at(tokio::time::Instant::now() + every, every),
        };
        let mut resp = Response::new(BodyExt::boxed(StreamBody::new(stream)));
        *resp.status_mut() = StatusCode::from_u16(r.status).unwrap();
        resp
    } else if let Some(n) = r.cut_after {
        let first = Bytes::from(r.body[..n.min(r.body.len())].to_vec());
        let chunks: Vec<Result<Frame<Bytes>, std::io::Error>> =
            vec![Ok(Frame::data(first)), Err(std::io::Error::other("cut"))];
        let stream = futures_stream(chunks);
        let mut resp = Response::new(BodyExt::boxed(StreamBody::new(stream)));
        *resp.status_mut() = StatusCode::from_u16(r.status).unwrap();
        resp.headers_mut()
            .insert("content-length", r.body.len().to_string().parse().unwrap());
        resp
    } else {
        let mut resp = Response::new(full(r.body.clone()));
        *resp.status_mut() = StatusCode::from_u16(r.status).unwrap();
        resp
    };
    for (k, v) in &r.headers {
        if not_modified && k.eq_ignore_ascii_case("content-length") {
            continue;
        }
        resp.headers_mut().append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    Ok(resp)
}

fn full(b: Vec<u8>) -> OriginBody {
    Full::new(Bytes::from(b))
        .map_err(|never| match never {})
        .boxed()
}

/// A stream over prepared frames, with a short pause before an error so the data
/// frame is flushed first.
fn futures_stream(
    frames: Vec<Result<Frame<Bytes>, std::io::Error>>,
) -> impl futures_core::Stream<Item = Result<Frame<Bytes>, std::io::Error>> + Send + Sync {
    struct S(
        std::collections::VecDeque<Result<Frame<Bytes>, std::io::Error>>,
        Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    );
    impl futures_core::Stream for S {
        type Item = Result<Frame<Bytes>, std::io::Error>;
        fn poll_next(
            mut self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Self::Item>> {
            if matches!(self.0.front(), Some(Err(_))) {
                let sleep = self
                    .1
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(Duration::from_millis(50))));
                if sleep.as_mut().poll(cx).is_pending() {
                    return std::task::Poll::Pending;
                }
            }
            std::task::Poll::Ready(self.0.pop_front())
        }
    }
    use std::future::Future;
    S(frames.into(), None)
}

/// A body that never ends: its first bytes, then one byte a tick.
struct Endless {
    first: Option<Bytes>,
    tick: tokio::time::Interval,
}

impl futures_core::Stream for Endless {
    type Item = Result<Frame<Bytes>, std::io::Error>;
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        if let Some(b) = self.first.take() {
            return std::task::Poll::Ready(Some(Ok(Frame::data(b))));
        }
        match self.tick.poll_tick(cx) {
            std::task::Poll::Ready(_) => {
                std::task::Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"x")))))
            }
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

/// quire in-process in front of an origin.
#[derive(Debug)]
pub struct Quire {
    /// Where quire listens.
    pub addr: SocketAddr,
    /// Where its plain-HTTP redirect listener is (`listen_http`), if configured.
    pub redirect_addr: Option<SocketAddr>,
    /// quire's shared state (metrics, store, clock).
    pub ctx: Arc<Ctx>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

/// The context for `cfg`. A test that restarts quire on the same volume may find
/// the stopped instance's last threads still holding it for a moment (seen once in
/// CI: `InUse`), so that one error is retried for up to 2 s; any other fails at once.
async fn open_ctx(cfg: Config) -> Arc<Ctx> {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        match Ctx::new(cfg.clone()) {
            Ok(ctx) => return ctx,
            Err(quire_server::policy::StartError::Store {
                source: quire_store::StoreError::InUse { .. },
                ..
            }) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("starting quire: {e:?}"),
        }
    }
}

impl Quire {
    /// Starts quire in front of `origin`, with `tweak` applied to the test config.
    pub async fn start(origin: &Origin, tweak: impl FnOnce(&mut Config)) -> Quire {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = Config {
            listen: "127.0.0.1:0".parse().unwrap(),
            origin: Some(origin.url()),
            admin_token: Some(TOKEN.to_string()),
            ..Config::default()
        };
        cfg.cache.path = dir.path().join("cache.vol");
        cfg.cache.size = quire_server::config::ByteSize(64 << 20);
        cfg.limits.origin_read_timeout = quire_server::config::Secs(Duration::from_secs(2));
        tweak(&mut cfg);
        let ctx = open_ctx(cfg).await;
        let server = Server::bind(ctx.clone()).await.unwrap();
        let addr = server.local_addr().unwrap();
        let redirect_addr = server.redirect_addr();
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async move {
            let _ = rx.await;
        }));
        Quire {
            addr,
            redirect_addr,
            ctx,
            stop: Some(tx),
            task: Some(task),
            _dir: dir,
        }
    }

    /// Sends the shutdown signal and waits for the drain.
    pub async fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
    }

    /// The URL of `path` on this quire.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
}

/// A response as the client saw it.
#[derive(Debug)]
pub struct Got {
    /// The status code.
    pub status: u16,
    /// The fields.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Got {
    /// The value of field `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    /// The `Cache-Status` value (empty when absent).
    pub fn cache_status(&self) -> &str {
        self.header("cache-status").unwrap_or("")
    }
}

/// A fresh client (its own connection pool).
pub fn client() -> Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// Sends one request to quire.
pub async fn send(
    q: &Quire,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Got {
    let mut b = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).unwrap())
        .uri(q.url(path));
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b.body(Full::new(Bytes::copy_from_slice(body))).unwrap();
    let resp = client().request(req).await.expect("quire answered");
    let (parts, body) = resp.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    Got {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
    }
}

/// Polls `cond` every 10 ms for up to 10 s; whether it came true. Tests wait on
/// the state they need, never for a fixed time.
pub async fn wait_for(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..1000 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// `GET /_quire/metrics` of `q`, with the test token: the Prometheus text.
pub async fn metrics_text(q: &Quire) -> String {
    let auth = format!("Bearer {TOKEN}");
    let got = send(
        q,
        "GET",
        "/_quire/metrics",
        &[("authorization", &auth)],
        b"",
    )
    .await;
    assert_eq!(got.status, 200, "the metrics");
    String::from_utf8_lossy(&got.body).into_owned()
}

/// The value of `series` (`name{labels}`, exactly as written) in a Prometheus text
/// exposition; panics, showing the text, when it is not there.
pub fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {series} in {text}"))
        .parse()
        .unwrap()
}

/// Waits until no fill is in flight (the last miss is stored or dropped) and the
/// compression pool is idle (the codings added after a commit are in).
pub async fn settle(q: &Quire) {
    for _ in 0..6000 {
        if q.ctx.fills.in_flight() == 0 && q.ctx.compress.held_bytes() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("fills never settled");
}

/// A `GET` of `path` with `headers`.
pub async fn get(q: &Quire, path: &str, headers: &[(&str, &str)]) -> Got {
    send(q, "GET", path, headers, b"").await
}

/// A body that compresses well and is easy to check.
pub fn page(n: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(n);
    let mut i = 0u32;
    while v.len() < n {
        v.extend_from_slice(format!("<p>line {i} of a test page</p>\n").as_bytes());
        i += 1;
    }
    v.truncate(n);
    v
}

/// A body decoded from the coding a response names (`""` for none).
pub fn decode(coding: &str, body: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    match coding {
        "gzip" => {
            flate2::read::GzDecoder::new(body)
                .read_to_end(&mut out)
                .unwrap();
        }
        "br" => {
            brotli::Decompressor::new(body, 4096)
                .read_to_end(&mut out)
                .unwrap();
        }
        "zstd" => out = zstd::decode_all(body).unwrap(),
        "" | "identity" => out = body.to_vec(),
        other => panic!("unexpected coding {other}"),
    }
    out
}

/// Sends `request` on a fresh connection and reads until the end (5 s at most).
pub fn raw(addr: SocketAddr, request: &[u8]) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// [`raw`] on a blocking thread, for async tests.
pub async fn raw_async(addr: std::net::SocketAddr, request: &'static [u8]) -> String {
    tokio::task::spawn_blocking(move || raw(addr, request))
        .await
        .unwrap()
}

/// Status codes of every response in `text`, in order.
pub fn statuses(text: &str) -> Vec<u16> {
    text.match_indices("HTTP/1.1 ")
        .filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok())
        .collect()
}

/// An origin that answers every request with `response`, byte for byte, then closes.
pub async fn raw_origin(response: &'static [u8]) -> Origin {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = s.write_all(response).await;
                let _ = s.shutdown().await;
            });
        }
    });
    Origin {
        addr,
        state: Default::default(),
    }
}

/// Reads one response with a `Content-Length` body (or none) from `s`;
/// `None` when the connection was closed instead.
pub fn read_response(s: &mut std::net::TcpStream) -> Option<Vec<u8>> {
    use std::io::Read;
    let mut got = Vec::new();
    let mut b = [0u8; 4096];
    loop {
        if let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + len {
                return Some(got);
            }
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => got.extend_from_slice(&b[..n]),
        }
    }
}

/// A loopback port free now, for a server a test must name before it starts (a
/// peer's URL, an ACME challenge port). Taken from 20000–29999, below the kernel's
/// ephemeral range (32768–60999 by default): a port that `bind(":0")` handed out
/// and the test then closed could be taken by another test's outgoing connection
/// before the server binds it (it happened: `AddrInUse` in the ACME test). Each
/// process starts at its own offset and never hands a port out twice.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let offset = std::process::id().wrapping_mul(97) % 10_000;
    for _ in 0..10_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + ((offset + n) % 10_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    l.local_addr().expect("its address").port()
}
