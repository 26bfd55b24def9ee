//! Who is served from cache, what hostile input gets, and the operator's controls
//! (purge, admin API, shutdown), through real sockets.

use std::io::{Read, Write};
use std::time::Duration;

use quire_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_cookies_and_authorization_bypass_analytics_cookies_do_not() {
    // RFC 9111 §3.5 (Authorization), quire's bypass rules.
    let o = Origin::start().await;
    o.route("/p", Route::ok("page", &[("cache-control", "max-age=60")]));
    let q = Quire::start(&o, |_| {}).await;
    get(&q, "/p", &[]).await;
    settle(&q).await;
    let r = get(&q, "/p", &[("cookie", "session=abc")]).await;
    assert_eq!(r.cache_status(), "quire; fwd=bypass; detail=cookie");
    assert_eq!(
        o.seen("/p").last().unwrap().headers["cookie"],
        "session=abc"
    );
    let r = get(&q, "/p", &[("authorization", "Bearer x")]).await;
    assert_eq!(r.cache_status(), "quire; fwd=bypass; detail=authorization");
    let r = get(&q, "/p", &[("cookie", "_ga=GA1.2.3; _gid=x")]).await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unkeyed_headers_never_reach_the_origin_on_a_fill() {
    // Cache poisoning: a header outside the key must not change a stored response.
    let o = Origin::start().await;
    o.route(
        "/home",
        Route::ok("home", &[("cache-control", "max-age=60")]),
    );
    let q = Quire::start(&o, |_| {}).await;
    get(
        &q,
        "/home",
        &[
            ("x-forwarded-host", "evil.example"),
            ("x-original-url", "/admin"),
            ("cookie", "_ga=1"),
            ("x-forwarded-scheme", "nothttps"),
        ],
    )
    .await;
    let seen = &o.seen("/home")[0];
    for h in [
        "x-forwarded-host",
        "x-original-url",
        "cookie",
        "x-forwarded-scheme",
    ] {
        assert!(
            !seen.headers.contains_key(h),
            "{h} reached the origin on a fill"
        );
    }
    assert_eq!(
        seen.headers["host"],
        q.addr.to_string(),
        "the normalised host"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_that_normalises_elsewhere_reaches_the_origin_normalised() {
    // RFC 3986 §6.2.2: `/a/%2e%2e/b` and `/b` are one resource; the origin must see
    // what the key says, or a cached `/b` could hold another page.
    let o = Origin::start().await;
    o.route("/b", Route::ok("b", &[("cache-control", "max-age=60")]));
    let q = Quire::start(&o, |_| {}).await;
    let r = get(&q, "/a/%2e%2e/b", &[]).await;
    assert_eq!(&r.body[..], b"b");
    assert_eq!(o.hits("/b"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smuggling_shapes_and_oversized_heads_are_refused() {
    // RFC 9112 §6.1, §6.3 (CL + TE, several CL), RFC 6585 §5 (431).
    let o = Origin::start().await;
    o.route("/x", Route::ok("x", &[("cache-control", "max-age=60")]));
    let q = Quire::start(&o, |_| {}).await;
    let addr = q.addr;
    let r = tokio::task::spawn_blocking(move || {
        raw(addr, b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    })
    .await
    .unwrap();
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    let r = tokio::task::spawn_blocking(move || {
        raw(
            addr,
            b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        )
    })
    .await
    .unwrap();
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    let big = format!(
        "GET /x HTTP/1.1\r\nHost: h\r\nX-Big: {}\r\n\r\n",
        "a".repeat(200_000)
    );
    let r = tokio::task::spawn_blocking(move || raw(addr, big.as_bytes()))
        .await
        .unwrap();
    assert!(r.starts_with("HTTP/1.1 431"), "{}", &r[..r.len().min(200)]);
    let r = tokio::task::spawn_blocking(move || raw(addr, b"GARBAGE\r\n\r\n"))
        .await
        .unwrap();
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert!(
        o.seen("/x").iter().all(|s| s.method != http::Method::POST),
        "nothing smuggled through"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_hung_or_cut_origin_gives_502_504_and_stores_nothing() {
    let o = Origin::start().await;
    o.route(
        "/hang",
        Route::ok("late", &[("cache-control", "max-age=60")]).delay(Duration::from_secs(5)),
    );
    o.route(
        "/cut",
        Route::ok(page(50_000), &[("cache-control", "max-age=60")]).cut_after(1000),
    );
    let q = Quire::start(&o, |_| {}).await;
    let r = get(&q, "/hang", &[]).await;
    assert_eq!(r.status, 504, "origin_read_timeout is 2 s in tests");
    // A cut body: the client sees an error (or a short body), never a full 200 of the
    // wrong length, and nothing is stored.
    let req = http::Request::get(q.url("/cut"))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    if let Ok(resp) = client().request(req).await {
        use http_body_util::BodyExt;
        let body = resp.into_body().collect().await;
        assert!(body.is_err() || body.unwrap().to_bytes().len() < 50_000);
    }
    settle(&q).await;
    assert!(!get(&q, "/cut", &[]).await.cache_status().contains("hit"));
    // A dead origin.
    let dead = Origin {
        addr: "127.0.0.1:1".parse().unwrap(),
        state: Default::default(),
    };
    let q2 = Quire::start(&dead, |_| {}).await;
    let r = get(&q2, "/any", &[]).await;
    assert_eq!(r.status, 502);
    assert!(r.cache_status().contains("origin-error"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::too_many_lines,
    reason = "one scenario: each purge form against one stored set, in order"
)]
async fn purge_needs_the_token_and_removes_by_url_prefix_and_tag() {
    let o = Origin::start().await;
    for p in ["/blog/a", "/blog/b", "/docs/c", "/docs/d"] {
        let tag = if p.ends_with('c') {
            "k-c shared"
        } else {
            "shared-not"
        };
        o.route(
            p,
            Route::ok(
                p.as_bytes().to_vec(),
                &[("cache-control", "max-age=60"), ("surrogate-key", tag)],
            ),
        );
    }
    let q = Quire::start(&o, |_| {}).await;
    for p in ["/blog/a", "/blog/b", "/docs/c", "/docs/d"] {
        let miss = get(&q, p, &[]).await;
        assert!(
            miss.header("surrogate-key").is_none(),
            "keys stay with quire on a miss too"
        );
    }
    settle(&q).await;
    let hit = |r: &Got| r.cache_status().contains("hit");
    // No token, wrong token.
    assert_eq!(send(&q, "PURGE", "/blog/a", &[], b"").await.status, 401);
    assert_eq!(
        send(
            &q,
            "PURGE",
            "/blog/a",
            &[("authorization", "Bearer wrong")],
            b""
        )
        .await
        .status,
        401
    );
    let auth = format!("Bearer {TOKEN}");
    let r = send(&q, "PURGE", "/blog/a", &[("authorization", &auth)], b"").await;
    assert_eq!(r.status, 200);
    assert!(!hit(&get(&q, "/blog/a", &[]).await));
    assert!(hit(&get(&q, "/blog/b", &[]).await));
    // Prefix.
    let body = format!(r#"{{"prefixes":["http://{}/blog/"]}}"#, q.addr);
    let r = send(
        &q,
        "POST",
        "/_quire/purge",
        &[
            ("authorization", &auth),
            ("content-type", "application/json"),
        ],
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    assert!(!hit(&get(&q, "/blog/b", &[]).await));
    assert!(hit(&get(&q, "/docs/c", &[]).await));
    // Tag (surrogate key); the key header is not sent to clients.
    assert!(get(&q, "/docs/c", &[])
        .await
        .header("surrogate-key")
        .is_none());
    let r = send(
        &q,
        "POST",
        "/_quire/purge",
        &[("authorization", &auth)],
        br#"{"tags":["k-c"]}"#,
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(!hit(&get(&q, "/docs/c", &[]).await));
    assert!(hit(&get(&q, "/docs/d", &[]).await));
    // Bad purge bodies are 400 and purge nothing.
    let r = send(
        &q,
        "POST",
        "/_quire/purge",
        &[("authorization", &auth)],
        br#"{"urls":["not a url"]}"#,
    )
    .await;
    assert_eq!(r.status, 400);
    let r = send(
        &q,
        "POST",
        "/_quire/purge",
        &[("authorization", &auth)],
        br#"{"nope":1}"#,
    )
    .await;
    assert_eq!(r.status, 400);
    assert!(hit(&get(&q, "/docs/d", &[]).await));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soft_purge_marks_stale_and_the_next_request_revalidates() {
    let o = Origin::start().await;
    o.route(
        "/s",
        Route::ok("body", &[("cache-control", "max-age=600")]).etag("\"s1\""),
    );
    let q = Quire::start(&o, |_| {}).await;
    get(&q, "/s", &[]).await;
    settle(&q).await;
    let auth = format!("Bearer {TOKEN}");
    let body = format!(r#"{{"urls":["http://{}/s"],"soft":true}}"#, q.addr);
    let r = send(
        &q,
        "POST",
        "/_quire/purge",
        &[("authorization", &auth)],
        body.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 200);
    assert!(
        String::from_utf8_lossy(&r.body).contains("\"purged\": 1"),
        "{}",
        String::from_utf8_lossy(&r.body)
    );
    let r = get(&q, "/s", &[]).await;
    assert_eq!(r.cache_status(), "quire; fwd=stale; fwd-status=304");
    assert_eq!(o.seen("/s")[1].headers["if-none-match"], "\"s1\"");
    assert!(get(&q, "/s", &[]).await.cache_status().contains("hit"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_endpoints_health_metrics_explain() {
    let o = Origin::start().await;
    o.route("/m", Route::ok("m", &[("cache-control", "max-age=60")]));
    let q = Quire::start(&o, |_| {}).await;
    get(&q, "/m", &[]).await;
    settle(&q).await;
    get(&q, "/m", &[]).await;
    assert_eq!(get(&q, "/_quire/health", &[]).await.status, 200);
    assert_eq!(get(&q, "/_quire/metrics", &[]).await.status, 401);
    let auth = format!("Bearer {TOKEN}");
    let m = get(&q, "/_quire/metrics", &[("authorization", &auth)]).await;
    let text = String::from_utf8_lossy(&m.body);
    assert!(
        text.contains("quire_requests_total{cache=\"hit\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("quire_requests_total{cache=\"miss\"} 1"),
        "{text}"
    );
    assert!(text.contains("quire_store_entries"));
    let path = format!(
        "/_quire/explain?url=http%3A%2F%2F{}%2Fm%3Futm_source%3Dx",
        q.addr
    );
    let e = get(&q, &path, &[("authorization", &auth)]).await;
    let v: serde_json::Value = serde_json::from_slice(&e.body).unwrap();
    assert_eq!(v["normalized"], format!("http://{}/m", q.addr));
    assert_eq!(v["cached"], true);
    assert_eq!(v["decision_for_plain_get"], "Fresh");
    assert_eq!(
        get(&q, "/_quire/nope", &[("authorization", &auth)])
            .await
            .status,
        404
    );
    // No token configured: the admin API is off.
    let q2 = Quire::start(&o, |c| c.admin_token = None).await;
    if std::env::var("QUIRE_ADMIN_TOKEN").is_err() {
        assert_eq!(
            get(&q2, "/_quire/metrics", &[("authorization", &auth)])
                .await
                .status,
            403
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_drains_in_flight_requests() {
    let o = Origin::start().await;
    o.route(
        "/slow",
        Route::ok("done", &[("cache-control", "max-age=60")]).delay(Duration::from_millis(500)),
    );
    let mut q = Quire::start(&o, |_| {}).await;
    let url = q.url("/slow");
    let inflight = tokio::spawn(async move {
        let req = http::Request::get(url)
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let resp = client().request(req).await.unwrap();
        use http_body_util::BodyExt;
        resp.into_body().collect().await.unwrap().to_bytes()
    });
    assert!(
        wait_for(|| o.hits("/slow") == 1).await,
        "the request is in flight"
    );
    q.shutdown().await;
    assert_eq!(&inflight.await.unwrap()[..], b"done");
    // The listener is closed.
    assert!(std::net::TcpStream::connect(q.addr).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keep_alive_connection_lives_while_used_and_closes_once_idle() {
    // The fast path keeps one idle timer per connection and moves it on lazily: a
    // connection busy for longer than the idle limit must not be cut, and one that
    // then goes quiet must be closed (the idle limit counts from its last request).
    let o = Origin::start().await;
    o.route("/p", Route::ok("page", &[("cache-control", "max-age=600")]));
    let q = Quire::start(&o, |c| {
        c.limits.client_idle_timeout = quire_server::config::Secs(Duration::from_millis(400))
    })
    .await;
    get(&q, "/p", &[]).await;
    settle(&q).await;
    let addr = q.addr;
    let (answered, closed_after) = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        // 1.5 s of requests 150 ms apart: well past the 400 ms limit in all.
        let req = format!("GET /p HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        let mut answered = 0;
        for _ in 0..10 {
            s.write_all(req.as_bytes()).unwrap();
            let r = read_response(&mut s).expect("closed while in use");
            assert!(
                String::from_utf8_lossy(&r).contains("cache-status: quire; hit"),
                "{}",
                String::from_utf8_lossy(&r)
            );
            answered += 1;
            std::thread::sleep(Duration::from_millis(150));
        }
        let quiet = std::time::Instant::now();
        let mut b = [0u8; 16];
        assert_eq!(s.read(&mut b).unwrap(), 0, "closed, not answered");
        (answered, quiet.elapsed())
    })
    .await
    .unwrap();
    assert_eq!(answered, 10);
    // Closed by the idle limit (after ~250 ms more of quiet), not by the client's
    // 10 s read timeout.
    assert!(closed_after < Duration::from_secs(5), "{closed_after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_idle_keep_alive_connections_at_once() {
    let o = Origin::start().await;
    o.route("/p", Route::ok("page", &[("cache-control", "max-age=600")]));
    let mut q = Quire::start(&o, |c| {
        c.limits.client_idle_timeout = quire_server::config::Secs(Duration::from_secs(60))
    })
    .await;
    get(&q, "/p", &[]).await;
    settle(&q).await;
    let mut s = std::net::TcpStream::connect(q.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let req = format!("GET /p HTTP/1.1\r\nHost: {}\r\n\r\n", q.addr);
    s.write_all(req.as_bytes()).unwrap();
    let r = read_response(&mut s).expect("answered");
    assert!(String::from_utf8_lossy(&r).contains("cache-status: quire; hit"));
    // Idle on the fast path now: shutdown must not wait out its 30 s grace for it.
    let started = std::time::Instant::now();
    q.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let mut b = [0u8; 16];
    assert_eq!(s.read(&mut b).unwrap(), 0, "the idle connection was closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_curl), ignore = "curl not found on PATH")]
async fn curl_gets_compressed_pages_over_http1_and_h2c() {
    // A real client: curl, HTTP/1.1 with --compressed, and HTTP/2 with prior knowledge.
    let o = Origin::start().await;
    let body = page(50_000);
    o.route(
        "/page",
        Route::ok(
            body.clone(),
            &[
                ("cache-control", "max-age=60"),
                ("content-type", "text/html"),
            ],
        ),
    );
    let q = Quire::start(&o, |_| {}).await;
    get(&q, "/page", &[]).await;
    settle(&q).await;
    let url = q.url("/page");
    let out = tokio::task::spawn_blocking(move || {
        let h1 = std::process::Command::new("curl")
            .args(["-s", "--compressed", "-D", "-", &url])
            .output()
            .unwrap();
        let h2 = std::process::Command::new("curl")
            .args([
                "-s",
                "--http2-prior-knowledge",
                "-H",
                "accept-encoding: gzip",
                "-o",
                "/dev/null",
                "-w",
                "%{http_version} %{size_download}",
                &url,
            ])
            .output()
            .unwrap();
        (h1, h2)
    })
    .await
    .unwrap();
    let text = String::from_utf8_lossy(&out.0.stdout).into_owned();
    let (head, got) = text.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("cache-status: quire; hit"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase().contains("content-encoding: br")
            || head.to_ascii_lowercase().contains("content-encoding: gzip")
            || head.to_ascii_lowercase().contains("content-encoding: zstd"),
        "{head}"
    );
    assert_eq!(got.as_bytes(), &body[..]);
    let h2 = String::from_utf8_lossy(&out.1.stdout).into_owned();
    let (ver, size) = h2.split_once(' ').unwrap();
    assert_eq!(ver, "2", "h2c prior knowledge");
    assert!(
        size.parse::<usize>().unwrap() < body.len(),
        "gzip over h2: {size} bytes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_trickled_in_is_cut_off() {
    // Slowloris: a head that never completes must not hold a connection forever.
    let o = Origin::start().await;
    let q = Quire::start(&o, |c| {
        c.limits.client_idle_timeout = quire_server::config::Secs(Duration::from_millis(500))
    })
    .await;
    let addr = q.addr;
    let closed = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let _ = s.write_all(b"GET / HTTP/1.1\r\nHost: h\r\n");
        for _ in 0..100 {
            std::thread::sleep(Duration::from_millis(100));
            if s.write_all(b"X-Slow: 1\r\n").is_err() {
                return true;
            }
            let mut b = [0u8; 64];
            if let Ok(0) = s.read(&mut b) {
                return true;
            }
        }
        false
    })
    .await
    .unwrap();
    assert!(closed, "the connection stayed open for 10 s of trickling");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_cut_off() {
    // A stalled reader must not hold a response, and the store region its body is
    // pinned in, forever: the send deadline (`limits.send_stall`) closes it.
    let o = Origin::start().await;
    let big: Vec<u8> = (0..6_000_000u32).map(|i| (i % 253) as u8).collect();
    o.route(
        "/big",
        Route::ok(big.clone(), &[("cache-control", "max-age=600")]),
    );
    let q = Quire::start(&o, |c| {
        c.cache.size = quire_server::config::ByteSize(1 << 30);
        c.limits.send_stall = quire_server::config::Secs(Duration::from_millis(500));
    })
    .await;
    assert_eq!(get(&q, "/big", &[]).await.body.len(), big.len());
    settle(&q).await;
    use std::sync::atomic::Ordering;
    let host = q.addr;
    let handovers = q.ctx.metrics.handovers();
    for (path, extra) in [
        // A hit, written by the fast path.
        ("a hit", ""),
        // A range: the service's answer, written by the fast path (`h1`).
        ("the service's answer", "Range: bytes=0-5999999\r\n"),
        // A connection-level field: hyper's path.
        ("hyper's path", "Connection: keep-alive\r\n"),
    ] {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        sock.connect(&q.addr.into()).unwrap();
        let mut s: std::net::TcpStream = sock.into();
        let req = format!("GET /big HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n");
        s.write_all(req.as_bytes()).unwrap();
        let mut closed = false;
        for _ in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if q.ctx.metrics.connections().load(Ordering::Relaxed) == 0 {
                closed = true;
                break;
            }
        }
        assert!(
            closed,
            "{path}: the stalled connection stayed open for 10 s"
        );
        drop(s);
    }
    assert_eq!(
        q.ctx.metrics.handovers(),
        handovers + 1,
        "only the last went to hyper"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_miss_past_the_fill_limit_is_passed_through_not_refused() {
    // `limits.fills`: a second cacheable miss while the only fill slot is taken is
    // still answered (from the origin, not stored): a full registry costs coalescing,
    // never an answer.
    let o = Origin::start().await;
    o.route(
        "/slow",
        Route::ok("s", &[("cache-control", "max-age=60")]).delay(Duration::from_millis(800)),
    );
    o.route("/other", Route::ok("o", &[("cache-control", "max-age=60")]));
    let q = std::sync::Arc::new(Quire::start(&o, |c| c.limits.fills = 1).await);
    let q2 = q.clone();
    let slow = tokio::spawn(async move { get(&q2, "/slow", &[]).await });
    assert!(
        wait_for(|| q.ctx.fills.slots_used() == 1).await,
        "the slow fill holds the slot"
    );
    let r = get(&q, "/other", &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(&r.body[..], b"o");
    assert!(
        r.cache_status().contains("detail=fills-busy"),
        "{}",
        r.cache_status()
    );
    assert_eq!(slow.await.unwrap().status, 200);
    settle(&q).await;
    let r = get(&q, "/other", &[]).await;
    assert!(
        r.cache_status().contains("stored"),
        "the slot is free again: {}",
        r.cache_status()
    );
    let r = get(&q, "/other", &[]).await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_body_over_the_limit_is_refused() {
    // `admin::PURGE_BODY_BYTES_MAX`.
    let o = Origin::start().await;
    let q = Quire::start(&o, |_| {}).await;
    let auth = format!("Bearer {TOKEN}");
    let big = format!(
        r#"{{"tags":["{}"]}}"#,
        "x".repeat(quire_server::admin::PURGE_BODY_BYTES_MAX)
    );
    let r = send(
        &q,
        "POST",
        "/_quire/purge",
        &[("authorization", &auth)],
        big.as_bytes(),
    )
    .await;
    assert_eq!(r.status, 413);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_limit_wait_in_the_backlog() {
    // `limits.connections`: the second connection is not served until the first ends.
    let o = Origin::start().await;
    o.route("/c", Route::ok("c", &[("cache-control", "max-age=60")]));
    let q = Quire::start(&o, |c| c.limits.connections = 1).await;
    let addr = q.addr;
    let first = std::net::TcpStream::connect(addr).unwrap();
    let open = || {
        q.ctx
            .metrics
            .connections()
            .load(std::sync::atomic::Ordering::Relaxed)
            == 1
    };
    assert!(wait_for(open).await, "the first connection is accepted");
    let got = tokio::task::spawn_blocking(move || {
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        s.write_all(b"GET /c HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
        let mut b = [0u8; 16];
        let early = s.read(&mut b).is_ok();
        drop(first);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let later = s.read(&mut b).map(|n| b[..n].to_vec()).unwrap_or_default();
        (early, later)
    })
    .await
    .unwrap();
    assert!(!got.0, "served while the only connection slot was taken");
    assert!(
        got.1.starts_with(b"HTTP/1.1 200"),
        "{:?}",
        String::from_utf8_lossy(&got.1)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fields_named_by_a_qualified_private_are_not_served_from_cache() {
    // RFC 9111 §5.2.2.7: `private="x-user"` forbids a shared cache to store that
    // field. The client it was meant for gets it; a later client must not get the
    // first client's value from the cache.
    let o = Origin::start().await;
    o.route(
        "/p",
        Route::ok(
            "page",
            &[
                ("cache-control", "max-age=60, private=\"x-user\""),
                ("x-user", "alice"),
            ],
        ),
    );
    let q = Quire::start(&o, |_| {}).await;
    let first = get(&q, "/p", &[]).await;
    assert_eq!(
        first.header("x-user"),
        Some("alice"),
        "its own client gets it"
    );
    settle(&q).await;
    o.route(
        "/p",
        Route::ok(
            "page",
            &[
                ("cache-control", "max-age=60, private=\"x-user\""),
                ("x-user", "bob"),
            ],
        ),
    );
    let r = get(&q, "/p", &[]).await;
    assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(
        r.header("x-user"),
        Some("bob"),
        "never alice's from the cache"
    );
    assert_eq!(o.hits("/p"), 2);
    // Naming a field the response does not carry stores it as usual.
    o.route(
        "/q",
        Route::ok(
            "page",
            &[("cache-control", "max-age=60, private=\"x-user\"")],
        ),
    );
    get(&q, "/q", &[]).await;
    settle(&q).await;
    let r = get(&q, "/q", &[]).await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
}
