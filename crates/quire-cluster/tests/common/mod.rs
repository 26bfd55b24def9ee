//! The cluster tests' harness: a real `redis-server`, three quire nodes in-process
//! on loopback, a scripted origin, and the requests the tests make.

#![allow(dead_code, reason = "each test file uses part of the harness")]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use quire_cluster::{Cluster, PeerFill};
use quire_server::bus::ClusterSection;
use quire_server::config::{ByteSize, Secs};
use quire_server::origin::{Origin as OriginClient, OriginOptions};
use quire_server::{Config, Ctx, Server};
pub(crate) use quire_testkit::{wait_for, Origin, Route};

pub(crate) const TOKEN: &str = "cluster-test-admin-token";

pub(crate) use quire_testkit::redis::{free_port, Redis};

/// One quire node.
pub(crate) struct Node {
    pub(crate) addr: SocketAddr,
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) cluster: Option<Cluster>,
    pub(crate) stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub(crate) task: Option<tokio::task::JoinHandle<()>>,
    pub(crate) volume: PathBuf,
    /// This node's connection to Redis, which a test can cut.
    pub(crate) link: Link,
}

/// A TCP relay between one node and Redis that a test can make silent: while
/// cut, it holds every connection open and forwards nothing (no reset, no FIN),
/// as a partition does; when restored, what it held flows on.
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) port: u16,
    cut: Arc<std::sync::atomic::AtomicBool>,
}

impl Link {
    pub(crate) async fn start(redis_port: u16) -> Link {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = cut.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", redis_port)).await
                else {
                    continue;
                };
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(relay(cr, sw, flag.clone()));
                tokio::spawn(relay(sr, cw, flag.clone()));
            }
        });
        Link { port, cut }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Stops forwarding (connections stay open and silent).
    pub(crate) fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    pub(crate) fn restore(&self) {
        self.cut.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

async fn relay(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    cut: Arc<std::sync::atomic::AtomicBool>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 64 << 10];
    loop {
        while cut.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        while cut.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

pub(crate) struct Spec<'a> {
    pub(crate) name: &'a str,
    pub(crate) port: u16,
    pub(crate) redis: &'a str,
    pub(crate) peers: &'a BTreeMap<String, String>,
    pub(crate) origin: &'a Origin,
    pub(crate) volume: PathBuf,
}

pub(crate) async fn start_node(s: &Spec<'_>) -> Node {
    start_node_with(s, None).await
}

/// [`start_node`] for a publishing node whose sessions are `sessions`.
pub(crate) async fn start_node_with(
    s: &Spec<'_>,
    sessions: Option<Arc<dyn quire_cluster::SignOutTable>>,
) -> Node {
    let redis_port: u16 = s
        .redis
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a redis URL with a port");
    let link = Link::start(redis_port).await;
    let mut cfg = Config {
        listen: SocketAddr::from(([127, 0, 0, 1], s.port)),
        admin_token: Some(TOKEN.into()),
        ..Config::default()
    };
    cfg.cache.path = s.volume.clone();
    cfg.cache.size = ByteSize(32 << 20);
    let mut section = ClusterSection::new(&link.url(), s.name);
    section.peers = s.peers.clone();
    section.peer_timeout = Secs(Duration::from_secs(1));
    cfg.cluster = Some(section.clone());
    let opts = OriginOptions::from_config(&cfg);
    let origin: Arc<dyn quire_server::upstream::Upstream> =
        Arc::new(OriginClient::new(&s.origin.url(), &opts).unwrap());
    let upstream: Arc<dyn quire_server::upstream::Upstream> = if s.peers.is_empty() {
        origin
    } else {
        Arc::new(PeerFill::new(origin, s.name, s.peers, section.peer_timeout.0, &opts).unwrap())
    };
    let ctx = Ctx::with_upstream(cfg, upstream).unwrap();
    let cluster = Cluster::start_with(&ctx, &section, &s.volume, sessions)
        .await
        .unwrap();
    let server = Server::bind(ctx.clone()).await.unwrap();
    let addr = server.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = rx.await;
    }));
    Node {
        addr,
        ctx,
        cluster: Some(cluster),
        stop: Some(tx),
        task: Some(task),
        volume: s.volume.clone(),
        link,
    }
}

impl Node {
    pub(crate) async fn shutdown(mut self) -> PathBuf {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            let _ = t.await;
        }
        if let Some(c) = self.cluster.take() {
            c.stop().await;
        }
        let volume = self.volume.clone();
        drop(self);
        volume
    }
}

/// Sends one request to `addr`: status, `Cache-Status`, body.
pub(crate) async fn fetch(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String, Vec<u8>) {
    use http_body_util::BodyExt;
    let mut req = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"))
        .header("host", "127.0.0.1");
    if path.starts_with("/_quire/") {
        req = req.header("authorization", format!("Bearer {TOKEN}"));
    }
    let req = req
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_owned(),
        )))
        .unwrap();
    let resp = quire_testkit::client()
        .request(req)
        .await
        .expect("an answer");
    let status = resp.status().as_u16();
    let cs = resp
        .headers()
        .get("cache-status")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = resp
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes().to_vec());
    (status, cs, body.unwrap_or_default())
}

/// `(status, body, Cache-Status)` of a GET of `path` from `node`.
pub(crate) async fn get(node: &Node, path: &str) -> (u16, Vec<u8>, String) {
    let (status, cs, body) = fetch(node.addr, "GET", path, "").await;
    (status, body, cs)
}

/// `POST /_quire/purge` on `node` with `body` (JSON); status and answer.
pub(crate) async fn purge(node: &Node, query: &str, body: &str) -> (u16, serde_json::Value) {
    let (status, _, body) = fetch(node.addr, "POST", &format!("/_quire/purge{query}"), body).await;
    let v = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    (status, v)
}

pub(crate) struct Three {
    pub(crate) redis: Redis,
    pub(crate) origin: Origin,
    pub(crate) nodes: Vec<Node>,
    pub(crate) _dirs: Vec<tempfile::TempDir>,
    pub(crate) peers: BTreeMap<String, String>,
}

pub(crate) const NAMES: [&str; 3] = ["a", "b", "c"];

/// Three nodes on one `redis-server`. Panics when Redis does not start: a test that
/// calls it is ignored where Redis is not installed (`build.rs`), never passed.
pub(crate) async fn three(peer_fill: bool) -> Three {
    let redis = Redis::start().expect("redis-server starts");
    let origin = Origin::start().await;
    let ports: Vec<u16> = NAMES.iter().map(|_| free_port()).collect();
    let peers: BTreeMap<String, String> = if peer_fill {
        NAMES
            .iter()
            .zip(&ports)
            .map(|(n, p)| ((*n).to_owned(), format!("http://127.0.0.1:{p}")))
            .collect()
    } else {
        BTreeMap::new()
    };
    let dirs: Vec<_> = NAMES.iter().map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = Vec::new();
    for ((name, port), dir) in NAMES.iter().zip(&ports).zip(&dirs) {
        let spec = Spec {
            name,
            port: *port,
            redis: &redis.url(),
            peers: &peers,
            origin: &origin,
            volume: dir.path().join("cache.vol"),
        };
        nodes.push(start_node(&spec).await);
    }
    Three {
        redis,
        origin,
        nodes,
        _dirs: dirs,
        peers,
    }
}

/// Stops the last node; what it takes to start it again.
pub(crate) async fn stop_last(t: &mut Three) -> (u16, PathBuf) {
    let c = t.nodes.pop().unwrap();
    let port = c.addr.port();
    (port, c.shutdown().await)
}

/// Starts node `c` again on its port and volume.
pub(crate) async fn restart_c(t: &Three, (port, volume): (u16, PathBuf)) -> Node {
    let spec = Spec {
        name: "c",
        port,
        redis: &t.redis.url(),
        peers: &t.peers,
        origin: &t.origin,
        volume,
    };
    start_node(&spec).await
}

pub(crate) fn versioned(origin: &Origin, path: &str, v: u32) {
    let body = format!("{path} version {v}");
    origin.route(
        path,
        Route::ok(body, &[("cache-control", "max-age=3600")]).etag(&format!("\"{v}\"")),
    );
}

pub(crate) async fn warm(t: &Three, path: &str) {
    for n in &t.nodes {
        get(n, path).await;
    }
    for n in &t.nodes {
        assert!(wait_for(|| n.ctx.fills.in_flight() == 0).await);
        let g = get(n, path).await;
        assert!(g.2.contains("hit"), "warm on every node: {g:?}");
    }
}
