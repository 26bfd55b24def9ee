//! Three quire nodes, a real `redis-server` and a real origin on loopback sockets:
//! purges reach every node, `wait=all`, a node that was down replays what it
//! missed, a trimmed log, Redis down, and peer fill.
//!
//! Skipped, saying so, where `redis-server` is not installed (`.ci/run` installs
//! it).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quire_cluster::{Cluster, PeerFill};
use quire_server::bus::ClusterSection;
use quire_server::config::{ByteSize, Secs};
use quire_server::origin::{Origin as OriginClient, OriginOptions};
use quire_server::{Config, Ctx, Server};
use quire_testkit::{page, wait_for, Origin, Route};

const TOKEN: &str = "cluster-test-admin-token";

/// A `redis-server` on a free port, killed on drop.
struct Redis {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Redis {
    fn start_on(port: u16, dir: tempfile::TempDir) -> Option<Redis> {
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args(["--appendonly", "no", "--dir"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .spawn()
            .ok()?;
        let r = Redis {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(r);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }

    fn start() -> Option<Redis> {
        let found = Command::new("redis-server")
            .arg("--version")
            .output()
            .is_ok();
        if !found {
            eprintln!("SKIP: redis-server is not installed (apt-get install redis-server)");
            return None;
        }
        Redis::start_on(free_port(), tempfile::tempdir().unwrap())
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Runs one command with `redis-cli`.
    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// One quire node.
struct Node {
    addr: SocketAddr,
    ctx: Arc<Ctx>,
    cluster: Option<Cluster>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
    volume: PathBuf,
}

struct Spec<'a> {
    name: &'a str,
    port: u16,
    redis: &'a str,
    peers: &'a BTreeMap<String, String>,
    origin: &'a Origin,
    volume: PathBuf,
}

async fn start_node(s: &Spec<'_>) -> Node {
    let mut cfg = Config {
        listen: SocketAddr::from(([127, 0, 0, 1], s.port)),
        admin_token: Some(TOKEN.into()),
        ..Config::default()
    };
    cfg.cache.path = s.volume.clone();
    cfg.cache.size = ByteSize(32 << 20);
    let mut section = ClusterSection::new(s.redis, s.name);
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
    let cluster = Cluster::start(&ctx, &section, &s.volume).await.unwrap();
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
    }
}

impl Node {
    async fn shutdown(mut self) -> PathBuf {
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
async fn fetch(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String, Vec<u8>) {
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
async fn get(node: &Node, path: &str) -> (u16, Vec<u8>, String) {
    let (status, cs, body) = fetch(node.addr, "GET", path, "").await;
    (status, body, cs)
}

/// `POST /_quire/purge` on `node` with `body` (JSON); status and answer.
async fn purge(node: &Node, query: &str, body: &str) -> (u16, serde_json::Value) {
    let (status, _, body) = fetch(node.addr, "POST", &format!("/_quire/purge{query}"), body).await;
    let v = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    (status, v)
}

struct Three {
    redis: Redis,
    origin: Origin,
    nodes: Vec<Node>,
    _dirs: Vec<tempfile::TempDir>,
    peers: BTreeMap<String, String>,
}

const NAMES: [&str; 3] = ["a", "b", "c"];

async fn three(peer_fill: bool) -> Option<Three> {
    let redis = Redis::start()?;
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
    Some(Three {
        redis,
        origin,
        nodes,
        _dirs: dirs,
        peers,
    })
}

/// Stops the last node; what it takes to start it again.
async fn stop_last(t: &mut Three) -> (u16, PathBuf) {
    let c = t.nodes.pop().unwrap();
    let port = c.addr.port();
    (port, c.shutdown().await)
}

/// Starts node `c` again on its port and volume.
async fn restart_c(t: &Three, (port, volume): (u16, PathBuf)) -> Node {
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

fn versioned(origin: &Origin, path: &str, v: u32) {
    let body = format!("{path} version {v}");
    origin.route(
        path,
        Route::ok(body, &[("cache-control", "max-age=3600")]).etag(&format!("\"{v}\"")),
    );
}

async fn warm(t: &Three, path: &str) {
    for n in &t.nodes {
        get(n, path).await;
    }
    for n in &t.nodes {
        assert!(wait_for(|| n.ctx.fills.in_flight() == 0).await);
        let g = get(n, path).await;
        assert!(g.2.contains("hit"), "warm on every node: {g:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_on_one_node_is_applied_on_every_node() {
    let Some(t) = three(false).await else { return };
    versioned(&t.origin, "/p", 1);
    warm(&t, "/p").await;
    versioned(&t.origin, "/p", 2);
    let (status, answer) = purge(&t.nodes[0], "", r#"{"urls":["http://127.0.0.1/p"]}"#).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["cluster"]["entry"].is_string(), "{answer}");
    let started = Instant::now();
    for n in &t.nodes[1..] {
        loop {
            let (_, body, _) = get(n, "/p").await;
            if body == b"/p version 2" {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the purge never arrived"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    assert_eq!(
        get(&t.nodes[0], "/p").await.1,
        b"/p version 2",
        "applied where it was received"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_all_answers_after_every_node_applied() {
    let Some(t) = three(false).await else { return };
    versioned(&t.origin, "/w", 1);
    warm(&t, "/w").await;
    // Heartbeats make the nodes live for `wait=all`.
    let r = &t.redis;
    assert!(wait_for(|| r.cli(&["HLEN", "quire:invalidations:alive"]) == "3").await);
    versioned(&t.origin, "/w", 2);
    let (status, answer) = purge(
        &t.nodes[1],
        "?wait=all",
        r#"{"urls":["http://127.0.0.1/w"]}"#,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["cluster"]["all_applied"], true, "{answer}");
    for name in NAMES {
        assert_eq!(answer["cluster"]["nodes"][name], "applied", "{answer}");
    }
    for n in &t.nodes {
        assert_eq!(
            get(n, "/w").await.1,
            b"/w version 2",
            "no node serves the old bytes"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stopped_purged_past_and_restarted_never_serves_the_purged_object() {
    let Some(mut t) = three(false).await else {
        return;
    };
    versioned(&t.origin, "/r", 1);
    warm(&t, "/r").await;
    let stopped = stop_last(&mut t).await;
    versioned(&t.origin, "/r", 2);
    let (status, _) = purge(&t.nodes[0], "", r#"{"urls":["http://127.0.0.1/r"]}"#).await;
    assert_eq!(status, 200);
    let c = restart_c(&t, stopped).await;
    // The node applies what it missed before it listens: its very first answer
    // is already the new version.
    assert_eq!(get(&c, "/r").await.1, b"/r version 2");
    assert!(c.cluster.as_ref().unwrap().bus.stats_applied() >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_trimmed_past_a_node_makes_it_revalidate_everything() {
    let Some(mut t) = three(false).await else {
        return;
    };
    versioned(&t.origin, "/t", 1);
    warm(&t, "/t").await;
    let stopped = stop_last(&mut t).await;
    for _ in 0..3 {
        let (status, _) = purge(&t.nodes[0], "", r#"{"tags":["other"]}"#).await;
        assert_eq!(status, 200);
    }
    assert_eq!(
        t.redis
            .cli(&["XTRIM", "quire:invalidations", "MAXLEN", "0"]),
        "3"
    );
    let before = t.origin.hits("/t");
    let c = restart_c(&t, stopped).await;
    assert_eq!(c.cluster.as_ref().unwrap().bus.stats_revalidated_all(), 1);
    let (_, body, _) = get(&c, "/t").await;
    assert_eq!(body, b"/t version 1", "the body stays");
    assert_eq!(t.origin.hits("/t"), before + 1, "revalidated once");
    let seen = t.origin.seen("/t");
    assert_eq!(seen.last().unwrap().headers["if-none-match"], "\"1\"");
    assert!(get(&c, "/t").await.2.contains("hit"), "then fresh again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_nodes_serve_and_purges_answer_503() {
    let Some(mut t) = three(false).await else {
        return;
    };
    versioned(&t.origin, "/d", 1);
    warm(&t, "/d").await;
    let port = t.redis.port;
    t.redis.stop();
    for n in &t.nodes {
        let (status, body, cs) = get(n, "/d").await;
        assert_eq!((status, &body[..]), (200, &b"/d version 1"[..]));
        assert!(cs.contains("hit"));
    }
    let (status, answer) = purge(&t.nodes[0], "", r#"{"urls":["http://127.0.0.1/d"]}"#).await;
    assert_eq!(status, 503, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("nothing was purged"),
        "{answer}"
    );
    assert!(
        get(&t.nodes[0], "/d").await.2.contains("hit"),
        "not purged here either"
    );
    t.redis = Redis::start_on(port, tempfile::tempdir().unwrap()).expect("redis again");
    let mut ok = false;
    for _ in 0..100 {
        if purge(&t.nodes[0], "", r#"{"urls":["http://127.0.0.1/d"]}"#)
            .await
            .0
            == 200
        {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(ok, "purges work again once Redis is back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_fill_makes_one_origin_fetch_per_object() {
    let Some(mut t) = three(true).await else {
        return;
    };
    let paths: Vec<String> = (0..150).map(|i| format!("/o/{i}")).collect();
    for p in &paths {
        t.origin.route(
            p,
            Route::ok(page(200), &[("cache-control", "max-age=3600")]),
        );
    }
    for n in &t.nodes {
        for p in &paths {
            assert_eq!(get(n, p).await.0, 200);
        }
    }
    let fetched: usize = paths.iter().map(|p| t.origin.hits(p)).sum();
    assert_eq!(
        fetched,
        paths.len(),
        "one origin fetch per object for the cluster"
    );
    let c = t.nodes.pop().unwrap();
    c.shutdown().await;
    for n in &t.nodes {
        for p in &paths {
            assert_eq!(get(n, p).await.0, 200, "the rest still serve");
        }
    }
}
