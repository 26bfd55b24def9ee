//! Brotli and zstd are made for an entry on its second read, not at its commit
//! (`fill::deferred`): a crowd of pages read once costs gzip alone.

use quire_testkit::*;

/// An origin answering every path with the same 20 KB HTML page, cacheable.
async fn pages() -> Origin {
    let o = Origin::start().await;
    o.fallback(Route::ok(
        page(20_000),
        &[
            ("cache-control", "max-age=600"),
            ("content-type", "text/html"),
        ],
    ));
    o
}

/// The count of `quire_deferred_codings_total` for `result` in `metrics`.
fn deferred(metrics: &str, result: &str) -> f64 {
    metric(
        metrics,
        &format!("quire_deferred_codings_total{{result=\"{result}\"}}"),
    )
}

/// quire (with `tweak`) on a volume in `dir` that stored `/kept` (gzip), stopped and
/// started again on the same volume and address (the host a page is keyed under is
/// the one it was asked of).
async fn stored_then_restarted(
    o: &Origin,
    dir: &tempfile::TempDir,
    tweak: impl Fn(&mut quire_server::config::Config),
) -> Quire {
    let volume = dir.path().join("kept.vol");
    let at = |c: &mut quire_server::config::Config| {
        c.cache.path = volume.clone();
        tweak(c);
    };
    let mut q = Quire::start(o, at).await;
    let stored = get(&q, "/kept", &[("accept-encoding", "gzip")]).await;
    assert_eq!(stored.status, 200);
    settle(&q).await;
    let addr = q.addr;
    q.shutdown().await;
    drop(q);
    Quire::start(o, |c| {
        at(c);
        c.listen = addr;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crowd_of_pages_read_once_costs_no_slow_codings() {
    let o = pages().await;
    let q = Quire::start(&o, |_| {}).await;
    for i in 0..40 {
        let r = get(
            &q,
            &format!("/crowd/{i}"),
            &[("accept-encoding", "br, gzip")],
        )
        .await;
        assert_eq!(r.status, 200);
    }
    settle(&q).await;
    let m = metrics_text(&q).await;
    assert_eq!(deferred(&m, "deferred"), 40.0);
    assert_eq!(deferred(&m, "queued"), 0.0, "no page was read twice");
    assert_eq!(metric(&m, "quire_deferred_codings_waiting"), 40.0);

    // The second read of one page is served what the commit made, and asks for more.
    let second = get(&q, "/crowd/7", &[("accept-encoding", "br, gzip")]).await;
    assert!(
        second.cache_status().contains("hit"),
        "{}",
        second.cache_status()
    );
    assert_eq!(second.header("content-encoding"), Some("gzip"));
    settle(&q).await;
    let third = get(&q, "/crowd/7", &[("accept-encoding", "br, gzip")]).await;
    assert_eq!(third.header("content-encoding"), Some("br"));
    assert_eq!(decode("br", &third.body), page(20_000));
    let zstd = get(&q, "/crowd/7", &[("accept-encoding", "zstd")]).await;
    assert_eq!(zstd.header("content-encoding"), Some("zstd"));
    assert_eq!(decode("zstd", &zstd.body), page(20_000));
    // Once per version: the later reads queued nothing more.
    let m = metrics_text(&q).await;
    assert_eq!(deferred(&m, "queued"), 1.0);
    assert_eq!(metric(&m, "quire_deferred_codings_waiting"), 39.0);
    // A page read once still has gzip and identity, and nothing else.
    let once = get(&q, "/crowd/8", &[("accept-encoding", "zstd")]).await;
    assert_eq!(once.header("content-encoding"), None);
    assert_eq!(once.body, page(20_000));
}

/// What waited for a second read is lost with the process; a page stored before a
/// restart and read after it is recovered from its own record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_stored_before_a_restart_gets_its_slow_codings_on_a_read_after_it() {
    let o = pages().await;
    let dir = tempfile::tempdir().unwrap();
    let q = stored_then_restarted(&o, &dir, |_| {}).await;
    let first = get(&q, "/kept", &[("accept-encoding", "br, gzip")]).await;
    assert!(
        first.cache_status().contains("hit"),
        "{}",
        first.cache_status()
    );
    assert_eq!(first.header("content-encoding"), Some("gzip"));
    settle(&q).await;
    let then = get(&q, "/kept", &[("accept-encoding", "br, gzip")]).await;
    assert_eq!(then.header("content-encoding"), Some("br"));
    assert_eq!(decode("br", &then.body), page(20_000));
    let m = metrics_text(&q).await;
    assert_eq!(deferred(&m, "recovered"), 1.0);
    assert_eq!(
        deferred(&m, "queued"),
        0.0,
        "nothing waited across the restart"
    );
    assert_eq!(
        o.hits("/kept"),
        1,
        "served from the volume kept across the restart"
    );
}

/// With brotli and zstd both off, a page read (here, stored before a restart and read
/// after it) queues no job: there is nothing for one to make (each had cost the
/// compression pool two decodes and a copy of the body, on every page's first read).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_job_is_queued_for_codings_that_are_off() {
    let o = pages().await;
    let dir = tempfile::tempdir().unwrap();
    let q = stored_then_restarted(&o, &dir, |c| {
        c.encodings.br = false;
        c.encodings.zstd = false;
    })
    .await;
    for _ in 0..3 {
        let r = get(&q, "/kept", &[("accept-encoding", "br, zstd, gzip")]).await;
        assert!(r.cache_status().contains("hit"), "{}", r.cache_status());
        assert_eq!(r.header("content-encoding"), Some("gzip"));
        assert_eq!(decode("gzip", &r.body), page(20_000));
    }
    settle(&q).await;
    let m = metrics_text(&q).await;
    assert_eq!(
        deferred(&m, "recovered"),
        0.0,
        "nothing to make, nothing queued"
    );
    assert_eq!(deferred(&m, "refused"), 0.0);
    assert_eq!(
        o.hits("/kept"),
        1,
        "served from the volume kept across the restart"
    );
}
