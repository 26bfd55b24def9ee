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
