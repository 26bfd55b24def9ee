//! The budget for uncached work (`[budget]`): a crowd of addresses, each inside any
//! per-client limit, shares one count of slots with the site's readers, and a
//! reader's miss waits its network's turn, not behind the whole crowd. Driven over
//! real sockets from many source addresses (127.0.0.0/8 is all loopback), directly
//! and through a trusted proxy's `X-Forwarded-For`.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use quire_server::config::Secs;
use quire_testkit::*;

/// An origin where every path takes `delay` and is cacheable.
async fn slow_origin(delay: Duration) -> Origin {
    let origin = Origin::start().await;
    origin.fallback(Route::ok("a page", &[("cache-control", "max-age=600")]).delay(delay));
    origin
}

/// The crowd fills the queue, then a reader from another network misses once: it
/// is answered (not refused), and at most one request of each crowd network (and
/// the slots' holders) reached the origin between its arrival and its own fill.
async fn a_reader_waits_one_turn_per_network(
    crowd: Crowd,
    nets: usize,
    reader: (IpAddr, Option<&str>),
    trusted: bool,
) {
    let origin = slow_origin(Duration::from_millis(30)).await;
    let slots = 2;
    let mut q = Quire::start(&origin, |c| {
        c.budget.slots = slots;
        // Generous: only the turn order decides when the reader is served.
        c.budget.queue_timeout = Secs(Duration::from_secs(60));
        c.budget.queue_per_client = 2;
        if trusted {
            c.trusted_proxies = vec!["127.0.0.1".into()];
        }
        c.rate_limit.misses_per_sec = 0.0;
    })
    .await;
    let crowd_size = crowd.len();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = run_crowd(q.addr, crowd, stop.clone());
    // Wait until most of the crowd is queued behind the slots.
    assert!(
        wait_for(|| q.ctx.budget.load().1 >= crowd_size).await,
        "the crowd never filled the queue: {:?}",
        q.ctx.budget.load()
    );
    let before = origin.seen_all().len();
    let fields: Vec<(&str, &str)> = reader
        .1
        .map(|f| vec![("x-forwarded-for", f)])
        .unwrap_or_default();
    let got = get_from(reader.0, q.addr, "/reader/page", &fields).await;
    stop.store(true, Ordering::Relaxed);
    assert_eq!(got.status, 200, "{}", got.head);
    let seen = origin.seen_all();
    let ahead = seen[before..]
        .iter()
        .position(|s| s.uri == "/reader/page")
        .expect("the reader's fill reached the origin");
    // One turn of each crowd network after the reader queued, plus what was
    // granted before it did (the slots' holders, and what the crowd was given
    // between the count above and the reader's arrival). First come, first served,
    // it would be behind the whole queue (over a hundred).
    let bound = nets + 2 * slots + 2;
    assert!(
        ahead <= bound,
        "{ahead} crowd requests reached the origin before the reader's (at most {bound}: {nets} networks, {slots} slots)"
    );
    let mut statuses = Vec::new();
    for t in tasks {
        statuses.extend(t.await.unwrap());
    }
    // The budget bounds the origin's load whatever the crowd does.
    assert!(
        origin.in_flight_max() <= slots,
        "{} at once",
        origin.in_flight_max()
    );
    assert!(
        statuses.iter().all(|s| matches!(s, 200 | 503)),
        "{statuses:?}"
    );
    q.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_a_crowd_of_addresses_gets_a_turn_per_network_and_a_reader_is_served() {
    // Six networks of ten addresses, two requests at once each: 120 waiting for
    // 2 slots.
    let reader = (IpAddr::from([127, 2, 0, 1]), None);
    a_reader_waits_one_turn_per_network(direct_crowd(6, 10), 6, reader, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_behind_a_trusted_proxy_the_forwarded_clients_take_turns() {
    let reader = (IpAddr::from([127, 0, 0, 1]), Some("198.51.100.7"));
    a_reader_waits_one_turn_per_network(forwarded_crowd(6, 10), 6, reader, true).await;
}

/// quire in front of an origin with a stored `/stored` and a slow everything else,
/// one budget slot, clients named by `X-Forwarded-For` from 127.0.0.1.
async fn one_slot() -> (Origin, Quire) {
    let origin = Origin::start().await;
    origin.route(
        "/stored",
        Route::ok("stored page", &[("cache-control", "max-age=600")]),
    );
    origin.fallback(
        Route::ok("slow", &[("cache-control", "max-age=600")]).delay(Duration::from_secs(4)),
    );
    let q = Quire::start(&origin, |c| {
        c.budget.slots = 1;
        c.budget.queue_timeout = Secs(Duration::from_millis(1500));
        c.budget.queue_per_client = 1;
        c.limits.origin_read_timeout = Secs(Duration::from_secs(10));
        c.trusted_proxies = vec!["127.0.0.1".into()];
        c.rate_limit.misses_per_sec = 0.0;
    })
    .await;
    (origin, q)
}

/// A `GET path` from the trusted proxy on behalf of `client`, in a task.
fn behind_proxy(
    q: &Quire,
    path: &'static str,
    client: &'static str,
) -> tokio::task::JoinHandle<Answer> {
    let addr = q.addr;
    tokio::spawn(async move {
        get_from(
            IpAddr::from([127, 0, 0, 1]),
            addr,
            path,
            &[("x-forwarded-for", client)],
        )
        .await
    })
}

/// The value of `name` (with its labels) in `q`'s metrics now.
async fn series(q: &Quire, name: &str) -> f64 {
    metric(&metrics_text(q).await, name)
}

/// `quire_budget_refused_total{reason}` of everyone's class from the metrics.
async fn refused(q: &Quire, reason: &str) -> u64 {
    let name = format!("quire_budget_refused_total{{reason=\"{reason}\",class=\"everyone\"}}");
    series(q, &name).await as u64
}

/// A request that waits past the deadline is answered 503 with `Retry-After`; a
/// hit is answered meanwhile, never queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_past_the_deadline_is_503_with_retry_after_and_hits_never_wait() {
    let (_origin, mut q) = one_slot().await;
    let local = IpAddr::from([127, 0, 0, 1]);
    assert_eq!(get_from(local, q.addr, "/stored", &[]).await.status, 200);
    settle(&q).await;
    // One slow miss holds the only slot; a second client waits.
    let holder = behind_proxy(&q, "/slow/1", "198.51.100.1");
    assert!(wait_for(|| q.ctx.budget.load().0 == 1).await);
    let waiting = behind_proxy(&q, "/slow/2", "198.51.100.2");
    assert!(wait_for(|| q.ctx.budget.load().1 == 1).await);
    let hit = get_from(local, q.addr, "/stored", &[]).await;
    assert_eq!(hit.status, 200);
    assert!(
        hit.field("cache-status").unwrap().contains("hit"),
        "{}",
        hit.head
    );
    let late = waiting.await.unwrap();
    assert_eq!(late.status, 503, "{}", late.head);
    assert!(late.field("retry-after").is_some(), "{}", late.head);
    assert!(
        late.field("cache-status")
            .unwrap()
            .contains("detail=budget"),
        "{}",
        late.head
    );
    assert_eq!(holder.await.unwrap().status, 200);
    assert_eq!(refused(&q, "deadline").await, 1);
    q.shutdown().await;
}

/// A client with a request waiting already is refused a second one at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_a_client_past_its_queue_is_refused_at_once() {
    let (_origin, mut q) = one_slot().await;
    let holder = behind_proxy(&q, "/slow/3", "198.51.100.3");
    assert!(wait_for(|| q.ctx.budget.load().0 == 1).await);
    let first = behind_proxy(&q, "/slow/4", "198.51.100.4");
    assert!(wait_for(|| q.ctx.budget.load().1 == 1).await);
    let second = behind_proxy(&q, "/slow/5", "198.51.100.4").await.unwrap();
    assert_eq!(second.status, 503, "{}", second.head);
    assert!(second.field("retry-after").is_some());
    assert_eq!(refused(&q, "client_queue_full").await, 1);
    let _ = first.await;
    let _ = holder.await;
    q.shutdown().await;
}

/// A crawler class (`[[budget.crawlers]]`) whose address is checked by reverse DNS:
/// 127.0.0.1 is `localhost` forward and back, so a `TestBot` from there takes the
/// class's own slot while everyone's is held; the same name from an address with no
/// such name is anyone's, and waits its turn in everyone's queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_a_verified_crawler_takes_its_own_slots_and_a_claimed_one_waits_with_everyone() {
    let origin = slow_origin(Duration::from_secs(4)).await;
    let q = Quire::start(&origin, |c| {
        c.limits.origin_read_timeout = Secs(Duration::from_secs(10));
        c.budget.slots = 1;
        c.budget.queue_timeout = Secs(Duration::from_secs(10));
        c.budget.crawlers = vec![quire_server::config::CrawlerClass {
            name: "local".into(),
            user_agent: "TestBot".into(),
            domains: vec!["localhost".into()],
            slots: 1,
        }];
        c.rate_limit.misses_per_sec = 0.0;
    })
    .await;
    let addr = q.addr;
    let reader =
        tokio::spawn(
            async move { get_from(IpAddr::from([127, 1, 0, 1]), addr, "/reader", &[]).await },
        );
    assert!(
        wait_for(|| q.ctx.budget.load().0 == 1).await,
        "everyone's slot held"
    );
    let bot = [("user-agent", "Mozilla/5.0 (compatible; TestBot/1.0)")];
    // The verified crawler is answered while everyone's slot is still held.
    let crawler = tokio::spawn(async move {
        get_from(IpAddr::from([127, 0, 0, 1]), addr, "/crawled", &bot).await
    });
    // It reaches the origin while the reader still holds everyone's slot, and
    // never waits for it.
    assert!(
        wait_for(|| origin.hits("/crawled") == 1).await,
        "the crawler waited"
    );
    assert_eq!(q.ctx.budget.load(), (1, 0), "it never used everyone's slot");
    assert_eq!(origin.hits("/reader"), 1);
    let local = "class=\"local\"";
    assert_eq!(
        series(&q, &format!("quire_crawler_requests_total{{{local}}}")).await,
        1.0
    );
    assert_eq!(
        series(
            &q,
            &format!("quire_budget_admitted_total{{waited=\"no\",{local}}}")
        )
        .await,
        1.0
    );
    // The same name from an unnamed address waits in everyone's queue.
    let claimed = tokio::spawn(async move {
        get_from(IpAddr::from([127, 9, 8, 7]), addr, "/claimed", &bot).await
    });
    assert!(
        wait_for(|| q.ctx.budget.load().1 == 1).await,
        "the claimed crawler did not queue with everyone: {:?}",
        q.ctx.budget.load()
    );
    // Refused (or, with a resolver that cannot answer in time, busy): anyone's.
    let refused = series(&q, "quire_crawler_checks_total{result=\"refused\"}").await;
    let busy = series(&q, "quire_crawler_checks_total{result=\"busy\"}").await;
    assert_eq!(refused + busy, 1.0);
    assert_eq!(
        series(&q, "quire_crawler_checks_total{result=\"verified\"}").await,
        1.0
    );
    let got = crawler.await.unwrap();
    assert_eq!(got.status, 200, "{}", got.head);
    assert_eq!(reader.await.unwrap().status, 200);
    assert_eq!(claimed.await.unwrap().status, 200);
    assert_eq!(
        series(&q, &format!("quire_crawler_requests_total{{{local}}}")).await,
        1.0
    );
}

/// Uncached work cheap enough to finish at once is bounded in rate, not only in
/// count: a crowd of misses an origin answers at once keeps the process busier than
/// `budget.cpu_busy_max`, so the budget hands out its slots at a pace (the gauge
/// says so), and every request of the crowd is still answered, not refused (the
/// pace never falls below 50 a second per slot).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_a_crowd_of_cheap_misses_is_paced_and_still_answered() {
    let origin = Origin::start().await;
    origin.route(
        "/stored",
        Route::ok("stored page", &[("cache-control", "max-age=600")]),
    );
    origin.fallback(Route::ok("a page", &[("cache-control", "max-age=600")]));
    let mut q = Quire::start(&origin, |c| {
        c.budget.slots = 2;
        c.budget.cpu_busy_max = 0.1;
        c.rate_limit.misses_per_sec = 0.0;
    })
    .await;
    let local = IpAddr::from([127, 0, 0, 1]);
    assert_eq!(get_from(local, q.addr, "/stored", &[]).await.status, 200);
    settle(&q).await;
    assert_eq!(
        series(&q, "quire_budget_pace_per_second{class=\"everyone\"}").await,
        0.0,
        "not paced before the crowd"
    );
    let stop = Arc::new(AtomicBool::new(false));
    let tasks = run_crowd(q.addr, direct_crowd(4, 8), stop.clone());
    let mut paced = 0.0;
    for _ in 0..500 {
        paced = series(&q, "quire_budget_pace_per_second{class=\"everyone\"}").await;
        if paced > 0.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        paced >= 100.0,
        "paced at {paced} a second: at least the floor"
    );
    let busy = series(&q, "quire_budget_cpu_busy{class=\"everyone\"}").await;
    assert!((0.0..=1.0).contains(&busy), "{busy}");
    // A reader's hit meanwhile never waits on the budget.
    let hit = get_from(IpAddr::from([127, 9, 9, 9]), q.addr, "/stored", &[]).await;
    assert_eq!(hit.status, 200);
    assert!(
        hit.field("cache-status").unwrap().contains("hit"),
        "{}",
        hit.head
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    let mut answered = 0;
    for t in tasks {
        for status in t.await.unwrap() {
            assert_eq!(status, 200, "a crowd request refused while paced");
            answered += 1;
        }
    }
    assert!(answered > 0);
    assert_eq!(refused(&q, "deadline").await, 0);
    q.shutdown().await;
}
