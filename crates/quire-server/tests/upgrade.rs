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
