//! Browser prefetches (`Sec-Purpose: prefetch`) are answered only from the store:
//! a stored page is served, anything else is a 503 at once, and the origin is
//! never asked (no fill, no pass, no background revalidation).

use std::time::Duration;

use quire_testkit::*;

const PREFETCH: (&str, &str) = ("sec-purpose", "prefetch");

#[tokio::test]
async fn a_prefetch_of_a_stored_page_is_a_hit_and_of_anything_else_a_503_that_asks_nothing() {
    let origin = Origin::start().await;
    origin.route(
        "/stored",
        Route::ok("stored", &[("cache-control", "max-age=600")]),
    );
    origin.route(
        "/new",
        Route::ok("new", &[("cache-control", "max-age=600")]),
    );
    origin.route(
        "/private",
        Route::ok("mine", &[("cache-control", "private")]),
    );
    let q = Quire::start(&origin, |_| {}).await;
    assert_eq!(get(&q, "/stored", &[]).await.status, 200);
    settle(&q).await;

    let got = get(&q, "/stored", &[PREFETCH]).await;
    assert_eq!(got.status, 200);
    assert!(got.cache_status().contains("hit"), "{}", got.cache_status());

    for path in ["/new", "/private", "/new?x=1"] {
        let got = get(&q, path, &[PREFETCH]).await;
        assert_eq!(got.status, 503, "{path}");
        assert_eq!(got.header("cache-control"), Some("no-store"), "{path}");
        assert!(got.cache_status().contains("detail=prefetch"), "{path}");
    }
    // A prefetch that would bypass the cache is refused too.
    let got = get(&q, "/new", &[PREFETCH, ("authorization", "Bearer x")]).await;
    assert_eq!(got.status, 503);
    let got = send(&q, "POST", "/new", &[PREFETCH], b"").await;
    assert_eq!(got.status, 503);
    settle(&q).await;
    assert_eq!(
        origin.hits("/new"),
        0,
        "a prefetch never reaches the origin"
    );
    assert_eq!(origin.hits("/private"), 0);
    assert_eq!(q.ctx.metrics.prefetches_refused(), 5);
    // The navigation, when it comes, is an ordinary miss.
    assert_eq!(get(&q, "/new", &[]).await.status, 200);
    assert_eq!(origin.hits("/new"), 1);
}

#[tokio::test]
async fn a_prefetch_of_a_stale_page_is_served_as_stored_without_revalidating_it() {
    let origin = Origin::start().await;
    origin.route(
        "/swr",
        Route::ok(
            "old",
            &[("cache-control", "max-age=10, stale-while-revalidate=600")],
        ),
    );
    origin.route(
        "/expired",
        Route::ok("old", &[("cache-control", "max-age=10")]),
    );
    let q = Quire::start(&origin, |_| {}).await;
    get(&q, "/swr", &[]).await;
    get(&q, "/expired", &[]).await;
    settle(&q).await;
    q.ctx.clock.advance(Duration::from_secs(60));
    // Stale where stale may be served: served, and no revalidation started.
    let got = get(&q, "/swr", &[PREFETCH]).await;
    assert_eq!(got.status, 200);
    assert!(got.cache_status().contains("stale-while-revalidate"));
    // Stale and not servable stale: refused, not revalidated.
    let got = get(&q, "/expired", &[PREFETCH]).await;
    assert_eq!(got.status, 503);
    tokio::time::sleep(Duration::from_millis(300)).await;
    settle(&q).await;
    assert_eq!(origin.hits("/swr"), 1, "a prefetch started no revalidation");
    assert_eq!(origin.hits("/expired"), 1);
    // A reader's request does revalidate.
    get(&q, "/swr", &[]).await;
    assert!(wait_for(|| origin.hits("/swr") == 2).await);
}
