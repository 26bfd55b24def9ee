//! WebSocket (any `Upgrade`) through quire to a real origin socket: the 101 comes
//! back, bytes go both ways untouched (HTTP-looking ones and long binary runs
//! included), upgraded connections have their own limit, and an origin that
//! declines the upgrade is answered as it answered, with the connection closed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use quire_testkit::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// An origin that switches protocols on `/ws` and then echoes every byte, and
/// answers anything else `200 no`.
async fn echo_origin() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") {
                    if s.read(&mut b).await.unwrap_or(0) == 0 {
                        return;
                    }
                    head.push(b[0]);
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                if !head.starts_with("get /ws ") || !head.contains("upgrade: websocket") {
                    let _ = s
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nno")
                        .await;
                    return;
                }
                let _ = s
                    .write_all(
                        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\
                          connection: Upgrade\r\nsec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
                    )
                    .await;
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    format!("http://{addr}")
}

const UPGRADE: &str = "GET /ws HTTP/1.1\r\nhost: example.com\r\nupgrade: websocket\r\n\
    connection: Upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
    sec-websocket-version: 13\r\n\r\n";

/// Sends an upgrade request; returns the socket and the response head.
fn open(addr: std::net::SocketAddr) -> (TcpStream, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(UPGRADE.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut b).unwrap(), 1, "head so far: {head:?}");
        head.push(b[0]);
    }
    (s, String::from_utf8(head).unwrap())
}

fn echoes(s: &mut TcpStream, payload: &[u8]) {
    s.write_all(payload).unwrap();
    let mut got = vec![0u8; payload.len()];
    s.read_exact(&mut got).unwrap();
    assert!(got == payload, "the echo differs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_bytes_pass_both_ways_untouched() {
    let origin = Origin::start().await;
    let upstream = echo_origin().await;
    let mut q = Quire::start(&origin, |c| c.origin = Some(upstream)).await;
    let addr = q.addr;
    let checks = tokio::task::spawn_blocking(move || {
        let (mut s, head) = open(addr);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(lower.contains("upgrade: websocket"), "{head}");
        assert!(
            lower.contains("sec-websocket-accept: s3pplmbitxaq9kygzzhzrbk+xoo="),
            "{head}"
        );
        // Bytes that look like HTTP, and smuggling-shaped ones, are not parsed.
        echoes(&mut s, b"GET /_quire/metrics HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n");
        // A long binary run with no head end in it (past the 64 KiB head limit).
        let blob: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        echoes(&mut s, &blob);
    });
    checks.await.unwrap();
    let mut text = String::new();
    q.ctx.tunnels.write_metrics(&mut text);
    assert!(
        text.contains("quire_upgrades_total{result=\"tunnelled\"} 1"),
        "{text}"
    );
    q.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgraded_connections_have_their_own_limit() {
    let origin = Origin::start().await;
    let upstream = echo_origin().await;
    let mut q = Quire::start(&origin, |c| {
        c.origin = Some(upstream);
        c.limits.upgrades = 1;
    })
    .await;
    let addr = q.addr;
    tokio::task::spawn_blocking(move || {
        let (mut first, head) = open(addr);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        let (_, refused) = open(addr);
        assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
        assert!(
            refused.to_ascii_lowercase().contains("retry-after: 1"),
            "{refused}"
        );
        echoes(&mut first, b"still open");
        drop(first);
        // The slot frees when the tunnel ends.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (_, head) = open(addr);
            if head.starts_with("HTTP/1.1 101") {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the slot never freed: {head}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    })
    .await
    .unwrap();
    q.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_the_origin_declines_is_answered_and_the_connection_closed() {
    let origin = Origin::start().await;
    let upstream = echo_origin().await;
    let mut q = Quire::start(&origin, |c| c.origin = Some(upstream)).await;
    let addr = q.addr;
    tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(UPGRADE.replace("/ws", "/other").as_bytes())
            .unwrap();
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        assert!(all.starts_with("HTTP/1.1 200"), "{all}");
        assert!(
            all.to_ascii_lowercase().contains("connection: close"),
            "{all}"
        );
        assert!(all.ends_with("no"), "{all}");
    })
    .await
    .unwrap();
    q.shutdown().await;
}

/// A keep-alive origin that answers every request at once with its own target as
/// the body, and only then skips the body its `Content-Length` announced (as nginx
/// does for `return`, or any error page): told of a length that never comes, it
/// takes the next request on that connection as the rest of the body.
async fn early_answering_origin() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(answer_early(s));
        }
    });
    format!("http://{addr}")
}

async fn answer_early(mut s: tokio::net::TcpStream) {
    loop {
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut b).await.unwrap_or(0) == 0 {
                return;
            }
            head.push(b[0]);
        }
        let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
        let target = text.split(' ').nth(1).unwrap_or("").to_owned();
        if !text.starts_with("get ") {
            let _ = s
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 3\r\nconnection: close\r\n\r\nbad")
                .await;
            return;
        }
        let resp = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\ncache-control: no-store\r\n\r\n{target}",
            target.len()
        );
        if s.write_all(resp.as_bytes()).await.is_err() {
            return;
        }
        let length: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        let mut skip = vec![0u8; length];
        if s.read_exact(&mut skip).await.is_err() {
            return;
        }
    }
}

/// One request on a fresh connection; the whole answer (the connection closes).
fn ask(addr: std::net::SocketAddr, req: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    String::from_utf8_lossy(&all).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_with_content_length_never_desyncs_the_pool() {
    let origin = Origin::start().await;
    let upstream = early_answering_origin().await;
    let mut q = Quire::start(&origin, |c| {
        c.origin = Some(upstream);
        c.limits.origin_idle_connections = 1;
    })
    .await;
    let addr = q.addr;
    tokio::task::spawn_blocking(move || {
        let get = |path: &str| {
            format!("GET {path} HTTP/1.1\r\nhost: example.com\r\nconnection: close\r\n\r\n")
        };
        // One pooled connection to the origin.
        let warm = ask(addr, &get("/warm"));
        assert!(warm.ends_with("/warm"), "{warm}");
        for framing in ["content-length: 40\r\n", "transfer-encoding: chunked\r\n"] {
            let upgrade = UPGRADE.replace("\r\n\r\n", &format!("\r\n{framing}\r\n"));
            let refused = ask(addr, &upgrade);
            assert!(refused.starts_with("HTTP/1.1 400"), "{framing}: {refused}");
            // Another client's request on the pooled connection is intact.
            let victim = ask(addr, &get("/victim"));
            assert!(victim.starts_with("HTTP/1.1 200"), "{framing}: {victim}");
            assert!(victim.ends_with("/victim"), "{framing}: {victim}");
        }
        // An upgrade that announces no body still reaches the origin.
        let plain = ask(
            addr,
            &UPGRADE.replace("\r\n\r\n", "\r\ncontent-length: 0\r\n\r\n"),
        );
        assert!(plain.ends_with("/ws"), "{plain}");
        let victim = ask(addr, &get("/victim"));
        assert!(victim.ends_with("/victim"), "{victim}");
    })
    .await
    .unwrap();
    let mut text = String::new();
    q.ctx.tunnels.write_metrics(&mut text);
    assert!(
        text.contains("quire_upgrades_total{result=\"bad_request\"} 2"),
        "{text}"
    );
    q.shutdown().await;
}

/// Opens an upgrade from the local address `from` (any of 127.0.0.0/8).
async fn open_from(from: &str, addr: std::net::SocketAddr) -> (tokio::net::TcpStream, String) {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(format!("{from}:0").parse().unwrap()).unwrap();
    let mut s = sock.connect(addr).await.unwrap();
    s.write_all(UPGRADE.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut b))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(n, 1, "head so far: {head:?}");
        head.push(b[0]);
    }
    (s, String::from_utf8(head).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnel_hoarding_by_a_few_addresses_leaves_slots_for_others() {
    let origin = Origin::start().await;
    let upstream = echo_origin().await;
    let mut q = Quire::start(&origin, |c| {
        c.origin = Some(upstream);
        c.limits.upgrades = 8;
        c.limits.upgrades_per_client = 2;
    })
    .await;
    let mut hoard = Vec::new();
    for hoarder in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        for _ in 0..2 {
            let (s, head) = open_from(hoarder, q.addr).await;
            assert!(head.starts_with("HTTP/1.1 101"), "{hoarder}: {head}");
            hoard.push(s);
        }
        let (_, refused) = open_from(hoarder, q.addr).await;
        assert!(refused.starts_with("HTTP/1.1 503"), "{hoarder}: {refused}");
    }
    // Three hoarders hold six of eight slots; another client still gets one.
    let (_s, head) = open_from("127.0.0.5", q.addr).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    let mut text = String::new();
    q.ctx.tunnels.write_metrics(&mut text);
    assert!(
        text.contains("quire_upgrades_total{result=\"refused_client\"} 3"),
        "{text}"
    );
    assert!(text.contains("quire_upgrades_open 7"), "{text}");
    // A hoarder's share frees as its tunnels close.
    drop(hoard.pop());
    let mut reopened = false;
    for _ in 0..500 {
        let (_s, head) = open_from("127.0.0.4", q.addr).await;
        if head.starts_with("HTTP/1.1 101") {
            reopened = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(reopened, "the share never freed");
    q.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_tunnel_hoarding_ends_at_tunnel_idle() {
    let origin = Origin::start().await;
    let upstream = echo_origin().await;
    let mut q = Quire::start(&origin, |c| {
        c.origin = Some(upstream);
        c.limits.upgrades = 1;
        c.limits.tunnel_idle = "300ms".parse().unwrap();
    })
    .await;
    let addr = q.addr;
    tokio::task::spawn_blocking(move || {
        let (mut s, head) = open(addr);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        // Traffic keeps it open past the idle limit...
        for _ in 0..5 {
            echoes(&mut s, b"ping");
            std::thread::sleep(Duration::from_millis(100));
        }
        // ...silence closes it (the read timeout is 10 s: "closed, not never").
        let mut b = [0u8; 1];
        assert_eq!(s.read(&mut b).unwrap(), 0, "the idle tunnel stayed open");
        let (_, head) = open(addr);
        assert!(
            head.starts_with("HTTP/1.1 101"),
            "the slot was not freed: {head}"
        );
    })
    .await
    .unwrap();
    let mut text = String::new();
    q.ctx.tunnels.write_metrics(&mut text);
    assert!(
        text.contains("quire_upgrades_idle_closed_total 1"),
        "{text}"
    );
    q.shutdown().await;
}
