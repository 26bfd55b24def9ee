//! `quire_request_duration_seconds`: every answered request is observed once, under
//! what the cache did, on the fast path and the full one alike, and a miss's time
//! includes its origin exchange (a real origin over real sockets, a real server).

use std::time::Duration;

use quire_testkit::raw_h1::exchange;
use quire_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn every_request_is_timed_once_and_a_miss_includes_its_origin() {
    let o = Origin::start().await;
    o.route(
        "/slow",
        Route::ok("slow page", &[("cache-control", "max-age=600")])
            .delay(Duration::from_millis(120)),
    );
    let q = Quire::start(&o, |_| {}).await;
    let req = format!(
        "GET /slow HTTP/1.1\r\nHost: {}\r\nAccept-Encoding: gzip\r\n\r\n",
        q.addr
    );
    assert_eq!(exchange(q.addr, req.clone(), 1).await[0].2, b"slow page");
    settle(&q).await;
    // Hits on the fast path (a raw keep-alive connection) and through hyper.
    assert_eq!(exchange(q.addr, req.repeat(5), 5).await.len(), 5);
    for _ in 0..3 {
        assert_eq!(get(&q, "/slow", &[]).await.status, 200);
    }
    let auth = format!("Bearer {TOKEN}");
    let got = send(
        &q,
        "GET",
        "/_quire/metrics",
        &[("authorization", &auth)],
        b"",
    )
    .await;
    let text = String::from_utf8_lossy(&got.body).into_owned();
    let hits = metric(&text, "quire_requests_total{cache=\"hit\"}");
    assert_eq!(hits, 8.0, "{text}");
    assert_eq!(
        metric(&text, "quire_request_duration_seconds_count{cache=\"hit\"}"),
        hits
    );
    assert_eq!(
        metric(
            &text,
            "quire_request_duration_seconds_count{cache=\"miss\"}"
        ),
        1.0
    );
    let miss = metric(&text, "quire_request_duration_seconds_sum{cache=\"miss\"}");
    assert!(
        miss >= 0.12,
        "the miss waited 120 ms for its origin: {miss}"
    );
    assert_eq!(
        metric(
            &text,
            "quire_request_duration_seconds_bucket{cache=\"miss\",le=\"0.1\"}"
        ),
        0.0,
        "{text}"
    );
}

/// `GET /_quire/top`: the URLs missing most and the hottest, from real requests.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn the_top_urls_name_the_missing_and_the_hot() {
    let o = Origin::start().await;
    o.route(
        "/hot",
        Route::ok("hot page", &[("cache-control", "max-age=600")]),
    );
    o.fallback(Route::ok("not cached", &[("cache-control", "no-store")]));
    let q = Quire::start(&o, |_| {}).await;
    let ask = |p: &str| format!("GET {p} HTTP/1.1\r\nHost: {}\r\n\r\n", q.addr);
    exchange(q.addr, ask("/hot"), 1).await;
    settle(&q).await;
    // 64 hits on one connection (the fast path, one worker: 4 samples of 16).
    assert_eq!(exchange(q.addr, ask("/hot").repeat(64), 64).await.len(), 64);
    for _ in 0..3 {
        exchange(q.addr, ask("/cold?x=1"), 1).await;
    }
    let auth = format!("Bearer {TOKEN}");
    let got = send(
        &q,
        "GET",
        "/_quire/top?n=5",
        &[("authorization", &auth)],
        b"",
    )
    .await;
    assert_eq!(got.status, 200);
    let v: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(v["missing"][0]["url"], "/cold?x=1", "{v}");
    assert_eq!(v["missing"][0]["count"], 3, "{v}");
    assert_eq!(v["hot"][0]["url"], "/hot", "{v}");
    assert_eq!(v["hot"][0]["count"], 64, "{v}");
    let anonymous = send(&q, "GET", "/_quire/top", &[], b"").await;
    assert_eq!(anonymous.status, 401, "the admin token is required");
}
