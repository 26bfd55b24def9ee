//! The front door under hostile input: request heads RFC 9112/9110 says to refuse,
//! admin paths spelled to reach the origin, broken bodies in either direction. Each
//! test is named for what it pins; all go through real sockets.

use std::io::{Read, Write};
use std::time::Duration;

use quire_store::Engine;
use quire_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_paths_reached_by_normalisation_never_reach_the_origin_or_the_cache() {
    let o = Origin::start().await;
    o.route(
        "/_quire/metrics",
        Route::ok("origin's copy", &[("cache-control", "max-age=600")]),
    );
    let q = Quire::start(&o, |_| {}).await;
    for path in [
        "/x/%2e%2e/_quire/metrics",
        "/%5fquire/metrics",
        "/%5Fquire/metrics",
        "/./_quire/metrics",
    ] {
        let r = get(&q, path, &[]).await;
        assert_eq!(r.status, 401, "{path}: the admin API, token required");
        let r = get(&q, path, &[("authorization", &format!("Bearer {TOKEN}"))]).await;
        assert_eq!(r.status, 200, "{path}");
        assert!(
            String::from_utf8_lossy(&r.body).contains("quire_requests_total"),
            "{path}: quire's own metrics"
        );
    }
    settle(&q).await;
    assert_eq!(o.hits("/_quire/metrics"), 0, "nothing reached the origin");
    assert_eq!(q.ctx.store.stats().admitted, 0, "nothing was stored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_host_fields_are_refused() {
    // RFC 9112 §3.2: more than one Host field is a 400.
    let o = Origin::start().await;
    o.route("/x", Route::ok("x", &[("cache-control", "max-age=60")]));
    let q = Quire::start(&o, |_| {}).await;
    let r = raw_async(
        q.addr,
        b"GET /x HTTP/1.1\r\nHost: a.example\r\nHost: b.example\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert_eq!(o.hits("/x"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_is_answered_not_forwarded() {
    let o = Origin::start().await;
    let q = Quire::start(&o, |_| {}).await;
    let r = raw_async(
        q.addr,
        b"CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n\r\n",
    )
    .await;
    let s = statuses(&r);
    assert!(s == [405] || s == [501], "{r}");
    assert!(o.seen_all().is_empty(), "nothing reached the origin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_naming_host_never_drops_host() {
    let o = Origin::start().await;
    o.route("/p", Route::ok("p", &[]));
    let q = Quire::start(&o, |_| {}).await;
    let r = raw_async(
        q.addr,
        b"POST /p HTTP/1.1\r\nHost: site.example\r\nConnection: Host, close\r\nContent-Length: 0\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let seen = o.seen("/p");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["host"], "site.example");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn underscored_field_names_are_not_forwarded() {
    // Some origins (CGI, some frameworks) read `Transfer_Encoding` as
    // `Transfer-Encoding`: forwarding it next to `Content-Length` invites
    // smuggling.
    let o = Origin::start().await;
    o.route("/p", Route::ok("p", &[]));
    let q = Quire::start(&o, |_| {}).await;
    let r = raw_async(
        q.addr,
        b"POST /p HTTP/1.1\r\nHost: h\r\nTransfer_Encoding: chunked\r\nX_Api_Key: k\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    let seen = o.seen("/p");
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0].headers.keys().all(|k| !k.as_str().contains('_')),
        "{:?}",
        seen[0].headers
    );
    assert_eq!(&seen[0].body[..], b"hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_coding_other_than_chunked_is_refused() {
    // RFC 9112 §6.1: a server that does not understand a transfer coding answers 501;
    // dropping `gzip` silently would hand the origin other bytes than were sent.
    let o = Origin::start().await;
    o.route("/p", Route::ok("p", &[]));
    let q = Quire::start(&o, |_| {}).await;
    let r = raw_async(
        q.addr,
        b"POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 501"), "{r}");
    assert_eq!(o.hits("/p"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_valid_request_pipelined_before_a_malformed_one_is_answered() {
    let o = Origin::start().await;
    o.route("/x", Route::ok("first", &[("cache-control", "max-age=60")]));
    let q = Quire::start(&o, |_| {}).await;
    let r = raw_async(
        q.addr,
        b"GET /x HTTP/1.1\r\nHost: h\r\n\r\nPOST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
    )
    .await;
    assert_eq!(statuses(&r), [200, 400], "{r}");
    assert!(r.contains("first"), "{r}");
    // Hits (the fast path) and misses, before each kind of malformed head.
    let bad: [&[u8]; 4] = [
        b"GARBAGE\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: h\r\nBad Name: v\r\n\r\n",
        b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"GET /x HTTP/1.1\r\nHost: h\r\nHost: i\r\n\r\n",
    ];
    for (i, b) in bad.iter().enumerate() {
        for path in ["/x", &format!("/cold{i}")] {
            o.route(path, Route::ok("first", &[("cache-control", "max-age=60")]));
            let mut req = format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n").into_bytes();
            req.extend_from_slice(b);
            let addr = q.addr;
            let r = tokio::task::spawn_blocking(move || raw(addr, &req))
                .await
                .unwrap();
            let s = statuses(&r);
            assert_eq!(s.first(), Some(&200), "{path} then shape {i}: {r}");
            assert_eq!(s.get(1), Some(&400), "{path} then shape {i}: {r}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_chunked_request_body_is_a_400() {
    let o = Origin::start().await;
    o.route("/p", Route::ok("p", &[]));
    let q = Quire::start(&o, |_| {}).await;
    let r = raw_async(
        q.addr,
        b"POST /p HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_cookie_crumbs_are_joined_into_one_field() {
    // RFC 9113 §8.2.3: an HTTP/2 client may split `Cookie` into crumbs; forwarded
    // over HTTP/1.1 they must be one field joined with "; ".
    let o = Origin::start().await;
    o.route("/p", Route::ok("p", &[]));
    let q = Quire::start(&o, |_| {}).await;
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let req = http::Request::get(q.url("/p"))
        .header("cookie", "a=1")
        .header("cookie", "b=2")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = h2.request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let seen = o.seen("/p");
    assert_eq!(seen.len(), 1);
    let cookies: Vec<_> = seen[0].headers.get_all("cookie").iter().collect();
    assert_eq!(cookies, ["a=1; b=2"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_origin_chunk_before_anything_was_sent_is_a_502() {
    let o = raw_origin(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nCache-Control: max-age=60\r\n\r\n5\r\nhello\r\nZZ-not-a-size\r\n\r\n",
    )
    .await;
    let q = Quire::start(&o, |_| {}).await;
    let r = raw_async(
        q.addr,
        b"GET /p HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 502"), "{r}");
    settle(&q).await;
    let r = raw_async(
        q.addr,
        b"GET /p HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 502"), "nothing was stored: {r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_origin_chunk_on_an_unstored_response_is_a_502() {
    let o = raw_origin(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nCache-Control: no-store\r\n\r\n5\r\nhello\r\nZZ-not-a-size\r\n\r\n",
    )
    .await;
    let q = Quire::start(&o, |_| {}).await;
    for extra in ["", "Authorization: Bearer x\r\n"] {
        let req = format!("GET /p HTTP/1.1\r\nHost: h\r\n{extra}Connection: close\r\n\r\n");
        let addr = q.addr;
        let r = tokio::task::spawn_blocking(move || raw(addr, req.as_bytes()))
            .await
            .unwrap();
        assert!(r.starts_with("HTTP/1.1 502"), "{extra:?}: {r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_is_believed_only_from_trusted_proxies() {
    let o = Origin::start().await;
    o.route("/p", Route::ok("p", &[]));
    let spoof = [("x-forwarded-for", "203.0.113.9"), ("authorization", "x")];
    // Untrusted (the default): the spoofed entry stays, the peer is appended last.
    let q = Quire::start(&o, |_| {}).await;
    get(&q, "/p", &spoof).await;
    let seen = o.seen("/p");
    assert_eq!(
        seen.last().unwrap().headers["x-forwarded-for"],
        "203.0.113.9, 127.0.0.1"
    );
    // Trusted: the client the proxy named is the last entry.
    let q = Quire::start(&o, |c| c.trusted_proxies = vec!["127.0.0.0/8".into()]).await;
    get(&q, "/p", &spoof).await;
    let seen = o.seen("/p");
    assert_eq!(
        seen.last().unwrap().headers["x-forwarded-for"],
        "203.0.113.9"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_cannot_hold_every_connection() {
    // Connection exhaustion: one address opens more idle connections than its cap.
    let o = Origin::start().await;
    let q = Quire::start(&o, |c| c.limits.connections_per_client = 8).await;
    let addr = q.addr;
    let (held, refused) = tokio::task::spawn_blocking(move || {
        let held: Vec<_> = (0..8)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        // (the accept loop admits in order: give it the eight first)
        std::thread::sleep(Duration::from_millis(200));
        let refused = raw(addr, b"");
        (held, refused)
    })
    .await
    .unwrap();
    assert!(refused.starts_with("HTTP/1.1 429"), "{refused:?}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after: 1"),
        "{refused}"
    );
    let (n, _) = q.ctx.metrics.connections_refused_reaped();
    assert_eq!(n, 1);
    // Another client is not held to that client's count (a trusted proxy is exempt
    // like another client would be: 127.0.0.1 is the only address here).
    drop(held);
    let q2 = Quire::start(&o, |c| {
        c.limits.connections_per_client = 1;
        c.trusted_proxies = vec!["127.0.0.1".into()];
    })
    .await;
    let addr = q2.addr;
    let r = tokio::task::spawn_blocking(move || {
        let _held: Vec<_> = (0..4)
            .map(|_| std::net::TcpStream::connect(addr).unwrap())
            .collect();
        raw(
            addr,
            b"GET /_quire/health HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
        )
    })
    .await
    .unwrap();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
}

/// Fills every connection slot (8) with keep-alive connections, each used once by
/// `request` and then left idle, and asks for the health check on a ninth: it must
/// be answered (without reaping it waits for client_idle_timeout, 60 s here, and the
/// read gives up at 30 s). Returns the reaped count.
async fn health_when_full_of_idle(request: &'static [u8]) -> u64 {
    let o = Origin::start().await;
    o.route("/p", Route::ok("p", &[("cache-control", "max-age=60")]));
    let q = Quire::start(&o, |c| {
        c.limits.connections = 8;
        c.limits.client_idle_timeout = quire_server::config::Secs(Duration::from_secs(60));
    })
    .await;
    let addr = q.addr;
    let (health, _idle) = tokio::task::spawn_blocking(move || {
        let mut idle = Vec::new();
        for _ in 0..8 {
            let mut s = std::net::TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(request).unwrap();
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
            idle.push(s);
        }
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        s.write_all(b"GET /_quire/health HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        (String::from_utf8_lossy(&out).into_owned(), idle)
    })
    .await
    .unwrap();
    let (_, reaped) = q.ctx.metrics.connections_refused_reaped();
    assert!(
        health.starts_with("HTTP/1.1 200"),
        "{health:?}, reaped {reaped}"
    );
    reaped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_make_room_when_the_server_is_full() {
    // Connection exhaustion by idle keep-alive connections on the fast path.
    let reaped = health_when_full_of_idle(b"GET /p HTTP/1.1\r\nHost: h\r\n\r\n").await;
    assert!(reaped >= 1, "reaped {reaped}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_on_hypers_path_make_room_too() {
    // `Connection: keep-alive` hands each connection to hyper: there, idle ones are
    // asked to close (graceful shutdown) once they are REAP_IDLE_MIN old.
    let reaped =
        health_when_full_of_idle(b"GET /p HTTP/1.1\r\nHost: h\r\nConnection: keep-alive\r\n\r\n")
            .await;
    assert!(reaped >= 1, "reaped {reaped}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_smallest_cache_size_accepted_stores_pages() {
    // A cache too small to store anything must be refused at start-up, not run
    // silently uncached: the smallest size accepted stores a page.
    let o = Origin::start().await;
    o.route(
        "/p",
        Route::ok(page(10_000), &[("cache-control", "max-age=60")]),
    );
    let q = Quire::start(&o, |c| {
        c.cache.size = quire_server::config::ByteSize(1 << 20)
    })
    .await;
    get(&q, "/p", &[]).await;
    settle(&q).await;
    let r = get(&q, "/p", &[]).await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
}
