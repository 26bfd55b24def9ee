//! Refill after purge: a hard purge that asks for it (`"refill": true`,
//! `Quire-Refill: 1`, or `storage.refill_after_purge`) fetches again, in the
//! background, the purged URLs that readers hit lately, so the next reader gets a
//! hit of the new version; URLs nobody read are left for a reader to fill.

use quire_testkit::*;

fn page(origin: &Origin, path: &str, body: &str) {
    origin.route(path, Route::ok(body, &[("cache-control", "max-age=600")]));
}

async fn purge_json(q: &Quire, json: &str) -> Got {
    send(
        q,
        "POST",
        "/_quire/purge",
        &[
            ("authorization", &format!("Bearer {TOKEN}")),
            ("content-type", "application/json"),
        ],
        json.as_bytes(),
    )
    .await
}

/// `PURGE path` with the admin token and `fields`.
async fn purge_method(q: &Quire, path: &str, fields: &[(&str, &str)]) -> Got {
    let auth = format!("Bearer {TOKEN}");
    let mut all = vec![("authorization", auth.as_str())];
    all.extend_from_slice(fields);
    send(q, "PURGE", path, &all, b"").await
}

/// Stores `/blog/hot` (read twice since) and `/blog/cold` (never read since).
async fn hot_and_cold(origin: &Origin, q: &Quire) {
    page(origin, "/blog/hot", "hot v1");
    page(origin, "/blog/cold", "cold v1");
    for path in ["/blog/hot", "/blog/hot", "/blog/hot", "/blog/cold"] {
        assert_eq!(get(q, path, &[]).await.status, 200);
        settle(q).await;
    }
    assert_eq!(origin.hits("/blog/hot"), 1, "stored, then two hits");
    assert_eq!(origin.hits("/blog/cold"), 1);
}

#[tokio::test]
async fn a_refill_purge_fetches_the_hot_urls_again_and_leaves_the_cold_ones() {
    let origin = Origin::start().await;
    let q = Quire::start(&origin, |_| {}).await;
    hot_and_cold(&origin, &q).await;
    page(&origin, "/blog/hot", "hot v2");
    let prefix = format!("{{\"prefixes\":[\"{}\"],\"refill\":true}}", q.url("/blog/"));
    let got = purge_json(&q, &prefix).await;
    assert_eq!(got.status, 200, "{:?}", got.body);
    let answer: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(answer["purged"], 2, "{answer}");
    assert_eq!(answer["refill"], 1, "only the hot URL is queued: {answer}");
    assert!(
        wait_for(|| origin.hits("/blog/hot") == 2).await,
        "the hot URL was not fetched again"
    );
    settle(&q).await;
    let got = get(&q, "/blog/hot", &[]).await;
    assert!(got.cache_status().contains("hit"), "{}", got.cache_status());
    assert_eq!(
        &got.body[..],
        b"hot v2",
        "the refill stored the new version"
    );
    assert_eq!(origin.hits("/blog/hot"), 2);
    assert_eq!(origin.hits("/blog/cold"), 1, "nobody read it: not refilled");
    let got = get(&q, "/blog/cold", &[]).await;
    assert!(
        !got.cache_status().contains("hit"),
        "{}",
        got.cache_status()
    );
}

#[tokio::test]
async fn without_refill_a_purge_fetches_nothing() {
    let origin = Origin::start().await;
    let q = Quire::start(&origin, |_| {}).await;
    hot_and_cold(&origin, &q).await;
    let got = purge_json(&q, &format!("{{\"urls\":[\"{}\"]}}", q.url("/blog/hot"))).await;
    assert_eq!(got.status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(answer["refill"], 0, "{answer}");
    // The refill of the test above is seen within milliseconds; wait far longer.
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    settle(&q).await;
    assert_eq!(origin.hits("/blog/hot"), 1, "nothing asked of the origin");
}

#[tokio::test]
async fn refill_after_purge_by_default_and_the_purge_method_can_refuse_it() {
    let origin = Origin::start().await;
    let q = Quire::start(&origin, |c| c.storage.refill_after_purge = true).await;
    hot_and_cold(&origin, &q).await;
    // The configured default refills...
    let got = purge_method(&q, "/blog/hot", &[]).await;
    assert_eq!(got.status, 200);
    assert!(
        wait_for(|| origin.hits("/blog/hot") == 2).await,
        "the default did not refill"
    );
    settle(&q).await;
    // (read twice, so hot again)
    get(&q, "/blog/hot", &[]).await;
    get(&q, "/blog/hot", &[]).await;
    // ...unless the purge says not to.
    let got = purge_method(&q, "/blog/hot", &[("quire-refill", "0")]).await;
    assert_eq!(got.status, 200);
    let answer: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    assert_eq!(answer["refill"], 0, "{answer}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    settle(&q).await;
    assert_eq!(origin.hits("/blog/hot"), 2);
}

#[tokio::test]
async fn refill_with_a_soft_purge_or_a_bad_field_is_refused_and_purges_nothing() {
    let origin = Origin::start().await;
    let q = Quire::start(&origin, |_| {}).await;
    hot_and_cold(&origin, &q).await;
    let url = q.url("/blog/hot");
    let got = purge_json(
        &q,
        &format!("{{\"urls\":[\"{url}\"],\"soft\":true,\"refill\":true}}"),
    )
    .await;
    assert_eq!(got.status, 400);
    let got = purge_method(&q, "/blog/hot", &[("quire-refill", "yes")]).await;
    assert_eq!(got.status, 400);
    let got = purge_method(
        &q,
        "/blog/hot",
        &[("quire-refill", "1"), ("quire-soft-purge", "1")],
    )
    .await;
    assert_eq!(got.status, 400);
    let got = get(&q, "/blog/hot", &[]).await;
    assert!(got.cache_status().contains("hit"), "still stored");
}
