//! Several origins (`[[origins]]`) end to end, with real origins on loopback
//! sockets: weights, routing by host and path prefix, trying the next origin,
//! active and passive health checks, `stale-if-error` over a down pool, and the
//! per-origin connection limit.

use std::time::Duration;

use quire_server::config::Secs;
use quire_server::origins::OriginEntry;
use quire_server::Config;
use quire_testkit::{get, page, send, settle, wait_for, Origin, Quire, Route};

/// An address nothing listens on (connections are refused).
fn dead_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

fn use_origins(cfg: &mut Config, entries: Vec<OriginEntry>) {
    cfg.origin = None;
    cfg.origins = entries;
}

fn entry(url: &str, f: impl FnOnce(&mut OriginEntry)) -> OriginEntry {
    let mut e = OriginEntry::new(url);
    f(&mut e);
    e
}

fn metrics(q: &Quire) -> String {
    let mut s = String::new();
    q.ctx.origin.metrics(&mut s);
    s
}

fn origin_up(q: &Quire, url: &str) -> bool {
    metrics(q).contains(&format!("quire_origin_up{{origin=\"{url}\"}} 1\n"))
}

const NO_STORE: [(&str, &str); 1] = [("cache-control", "no-store")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weights_share_requests_between_the_origins_of_a_pool() {
    let (a, b) = (Origin::start().await, Origin::start().await);
    for o in [&a, &b] {
        o.route("/w", Route::ok("w", &NO_STORE));
    }
    let (ua, ub) = (a.url(), b.url());
    let q = Quire::start(&a, |c| {
        use_origins(
            c,
            vec![entry(&ua, |e| e.weight = 3), entry(&ub, |e| e.weight = 1)],
        )
    })
    .await;
    for _ in 0..40 {
        assert_eq!(get(&q, "/w", &[]).await.status, 200);
    }
    assert_eq!((a.hits("/w"), b.hits("/w")), (30, 10));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_go_by_host_first_then_by_longest_path_prefix() {
    let (site, api, blog) = (
        Origin::start().await,
        Origin::start().await,
        Origin::start().await,
    );
    for o in [&site, &api, &blog] {
        for p in ["/", "/api/v1", "/apiary"] {
            o.route(p, Route::ok("x", &NO_STORE));
        }
    }
    let (us, ua, ub) = (site.url(), api.url(), blog.url());
    let q = Quire::start(&site, |c| {
        use_origins(
            c,
            vec![
                entry(&us, |_| {}),
                entry(&ua, |e| e.path_prefix = "/api".into()),
                entry(&ub, |e| e.hosts = vec!["blog.example".into()]),
            ],
        )
    })
    .await;
    let host = |h: &'static str| [("host", h)];
    get(&q, "/", &host("www.example")).await;
    get(&q, "/api/v1", &host("www.example")).await;
    get(&q, "/apiary", &host("www.example")).await;
    get(&q, "/api/v1", &host("Blog.Example")).await;
    assert_eq!(site.hits("/"), 1);
    assert_eq!(site.hits("/apiary"), 1, "a prefix matches whole segments");
    assert_eq!(api.hits("/api/v1"), 1);
    assert_eq!(blog.hits("/api/v1"), 1, "the host decides before the path");
    assert_eq!(
        api.hits("/apiary") + blog.hits("/") + site.hits("/api/v1"),
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_no_origin_takes_is_a_502_naming_its_host() {
    let a = Origin::start().await;
    a.route("/", Route::ok("a", &NO_STORE));
    let ua = a.url();
    let q = Quire::start(&a, |c| {
        use_origins(c, vec![entry(&ua, |e| e.hosts = vec!["a.example".into()])])
    })
    .await;
    assert_eq!(get(&q, "/", &[("host", "a.example")]).await.status, 200);
    let r = get(&q, "/", &[("host", "b.example")]).await;
    assert_eq!(r.status, 502);
    assert_eq!(a.hits("/"), 1);
    assert!(metrics(&q).contains("quire_origins_unrouted_total 1\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_connection_goes_to_the_next_origin_and_marks_the_dead_one_down() {
    let b = Origin::start().await;
    b.route("/r", Route::ok("b", &NO_STORE));
    let (dead, ub) = (dead_url(), b.url());
    let d = dead.clone();
    let q = Quire::start(&b, |c| {
        use_origins(
            c,
            vec![
                entry(&d, |e| e.health_interval = Secs(Duration::from_secs(60))),
                entry(&ub, |_| {}),
            ],
        )
    })
    .await;
    for i in 0..20 {
        let r = get(&q, "/r", &[]).await;
        assert_eq!((i, r.status), (i, 200), "no request fails");
    }
    assert_eq!(b.hits("/r"), 20);
    assert!(!origin_up(&q, &dead), "{}", metrics(&q));
    let m = metrics(&q);
    // The dead origin was scheduled for half the requests until it was marked
    // down after its third failure: three retries, then none.
    assert!(m.contains("quire_origins_retries_total 3\n"), "{m}");
    assert!(m.contains(&format!(
        "quire_origin_marked_down_total{{origin=\"{dead}\"}} 1\n"
    )));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_is_never_sent_to_a_second_origin() {
    let (a, b) = (Origin::start().await, Origin::start().await);
    for o in [&a, &b] {
        o.route(
            "/form",
            Route::ok("ok", &NO_STORE).delay(Duration::from_secs(3)),
        );
    }
    let (ua, ub) = (a.url(), b.url());
    let q = Quire::start(&a, |c| {
        use_origins(c, vec![entry(&ua, |_| {}), entry(&ub, |_| {})]);
    })
    .await;
    // quire's read timeout is 2 s in the test kit: the first origin got the POST
    // and timed out; it may have acted on it, so nobody else is asked.
    let r = send(&q, "POST", "/form", &[], b"x=1").await;
    assert_eq!(r.status, 504);
    assert_eq!(a.hits("/form") + b.hits("/form"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_that_times_out_is_answered_by_the_next_origin() {
    let (a, b) = (Origin::start().await, Origin::start().await);
    a.route("/g", Route::ok("late", &[]).delay(Duration::from_secs(3)));
    b.route(
        "/g",
        Route::ok("from b", &[("cache-control", "max-age=60")]),
    );
    let (ua, ub) = (a.url(), b.url());
    let q = Quire::start(&a, |c| {
        use_origins(c, vec![entry(&ua, |_| {}), entry(&ub, |_| {})]);
    })
    .await;
    let r = get(&q, "/g", &[]).await;
    assert_eq!((r.status, &r.body[..]), (200, &b"from b"[..]));
    assert_eq!((a.hits("/g"), b.hits("/g")), (1, 1));
    settle(&q).await;
    assert_eq!(get(&q, "/g", &[]).await.body, "from b", "and it was stored");
    assert_eq!(b.hits("/g"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_active_check_marks_an_origin_down_and_back_up() {
    let (a, b) = (Origin::start().await, Origin::start().await);
    for o in [&a, &b] {
        o.route("/p", Route::ok("p", &NO_STORE));
        o.route("/healthz", Route::ok("ok", &[]));
    }
    let (ua, ub) = (a.url(), b.url());
    let check = |e: &mut OriginEntry| {
        e.health_path = Some("/healthz".into());
        e.health_interval = Secs(Duration::from_millis(100));
    };
    let q = Quire::start(&a, |c| {
        use_origins(c, vec![entry(&ua, check), entry(&ub, check)])
    })
    .await;
    assert!(wait_for(|| a.hits("/healthz") >= 2).await, "checks run");
    let seen = a.seen("/healthz");
    assert_eq!(seen[0].headers["user-agent"], "quire-health-check");
    a.route("/healthz", Route::ok("sick", &[]).status(503));
    assert!(
        wait_for(|| !origin_up(&q, &ua)).await,
        "one failed check marks it down"
    );
    let before = a.hits("/p");
    for _ in 0..10 {
        assert_eq!(get(&q, "/p", &[]).await.status, 200);
    }
    assert_eq!(a.hits("/p"), before, "a down origin gets no request");
    a.route("/healthz", Route::ok("ok", &[]));
    assert!(
        wait_for(|| origin_up(&q, &ua)).await,
        "a passing check brings it back"
    );
    for _ in 0..10 {
        get(&q, "/p", &[]).await;
    }
    assert_eq!(a.hits("/p"), before + 5, "and it takes its share again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_if_error_covers_a_pool_whose_every_origin_is_down() {
    let a = Origin::start().await;
    a.route(
        "/e",
        Route::ok(
            page(500),
            &[("cache-control", "max-age=1, stale-if-error=60")],
        ),
    );
    a.route("/healthz", Route::ok("ok", &[]));
    let ua = a.url();
    let q = Quire::start(&a, |c| {
        use_origins(
            c,
            vec![entry(&ua, |e| {
                e.health_path = Some("/healthz".into());
                e.health_interval = Secs(Duration::from_millis(100));
            })],
        )
    })
    .await;
    get(&q, "/e", &[]).await;
    settle(&q).await;
    a.stop();
    assert!(
        wait_for(|| !origin_up(&q, &ua)).await,
        "the stopped origin is marked down"
    );
    q.ctx.clock.advance(Duration::from_secs(2));
    let r = get(&q, "/e", &[]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body, page(500));
    assert!(
        r.cache_status().contains("stale-if-error"),
        "{}",
        r.cache_status()
    );
    assert!(
        metrics(&q).contains("quire_origins_none_up_total 1\n"),
        "{}",
        metrics(&q)
    );
    let r = get(&q, "/other", &[]).await;
    assert_eq!(r.status, 502, "nothing stale: the failure shows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_connection_limit_cannot_be_exceeded() {
    let a = Origin::start().await;
    for i in 0..5 {
        let slow = Route::ok("s", &NO_STORE).delay(Duration::from_millis(1500));
        a.route(&format!("/slow{i}"), slow);
    }
    let ua = a.url();
    let q = Quire::start(&a, |c| {
        c.limits.origin_connect_timeout = Secs(Duration::from_millis(300));
        use_origins(c, vec![entry(&ua, |e| e.max_connections = Some(2))]);
    })
    .await;
    let q = std::sync::Arc::new(q);
    let mut tasks = Vec::new();
    for i in 0..5 {
        // Distinct URLs: one URL's misses would share one fill.
        let q = q.clone();
        let path = format!("/slow{i}");
        tasks.push(tokio::spawn(
            async move { get(&q, &path, &[]).await.status },
        ));
    }
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.push(t.await.unwrap());
    }
    statuses.sort_unstable();
    assert_eq!(
        statuses,
        vec![200, 200, 502, 502, 502],
        "two slots, three refused"
    );
    let hits: usize = (0..5).map(|i| a.hits(&format!("/slow{i}"))).sum();
    assert_eq!(hits, 2, "the origin never saw more than its limit");
    let m = metrics(&q);
    assert!(
        m.contains(&format!(
            "quire_origin_requests_total{{origin=\"{ua}\",result=\"busy\"}} 3\n"
        )),
        "{m}"
    );
}

#[test]
fn origin_and_origins_together_are_refused() {
    let mut c = Config {
        origin: Some("http://a".into()),
        origins: vec![OriginEntry::new("http://b")],
        ..Config::default()
    };
    let why = c.validate().unwrap_err().to_string();
    assert!(why.contains("not both"), "{why}");
    c.origin = None;
    c.validate().unwrap();
    c.origins[0].weight = 0;
    assert!(c.validate().is_err());
}

/// One client's slow page (slower than `origin_read_timeout`) must not mark a pool
/// down: each request reaches at most two origins, and a timeout only makes quire
/// probe the origin, whose quick answer to the probe keeps it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_requests_from_one_client_never_mark_a_pool_down() {
    let (a, b, c) = (
        Origin::start().await,
        Origin::start().await,
        Origin::start().await,
    );
    for o in [&a, &b, &c] {
        for i in 0..3 {
            let slow = Route::ok("late", &NO_STORE).delay(Duration::from_secs(3));
            o.route(&format!("/slow{i}"), slow);
        }
        o.route("/", Route::ok("home", &NO_STORE));
        o.route("/ok", Route::ok("ok", &NO_STORE));
    }
    let urls = [a.url(), b.url(), c.url()];
    let q = Quire::start(&a, |cfg| {
        use_origins(cfg, urls.iter().map(|u| entry(u, |_| {})).collect());
    })
    .await;
    let slow: Vec<_> = (0..3)
        .map(|i| {
            let url = q.url(&format!("/slow{i}"));
            tokio::spawn(async move {
                let r = quire_testkit::client()
                    .get(url.parse().unwrap())
                    .await
                    .unwrap();
                r.status().as_u16()
            })
        })
        .collect();
    for s in slow {
        assert!([502, 504].contains(&s.await.unwrap()));
    }
    for i in 0..3 {
        let path = format!("/slow{i}");
        let reached = a.hits(&path) + b.hits(&path) + c.hits(&path);
        assert!(reached <= 2, "{path} reached {reached} origins");
    }
    assert!(
        wait_for(
            || metrics(&q).contains("quire_origins_probes_total{result=\"pass\"}")
                && !metrics(&q).contains("quire_origins_probes_total{result=\"pass\"} 0\n")
        )
        .await,
        "{}",
        metrics(&q)
    );
    for u in &urls {
        assert!(origin_up(&q, u), "{u} stays up:\n{}", metrics(&q));
    }
    for _ in 0..6 {
        assert_eq!(get(&q, "/ok", &[]).await.status, 200);
    }
}

/// A pass (here POSTs) goes where a fill of the same URL would: routed on the
/// normalised path and host, not on the target as the client spelt it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passes_route_on_the_normalised_path_and_host_like_fills() {
    let (site, api, admin, blog) = (
        Origin::start().await,
        Origin::start().await,
        Origin::start().await,
        Origin::start().await,
    );
    let (us, ua, ud, ub) = (site.url(), api.url(), admin.url(), blog.url());
    let q = Quire::start(&site, |c| {
        use_origins(
            c,
            vec![
                entry(&us, |_| {}),
                entry(&ua, |e| e.path_prefix = "/api".into()),
                entry(&ud, |e| e.path_prefix = "/admin".into()),
                entry(&ub, |e| e.hosts = vec!["a.example".into()]),
            ],
        )
    })
    .await;
    let post = |path: &'static str, host: &'static str| {
        let q = &q;
        async move { send(q, "POST", path, &[("host", host)], b"x").await }
    };
    post("/api/%2e%2e/admin", "www.example").await;
    assert_eq!(
        (admin.seen_all().len(), api.seen_all().len()),
        (1, 0),
        "dot segments are resolved before routing"
    );
    post("/%61pi/x", "www.example").await;
    assert_eq!(
        api.seen_all().len(),
        1,
        "percent-encoded letters are decoded"
    );
    post("/", "a.example.").await;
    assert_eq!(
        blog.seen_all().len(),
        1,
        "a trailing dot names the same host"
    );
    assert_eq!(site.seen_all().len(), 0);
}
