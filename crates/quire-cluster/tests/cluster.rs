//! Three quire nodes, a real `redis-server` and a real origin on loopback sockets:
//! purges reach every node, `wait=all`, a node that was down replays what it
//! missed, a trimmed log, Redis down, and peer fill.
//!
//! Ignored, saying so, where `redis-server` is not installed (`build.rs` looks;
//! `.ci/run` installs it).

mod common;

use std::time::{Duration, Instant};

use common::*;
use quire_testkit::{page, wait_for, Route};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn a_purge_on_one_node_is_applied_on_every_node() {
    let t = three(false).await;
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
    let (status, _, text) = fetch(t.nodes[1].addr, "GET", "/_quire/metrics", "").await;
    assert_eq!(status, 200);
    let text = String::from_utf8(text).unwrap();
    let value = |name: &str| -> Option<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
    };
    assert_eq!(value("quire_cluster_bus_up"), Some(1.0), "{text}");
    assert_eq!(value("quire_cluster_applied_total"), Some(1.0), "{text}");
    assert_eq!(
        value("quire_cluster_appended_total"),
        Some(0.0),
        "b appended none"
    );
    let lag = value("quire_cluster_lag_entries").expect("the lag in entries");
    assert!(lag <= 1.0, "b keeps up: {lag}");
    assert!(value("quire_cluster_lag_seconds").is_some());
    assert_eq!(
        value("quire_cluster_replays_total"),
        Some(1.0),
        "joined once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn wait_all_answers_after_every_node_applied() {
    let t = three(false).await;
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
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn a_node_stopped_purged_past_and_restarted_never_serves_the_purged_object() {
    let mut t = three(false).await;
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
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn a_log_trimmed_past_a_node_makes_it_revalidate_everything() {
    let mut t = three(false).await;
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
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn with_redis_down_nodes_serve_and_purges_answer_503() {
    let mut t = three(false).await;
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
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn peer_fill_makes_one_origin_fetch_per_object() {
    let mut t = three(true).await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn wait_all_gives_up_on_a_live_node_that_never_applies_and_names_it() {
    let t = three(false).await;
    let r = &t.redis;
    assert!(wait_for(|| r.cli(&["HLEN", "quire:invalidations:alive"]) == "3").await);
    // A node that beats but never reads the log (hung on its store, say): its
    // heartbeat is kept fresh all through the wait.
    let port = r.port.to_string();
    let beating = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let still = beating.clone();
    let ghost = std::thread::spawn(move || {
        while still.load(std::sync::atomic::Ordering::Relaxed) {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
                .to_string();
            let _ = std::process::Command::new("redis-cli")
                .args([
                    "-p",
                    &port,
                    "HSET",
                    "quire:invalidations:alive",
                    "ghost",
                    &now,
                ])
                .output();
            std::thread::sleep(Duration::from_millis(300));
        }
    });
    assert!(wait_for(|| r.cli(&["HEXISTS", "quire:invalidations:alive", "ghost"]) == "1").await);
    let started = Instant::now();
    let (status, answer) = purge(
        &t.nodes[0],
        "?wait=all",
        r#"{"urls":["http://127.0.0.1/g"]}"#,
    )
    .await;
    let took = started.elapsed();
    beating.store(false, std::sync::atomic::Ordering::Relaxed);
    ghost.join().unwrap();
    assert_eq!(status, 200, "the purge itself is done: {answer}");
    assert_eq!(answer["cluster"]["all_applied"], false, "{answer}");
    assert_eq!(answer["cluster"]["nodes"]["ghost"], "pending", "{answer}");
    assert_eq!(answer["cluster"]["nodes"]["a"], "applied", "{answer}");
    let limit = quire_server::purge_api::WAIT_ALL_TIMEOUT;
    assert!(
        took >= limit && took < limit + Duration::from_secs(3),
        "{took:?}"
    );
}

/// `/_quire/health` of `node`.
async fn health(node: &Node) -> String {
    let (status, _, body) = fetch(node.addr, "GET", "/_quire/health", "").await;
    assert_eq!(status, 200);
    String::from_utf8(body).unwrap()
}

/// Waits (up to 20 s) until `node`'s health says whether it is cut off.
async fn until_cut_off(node: &Node, cut: bool) {
    let started = Instant::now();
    while health(node).await.contains("cut off") != cut {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the node never said it was {}cut off",
            if cut { "" } else { "no longer " }
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn urls_json(paths: &[String]) -> String {
    let urls: Vec<String> = paths
        .iter()
        .map(|p| format!("\"http://127.0.0.1{p}\""))
        .collect();
    format!(r#"{{"urls":[{}]}}"#, urls.join(","))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn peer_fill_from_a_lagging_owner_never_undoes_a_wait_all_purge() {
    let t = three(true).await;
    let paths: Vec<String> = (0..24).map(|i| format!("/lag/{i}")).collect();
    for p in &paths {
        versioned(&t.origin, p, 1);
        warm(&t, p).await;
    }
    let r = &t.redis;
    assert!(wait_for(|| r.cli(&["HLEN", "quire:invalidations:alive"]) == "3").await);
    // The owner of about a third of the keys stops reading the log: it still
    // answers its peers, from the copies it holds.
    t.nodes[2].link.cut();
    for p in &paths {
        versioned(&t.origin, p, 2);
    }
    // Read at once, while c lags (well inside its cut-off window): a and b have
    // applied the purge, c has not, and c owns some of these keys.
    let (status, answer) = purge(&t.nodes[0], "", &urls_json(&paths)).await;
    assert_eq!(status, 200, "{answer}");
    assert!(
        wait_for(|| r
            .cli(&["HGET", "quire:invalidations:applied", "b"])
            .ends_with(answer["cluster"]["entry"].as_str().unwrap()))
        .await
    );
    let read_all = || async {
        for n in &t.nodes[..2] {
            for p in &paths {
                let (_, body, cs) = get(n, p).await;
                assert_eq!(
                    String::from_utf8_lossy(&body),
                    format!("{p} version 2"),
                    "a lagging owner's old copy came back after the purge ({cs})"
                );
            }
        }
    };
    read_all().await;
    // And `wait=all` with the owner still behind names it, never acknowledges it.
    for p in &paths {
        versioned(&t.origin, p, 3);
    }
    let (status, answer) = purge(&t.nodes[1], "?wait=all", &urls_json(&paths)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["cluster"]["all_applied"], false, "{answer}");
    assert_eq!(answer["cluster"]["nodes"]["a"], "applied", "{answer}");
    assert_eq!(answer["cluster"]["nodes"]["b"], "applied", "{answer}");
    assert_ne!(
        answer["cluster"]["nodes"]["c"], "applied",
        "the lagging node is named, never acknowledged: {answer}"
    );
    for p in &paths {
        versioned(&t.origin, p, 2);
    }
    let (_, _, text) = fetch(t.nodes[0].addr, "GET", "/_quire/metrics", "").await;
    let text = String::from_utf8(text).unwrap();
    assert!(
        !text.contains("quire_cluster_peer_fills_total{result=\"refused\"} 0\n"),
        "the owner's answers were refused, not missed: {text}"
    );
    t.nodes[2].link.restore();
    let c = &t.nodes[2];
    for p in &paths {
        let started = Instant::now();
        while get(c, p).await.1 != format!("{p} version 2").into_bytes() {
            assert!(
                started.elapsed() < Duration::from_secs(15),
                "c never caught up"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn a_node_cut_off_past_the_liveness_window_revalidates_everything_it_serves() {
    let t = three(false).await;
    versioned(&t.origin, "/cut", 1);
    warm(&t, "/cut").await;
    let c = &t.nodes[2];
    assert_eq!(health(c).await, "ok\n");
    // Held open and silent: no reset tells the node anything.
    c.link.cut();
    until_cut_off(c, true).await;
    versioned(&t.origin, "/cut", 2);
    let (status, answer) = purge(&t.nodes[0], "", r#"{"urls":["http://127.0.0.1/cut"]}"#).await;
    assert_eq!(status, 200, "{answer}");
    let (_, body, cs) = get(c, "/cut").await;
    assert_eq!(
        body, b"/cut version 2",
        "served the purged bytes while cut off ({cs})"
    );
    let (_, _, text) = fetch(c.addr, "GET", "/_quire/metrics", "").await;
    let text = String::from_utf8(text).unwrap();
    assert!(text.contains("quire_cluster_cut_off 1\n"), "{text}");
    assert!(text.contains("quire_cluster_cut_offs_total 1\n"), "{text}");
    c.link.restore();
    until_cut_off(c, false).await;
    assert_eq!(get(c, "/cut").await.1, b"/cut version 2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn a_stream_redis_lost_never_hides_later_purges_or_fakes_their_acks() {
    let t = three(false).await;
    versioned(&t.origin, "/lost", 1);
    warm(&t, "/lost").await;
    let r = &t.redis;
    assert!(wait_for(|| r.cli(&["HLEN", "quire:invalidations:alive"]) == "3").await);
    // An entry far in the future: every node's position passes it; then Redis
    // loses the stream, and the ids it assigns next are lower than every position.
    let future = r.cli(&[
        "XADD",
        "quire:invalidations",
        "99999999999999-0",
        "v",
        "1",
        "node",
        "x",
        "op",
        "purge",
        "soft",
        "0",
        "targets",
        "[]",
    ]);
    assert_eq!(future, "99999999999999-0");
    assert!(
        wait_for(|| r
            .cli(&["HVALS", "quire:invalidations:applied"])
            .matches("99999999999999-0")
            .count()
            == 3)
        .await
    );
    assert_eq!(r.cli(&["DEL", "quire:invalidations"]), "1");
    versioned(&t.origin, "/lost", 2);
    let (status, answer) = purge(
        &t.nodes[0],
        "?wait=all",
        r#"{"urls":["http://127.0.0.1/lost"]}"#,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let entry = answer["cluster"]["entry"].as_str().unwrap().to_owned();
    assert!(entry.as_str() < "99999999999999-0", "a lower id: {entry}");
    assert_eq!(answer["cluster"]["all_applied"], true, "{answer}");
    for n in &t.nodes {
        assert_eq!(
            get(n, "/lost").await.1,
            b"/lost version 2",
            "a node acknowledged a purge it skipped"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn a_node_whose_clock_is_ten_seconds_off_is_waited_for_and_applies_before_the_ack() {
    let t = three(false).await;
    versioned(&t.origin, "/skew", 1);
    warm(&t, "/skew").await;
    // c's clock is 10 s behind the others' (the server clock only moves forward:
    // the others move ahead).
    for n in &t.nodes[..2] {
        n.ctx.clock.advance(Duration::from_secs(10));
    }
    let r = &t.redis;
    assert!(wait_for(|| r.cli(&["HLEN", "quire:invalidations:alive"]) == "3").await);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    versioned(&t.origin, "/skew", 2);
    let (status, answer) = purge(
        &t.nodes[0],
        "?wait=all",
        r#"{"urls":["http://127.0.0.1/skew"]}"#,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["cluster"]["nodes"]["c"], "applied", "{answer}");
    assert_eq!(answer["cluster"]["all_applied"], true, "{answer}");
    assert_eq!(get(&t.nodes[2], "/skew").await.1, b"/skew version 2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn an_outside_quire_peer_header_never_turns_peer_fill_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let t = three(true).await;
    let paths: Vec<String> = (0..30).map(|i| format!("/op/{i}")).collect();
    for p in &paths {
        t.origin.route(
            p,
            Route::ok(page(200), &[("cache-control", "max-age=3600")]),
        );
    }
    // A client (not a peer's address) claiming to be a peer, on node a.
    for p in &paths {
        let sock = tokio::net::TcpSocket::new_v4().unwrap();
        sock.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        let mut s = sock.connect(t.nodes[0].addr).await.unwrap();
        let req = format!(
            "GET {p} HTTP/1.1\r\nhost: 127.0.0.1\r\nquire-peer: b\r\nconnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        assert!(
            out.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&out)
        );
        assert!(
            !String::from_utf8_lossy(&out).contains("quire-peer-position"),
            "a client is never answered as a peer"
        );
    }
    for n in &t.nodes[1..] {
        for p in &paths {
            assert_eq!(get(n, p).await.0, 200);
        }
    }
    let fetched: usize = paths.iter().map(|p| t.origin.hits(p)).sum();
    assert_eq!(fetched, paths.len(), "peer fill stayed on");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn a_cluster_purge_answers_the_entries_it_removed() {
    let t = three(false).await;
    for round in 0..20 {
        let p = format!("/count/{round}");
        versioned(&t.origin, &p, 1);
        get(&t.nodes[0], &p).await;
        assert!(get(&t.nodes[0], &p).await.2.contains("hit"));
        let body = format!(r#"{{"urls":["http://127.0.0.1{p}"]}}"#);
        let (status, answer) = purge(&t.nodes[0], "", &body).await;
        assert_eq!(status, 200, "{answer}");
        assert!(
            answer["purged"].as_u64().unwrap() >= 1,
            "round {round}: the reader applied it first and the answer said 0: {answer}"
        );
    }
}

/// A node's sessions as the cluster sees them: a cookie is `(epoch, generation)`
/// and is honoured while it is the table's current pair for its reader.
#[derive(Default)]
struct Table(std::sync::Mutex<(u64, std::collections::HashMap<String, u64>)>);

impl Table {
    fn cookie(&self, name: &str) -> (u64, u64) {
        let t = self.0.lock().unwrap();
        (t.0, t.1.get(name).copied().unwrap_or(0))
    }

    fn honours(&self, name: &str, cookie: (u64, u64)) -> bool {
        self.cookie(name) == cookie
    }
}

impl quire_cluster::SignOutTable for Table {
    fn adopt(&self, epoch: u64, generations: std::collections::HashMap<String, u64>) {
        *self.0.lock().unwrap() = (epoch, generations);
    }

    fn raise(&self, name: &str, generation: u64) {
        let mut t = self.0.lock().unwrap();
        let g = t.1.entry(name.to_owned()).or_insert(0);
        *g = (*g).max(generation);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn a_node_cut_off_from_redis_refuses_a_cookie_signed_out_elsewhere() {
    use std::sync::Arc;
    let redis = Redis::start().expect("redis-server starts");
    let origin = Origin::start().await;
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let tables: Vec<Arc<Table>> = (0..2).map(|_| Arc::new(Table::default())).collect();
    let peers = std::collections::BTreeMap::new();
    let mut nodes = Vec::new();
    for (i, name) in ["a", "b"].iter().enumerate() {
        let spec = common::Spec {
            name,
            port: free_port(),
            redis: &redis.url(),
            peers: &peers,
            origin: &origin,
            volume: dirs[i].path().join("cache.vol"),
        };
        let table: Arc<dyn quire_cluster::SignOutTable> = tables[i].clone();
        nodes.push(common::start_node_with(&spec, Some(table)).await);
    }
    let (a, b) = (&nodes[0], &nodes[1]);
    assert_ne!(
        tables[1].cookie("ada").0,
        0,
        "b adopted the cluster's table"
    );
    // A cookie b issued, honoured on both nodes.
    let cookie = tables[1].cookie("ada");
    assert!(tables[0].honours("ada", cookie));
    b.link.cut();
    let cut = Instant::now();
    a.cluster
        .as_ref()
        .unwrap()
        .bus
        .sign_out("ada")
        .await
        .unwrap();
    assert!(
        wait_for(|| !tables[0].honours("ada", cookie)).await,
        "ended on the node that can read the log"
    );
    while tables[1].honours("ada", cookie) {
        assert!(
            cut.elapsed() < Duration::from_millis(quire_cluster::bus::LIVE_MS),
            "b honoured a signed-out cookie past the liveness window"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(health(b).await.contains("session cookie is refused"));
    b.link.restore();
    until_cut_off(b, false).await;
    // Back: the cluster's table again; the signed-out cookie stays refused, a new
    // one holds on both nodes.
    assert!(
        wait_for(|| tables[1].cookie("ada") == tables[0].cookie("ada")).await,
        "b read the table again"
    );
    assert!(!tables[1].honours("ada", cookie));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn cluster_view_totals_survive_redis_restarting_empty() {
    let t = three(false).await;
    let bus = &t.nodes[0].cluster.as_ref().unwrap().bus;
    let totals = quire_cluster::ViewTotals::start(bus);
    totals.add([("a.md", 3), ("b.md", 1)]);
    totals.push().await;
    let views = |rows: Vec<(String, u64)>| {
        rows.into_iter()
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let before = views(bus.view_totals().await.unwrap());
    assert_eq!(before.get("a.md"), Some(&3), "{before:?}");
    assert_eq!(t.redis.cli(&["FLUSHALL"]), "OK");
    totals.add([("a.md", 2)]);
    totals.push().await;
    let after = views(bus.view_totals().await.unwrap());
    assert_eq!(
        after.get("a.md"),
        Some(&5),
        "added again, not reset: {after:?}"
    );
    assert_eq!(after.get("b.md"), Some(&1), "{after:?}");
    totals.add([("a.md", 1)]);
    totals.push().await;
    let once = views(bus.view_totals().await.unwrap());
    assert_eq!(
        once.get("a.md"),
        Some(&6),
        "added again once only: {once:?}"
    );
}
