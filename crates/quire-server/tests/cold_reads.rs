//! A hit whose entry is not in memory (a volume bigger than the memory quire may
//! use) is read in off the request workers, then served whole: through the fast path
//! and through hyper, with no second trip to the origin.

use quire_server::config::Residency;
use quire_testkit::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hit_on_a_paged_out_entry_is_read_in_off_the_worker_and_served_whole() {
    let o = Origin::start().await;
    let body = page(200_000);
    o.route(
        "/cold",
        Route::ok(
            body.clone(),
            &[
                ("cache-control", "max-age=600"),
                ("content-type", "application/octet-stream"),
            ],
        ),
    );
    let q = Quire::start(&o, |c| c.cache.residency = Residency::Always).await;
    get(&q, "/cold", &[]).await;
    settle(&q).await;
    assert!(get(&q, "/cold", &[]).await.cache_status().contains("hit"));
    assert_eq!(q.ctx.metrics.cold_reads(), 0, "just written: in memory");
    for round in 1..=3 {
        q.ctx.store.page_out().unwrap();
        let r = get(&q, "/cold", &[]).await;
        assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
        assert_eq!(r.body, body, "round {round}: the whole body");
        assert_eq!(q.ctx.metrics.cold_reads(), round, "read in off the worker");
    }
    assert_eq!(o.hits("/cold"), 1, "never refetched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_checks_off_a_paged_out_entry_is_read_where_it_is_asked_for() {
    let o = Origin::start().await;
    o.route(
        "/warm",
        Route::ok(
            page(50_000),
            &[
                ("cache-control", "max-age=600"),
                ("content-type", "application/octet-stream"),
            ],
        ),
    );
    let q = Quire::start(&o, |c| c.cache.residency = Residency::Never).await;
    get(&q, "/warm", &[]).await;
    settle(&q).await;
    q.ctx.store.page_out().unwrap();
    let r = get(&q, "/warm", &[]).await;
    assert!(r.cache_status().contains("hit"));
    assert_eq!(r.body, page(50_000));
    assert_eq!(q.ctx.metrics.cold_reads(), 0);
}

/// Cold reads hold one of a fixed number of slots each: with every slot taken, a
/// cold hit waits, reading nothing, and is answered once one frees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cold_reads_past_their_limit_wait_for_a_slot() {
    let o = Origin::start().await;
    o.route(
        "/slot",
        Route::ok(
            page(100_000),
            &[
                ("cache-control", "max-age=600"),
                ("content-type", "application/octet-stream"),
            ],
        ),
    );
    let q = Quire::start(&o, |c| c.cache.residency = Residency::Always).await;
    get(&q, "/slot", &[]).await;
    settle(&q).await;
    q.ctx.store.page_out().unwrap();
    let slots = q.ctx.cold_reads.available_permits();
    assert!(slots > 0);
    let held = q
        .ctx
        .cold_reads
        .clone()
        .acquire_many_owned(slots as u32)
        .await
        .unwrap();
    let waiting =
        tokio::time::timeout(std::time::Duration::from_millis(500), get(&q, "/slot", &[]));
    assert!(waiting.await.is_err(), "no slot: the cold hit waits");
    assert_eq!(q.ctx.metrics.cold_reads(), 0, "nothing read without a slot");
    drop(held);
    let r = get(&q, "/slot", &[]).await;
    assert_eq!(r.body, page(100_000));
    // The request the client gave up on was still waiting server side: it reads too.
    assert!((1..=2).contains(&q.ctx.metrics.cold_reads()));
}
