//! Every response makes progress or ends: clients that stop taking bytes — an
//! HTTP/2 client that keeps every stream's window at zero (and answers PINGs), an
//! HTTP/1.1 client that never reads — lose their responses after
//! `limits.send_stall`, and while they hold them the server still answers the
//! health check and new clients from other addresses.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use quire_testkit::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CACHEABLE: &[(&str, &str)] = &[("cache-control", "max-age=600")];

/// Stores `paths` (each `len` bytes) and checks they now hit.
async fn stored(origin: &Origin, q: &Quire, paths: &[String], len: usize) {
    for p in paths {
        origin.route(p, Route::ok(vec![b'x'; len], CACHEABLE));
        assert_eq!(send(q, "GET", p, &[], b"").await.status, 200);
    }
    settle(q).await;
    for p in paths {
        let got = send(q, "GET", p, &[], b"").await;
        assert!(
            got.cache_status().contains("hit"),
            "{p}: {}",
            got.cache_status()
        );
    }
}

/// An HTTP/2 connection whose streams all start with a window of zero (it never
/// sends a `WINDOW_UPDATE`, since it never reads); it answers PINGs.
async fn shut_window_client(q: &Quire) -> http2::SendRequest<Empty<Bytes>> {
    let tcp = tokio::net::TcpStream::connect(q.addr).await.unwrap();
    let (send, conn) = http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(0)
        .handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    send
}

/// Asks for `paths` on `send`; the response bodies, not read.
async fn hold(
    send: &mut http2::SendRequest<Empty<Bytes>>,
    q: &Quire,
    paths: &[String],
) -> Vec<hyper::body::Incoming> {
    let mut bodies = Vec::new();
    for p in paths {
        let req = http::Request::get(q.url(p)).body(Empty::new()).unwrap();
        let resp = send.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        bodies.push(resp.into_body());
    }
    bodies
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_zero_window_streams_are_reset_after_send_stall() {
    let origin = Origin::start().await;
    let mut q = Quire::start(&origin, |c| {
        c.limits.send_stall = "300ms".parse().unwrap();
    })
    .await;
    let paths: Vec<String> = (0..4).map(|i| format!("/obj{i}")).collect();
    stored(&origin, &q, &paths, 100_000).await;
    let mut h2 = shut_window_client(&q).await;
    let bodies = hold(&mut h2, &q, &paths).await;
    for mut b in bodies {
        // Reset (or the connection closed under it): an error, within 30 s
        // instead of never.
        let end = tokio::time::timeout(Duration::from_secs(30), b.frame())
            .await
            .expect("the stalled stream was never reset");
        assert!(matches!(end, Some(Err(_))), "{end:?}");
    }
    let (streams, conns) = q.ctx.metrics.send_stalls();
    assert_eq!(streams, 4, "each stalled response dropped once");
    assert_eq!(conns, 1, "the connection had nothing else: closed");
    let auth = format!("Bearer {TOKEN}");
    let m = send(
        &q,
        "GET",
        "/_quire/metrics",
        &[("authorization", &auth)],
        b"",
    )
    .await;
    let text = String::from_utf8_lossy(&m.body);
    assert!(
        text.contains("quire_send_stalls_total{scope=\"stream\"} 4"),
        "{text}"
    );
    // The objects are still served to a client that reads.
    let got = send(&q, "GET", "/obj0", &[], b"").await;
    assert_eq!(got.body.len(), 100_000);
    q.shutdown().await;
}

/// `GET /_quire/health` from the local address `from`; the status line.
async fn health_from(from: &str, q: &Quire) -> String {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut s = sock.connect(q.addr).await.unwrap();
    s.write_all(b"GET /_quire/health HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).await.unwrap();
    let all = String::from_utf8_lossy(&all);
    all.lines().next().unwrap_or("").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_h2_clients_never_keep_health_or_new_clients_out() {
    let origin = Origin::start().await;
    let mut q = Quire::start(&origin, |c| {
        c.limits.connections = 4;
        // Long: only the reaper can free the slots while the test runs.
        c.limits.send_stall = "600s".parse().unwrap();
    })
    .await;
    let paths: Vec<String> = (0..2).map(|i| format!("/held{i}")).collect();
    stored(&origin, &q, &paths, 100_000).await;
    // Wait for the warm-up connections to be gone before filling every slot.
    assert!(
        wait_for(|| q
            .ctx
            .metrics
            .connections()
            .load(std::sync::atomic::Ordering::Relaxed)
            == 0)
        .await
    );
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut h2 = shut_window_client(&q).await;
        let bodies = hold(&mut h2, &q, &paths).await;
        held.push((h2, bodies));
    }
    // Every slot is held by a stalled client; another address still gets in.
    let status = tokio::time::timeout(Duration::from_secs(30), health_from("127.0.0.2", &q))
        .await
        .expect("health never answered while stalled clients held every slot");
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let (_, reaped) = q.ctx.metrics.connections_refused_reaped();
    assert!(reaped >= 1, "a stalled connection made room");
    drop(held);
    q.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h1_client_that_never_reads_a_large_hit_is_cut_after_send_stall() {
    let origin = Origin::start().await;
    let mut q = Quire::start(&origin, |c| {
        c.limits.send_stall = "300ms".parse().unwrap();
        // 8 MiB regions (a volume's 1/128), as by default.
        c.cache.size = quire_server::config::ByteSize(1 << 30);
    })
    .await;
    // Larger than the socket buffers on both sides can hold (Linux sends at most
    // 4 MiB ahead by default; the client takes 4 KiB).
    let len = 7 << 20;
    stored(&origin, &q, &["/large".to_owned()], len).await;
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let mut s = sock.connect(q.addr).await.unwrap();
    s.write_all(b"GET /large HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let cut = wait_for(|| q.ctx.metrics.send_stalls().1 >= 1).await
        || wait_for(|| q.ctx.metrics.send_stalls().1 >= 1).await
        || wait_for(|| q.ctx.metrics.send_stalls().1 >= 1).await;
    assert!(
        cut,
        "the connection of a client that never reads was never cut"
    );
    // The client, reading now, gets part of the response and then the end.
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut got)).await;
    assert!(read.is_ok(), "the connection stayed open");
    assert!(got.len() < len, "the whole response went: {}", got.len());
    q.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_pass_gives_its_origin_permit_back() {
    // A passed-through response holds its origin connection and permit: a shut
    // window must not keep every other client's miss at 502.
    let origin = Origin::start().await;
    // A stream that never ends: the pass holds its origin connection for as long
    // as it lives.
    origin.route(
        "/pass",
        Route::ok("p", &[("cache-control", "no-store")]).endless(Duration::from_millis(50)),
    );
    origin.route("/other", Route::ok("o", &[("cache-control", "no-store")]));
    let mut q = Quire::start(&origin, |c| {
        c.limits.send_stall = "300ms".parse().unwrap();
        c.limits.origin_connections = 1;
    })
    .await;
    let mut h2 = shut_window_client(&q).await;
    let _held = hold(&mut h2, &q, &["/pass".to_owned()]).await;
    let mut answered = false;
    for _ in 0..300 {
        if send(&q, "GET", "/other", &[], b"").await.status == 200 {
            answered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered, "the stalled pass kept the only origin permit");
    assert!(q.ctx.metrics.send_stalls().0 >= 1);
    q.shutdown().await;
}
