//! The HTTP/1.1 fast path against the general (hyper) path: same answers, pipelining,
//! and the hand-over of a connection mid-stream.

use quire_testkit::raw_h1::{exchange, Raw};
use quire_testkit::*;

fn gunzip(b: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .expect("gzip");
    out
}

fn get_req(path: &str, extra: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: site.test\r\nAccept-Encoding: gzip\r\n{extra}\r\n")
}

/// A request that hands its connection to hyper (a connection-level field).
fn to_hyper(path: &str) -> String {
    get_req(path, "Connection: keep-alive\r\n")
}

/// The ttl `Cache-Status` gives in `fields`.
fn ttl(fields: &[(String, String)]) -> i64 {
    fields
        .iter()
        .find(|(n, _)| n == "cache-status")
        .and_then(|(_, v)| {
            v.split("ttl=")
                .nth(1)?
                .split(';')
                .next()?
                .trim()
                .parse()
                .ok()
        })
        .expect("a ttl")
}

/// `fields` without what moves with the clock between two answers (a second
/// boundary may fall between them): `Age`, `Date`, and the ttl in `Cache-Status`
/// (checked apart with [`ttl`]).
fn timeless(fields: &[(String, String)]) -> Vec<(String, String)> {
    fields
        .iter()
        .filter(|(n, _)| n != "age" && n != "date")
        .map(|(n, v)| match v.split_once("; ttl=") {
            Some((before, _)) if n == "cache-status" => (n.clone(), before.to_owned()),
            _ => (n.clone(), v.clone()),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fast_path_answers_exactly_as_the_general_path() {
    let o = Origin::start().await;
    o.route(
        "/page",
        Route::ok(
            page(30_000),
            &[
                ("cache-control", "max-age=600"),
                ("content-type", "text/html"),
                ("x-app", "1"),
            ],
        )
        .etag("\"p1\""),
    );
    o.route("/other", Route::ok("o", &[("cache-control", "no-store")]));
    let q = Quire::start(&o, |_| {}).await;
    let warm = exchange(q.addr, get_req("/page", ""), 1).await;
    assert_eq!(warm[0].0, 200);
    settle(&q).await;
    let before = q.ctx.metrics.handovers();
    // A fresh connection whose first request is a hit: the fast path.
    let fast = exchange(q.addr, get_req("/page", ""), 1).await;
    assert_eq!(
        q.ctx.metrics.handovers(),
        before,
        "served without handing over"
    );
    // A connection-level field hands the connection to hyper; its hit comes from there.
    let general = exchange(q.addr, to_hyper("/other") + &get_req("/page", ""), 2).await;
    assert_eq!(q.ctx.metrics.handovers(), before + 1);
    let (fs, ff, fb) = &fast[0];
    let (gs, gf, gb) = &general[1];
    assert_eq!(fs, gs);
    assert_eq!(timeless(ff), timeless(gf), "same fields");
    assert!(
        (ttl(ff) - ttl(gf)).abs() <= 1,
        "the same ttl, a second apart at most"
    );
    assert_eq!(fb, gb, "same body");
    assert!(ff
        .iter()
        .any(|(n, v)| n == "cache-status" && v.starts_with("quire; hit")));
    assert!(ff
        .iter()
        .any(|(n, v)| n == "content-encoding" && v == "gzip"));
    assert!(ff.iter().any(|(n, _)| n == "age"));
    // A matching conditional on the fast path is the general path's 304, field for field.
    let before = q.ctx.metrics.handovers();
    let inm = get_req("/page", "If-None-Match: \"p1\"\r\n");
    let fast304 = exchange(q.addr, inm.clone(), 1).await;
    assert_eq!(
        q.ctx.metrics.handovers(),
        before,
        "answered on the fast path"
    );
    let general304 = exchange(q.addr, to_hyper("/other") + &inm, 2).await;
    assert_eq!(fast304[0].0, 304);
    assert_eq!(general304[1].0, 304);
    assert_eq!(
        timeless(&fast304[0].1),
        timeless(&general304[1].1),
        "same 304 fields"
    );
    assert!(fast304[0].2.is_empty());
    // HEAD on the fast path: the same fields, no body.
    let head = exchange(
        q.addr,
        "HEAD /page HTTP/1.1\r\nHost: site.test\r\nAccept-Encoding: gzip\r\n\r\n".into(),
        1,
    )
    .await;
    assert_eq!(timeless(&head[0].1), timeless(ff));
    assert!(head[0].2.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_are_answered_in_order_across_a_hand_over() {
    let o = Origin::start().await;
    o.route("/a", Route::ok("AAA", &[("cache-control", "max-age=600")]));
    o.route("/b", Route::ok("BBBB", &[("cache-control", "max-age=600")]));
    o.route("/m", Route::ok("MM", &[("cache-control", "no-store")]));
    let q = Quire::start(&o, |_| {}).await;
    exchange(q.addr, get_req("/a", "") + &get_req("/b", ""), 2).await;
    settle(&q).await;
    let before = q.ctx.metrics.handovers();
    // Hits, a miss the service answers on the same connection, hits again; then a
    // hand-over (with the rest of the pipeline) and hits from hyper.
    let reqs = get_req("/a", "")
        + &get_req("/b", "")
        + &get_req("/m", "")
        + &get_req("/a", "")
        + &to_hyper("/b")
        + &get_req("/a", "");
    let got = exchange(q.addr, reqs, 6).await;
    let bodies: Vec<&[u8]> = got.iter().map(|r| &r.2[..]).collect();
    assert_eq!(
        bodies,
        vec![&b"AAA"[..], b"BBBB", b"MM", b"AAA", b"BBBB", b"AAA"]
    );
    assert_eq!(q.ctx.metrics.handovers(), before + 1);
    // A conditional that does not match is a 200 on the fast path; ranged and
    // bypassed requests are the service's, answered without leaving the fast path;
    // HTTP/1.0 is handed over. All are answered.
    for (req, hands_over) in [
        (get_req("/a", "If-None-Match: \"x\"\r\n"), false),
        (get_req("/a", "Range: bytes=0-0\r\n"), false),
        (get_req("/a", "Cookie: session=1\r\n"), false),
        (
            "GET /a HTTP/1.0\r\nHost: site.test\r\n\r\n".to_string(),
            true,
        ),
    ] {
        let before = q.ctx.metrics.handovers();
        let r = exchange(q.addr, req.clone(), 1).await;
        assert!(matches!(r[0].0, 200 | 206), "{req:?} -> {}", r[0].0);
        assert_eq!(
            q.ctx.metrics.handovers(),
            before + u64::from(hands_over),
            "{req:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_pipeline_of_sendfile_hits_is_answered_byte_exact() {
    // With sendfile on, the fast path keeps each body sent that way pinned until the
    // peer acknowledged it, asks the socket every 16 bodies and, past 64, waits for
    // the queue to drain (`fastpath::InFlight`). 300 pipelined hits in one write go
    // through all of that; every answer must be whole and in order.
    let o = Origin::start().await;
    let body = |i: u32| -> Vec<u8> {
        (0..3_000u32)
            .map(|j| (j.wrapping_add(i).wrapping_mul(2_654_435_761) >> 11) as u8)
            .collect()
    };
    for i in 0..4 {
        o.route(
            &format!("/s/{i}"),
            Route::ok(
                body(i),
                &[
                    ("cache-control", "max-age=600"),
                    ("content-type", "application/octet-stream"),
                ],
            ),
        );
    }
    let q = Quire::start(&o, |c| {
        c.sendfile_min_bytes = quire_server::config::ByteSize(1024)
    })
    .await;
    let warm: String = (0..4).map(|i| get_req(&format!("/s/{i}"), "")).collect();
    exchange(q.addr, warm, 4).await;
    settle(&q).await;
    let before = q.ctx.metrics.handovers();
    let n = 300;
    let reqs: String = (0..n)
        .map(|k| get_req(&format!("/s/{}", k % 4), ""))
        .collect();
    let got = exchange(q.addr, reqs, n).await;
    assert_eq!(got.len(), n);
    for (k, (status, fields, b)) in got.iter().enumerate() {
        assert_eq!(*status, 200, "answer {k}");
        assert!(
            fields
                .iter()
                .any(|(n, v)| n == "cache-status" && v.contains("hit")),
            "answer {k}: {fields:?}"
        );
        assert!(
            b[..] == body((k % 4) as u32)[..],
            "answer {k}: body differs"
        );
    }
    assert_eq!(q.ctx.metrics.handovers(), before, "all on the fast path");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(
    clippy::too_many_lines,
    reason = "one differential table: every kind of service answer through both paths"
)]
async fn the_service_answers_written_here_match_hypers() {
    // Misses, pass-throughs, ranges, origin errors and HEADs are the service's; on a
    // fast-path connection `quire_server::h1` writes them. They must be what hyper
    // writes for the same response: same status, same fields (framing included), same
    // body. (Fields that change per response, `date` and `age`, are left out.)
    let o = Origin::start().await;
    let page = page(30_000);
    // Misses of bodies past the hold limit stream as they arrive (smaller ones are
    // committed first and answered from the store, like hits).
    let big = self::page(300_000);
    for (p, body) in [
        ("/page", &page),
        ("/fill-a", &big),
        ("/fill-b", &big),
        ("/held-a", &page),
        ("/held-b", &page),
    ] {
        o.route(
            p,
            Route::ok(
                body.clone(),
                &[
                    ("cache-control", "max-age=600"),
                    ("content-type", "text/html"),
                ],
            ),
        );
    }
    let q = Quire::start(&o, |_| {}).await;
    exchange(q.addr, get_req("/page", ""), 1).await;
    settle(&q).await;
    let strip = |f: &Vec<(String, String)>| {
        f.iter()
            .filter(|(n, _)| n != "age" && n != "date")
            .cloned()
            .collect::<Vec<_>>()
    };
    let cases: [(&str, String, String); 7] = [
        (
            "a miss as its fill streams",
            get_req("/fill-a", ""),
            get_req("/fill-b", ""),
        ),
        (
            "a miss committed before it is answered",
            get_req("/held-a", ""),
            get_req("/held-b", ""),
        ),
        (
            "a bypass passed through",
            get_req("/page", "Cookie: session=1\r\n"),
            get_req("/page", "Cookie: session=1\r\n"),
        ),
        (
            "a range from the cache",
            get_req("/page", "Range: bytes=100-4099\r\n"),
            get_req("/page", "Range: bytes=100-4099\r\n"),
        ),
        (
            "an unsatisfiable range",
            get_req("/page", "Range: bytes=900000-\r\n"),
            get_req("/page", "Range: bytes=900000-\r\n"),
        ),
        (
            "an origin 404",
            get_req("/nothing", ""),
            get_req("/nothing", ""),
        ),
        (
            "a HEAD passed through",
            "HEAD /page HTTP/1.1\r\nHost: site.test\r\nCookie: session=1\r\n\r\n".into(),
            "HEAD /page HTTP/1.1\r\nHost: site.test\r\nCookie: session=1\r\n\r\n".into(),
        ),
    ];
    for (what, fast_req, hyper_req) in cases {
        let head_only = fast_req.starts_with("HEAD");
        let before = q.ctx.metrics.handovers();
        let fast = exchange(q.addr, fast_req, 1).await;
        assert_eq!(q.ctx.metrics.handovers(), before, "{what}: stays here");
        // The same request with a connection-level field goes to hyper.
        let hyper_req = hyper_req.replacen("\r\n\r\n", "\r\nConnection: keep-alive\r\n\r\n", 1);
        let general = exchange(q.addr, hyper_req, 1).await;
        assert_eq!(q.ctx.metrics.handovers(), before + 1, "{what}: via hyper");
        assert_eq!(fast.len(), 1, "{what}: answered");
        assert_eq!(general.len(), 1, "{what}: answered by hyper");
        let ((fs, ff, fb), (gs, gf, gb)) = (&fast[0], &general[0]);
        assert_eq!(fs, gs, "{what}: status");
        assert_eq!(strip(ff), strip(gf), "{what}: fields");
        assert_eq!(fb, gb, "{what}: body");
        assert!(ff.iter().any(|(n, _)| n == "date"), "{what}: a date");
        if !head_only && *fs == 200 {
            let coded = ff
                .iter()
                .any(|(n, v)| n == "content-encoding" && v == "gzip");
            let got = if coded { gunzip(fb) } else { fb.to_vec() };
            let want = if what.contains("streams") {
                &big
            } else {
                &page
            };
            assert!(
                got[..] == want[..],
                "{what}: the page ({} bytes)",
                got.len()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_past_the_fast_paths_field_limit_is_answered_by_hyper() {
    // The fast path parses at most 64 field lines (`HEADERS_MAX`); a longer head is
    // hyper's, within `limits.header_bytes`, and still a hit.
    let o = Origin::start().await;
    o.route("/a", Route::ok("AAA", &[("cache-control", "max-age=600")]));
    let q = Quire::start(&o, |_| {}).await;
    exchange(q.addr, get_req("/a", ""), 1).await;
    settle(&q).await;
    let extra: String = (0..70).map(|i| format!("X-Field-{i}: {i}\r\n")).collect();
    let before = q.ctx.metrics.handovers();
    let got = exchange(q.addr, get_req("/a", &extra), 1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 200);
    assert_eq!(got[0].2, b"AAA");
    assert!(got[0]
        .1
        .iter()
        .any(|(n, v)| n == "cache-status" && v.contains("hit")));
    assert_eq!(q.ctx.metrics.handovers(), before + 1, "handed to hyper");
    // 60 lines more (62 in all) stay within it.
    let extra: String = (0..60).map(|i| format!("X-Field-{i}: {i}\r\n")).collect();
    let before = q.ctx.metrics.handovers();
    let got = exchange(q.addr, get_req("/a", &extra), 1).await;
    assert_eq!(got[0].2, b"AAA");
    assert_eq!(
        q.ctx.metrics.handovers(),
        before,
        "answered on the fast path"
    );
}

/// The fast path parses each request into the field map the connection's last hit
/// left, emptied, and its field values are slices of the connection's read buffer:
/// nothing of one pipelined request may reach the next one's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_field_of_one_request_reaches_the_next_on_the_connection() {
    let o = Origin::start().await;
    let body = page(20_000);
    o.route(
        "/page",
        Route::ok(
            body.clone(),
            &[
                ("cache-control", "max-age=600"),
                ("content-type", "text/html"),
            ],
        ),
    );
    let q = Quire::start(&o, |_| {}).await;
    let warm = exchange(q.addr, get_req("/page", ""), 1).await;
    assert_eq!(warm[0].0, 200);
    settle(&q).await;
    let before = q.ctx.metrics.handovers();
    let plain = "GET /page HTTP/1.1\r\nHost: site.test\r\n\r\n";
    let requests = get_req("/page", "X-One: 1\r\n") + plain + &get_req("/page", "");
    let got = exchange(q.addr, requests, 3).await;
    assert_eq!(q.ctx.metrics.handovers(), before, "all on the fast path");
    assert_eq!(got.len(), 3);
    let field = |r: &Raw, name: &str| r.1.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    for r in &got {
        assert_eq!(r.0, 200);
        assert!(field(r, "cache-status").unwrap().contains("hit"), "{r:?}");
    }
    assert_eq!(field(&got[0], "content-encoding").as_deref(), Some("gzip"));
    assert_eq!(gunzip(&got[0].2), body);
    assert_eq!(
        field(&got[1], "content-encoding"),
        None,
        "no Accept-Encoding left over from the request before"
    );
    assert_eq!(got[1].2, body);
    assert_eq!(field(&got[2], "content-encoding").as_deref(), Some("gzip"));
    assert_eq!(gunzip(&got[2].2), body);
}
