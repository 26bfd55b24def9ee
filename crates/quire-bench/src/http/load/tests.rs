//! The generator against a small real server on a loopback port (std::net, a thread
//! per connection): keep-alive, sized and chunked answers, 204/304 without bodies, a
//! 404 now and then, `Connection: close`. The generator's counts must equal the
//! server's exactly; nothing here depends on timing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::engine::{self, Config};
use super::request::Requests;
use super::schedule::Schedule;
use super::stats::Stats;

/// What the server answered.
#[derive(Debug, Default)]
struct Counts {
    requests: AtomicU64,
    not_found: AtomicU64,
    bytes: AtomicU64,
}

fn answer(path: &str) -> (Vec<Vec<u8>>, bool) {
    let one = |s: &str| (vec![s.as_bytes().to_vec()], false);
    match path {
        "/chunked" => (
            vec![
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec(),
                b"5;ext=1\r\nhello\r\n".to_vec(),
                b"b\r\n, world!!!!\r\n0\r\nX-Trailer: yes\r\n\r\n".to_vec(),
            ],
            false,
        ),
        "/missing" => one("HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\n\r\nnot found"),
        "/empty" => one("HTTP/1.1 204 No Content\r\n\r\n"),
        "/nm" => one("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"),
        "/close" => (
            vec![b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbye".to_vec()],
            true,
        ),
        "/big" => {
            let mut r = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n".to_vec();
            r.resize(r.len() + 100_000, b'x');
            (vec![r], false)
        }
        _ => one("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"),
    }
}

fn serve_conn(mut s: TcpStream, counts: Arc<Counts>) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
        buf.drain(..end + 4);
        let path = head.split(' ').nth(1).unwrap_or("/").to_owned();
        let (pieces, close) = answer(&path);
        counts.requests.fetch_add(1, Ordering::SeqCst);
        if path == "/missing" {
            counts.not_found.fetch_add(1, Ordering::SeqCst);
        }
        let len: usize = pieces.iter().map(Vec::len).sum();
        counts.bytes.fetch_add(len as u64, Ordering::SeqCst);
        for p in &pieces {
            if s.write_all(p).is_err() {
                return;
            }
        }
        if close {
            return;
        }
    }
}

/// Starts the server; it lives until the test process ends.
fn server() -> (SocketAddr, Arc<Counts>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let counts = Arc::new(Counts::default());
    let c = counts.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let c = c.clone();
            let _ = s.set_nodelay(true);
            std::thread::spawn(move || serve_conn(s, c));
        }
    });
    (addr, counts)
}

fn load(addr: SocketAddr, paths: &[&str], rate: Option<f64>, ms: u64) -> Stats {
    load_with(addr, paths, rate, ms, false)
}

fn load_with(addr: SocketAddr, paths: &[&str], rate: Option<f64>, ms: u64, spin: bool) -> Stats {
    let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
    let reqs = Requests::new(&paths, &addr.to_string(), "gzip, br", None).unwrap();
    let cfg = Config {
        addr,
        connections: 4,
        duration: Duration::from_millis(ms),
        rate,
        timeout: Duration::from_secs(10),
        spin,
    };
    engine::run(&cfg, &reqs).unwrap()
}

const MIX: &[&str] = &[
    "/a", "/chunked", "/a", "/missing", "/empty", "/a", "/nm", "/big", "/chunked", "/close", "/a",
];

fn assert_matches(s: &Stats, counts: &Counts) {
    assert_eq!(s.errors.total(), 0, "{:?}", s.errors);
    assert!(s.requests > 0);
    assert_eq!(s.requests, counts.requests.load(Ordering::SeqCst));
    assert_eq!(s.non_2xx, counts.not_found.load(Ordering::SeqCst));
    assert_eq!(s.bytes, counts.bytes.load(Ordering::SeqCst));
    assert_eq!(s.latency.count(), s.requests);
    assert_eq!(s.timeline.iter().sum::<u64>(), s.requests);
}

#[test]
fn closed_loop_counts_equal_the_servers() {
    let (addr, counts) = server();
    let s = load(addr, MIX, None, 1000);
    assert_matches(&s, &counts);
    assert!(s.non_2xx > 0);
    assert_eq!(s.unsent, 0);
}

#[test]
fn open_loop_sends_every_due_request() {
    let (addr, counts) = server();
    let s = load(addr, MIX, Some(2000.0), 1000);
    assert_matches(&s, &counts);
    // Every request due before the end was either answered or still queued.
    let due = Schedule::new(2000.0)
        .unwrap()
        .due_by(Duration::from_millis(1000));
    assert_eq!(s.requests + s.unsent, due);
}

#[test]
fn a_spinning_generator_counts_what_a_sleeping_one_does() {
    // `--spin` only changes how the loop waits (never asleep): every request still
    // goes out, is answered and counted exactly, closed loop and open loop alike.
    let (addr, counts) = server();
    let s = load_with(addr, MIX, None, 500, true);
    assert_matches(&s, &counts);
    let (addr, counts) = server();
    let s = load_with(addr, MIX, Some(2000.0), 500, true);
    assert_matches(&s, &counts);
    let due = Schedule::new(2000.0)
        .unwrap()
        .due_by(Duration::from_millis(500));
    assert_eq!(s.requests + s.unsent, due);
}

#[test]
fn garbage_and_refused_connections_are_errors() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut b = [0u8; 1024];
                while let Ok(n) = s.read(&mut b) {
                    if n == 0 || s.write_all(b"SPAM/9 nonsense\r\n\r\n").is_err() {
                        return;
                    }
                }
            });
        }
    });
    let s = load(addr, &["/"], None, 200);
    assert_eq!(s.requests, 0);
    assert!(s.errors.parse > 0, "{:?}", s.errors);
    // A port nobody listens on.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let s = load(addr, &["/"], Some(1000.0), 100);
    assert_eq!(s.requests, 0);
    assert!(s.errors.connect > 0, "{:?}", s.errors);
}
