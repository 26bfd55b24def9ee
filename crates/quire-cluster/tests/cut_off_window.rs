//! A node cut off from the invalidation log holds nothing fresh while it is cut
//! off, not even a copy it revalidated a moment ago: a purge it cannot see may be
//! acknowledged at any instant, also just after that copy was stored. Found by
//! `quire-chaos hostile --suite cluster --case partition` (2 stale hits in 924
//! answers): the cut-off node made everything stale on a 100 ms tick, so a copy
//! stored after the last tick was served as a hit after a later purge. Nor is a
//! copy it holds served stale: not while revalidating (`stale-while-revalidate`),
//! nor to a request's `max-stale` (both undid the purge the same way).

mod common;

use std::time::{Duration, Instant};

use common::*;

/// Revalidate-then-purge rounds; without the fix most rounds fail (a tick falls
/// between the two requests of a round only rarely), so one round is enough to
/// fail the test and twenty make a pass meaningful.
const ROUNDS: u32 = 20;

/// Waits (up to 20 s) until `node` says it is cut off from the log.
async fn until_cut_off(node: &Node) {
    let started = Instant::now();
    loop {
        let (_, _, body) = fetch(node.addr, "GET", "/_quire/health", "").await;
        if String::from_utf8_lossy(&body).contains("cut off") {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the node never said it was cut off"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn a_cut_off_node_never_serves_as_a_hit_what_it_revalidated_just_before_a_purge() {
    let t = three(false).await;
    versioned(&t.origin, "/tick", 0);
    warm(&t, "/tick").await;
    let c = &t.nodes[2];
    // Held open and silent: no reset tells the node anything.
    c.link.cut();
    until_cut_off(c).await;
    for round in 0..ROUNDS {
        let before = 2 * round + 1;
        versioned(&t.origin, "/tick", before);
        // Cut off, the node revalidates what it holds: this stores `before` now.
        let (_, body, cs) = get(c, "/tick").await;
        assert_eq!(body, format!("/tick version {before}").as_bytes(), "{cs}");
        versioned(&t.origin, "/tick", before + 1);
        let (status, answer) =
            purge(&t.nodes[0], "", r#"{"urls":["http://127.0.0.1/tick"]}"#).await;
        assert_eq!(status, 200, "{answer}");
        let (_, body, cs) = get(c, "/tick").await;
        assert_eq!(
            String::from_utf8_lossy(&body),
            format!("/tick version {}", before + 1),
            "round {round}: the cut-off node served what a purge removed ({cs})"
        );
    }
    c.link.restore();
}

/// `path` at version `v`, fresh for an hour and then servable stale while
/// revalidating for ten minutes (RFC 5861 §3).
fn stale_while_revalidate(origin: &Origin, path: &str, v: u32) {
    let body = format!("{path} version {v}");
    origin.route(
        path,
        Route::ok(
            body,
            &[("cache-control", "max-age=3600, stale-while-revalidate=600")],
        )
        .etag(&format!("\"{v}\"")),
    );
}

/// `GET path` on `node` with `cache-control` in the request; the whole answer.
async fn get_with_cache_control(node: &Node, path: &str, cc: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(node.addr).await.unwrap();
    let req = format!(
        "GET {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncache-control: {cc}\r\nconnection: close\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_redis),
    ignore = "redis-server or redis-cli not found on PATH (apt-get install redis-server)"
)]
async fn a_cut_off_node_never_serves_a_purged_copy_stale_while_revalidating_or_to_max_stale() {
    let t = three(false).await;
    stale_while_revalidate(&t.origin, "/swr", 1);
    stale_while_revalidate(&t.origin, "/ms", 1);
    warm(&t, "/swr").await;
    warm(&t, "/ms").await;
    let c = &t.nodes[2];
    c.link.cut();
    until_cut_off(c).await;
    for path in ["/swr", "/ms"] {
        stale_while_revalidate(&t.origin, path, 2);
        let body = format!(r#"{{"urls":["http://127.0.0.1{path}"]}}"#);
        let (status, answer) = purge(&t.nodes[0], "", &body).await;
        assert_eq!(status, 200, "{answer}");
    }
    // The copy it holds is stale for it, but a stale copy it may not serve: the
    // purge it cannot see removed it everywhere else.
    let answer = get_with_cache_control(c, "/ms", "max-stale").await;
    assert!(
        answer.ends_with("/ms version 2"),
        "served the purged copy to max-stale: {answer}"
    );
    let (_, body, cs) = get(c, "/swr").await;
    assert_eq!(
        String::from_utf8_lossy(&body),
        "/swr version 2",
        "served the purged copy while revalidating ({cs})"
    );
    c.link.restore();
}
