//! Refresh-ahead (`[storage] refresh_ahead`): a hit in the last share of its
//! lifetime starts one background revalidation, so a popular response is renewed
//! before it expires, never at a reader's cost; it never waits for a budget slot.
//! The server's clock is moved, not waited on.

use std::time::Duration;

use quire_server::config::Secs;
use quire_testkit::*;

fn stored(origin: &Origin, path: &str) {
    origin.route(
        path,
        Route::ok("hot page", &[("cache-control", "max-age=100")]).etag("\"v1\""),
    );
}

#[tokio::test]
async fn refresh_ahead_renews_a_hot_entry_before_it_expires() {
    let origin = Origin::start().await;
    stored(&origin, "/hot");
    let mut q = Quire::start(&origin, |_| {}).await;
    assert_eq!(get(&q, "/hot", &[]).await.status, 200);
    settle(&q).await;
    // Half-way through its life: a plain hit, nothing asked of the origin.
    q.ctx.clock.advance(Duration::from_secs(50));
    let got = get(&q, "/hot", &[]).await;
    assert!(got.cache_status().contains("hit"), "{}", got.cache_status());
    settle(&q).await;
    assert_eq!(origin.hits("/hot"), 1);
    // In its last tenth: still a fresh hit for the reader, and one revalidation,
    // whose 304 brings a field the stored head takes (RFC 9111 §4.3.4).
    origin.route(
        "/hot",
        Route::ok(
            "hot page",
            &[("cache-control", "max-age=100"), ("x-edition", "2")],
        )
        .etag("\"v1\""),
    );
    q.ctx.clock.advance(Duration::from_secs(45));
    let got = get(&q, "/hot", &[]).await;
    assert_eq!(got.status, 200);
    assert!(got.cache_status().contains("hit"), "{}", got.cache_status());
    assert!(
        !got.cache_status().contains("stale"),
        "{}",
        got.cache_status()
    );
    assert_eq!(
        got.header("x-edition"),
        None,
        "the reader got the stored copy"
    );
    assert!(
        wait_for(|| origin.hits("/hot") == 2).await,
        "no refresh-ahead"
    );
    settle(&q).await;
    let seen = origin.seen("/hot");
    assert_eq!(
        seen[1]
            .headers
            .get("if-none-match")
            .map(|v| v.to_str().unwrap()),
        Some("\"v1\""),
        "the refresh revalidates"
    );
    assert_eq!(q.ctx.metrics.refresh_ahead_started(), 1);
    // The entry was renewed: the next hit is the refreshed head, with no trip. (The
    // test origin's `Date` is the real clock, not the advanced one, so the renewed
    // entry's age is not checked here; a 304's refresh of the timing is
    // `fill_path`'s.)
    let got = get(&q, "/hot", &[]).await;
    assert!(got.cache_status().contains("hit"), "{}", got.cache_status());
    assert_eq!(got.header("x-edition"), Some("2"), "{:?}", got.headers);
    settle(&q).await;
    assert_eq!(origin.hits("/hot"), 2);
    q.shutdown().await;
}

#[tokio::test]
async fn refresh_ahead_never_waits_for_a_budget_slot_and_can_be_turned_off() {
    let origin = Origin::start().await;
    stored(&origin, "/hot");
    origin.route(
        "/slow",
        Route::ok("slow", &[("cache-control", "max-age=100")]).delay(Duration::from_secs(2)),
    );
    let mut q = Quire::start(&origin, |c| {
        c.budget.slots = 1;
        c.limits.origin_read_timeout = Secs(Duration::from_secs(10));
    })
    .await;
    assert_eq!(get(&q, "/hot", &[]).await.status, 200);
    settle(&q).await;
    // The only slot is held by a slow miss: the due hit is served, and skips its
    // refresh rather than queue for the slot.
    let url = q.url("/slow");
    let slow = tokio::spawn(async move { client().get(url.parse().unwrap()).await });
    assert!(wait_for(|| q.ctx.budget.load().0 == 1).await);
    q.ctx.clock.advance(Duration::from_secs(95));
    let got = get(&q, "/hot", &[]).await;
    assert!(got.cache_status().contains("hit"), "{}", got.cache_status());
    assert_eq!(q.ctx.metrics.refresh_ahead_started(), 0);
    let _ = slow.await;
    settle(&q).await;
    assert_eq!(
        origin.hits("/hot"),
        1,
        "no refresh while the budget was full"
    );
    q.shutdown().await;

    let origin = Origin::start().await;
    stored(&origin, "/hot");
    let mut q = Quire::start(&origin, |c| c.storage.refresh_ahead = 0.0).await;
    assert_eq!(get(&q, "/hot", &[]).await.status, 200);
    settle(&q).await;
    q.ctx.clock.advance(Duration::from_secs(95));
    assert!(get(&q, "/hot", &[]).await.cache_status().contains("hit"));
    settle(&q).await;
    assert_eq!(origin.hits("/hot"), 1, "refresh_ahead = 0 is off");
    q.shutdown().await;
}

/// An origin that is down when the refresh is due is asked once for the record, not
/// on every hit in the window; the hits stay fresh hits.
#[tokio::test]
async fn refresh_ahead_is_tried_once_per_record_even_when_it_fails() {
    let origin = Origin::start().await;
    stored(&origin, "/hot");
    let mut q = Quire::start(&origin, |_| {}).await;
    assert_eq!(get(&q, "/hot", &[]).await.status, 200);
    settle(&q).await;
    origin.stop();
    q.ctx.clock.advance(Duration::from_secs(95));
    for _ in 0..20 {
        let got = get(&q, "/hot", &[]).await;
        assert!(got.cache_status().contains("hit"), "{}", got.cache_status());
        settle(&q).await;
    }
    assert_eq!(
        q.ctx.metrics.refresh_ahead_started(),
        1,
        "one try for the record"
    );
    q.shutdown().await;
}
