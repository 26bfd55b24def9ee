//! Configuration reload (`Ctx::reload`, what `SIGHUP` calls): new settings apply to
//! requests that start after it, a request in flight finishes under the settings
//! it started with, and an invalid configuration changes nothing.

use std::time::Duration;

use quire_server::config::ByteSize;
use quire_testkit::*;

fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

async fn metrics_status(q: &Quire, token: &str) -> u16 {
    let auth = bearer(token);
    send(
        q,
        "GET",
        "/_quire/metrics",
        &[("authorization", &auth)],
        b"",
    )
    .await
    .status
}

#[tokio::test]
async fn a_reload_applies_to_new_requests_and_an_invalid_one_changes_nothing() {
    let origin = Origin::start().await;
    let mut q = Quire::start(&origin, |_| {}).await;
    assert_eq!(metrics_status(&q, TOKEN).await, 200);

    let new_token = "another-admin-token-9876543210";
    let mut cfg = q.ctx.policy().cfg.clone();
    cfg.admin_token = Some(new_token.into());
    let r = q.ctx.reload(cfg.clone()).unwrap();
    assert!(r.needs_restart.is_empty(), "{:?}", r.needs_restart);
    assert_eq!(metrics_status(&q, new_token).await, 200);
    assert_eq!(metrics_status(&q, TOKEN).await, 401);

    // Invalid: refused as a whole, the running settings stay.
    let mut bad = cfg.clone();
    bad.admin_token = Some("short".into());
    bad.storage.heuristic_fraction = 0.5;
    let err = q.ctx.reload(bad).unwrap_err().to_string();
    assert!(err.contains("admin_token"), "{err}");
    assert_eq!(metrics_status(&q, new_token).await, 200);
    assert_eq!(
        q.ctx.policy().cfg.storage.heuristic_fraction,
        cfg.storage.heuristic_fraction
    );

    // What the server sized at start-up is reported, the rest applied.
    let mut sized = cfg.clone();
    sized.limits.connections = 7;
    sized.cache.size = ByteSize(sized.cache.size.0 * 2);
    sized.storage.store_private = true;
    let r = q.ctx.reload(sized).unwrap();
    assert_eq!(r.needs_restart, vec!["cache", "limits.connections"]);
    assert!(q.ctx.policy().cfg.storage.store_private);
    let mut text = String::new();
    q.ctx.reloads.write_metrics(&mut text);
    assert!(
        text.contains("quire_config_reloads_total{result=\"ok\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("quire_config_reloads_total{result=\"failed\"} 1"),
        "{text}"
    );
    q.shutdown().await;
}

/// A fill that started before a reload is stored under the settings it started
/// with: a limit lowered meanwhile does not turn it away.
#[tokio::test]
async fn a_fill_in_flight_finishes_under_the_settings_it_started_with() {
    let origin = Origin::start().await;
    let body = vec![b'x'; 64 << 10];
    origin.route(
        "/big",
        Route::ok(body.clone(), &[("cache-control", "max-age=600")])
            .delay(Duration::from_millis(400)),
    );
    let mut q = Quire::start(&origin, |_| {}).await;
    let url = q.url("/big");
    let first = tokio::spawn(async move {
        let resp = client().get(url.parse().unwrap()).await.unwrap();
        resp.status().as_u16()
    });
    assert!(
        wait_for(|| origin.hits("/big") == 1).await,
        "the fill started"
    );
    let mut cfg = q.ctx.policy().cfg.clone();
    cfg.limits.object_bytes = ByteSize(1024);
    q.ctx.reload(cfg).unwrap();
    assert_eq!(first.await.unwrap(), 200);
    settle(&q).await;
    let again = send(&q, "GET", "/big", &[], b"").await;
    assert!(
        again.cache_status().contains("hit"),
        "{}",
        again.cache_status()
    );
    assert_eq!(again.body.len(), body.len());
    assert_eq!(origin.hits("/big"), 1);

    // A fill that starts now is under the lowered limit: not stored.
    origin.route(
        "/big2",
        Route::ok(body, &[("cache-control", "max-age=600")]),
    );
    send(&q, "GET", "/big2", &[], b"").await;
    settle(&q).await;
    let again = send(&q, "GET", "/big2", &[], b"").await;
    assert!(
        !again.cache_status().contains("hit"),
        "{}",
        again.cache_status()
    );
    assert_eq!(origin.hits("/big2"), 2);
    q.shutdown().await;
}

/// A reload that moves the access log: lines of requests after it go to the new
/// file, and the old log writes what it had before its writer ends.
#[tokio::test]
async fn a_reload_can_move_the_access_log() {
    let origin = Origin::start().await;
    origin.route("/a", Route::ok("a", &[("cache-control", "max-age=60")]));
    origin.route("/b", Route::ok("b", &[("cache-control", "max-age=60")]));
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("one.log"), dir.path().join("two.log"));
    let f = first.clone();
    let mut q = Quire::start(&origin, move |c| c.log.access = Some(f)).await;
    assert_eq!(send(&q, "GET", "/a", &[], b"").await.status, 200);
    let mut cfg = q.ctx.policy().cfg.clone();
    cfg.log.access = Some(second.clone());
    q.ctx.reload(cfg).unwrap();
    assert_eq!(send(&q, "GET", "/b", &[], b"").await.status, 200);
    q.shutdown().await;
    let lines = |p: &std::path::Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert!(
        wait_for(|| lines(&first) == 1).await,
        "the old log wrote its line"
    );
    assert_eq!(lines(&second), 1);
    assert!(std::fs::read_to_string(&second)
        .unwrap()
        .contains("GET /b "));
}

/// Stored under one `[keys]` (the query kept), purged under another (the query
/// dropped: the purge names `/page`, not the stored `/page?v=1`), then the first
/// reloaded again: the old version must not come back as a hit.
#[tokio::test]
async fn a_purge_under_one_key_config_holds_after_reverting_to_another() {
    use quire_server::config::{QuerySetting, QueryValue};
    let origin = Origin::start().await;
    let page = |body: &str| Route::ok(body, &[("cache-control", "max-age=600")]);
    origin.route("/page?v=1", page("version 1"));
    let mut q = Quire::start(&origin, |_| {}).await;
    let a = q.ctx.policy().cfg.clone();
    assert_eq!(get(&q, "/page?v=1", &[]).await.body, "version 1");
    settle(&q).await;
    assert!(get(&q, "/page?v=1", &[])
        .await
        .cache_status()
        .contains("hit"));

    let mut b = a.clone();
    b.keys.query = QuerySetting::One(QueryValue::Word("none".into()));
    q.ctx.reload(b).unwrap();
    origin.route("/page?v=1", page("version 2"));
    origin.route("/page", page("version 2"));
    let auth = bearer(TOKEN);
    let purged = send(&q, "PURGE", "/page?v=1", &[("authorization", &auth)], b"").await;
    assert_eq!(purged.status, 200, "{:?}", purged.body);

    q.ctx.reload(a.clone()).unwrap();
    let got = get(&q, "/page?v=1", &[]).await;
    assert_eq!(got.body, "version 2", "{}", got.cache_status());
    assert!(
        !got.cache_status().contains("hit"),
        "{}",
        got.cache_status()
    );
    // The same scheme kept across a reload keeps its epoch: hits stay hits.
    settle(&q).await;
    q.ctx.reload(a).unwrap();
    assert!(get(&q, "/page?v=1", &[])
        .await
        .cache_status()
        .contains("hit"));
    q.shutdown().await;
}
