//! A client is never silently the proxy: behind a trusted proxy (a local TLS
//! terminator), a hostile `X-Forwarded-For` — long, not text, split over several
//! fields — still names the client the rate limits charge, the origin is told and
//! the access log writes; a header that names nobody is refused 400 and counted.

use std::path::Path;

use quire_testkit::*;

/// Quire behind a trusted local proxy, five misses allowed per client (the refill
/// is one per 100 s: nothing comes back during a test), with a JSON access log.
async fn behind_a_proxy(origin: &Origin, log: &Path) -> Quire {
    for i in 0..12 {
        origin.route(
            &format!("/p{i}"),
            Route::ok("page", &[("cache-control", "max-age=600")]),
        );
    }
    let log = log.to_owned();
    Quire::start(origin, move |c| {
        c.trusted_proxies = vec!["127.0.0.1".into()];
        c.rate_limit.misses_per_sec = 0.01;
        c.rate_limit.misses_burst = 5;
        c.log.access = Some(log);
        c.log.format = quire_server::access_log::Format::Json;
    })
    .await
}

/// Sends twelve misses (`/p0` … `/p11`) with the head lines `extra(i)` on fresh
/// connections; the statuses.
async fn twelve_misses(q: &Quire, extra: impl Fn(usize) -> Vec<u8>) -> Vec<u16> {
    let mut out = Vec::new();
    for i in 0..12 {
        let mut req =
            format!("GET /p{i} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n").into_bytes();
        req.extend_from_slice(&extra(i));
        req.extend_from_slice(b"\r\n");
        let addr = q.addr;
        let r = tokio::task::spawn_blocking(move || raw(addr, &req))
            .await
            .unwrap();
        out.extend(statuses(&r));
        settle(q).await;
    }
    out
}

fn admitted(statuses: &[u16]) -> usize {
    statuses.iter().filter(|&&s| s == 200).count()
}

fn log_clients(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["client"].as_str().unwrap_or_default().to_owned()
        })
        .collect()
}

fn refused_metric(q: &Quire) -> u64 {
    let mut text = String::new();
    q.ctx.limiter.write_metrics(&mut text);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("quire_forwarded_for_refused_total ")?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no refusal counter in\n{text}"))
}

/// Checks the budget held for `client`: five of twelve admitted, the origin told
/// the client last, every log line naming it.
fn assert_limited_as(statuses: &[u16], origin: &Origin, log: &Path, client: &str) {
    assert_eq!(admitted(statuses), 5, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|&&s| s == 429).count(), 7);
    let seen = origin.seen_all();
    assert_eq!(seen.len(), 5);
    for s in &seen {
        let xff = s.headers["x-forwarded-for"]
            .to_str()
            .expect("forwarded as text");
        assert!(xff.ends_with(client), "{xff:.200}");
    }
    let clients = log_clients(log);
    assert_eq!(clients.len(), 12, "{clients:?}");
    assert!(clients.iter().all(|c| c == client), "{clients:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_forwarded_for_from_a_trusted_proxy_is_limited_as_its_client() {
    let origin = Origin::start().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    let mut q = behind_a_proxy(&origin, &log).await;
    // 8 KiB of addresses the client wrote, then the terminator's entry.
    let spoof = vec!["10.9.8.7"; 1000].join(", ");
    let got = twelve_misses(&q, |i| {
        format!("X-Forwarded-For: {i}.1.1.1, {spoof}, 192.0.2.1\r\n").into_bytes()
    })
    .await;
    q.shutdown().await;
    assert_limited_as(&got, &origin, &log, "192.0.2.1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_ascii_forwarded_for_from_a_trusted_proxy_is_limited_as_its_client() {
    let origin = Origin::start().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    let mut q = behind_a_proxy(&origin, &log).await;
    let got = twelve_misses(&q, |i| {
        let mut h = b"X-Forwarded-For: caf\xc3\xa9\xff".to_vec();
        h.extend_from_slice(format!("{i}, 192.0.2.2\r\n").as_bytes());
        h
    })
    .await;
    q.shutdown().await;
    assert_limited_as(&got, &origin, &log, "192.0.2.2");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_forwarded_for_fields_are_limited_as_the_last_client() {
    let origin = Origin::start().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    let mut q = behind_a_proxy(&origin, &log).await;
    // The client rotates what it writes; the terminator adds its own field.
    let got = twelve_misses(&q, |i| {
        format!("X-Forwarded-For: 198.51.100.{i}\r\nX-Forwarded-For: 192.0.2.3\r\n").into_bytes()
    })
    .await;
    q.shutdown().await;
    assert_limited_as(&got, &origin, &log, "192.0.2.3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_for_naming_nobody_is_refused_never_the_proxy() {
    let origin = Origin::start().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("a.log");
    let mut q = behind_a_proxy(&origin, &log).await;
    // Store /p0 for a named client, so the fast path (hits) is tried too.
    let named = twelve_misses(&q, |_| b"X-Forwarded-For: 192.0.2.4\r\n".to_vec()).await;
    assert_eq!(admitted(&named), 5);
    let before = origin.seen_all().len();
    let nobody: [&[u8]; 5] = [
        b"X-Forwarded-For: 192.0.2.4, junk\r\n",
        b"X-Forwarded-For: 192.0.2.4, \xff\xfe\r\n",
        b"X-Forwarded-For: \r\n",
        b"X-Forwarded-For: 192.0.2.4\r\nX-Forwarded-For: ,junk\r\n",
        b"X-Forwarded-For:  , \r\n",
    ];
    for (n, h) in nobody.iter().enumerate() {
        // A stored page (a fast-path hit) and a miss: both refused.
        for path in ["/p0", "/p11"] {
            let mut req =
                format!("GET {path} HTTP/1.1\r\nHost: h\r\nConnection: close\r\n").into_bytes();
            req.extend_from_slice(h);
            req.extend_from_slice(b"\r\n");
            let addr = q.addr;
            let r = tokio::task::spawn_blocking(move || raw(addr, &req))
                .await
                .unwrap();
            assert!(r.starts_with("HTTP/1.1 400"), "{n} {path}: {r}");
        }
    }
    assert_eq!(refused_metric(&q), 10);
    assert_eq!(
        origin.seen_all().len(),
        before,
        "nothing reached the origin"
    );
    q.shutdown().await;
    let clients = log_clients(&log);
    assert_eq!(clients.len(), 22, "every refusal is logged: {clients:?}");
}
