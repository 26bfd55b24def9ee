//! The fill path's promises, over real sockets: an invalidation is never lost to a
//! fill in flight, a response that has ended is a hit for the next request, no client
//! can take the fill slots from the others, and no field outside the key changes what
//! is stored.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quire_testkit::*;
use rand::{Rng, SeedableRng};
use tokio::io::AsyncWriteExt;

/// The origin's page for version `v` of trial `i`: the version is in the body and
/// the `ETag`; tagged with the trial's surrogate key.
fn versioned(i: usize, v: u32, delay: Duration) -> Route {
    let mut body = format!("<p>VERSION={v}</p>\n").into_bytes();
    body.extend_from_slice(&page(8_000));
    Route::ok(
        body,
        &[
            ("cache-control", "max-age=600"),
            ("content-type", "text/html"),
            ("surrogate-key", &format!("trial-{i}")),
        ],
    )
    .etag(&format!("\"v{v}\""))
    .delay(delay)
}

fn version_of(body: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(body.get(..32)?).ok()?;
    let at = s.find("VERSION=")? + 8;
    s[at..].split('<').next()?.parse().ok()
}

/// The ways an operator or a client invalidates a URL.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    PurgeMethod,
    SoftPurgeMethod,
    PostUrls,
    PostPrefix,
    PostTag,
    SoftPostTag,
    UnsafeMethod,
}

const KINDS: [Kind; 7] = [
    Kind::PurgeMethod,
    Kind::SoftPurgeMethod,
    Kind::PostUrls,
    Kind::PostPrefix,
    Kind::PostTag,
    Kind::SoftPostTag,
    Kind::UnsafeMethod,
];

async fn invalidate(q: &Quire, kind: Kind, i: usize, path: &str) -> u16 {
    let auth = format!("Bearer {TOKEN}");
    let base = format!("http://{}", q.addr);
    let post = |json: String| async move {
        send(
            q,
            "POST",
            "/_quire/purge",
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
            json.as_bytes(),
        )
        .await
        .status
    };
    match kind {
        Kind::PurgeMethod => {
            send(
                q,
                "PURGE",
                path,
                &[("authorization", &format!("Bearer {TOKEN}"))],
                b"",
            )
            .await
            .status
        }
        Kind::SoftPurgeMethod => {
            send(
                q,
                "PURGE",
                path,
                &[
                    ("authorization", &format!("Bearer {TOKEN}")),
                    ("quire-soft-purge", "1"),
                ],
                b"",
            )
            .await
            .status
        }
        Kind::PostUrls => post(format!(r#"{{"urls":["{base}{path}"]}}"#)).await,
        Kind::PostPrefix => post(format!(r#"{{"prefixes":["{base}/r/{i}/"]}}"#)).await,
        Kind::PostTag => post(format!(r#"{{"tags":["trial-{i}"]}}"#)).await,
        Kind::SoftPostTag => post(format!(r#"{{"tags":["trial-{i}"],"soft":true}}"#)).await,
        Kind::UnsafeMethod => send(q, "POST", path, &[], b"form").await.status,
    }
}

/// One trial: a miss starts a fill (the origin answers after `delay`), the content
/// changes and is invalidated at a random moment of that fill — before its head,
/// while it is committed, or after — with more misses racing it. Returns the
/// versions seen by requests that started after the invalidation was answered.
async fn trial(q: Arc<Quire>, o: Origin, i: usize, seed: u64) -> (Kind, Vec<Option<u32>>) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let path = format!("/r/{i}/p");
    let kind = KINDS[i % KINDS.len()];
    let delay = Duration::from_millis(rng.random_range(0..30));
    o.route(&path, versioned(i, 0, delay));
    let (qa, pa) = (q.clone(), path.clone());
    let mut first = Some(tokio::spawn(async move {
        get(&qa, &pa, &[("accept-encoding", "gzip")]).await
    }));
    tokio::time::sleep(Duration::from_micros(rng.random_range(0..60_000))).await;
    // Half the time the first response has ended, so the racer below is the entry's
    // second read: it queues the entry's brotli and zstd (`fill::deferred`), whose
    // rewrite then races the invalidation.
    if rng.random_bool(0.5) {
        if let Some(f) = first.take() {
            let _ = f.await;
        }
    }
    // A racing miss that may join the fill in flight (or a hit).
    let (qb, pb) = (q.clone(), path.clone());
    let racer = tokio::spawn(async move { get(&qb, &pb, &[]).await });
    // Publish: the content changes at the origin, then it is invalidated.
    o.route(&path, versioned(i, 1, Duration::ZERO));
    let status = invalidate(&q, kind, i, &path).await;
    assert!(status < 300, "{kind:?}: the invalidation answered {status}");
    let mut after = Vec::new();
    // Right after the answer, while the first fill may still be committing.
    let r = get(&q, &path, &[("accept-encoding", "gzip")]).await;
    after.push(version_of(&decode(
        r.header("content-encoding").unwrap_or(""),
        &r.body,
    )));
    if let Some(f) = first {
        let _ = f.await;
    }
    let _ = racer.await;
    // And once every fill is done and every background coding is in.
    settle(&q).await;
    for ae in ["gzip", "br", "zstd", "identity"] {
        let r = get(&q, &path, &[("accept-encoding", ae)]).await;
        let body = decode(r.header("content-encoding").unwrap_or(""), &r.body);
        after.push(version_of(&body));
    }
    (kind, after)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_request_after_an_invalidation_sees_the_old_version() {
    // The purge-after-fill race, against a model: a request that starts after an
    // invalidation's answer must see the version published before it (1), never
    // the old one (0), whatever the invalidation (hard or soft purge by URL, prefix
    // or tag; an unsafe method) and wherever in the fill it lands.
    let o = Origin::start().await;
    // Every coding is made (brotli and zstd in the background, which races the
    // invalidations too), at levels a debug build gets through quickly.
    let q = Arc::new(
        Quire::start(&o, |c| {
            c.encodings.brotli_upgrade_level = 0;
            c.encodings.brotli_level = 1;
            c.encodings.zstd_level = 1;
        })
        .await,
    );
    let trials: usize = std::env::var("QUIRE_RACE_TRIALS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1050);
    let seed: u64 = std::env::var("QUIRE_RACE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random);
    let t0 = Instant::now();
    let mut stale = vec![0usize; KINDS.len()];
    let mut reads = 0usize;
    for batch in (0..trials).collect::<Vec<_>>().chunks(30) {
        let tasks: Vec<_> = batch
            .iter()
            .map(|&i| tokio::spawn(trial(q.clone(), o.clone(), i, seed ^ i as u64)))
            .collect();
        for t in tasks {
            let (kind, seen) = t.await.unwrap();
            for (n, v) in seen.into_iter().enumerate() {
                if v != Some(1) && std::env::var("QUIRE_RACE_DEBUG").is_ok() {
                    eprintln!("{kind:?}: read {n} saw {v:?}");
                }
                reads += 1;
                let k = KINDS.iter().position(|x| *x == kind).unwrap_or(0);
                if v != Some(1) {
                    stale[k] += 1;
                }
            }
        }
    }
    eprintln!(
        "purge race: {trials} trials, {reads} reads after an invalidation, old version seen: {:?} (by kind {KINDS:?}), seed {seed}, {:.1} s",
        stale,
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(stale.iter().sum::<usize>(), 0, "seed {seed}: {stale:?}");
    // The background rewrites raced the invalidations: second reads queued them.
    let m = metrics_text(&q).await;
    let queued = metric(&m, "quire_deferred_codings_total{result=\"queued\"}");
    assert!(queued > 0.0, "no deferred coding job ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_request_after_a_response_ends_is_a_hit() {
    // A response that has ended is a hit for the next request: 304s and 206s from
    // the store at once, for bodies committed before they were answered and for
    // bodies that streamed (past the hold limit).
    let o = Origin::start().await;
    let small = page(40_000);
    let large = page(350_000);
    let mut delays_ms = Vec::new();
    let q = Quire::start(&o, |_| {}).await;
    for i in 0..40 {
        let body = if i % 2 == 0 { &small } else { &large };
        let path = format!("/h/{i}");
        o.route(
            &path,
            Route::ok(
                body.clone(),
                &[
                    ("cache-control", "max-age=600"),
                    ("content-type", "text/html"),
                ],
            )
            .etag(&format!("\"e{i}\"")),
        );
        let first = get(&q, &path, &[("accept-encoding", "gzip")]).await;
        assert_eq!(first.status, 200);
        let ended = Instant::now();
        let inm = format!("\"e{i}\"");
        let r = get(&q, &path, &[("if-none-match", &inm)]).await;
        assert_eq!(r.status, 304, "{path}: {}", r.cache_status());
        let r = get(&q, &path, &[("range", "bytes=0-99")]).await;
        assert_eq!(r.status, 206, "{path}: {}", r.cache_status());
        assert_eq!(&r.body[..], &body[..100]);
        assert!(
            r.cache_status().contains("hit") || r.cache_status().contains("stored"),
            "{path}: {}",
            r.cache_status()
        );
        delays_ms.push(ended.elapsed().as_secs_f64() * 1000.0);
    }
    assert_eq!(o.hits("/h/0"), 1);
    delays_ms.sort_by(f64::total_cmp);
    eprintln!(
        "last byte → 304 and 206 answered from the store: min {:.2} ms, median {:.2} ms, max {:.2} ms",
        delays_ms[0],
        delays_ms[delays_ms.len() / 2],
        delays_ms[delays_ms.len() - 1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fill_slots_cannot_be_taken_by_requests_that_hang_up() {
    // 300 requests sent and closed at once, for URLs whose origin body never ends,
    // from a client allowed every slot: each fill is cancelled when its client
    // leaves (nothing else would ever end it), every slot comes back, and other
    // clients' misses are fills again, stored.
    let o = Origin::start().await;
    for i in 0..300 {
        o.route(
            &format!("/endless/{i}"),
            Route::ok(
                "start",
                &[
                    ("cache-control", "max-age=600"),
                    ("content-type", "text/html"),
                ],
            )
            .endless(Duration::from_millis(200)),
        );
    }
    for i in 0..50 {
        o.route(
            &format!("/ok/{i}"),
            Route::ok(page(2000), &[("cache-control", "max-age=600")]),
        );
    }
    let q = Quire::start(&o, |c| {
        c.limits.fills = 256;
        c.limits.fills_per_client = 300;
    })
    .await;
    for i in 0..300 {
        let mut s = tokio::net::TcpStream::connect(q.addr).await.unwrap();
        let req = format!("GET /endless/{i} HTTP/1.1\r\nHost: site.test\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        drop(s);
    }
    assert!(
        wait_for(|| q.ctx.fills.slots_used() == 0).await,
        "{} slots still held by abandoned fills",
        q.ctx.fills.slots_used()
    );
    let fetched = (0..300)
        .filter(|i| o.hits(&format!("/endless/{i}")) > 0)
        .count();
    eprintln!("abandoned fills: {fetched} of 300 reached the origin; every slot came back");
    assert!(
        fetched >= 256,
        "every slot was taken (else the test proves little)"
    );
    let stored = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..50 {
        let (addr, stored) = (q.addr, stored.clone());
        tasks.push(tokio::spawn(async move {
            let req = http::Request::get(format!("http://{addr}/ok/{i}"))
                .header("host", "other.test")
                .body(http_body_util::Full::new(bytes::Bytes::new()))
                .unwrap();
            let r = tokio::time::timeout(Duration::from_secs(10), client().request(req)).await;
            let cs = |r: &http::Response<_>| {
                r.headers()
                    .get("cache-status")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .contains("stored")
            };
            if matches!(r, Ok(Ok(ref r)) if r.status() == 200 && cs(r)) {
                stored.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(
        stored.load(Ordering::Relaxed),
        50,
        "every other client's miss was a fill and stored"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fills_that_will_not_be_stored_give_their_slot_back_at_once() {
    // `no-store` and event streams become pass-throughs: they stream on, but hold no
    // fill slot, so a client reading many of them costs others nothing.
    let o = Origin::start().await;
    o.route(
        "/events",
        Route::ok("data: 1\n\n", &[("content-type", "text/event-stream")])
            .endless(Duration::from_millis(50)),
    );
    o.route(
        "/private",
        Route::ok("p", &[("cache-control", "no-store")]).endless(Duration::from_millis(50)),
    );
    let q = Quire::start(&o, |c| c.limits.fills = 1).await;
    let mut open = Vec::new();
    for p in ["/events", "/private"] {
        let mut s = tokio::net::TcpStream::connect(q.addr).await.unwrap();
        let req = format!("GET {p} HTTP/1.1\r\nHost: site.test\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        open.push(s);
    }
    // Both heads arrive (the fills start, then turn into pass-throughs).
    assert!(wait_for(|| o.hits("/events") == 1 && o.hits("/private") == 1).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        wait_for(|| q.ctx.fills.slots_used() == 0).await,
        "pass-throughs hold no slot"
    );
    o.route("/a", Route::ok("a", &[("cache-control", "max-age=60")]));
    let r = get(&q, "/a", &[]).await;
    assert!(r.cache_status().contains("stored"), "{}", r.cache_status());
    drop(open);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_past_its_deadline_stops_holding_a_slot() {
    // `limits.fill_deadline`: a body that trickles forever while its client reads it
    // becomes a pass-through at the deadline; it is never stored.
    let o = Origin::start().await;
    o.route(
        "/trickle",
        Route::ok(
            "t",
            &[
                ("cache-control", "max-age=600"),
                ("content-type", "text/html"),
            ],
        )
        .endless(Duration::from_millis(20)),
    );
    let q = Quire::start(&o, |c| {
        c.limits.fill_deadline = quire_server::config::Secs(Duration::from_millis(400));
    })
    .await;
    let mut s = tokio::net::TcpStream::connect(q.addr).await.unwrap();
    s.write_all(b"GET /trickle HTTP/1.1\r\nHost: site.test\r\n\r\n")
        .await
        .unwrap();
    assert!(
        wait_for(|| q.ctx.fills.slots_used() == 1).await,
        "a fill while under its deadline"
    );
    // The origin trickles for ever: only the deadline frees the slot.
    assert!(
        wait_for(|| q.ctx.fills.slots_used() == 0).await,
        "past its deadline"
    );
    assert_eq!(q.ctx.fills.in_flight(), 0, "and out of the registry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_poisoning_by_a_reflected_user_agent_is_not_stored() {
    // An origin that reflects `User-Agent` (or `Accept-Language`) without `Vary`:
    // fills never forward those fields, so no client's value reaches a stored page.
    let o = Origin::start().await;
    o.route(
        "/reflect",
        Route::ok(page(500), &[("cache-control", "max-age=600")]),
    );
    let q = Quire::start(&o, |_| {}).await;
    get(
        &q,
        "/reflect",
        &[
            ("user-agent", "<script>evil()</script>"),
            ("accept-language", "xx-evil"),
            ("accept", "text/evil"),
        ],
    )
    .await;
    let seen = &o.seen("/reflect")[0].headers;
    for f in ["user-agent", "accept-language", "accept", "cookie"] {
        assert!(!seen.contains_key(f), "{f} reached the origin on a fill");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_status_never_says_stored_for_what_was_not() {
    // An origin body that claims gzip but does not decode is not stored, and the
    // answer says so (the decision falls after the head: the body is held until it).
    let o = Origin::start().await;
    o.route(
        "/bad-gzip",
        Route::ok(
            b"this is not gzip at all, not even close".to_vec(),
            &[
                ("cache-control", "max-age=600"),
                ("content-encoding", "gzip"),
            ],
        ),
    );
    let q = Quire::start(&o, |_| {}).await;
    let r = get(&q, "/bad-gzip", &[("accept-encoding", "gzip")]).await;
    assert_eq!(r.cache_status(), "quire; fwd=uri-miss; detail=not-storable");
    settle(&q).await;
    let r = get(&q, "/bad-gzip", &[("accept-encoding", "gzip")]).await;
    assert!(!r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(o.hits("/bad-gzip"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn varied_urls_are_admitted_once_the_volume_is_full() {
    // Admission counts the key lookups count: a URL with `Vary` asked for twice is
    // stored even when the volume is full.
    let o = Origin::start().await;
    let filler = page(150_000);
    for i in 0..300 {
        o.route(
            &format!("/fill/{i}"),
            Route::ok(filler.clone(), &[("cache-control", "max-age=600")]),
        );
    }
    o.route(
        "/v",
        Route::ok(
            page(3000),
            &[
                ("cache-control", "max-age=600"),
                ("vary", "Accept-Language"),
            ],
        ),
    );
    let q = Quire::start(&o, |c| {
        c.cache.size = quire_server::config::ByteSize(32 << 20);
        c.encodings.br = false;
        c.encodings.zstd = false;
        c.encodings.gzip = false;
    })
    .await;
    // Fill the volume past its cap, twice over, so admission is on.
    for i in 0..300 {
        get(&q, &format!("/fill/{i}"), &[]).await;
    }
    settle(&q).await;
    use quire_store::Engine;
    assert!(q.ctx.store.stats().evicted > 0, "the volume is full");
    let mut stored = false;
    for _ in 0..4 {
        let r = get(&q, "/v", &[]).await;
        settle(&q).await;
        if r.cache_status().contains("hit") {
            stored = true;
            break;
        }
    }
    assert!(stored, "a varied URL was never admitted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_compression_budget_a_response_is_stored_in_identity_only() {
    // `encodings.budget`: a body larger than the whole budget is never queued for
    // compression; it is stored (a hit next time) in identity alone, and counted.
    let o = Origin::start().await;
    o.route(
        "/big",
        Route::ok(
            page(40_000),
            &[
                ("cache-control", "max-age=600"),
                ("content-type", "text/html"),
            ],
        ),
    );
    let q = Quire::start(&o, |c| {
        c.encodings.budget = quire_server::config::ByteSize(16 << 10);
    })
    .await;
    let r = get(&q, "/big", &[("accept-encoding", "gzip, br, zstd")]).await;
    assert!(r.cache_status().contains("stored"), "{}", r.cache_status());
    settle(&q).await;
    let r = get(&q, "/big", &[("accept-encoding", "gzip, br, zstd")]).await;
    assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
    assert_eq!(r.header("content-encoding"), None, "identity only");
    assert_eq!(r.body.len(), 40_000);
    assert!(
        q.ctx.compress.refused() >= 2,
        "the commit and the background job"
    );
}
