//! AI crawlers the operator names in `[agents] refuse` are answered 403 (or 402
//! with a price) before the cache: never a stored page, never the origin, on the
//! full path and on the keep-alive fast path alike; everyone else is served.

use quire_testkit::raw_h1::exchange;
use quire_testkit::*;

const GPTBOT: &str = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko); compatible; GPTBot/1.2; +https://openai.com/gptbot";

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn agents_a_named_ai_crawler_gets_no_stored_page_and_never_reaches_the_origin() {
    let origin = Origin::start().await;
    origin.route(
        "/page",
        Route::ok("the page", &[("cache-control", "max-age=600")]),
    );
    let q = Quire::start(&origin, |c| {
        c.agents.refuse = vec!["GPTBot".into(), "CCBot".into()];
    })
    .await;
    assert_eq!(get(&q, "/page", &[]).await.status, 200);
    settle(&q).await;
    // Stored: a reader's next request is a hit.
    assert!(get(&q, "/page", &[]).await.cache_status().contains("hit"));

    let got = get(&q, "/page", &[("user-agent", GPTBOT)]).await;
    assert_eq!(got.status, 403);
    assert_eq!(got.header("cache-control"), Some("no-store"));
    assert!(got.cache_status().contains("detail=agent-refused"));
    let got = get(&q, "/other", &[("user-agent", "ccbot/2.0")]).await;
    assert_eq!(got.status, 403, "any case, a miss too");

    // Keep-alive heads, as a crawler sends them: the fast path hands them over.
    let host = q.addr;
    let head = |ua: &str| format!("GET /page HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {ua}\r\n\r\n");
    let two = format!("{}{}", head(GPTBOT), head(GPTBOT));
    let answers = exchange(q.addr, two, 2).await;
    assert_eq!(answers.iter().map(|a| a.0).collect::<Vec<_>>(), [403, 403]);
    let answers = exchange(q.addr, format!("{}{}", head("Firefox"), head("Firefox")), 2).await;
    assert_eq!(answers.iter().map(|a| a.0).collect::<Vec<_>>(), [200, 200]);

    assert_eq!(origin.hits("/page"), 1, "only the reader's miss reached it");
    assert_eq!(origin.hits("/other"), 0);
    assert_eq!(q.ctx.metrics.agents_refused(), 4);
}

#[tokio::test]
async fn agents_status_402_names_the_price() {
    let origin = Origin::start().await;
    origin.route("/page", Route::ok("the page", &[]));
    let q = Quire::start(&origin, |c| {
        c.agents.refuse = vec!["GPTBot".into()];
        c.agents.status = 402;
        c.agents.price = Some("USD 0.01".into());
    })
    .await;
    let got = get(&q, "/page", &[("user-agent", GPTBOT)]).await;
    assert_eq!(got.status, 402);
    assert_eq!(got.header("crawler-price"), Some("USD 0.01"));
    assert_eq!(origin.hits("/page"), 0);
}
