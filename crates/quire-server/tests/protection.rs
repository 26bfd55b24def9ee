//! Protection against clients that cost the origin: cache-busting query strings
//! (`[keys] query`) and per-client request rates (`[rate_limit]`).

use quire_server::config::{QuerySetting, QueryValue};
use quire_testkit::*;

#[tokio::test]
async fn cache_busting_query_strings_make_one_fill_per_page() {
    let origin = Origin::start().await;
    origin.route(
        "/page",
        Route::ok("the page", &[("cache-control", "max-age=600")]),
    );
    for q in ["/search?q=a", "/search?q=b"] {
        origin.route(q, Route::ok("results", &[("cache-control", "max-age=600")]));
    }
    let mut q = Quire::start(&origin, |c| {
        c.keys.query = QuerySetting::ByPrefix(
            [
                ("/".to_owned(), QueryValue::Word("none".into())),
                ("/search".to_owned(), QueryValue::Params(vec!["q".into()])),
            ]
            .into(),
        );
    })
    .await;
    for i in 0..50 {
        let got = send(&q, "GET", &format!("/page?x={i}&cb={}", i * 7), &[], b"").await;
        assert_eq!(got.status, 200);
        assert_eq!(&got.body[..], b"the page");
        settle(&q).await;
    }
    assert_eq!(
        origin.hits("/page"),
        1,
        "one fill for fifty busting query strings"
    );
    // The origin was asked without the query it does not read.
    assert_eq!(origin.seen("/page")[0].uri, "/page");
    // An allowed parameter still makes its own key; the others do not.
    let searches = || {
        let all = origin.seen_all();
        all.iter()
            .filter(|s| s.uri.starts_with("/search"))
            .map(|s| s.uri.clone())
            .collect::<Vec<_>>()
    };
    for target in ["/search?q=a&x=1", "/search?x=2&q=a", "/search?q=b&cb=3"] {
        assert_eq!(
            send(&q, "GET", target, &[], b"").await.status,
            200,
            "{target}"
        );
        settle(&q).await;
    }
    assert_eq!(searches(), ["/search?q=a", "/search?q=b"]);
    q.shutdown().await;
}

/// One client over its budgets gets 429 with `Retry-After`; another client, behind
/// the same trusted proxy, is served as before. Misses and hits have budgets of
/// their own.
#[tokio::test]
async fn rate_limit_a_flooding_client_gets_429_and_others_are_served() {
    let origin = Origin::start().await;
    for i in 0..20 {
        origin.route(
            &format!("/p{i}"),
            Route::ok("page", &[("cache-control", "max-age=600")]),
        );
    }
    let mut q = Quire::start(&origin, |c| {
        c.trusted_proxies = vec!["127.0.0.1".into()];
        c.rate_limit.misses_per_sec = 1.0;
        c.rate_limit.misses_burst = 5;
        c.rate_limit.hits_per_sec = 1.0;
        c.rate_limit.hits_burst = 10;
    })
    .await;
    let from = |ip: &'static str| [("x-forwarded-for", ip)];
    // Misses: five pass, the next is refused before it reaches the origin.
    let mut statuses = Vec::new();
    for i in 0..8 {
        let got = send(&q, "GET", &format!("/p{i}"), &from("192.0.2.1"), b"").await;
        settle(&q).await;
        if got.status == 429 {
            let wait: u64 = got.header("retry-after").unwrap().parse().unwrap();
            assert!((1..=2).contains(&wait), "{wait}");
            assert!(
                got.cache_status().contains("rate-limited"),
                "{}",
                got.cache_status()
            );
        }
        statuses.push(got.status);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 200, 429, 429, 429]);
    assert_eq!(
        origin.seen_all().len(),
        5,
        "refused misses never reach the origin"
    );
    // Hits (the five stored pages) draw on their own budget: ten, then 429 —
    // on the fast path (HTTP/1.1 hits) as through the service.
    let mut hits = 0;
    for i in 0..15 {
        let got = send(&q, "GET", &format!("/p{}", i % 5), &from("192.0.2.1"), b"").await;
        if got.status == 200 {
            assert!(got.cache_status().contains("hit"));
            hits += 1;
        } else {
            assert_eq!(got.status, 429);
        }
    }
    assert_eq!(hits, 10);
    // Another client is not affected.
    let other = send(&q, "GET", "/p6", &from("198.51.100.7"), b"").await;
    assert_eq!(other.status, 200);
    let mut text = String::new();
    q.ctx.limiter.write_metrics(&mut text);
    assert!(
        text.contains("quire_rate_limit_requests_total{class=\"miss\",result=\"limited\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("quire_rate_limit_requests_total{class=\"hit\",result=\"limited\"} 5"),
        "{text}"
    );
    q.shutdown().await;
}
