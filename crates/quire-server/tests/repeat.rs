//! Repeat hits (`http1::repeat`): a request head the fast path answered before is
//! answered again from what it decided the first time. A repeat must answer
//! exactly as the first time would now, and everything that changes an answer — a
//! purge, a new version at the origin, a reload, time — must reach it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quire_testkit::raw_h1::{exchange, parse_responses, Raw};
use quire_testkit::*;

/// A GET of `path` with the host a test's PURGE names, and `extra` fields.
fn get_req(q: &Quire, path: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: repeat-test\r\n{extra}\r\n",
        q.addr
    )
}

/// `fields` without the ones that change from second to second.
fn timeless(fields: &[(String, String)]) -> Vec<(String, String)> {
    fields
        .iter()
        .filter(|(n, _)| n != "age" && n != "cache-status")
        .cloned()
        .collect()
}

fn field<'a>(r: &'a Raw, name: &str) -> &'a str {
    r.1.iter()
        .find(|(n, _)| n == name)
        .map_or("", |(_, v)| v.as_str())
}

/// Asks `req` `n` times, one connection each, letting quire store what it filled
/// after each; the last answer.
async fn ask_settled(q: &Quire, req: &str, n: usize) -> Raw {
    let mut last = None;
    for _ in 0..n {
        last = exchange(q.addr, req.to_owned(), 1).await.pop();
        settle(q).await;
    }
    last.expect("an answer")
}

/// `PURGE path` with the admin token.
async fn purge(q: &Quire, path: &str) {
    let auth = format!("Bearer {TOKEN}");
    let got = send(q, "PURGE", path, &[("authorization", &auth)], b"").await;
    assert_eq!(got.status, 200, "purge {path}");
}

/// `body` at `path`, fresh for ten minutes, its `ETag` the body quoted (so a head
/// served with another version's body shows).
fn page(origin: &Origin, path: &str, body: &str) {
    let etag = format!("\"{body}\"");
    origin.route(
        path,
        Route::ok(body, &[("cache-control", "max-age=600"), ("etag", &etag)]),
    );
}

/// The body, checked against the `ETag` its head carries.
fn body_of(r: &Raw) -> String {
    let body = String::from_utf8(r.2.clone()).unwrap();
    assert_eq!(
        field(r, "etag"),
        format!("\"{body}\""),
        "head and body of one version"
    );
    body
}

/// The same head answered three times on three connections: a fill, a hit whose
/// recipe is kept, and a repeat, which is the hit's answer field for field (a HEAD
/// and a matching `If-None-Match` likewise).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_repeated_head_is_answered_as_its_first_time() {
    let o = Origin::start().await;
    page(&o, "/p", "one");
    let q = Quire::start(&o, |_| {}).await;
    let req = get_req(&q, "/p", "");
    assert_eq!(exchange(q.addr, req.clone(), 1).await[0].2, b"one");
    settle(&q).await;
    let before = q.ctx.metrics.repeats();
    let hit = exchange(q.addr, req.clone(), 1).await.remove(0);
    let repeat = exchange(q.addr, req.clone(), 1).await.remove(0);
    assert_eq!(
        q.ctx.metrics.repeats(),
        before + 1,
        "the third was a repeat"
    );
    assert!(field(&repeat, "cache-status").starts_with("quire; hit"));
    assert_eq!(
        (hit.0, timeless(&hit.1), &hit.2),
        (repeat.0, timeless(&repeat.1), &repeat.2)
    );
    let head = req.replace("GET ", "HEAD ");
    let inm = get_req(&q, "/p", "If-None-Match: \"one\"\r\n");
    for (ask, status) in [(head, 200), (inm, 304)] {
        let first = exchange(q.addr, ask.clone(), 1).await.remove(0);
        let again = exchange(q.addr, ask, 1).await.remove(0);
        assert_eq!(first.0, status);
        assert!(first.2.is_empty() && again.2.is_empty());
        assert_eq!((first.0, timeless(&first.1)), (again.0, timeless(&again.1)));
    }
    assert_eq!(q.ctx.metrics.repeats(), before + 3);
}

/// A purge between a head's answers: the next one is the new version, never the
/// repeat of the old. (One worker: recipes are per worker thread, and with two the
/// connections' hits could fall on either.)
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_purge_reaches_a_repeated_head() {
    let o = Origin::start().await;
    page(&o, "/p", "old");
    let q = Quire::start(&o, |_| {}).await;
    let req = get_req(&q, "/p", "");
    assert_eq!(ask_settled(&q, &req, 4).await.2, b"old");
    assert!(q.ctx.metrics.repeats() >= 2);
    page(&o, "/p", "new");
    purge(&q, "/p").await;
    // The fill of the new version, then hits of it on one connection, pipelined
    // (the head's recipe is the old version's until a hit replaces it): each
    // answer is the new version.
    let got = exchange(q.addr, req.clone(), 1).await;
    settle(&q).await;
    let got = [got, exchange(q.addr, req.repeat(3), 3).await].concat();
    assert!(got.iter().all(|r| body_of(r) == "new"), "{got:?}");
}

/// A URL that varies: each head repeats its own variant, and a purge reaches both.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_varying_urls_repeats_keep_to_their_variant() {
    let o = Origin::start().await;
    let lang = |v: &str| {
        Route::ok(
            v,
            &[
                ("cache-control", "max-age=600"),
                ("vary", "accept-language"),
            ],
        )
    };
    o.route("/v", lang("any"));
    let q = Quire::start(&o, |_| {}).await;
    let en = get_req(&q, "/v", "Accept-Language: en\r\n");
    let fr = get_req(&q, "/v", "Accept-Language: fr\r\n");
    // The origin answers per language only as the test switches its route.
    o.route("/v", lang("english"));
    exchange(q.addr, en.clone(), 1).await;
    settle(&q).await;
    o.route("/v", lang("french"));
    exchange(q.addr, fr.clone(), 1).await;
    settle(&q).await;
    for _ in 0..3 {
        assert_eq!(exchange(q.addr, en.clone(), 1).await[0].2, b"english");
        assert_eq!(exchange(q.addr, fr.clone(), 1).await[0].2, b"french");
    }
    assert!(q.ctx.metrics.repeats() >= 4);
    o.route("/v", lang("after"));
    purge(&q, "/v").await;
    assert_eq!(exchange(q.addr, en.clone(), 1).await[0].2, b"after");
    assert_eq!(exchange(q.addr, fr.clone(), 1).await[0].2, b"after");
}

/// A reload changes the answer of the same head (here: `Cache-Status` shows the key);
/// a repeat made under the old policy is not used under the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_reload_reaches_a_repeated_head() {
    let o = Origin::start().await;
    page(&o, "/p", "one");
    let q = Quire::start(&o, |_| {}).await;
    let req = get_req(&q, "/p", "");
    let before = ask_settled(&q, &req, 4).await;
    assert!(!field(&before, "cache-status").contains("key="));
    let mut cfg = q.ctx.policy().cfg.clone();
    cfg.expose_key = true;
    q.ctx.reload(cfg).unwrap();
    let after = exchange(q.addr, req.clone(), 1).await.remove(0);
    assert!(field(&after, "cache-status").contains("key="), "{after:?}");
}

/// A response that goes stale between two answers of the same head is not a
/// repeat's hit: freshness is judged at each answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_repeated_head_is_judged_fresh_at_each_answer() {
    let o = Origin::start().await;
    o.route("/s", Route::ok("s", &[("cache-control", "max-age=1")]));
    let q = Quire::start(&o, |_| {}).await;
    let req = get_req(&q, "/s", "");
    let fresh = ask_settled(&q, &req, 4).await;
    assert!(field(&fresh, "cache-status").starts_with("quire; hit"));
    let seen = o.hits("/s");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let later = exchange(q.addr, req.clone(), 1).await.remove(0);
    assert!(
        !field(&later, "cache-status").starts_with("quire; hit"),
        "{later:?}"
    );
    assert!(o.hits("/s") > seen, "went to the origin");
}

/// Random interleavings of repeated heads and purges: clients send the same head
/// over and over on keep-alive connections while a purger publishes version after
/// version, purging after each. An answer to a request sent after the purge of
/// version n completed must be version n or later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purges_racing_repeats_never_serve_purged_bytes() {
    let o = Arc::new(Origin::start().await);
    page(&o, "/r", "v0");
    let q = Quire::start(&o, |_| {}).await;
    let done = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64
        | 1;
    eprintln!("seed {seed}");
    let clients: Vec<_> = (0..3)
        .map(|i| {
            let (done, stop, addr) = (done.clone(), stop.clone(), q.addr);
            let req = format!("GET /r HTTP/1.1\r\nHost: {addr}\r\nUser-Agent: repeat-test\r\n\r\n");
            std::thread::spawn(move || race_client(addr, &req, &done, &stop, seed + i))
        })
        .collect();
    let mut rng = seed;
    let until = Instant::now() + Duration::from_secs(3);
    let mut n = 0;
    while Instant::now() < until {
        n += 1;
        page(&o, "/r", &format!("v{n}"));
        purge(&q, "/r").await;
        done.store(n, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_micros(next(&mut rng) % 20_000)).await;
    }
    stop.store(true, Ordering::SeqCst);
    let mut answers = 0;
    for c in clients {
        answers += c.join().expect("no client saw purged bytes");
    }
    assert!(n >= 10 && answers >= 100, "{n} purges, {answers} answers");
    assert!(q.ctx.metrics.repeats() > 0, "repeats were in the race");
}

/// xorshift64.
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Sends `req` until `stop`, a few at a time on one connection, each checked
/// against the version whose purge had completed before it was sent; the number
/// of answers.
fn race_client(
    addr: std::net::SocketAddr,
    req: &str,
    done: &AtomicU64,
    stop: &AtomicBool,
    mut rng: u64,
) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut answers = 0;
    while !stop.load(Ordering::SeqCst) {
        let k = 1 + (next(&mut rng) % 3) as usize;
        let floor = done.load(Ordering::SeqCst);
        s.write_all(req.repeat(k).as_bytes()).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 16384];
        let parsed = loop {
            let parsed = parse_responses(&got, false);
            if parsed.len() >= k {
                break parsed;
            }
            let n = s.read(&mut buf).expect("an answer");
            assert!(n > 0, "closed");
            got.extend_from_slice(&buf[..n]);
        };
        for r in &parsed {
            let v: u64 = body_of(r)[1..].parse().unwrap();
            assert!(
                v >= floor,
                "version {v} after the purge of {floor} completed"
            );
        }
        answers += parsed.len() as u64;
        if next(&mut rng).is_multiple_of(4) {
            std::thread::sleep(Duration::from_micros(next(&mut rng) % 2000));
        }
    }
    answers
}

/// What the fast path's kept heads hold, from `/_quire/metrics`.
async fn repeat_bytes(q: &Quire) -> u64 {
    let text = metrics_text(q).await;
    text.lines()
        .find_map(|l| l.strip_prefix("quire_fastpath_repeat_bytes "))
        .expect("the gauge")
        .parse()
        .unwrap()
}

/// A client that sends thousands of different long heads for one stored page (a
/// second `User-Agent` of 1.9 KB, changed each time, so the heads are just under
/// the longest kept) makes the worker keep a recipe
/// for each: what they hold stays under the cap, and the heads are still answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn heads_made_to_fill_the_kept_recipes_are_bounded_in_bytes() {
    const CAP: u64 = 8 << 20;
    let o = Origin::start().await;
    page(&o, "/p", "one");
    let q = Quire::start(&o, |_| {}).await;
    exchange(q.addr, get_req(&q, "/p", ""), 1).await;
    settle(&q).await;
    let filler = "x".repeat(1900);
    let (mut sent, mut answered) = (0, 0);
    // (In batches of 20 pipelined heads: 40 KB, under the fast path's 64 KB buffer.)
    for batch in 0..300 {
        let heads: String = (0..20)
            .map(|i| {
                let ua = format!("User-Agent: {batch}-{i}-{filler}\r\n");
                get_req(&q, "/p", &ua)
            })
            .collect();
        let got = exchange(q.addr, heads, 20).await;
        sent += 20;
        answered += got.iter().filter(|r| r.2 == b"one").count();
    }
    assert_eq!(answered, sent, "every head answered");
    let held = repeat_bytes(&q).await;
    // Without the cap the 16,384 slots would hold nearly all 6,000 heads, at about
    // 2.5 KB each 15 MB; other tests' servers in this process keep a few small ones.
    eprintln!("{held} bytes kept");
    assert!(held > 0 && held <= CAP + (1 << 20), "{held} bytes kept");
}
