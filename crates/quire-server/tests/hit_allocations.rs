//! Heap allocations per fresh hit on the HTTP/1.1 fast path, counted by a counting
//! global allocator around a run of keep-alive hits: a fence for the hit path's
//! cost (docs/performance.md, "Where a hit's time goes"). The client's side of the
//! window allocates nothing (a prebuilt request, a buffer made before), so what is
//! counted is the server's, plus whatever its background tasks did meanwhile (the
//! slack).

use std::alloc::{GlobalAlloc, Layout, System};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use quire_testkit::*;

/// The system allocator, counting allocations (`alloc`, `alloc_zeroed`, `realloc`).
struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged,
// so `System`'s guarantees are this allocator's; the counter has no effect on memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract for `layout`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from this allocator (so from `System`) with `layout`,
        // as the caller guarantees.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator (so from `System`) with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Hits counted.
const HITS: u64 = 400;

/// Most heap allocations a fresh keep-alive hit may make on the fast path. The
/// same head over and over is a repeat (`http1::repeat`): no parse, no key made; what
/// is left is the body's owner, which holds the store handle. (A head seen for the
/// first time made 8 when this was measured.)
const PER_HIT_MAX: u64 = 1;

/// Allocations the server's other tasks may make during the window.
const SLACK: u64 = 100;

/// The value of `Content-Length` in `head` (0 when absent), read without allocating.
fn content_length(head: &[u8]) -> usize {
    head.split(|&b| b == b'\n')
        .find_map(|line| {
            let colon = line.iter().position(|&b| b == b':')?;
            let (name, value) = line.split_at(colon);
            name.eq_ignore_ascii_case(b"content-length").then(|| {
                value[1..]
                    .iter()
                    .filter(|b| b.is_ascii_digit())
                    .fold(0, |n, &d| n * 10 + usize::from(d - b'0'))
            })
        })
        .unwrap_or(0)
}

/// Reads one whole answer on `s` into `buf`, without allocating; its length. (One
/// request is in flight at a time, so no read takes bytes of the next answer.)
fn read_answer(s: &mut std::net::TcpStream, buf: &mut [u8]) -> usize {
    let mut got = 0;
    loop {
        if let Some(end) = buf[..got].windows(4).position(|w| w == b"\r\n\r\n") {
            let whole = end + 4 + content_length(&buf[..end]);
            if got < whole {
                s.read_exact(&mut buf[got..whole]).unwrap();
            }
            return whole;
        }
        let n = s.read(&mut buf[got..]).unwrap();
        assert!(n > 0, "closed before a whole answer");
        got += n;
    }
}

/// Allocations during `HITS` keep-alive hits of `request` on one connection to
/// `addr`, after one unmeasured hit.
fn count(addr: std::net::SocketAddr, request: &[u8]) -> u64 {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    s.write_all(request).unwrap();
    let len = read_answer(&mut s, &mut buf);
    let head = String::from_utf8_lossy(&buf[..len.min(2048)]).to_ascii_lowercase();
    assert!(head.contains("cache-status: quire; hit"), "{head}");
    assert!(head.contains("content-encoding:"), "{head}");
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..HITS {
        s.write_all(request).unwrap();
        read_answer(&mut s, &mut buf);
    }
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_fresh_hit_on_the_fast_path_allocates_at_most_its_budget() {
    let o = Origin::start().await;
    let body = page(20_000);
    o.route(
        "/page",
        Route::ok(
            body,
            &[
                ("cache-control", "max-age=3600"),
                ("content-type", "text/html"),
            ],
        ),
    );
    let q = Quire::start(&o, |_| {}).await;
    let first = get(&q, "/page", &[("accept-encoding", "gzip")]).await;
    assert_eq!(first.status, 200);
    settle(&q).await;
    // A browser's fields, as a hit would see them (the host as the client above sent
    // it, which is in the key).
    let request = format!(
        "GET /page HTTP/1.1\r\nHost: {}\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n\
         Accept: text/html,application/xhtml+xml\r\nAccept-Language: en-GB,en;q=0.9\r\n\
         Accept-Encoding: gzip, br\r\n\r\n",
        q.addr
    );
    let addr = q.addr;
    let n = tokio::task::spawn_blocking(move || count(addr, request.as_bytes()))
        .await
        .unwrap();
    eprintln!(
        "{n} allocations in {HITS} hits: {:.2} per hit",
        n as f64 / HITS as f64
    );
    assert!(
        n <= HITS * PER_HIT_MAX + SLACK,
        "{n} allocations in {HITS} fast-path hits: over {PER_HIT_MAX} per hit"
    );
}
