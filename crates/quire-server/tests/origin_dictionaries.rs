//! An origin's own dictionaries (RFC 9842) through `quire proxy`: a response the
//! origin marks `Use-As-Dictionary` is learned when stored, a later response its
//! pattern matches is stored `dcz` against it too, and that body goes only to a
//! client whose `Available-Dictionary` names it (`fill::dictionaries`).

use quire_http::dictionary::Dictionary;
use quire_testkit::*;

const DCZ: &str = "gzip, deflate, br, zstd, dcz";

/// A stylesheet of `rules` rules, the `n`th edition.
fn stylesheet(rules: usize, n: usize) -> Vec<u8> {
    let mut s = String::new();
    for i in 0..rules {
        let colour = if i == rules / 2 { n } else { i };
        s.push_str(&format!(
            ".rule-{i} {{ color: #{:06x}; margin: {}px {}px; }}\n",
            colour * 2_654_435 % 0xff_ffff,
            i % 17,
            i % 5
        ));
    }
    s.into_bytes()
}

fn css(body: Vec<u8>, dictionary: Option<&str>) -> Route {
    let mut h = vec![
        ("content-type", "text/css"),
        ("cache-control", "max-age=600"),
    ];
    if let Some(m) = dictionary {
        h.push(("use-as-dictionary", m));
    }
    Route::ok(body, &h)
}

/// Asks `path` until it comes `dcz` (made in the background), within 20 s.
async fn until_dcz(q: &Quire, path: &str, ad: &str) -> Got {
    for _ in 0..200 {
        let got = get(
            q,
            path,
            &[("accept-encoding", DCZ), ("available-dictionary", ad)],
        )
        .await;
        if got.header("content-encoding") == Some("dcz") {
            return got;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{path} never came dcz");
}

#[tokio::test]
async fn a_new_version_goes_as_a_delta_of_the_one_the_origin_named_a_dictionary() {
    let origin = Origin::start().await;
    let (v1, v2) = (stylesheet(400, 1), stylesheet(400, 2));
    origin.route(
        "/app.v1.css",
        css(
            v1.clone(),
            Some(r#"match="/app.*.css", match-dest=("style")"#),
        ),
    );
    origin.route("/app.v2.css", css(v2.clone(), None));
    let mut q = Quire::start(&origin, |_| {}).await;
    assert_eq!(get(&q, "/app.v1.css", &[]).await.body, v1);
    settle(&q).await;
    let dict = Dictionary::new(v1.clone());
    let ad = dict.available_value();
    assert_eq!(get(&q, "/app.v2.css", &[]).await.body, v2);
    let got = until_dcz(&q, "/app.v2.css", &ad).await;
    let decoded = quire_server::compress::decode_dcz(&got.body, &dict, 1 << 24).unwrap();
    assert_eq!(decoded, v2, "decodes to the new version");
    let vary: Vec<_> = got
        .headers
        .get_all("vary")
        .iter()
        .map(|v| v.to_str().unwrap().to_ascii_lowercase())
        .collect();
    assert!(
        vary.iter().any(|v| v.contains("available-dictionary")),
        "{vary:?}"
    );
    let br = get(&q, "/app.v2.css", &[("accept-encoding", "br")]).await;
    assert!(
        got.body.len() * 10 < br.body.len(),
        "a delta of {} bytes against brotli's {}",
        got.body.len(),
        br.body.len()
    );
    // Another dictionary, none, or `dcz` not listed: never `dcz`.
    let other = Dictionary::new(b"another".to_vec()).available_value();
    for (ae, ad) in [
        (DCZ, Some(other.as_str())),
        (DCZ, None),
        ("gzip, br, zstd", Some(ad.as_str())),
        ("*", Some(ad.as_str())),
    ] {
        let mut h = vec![("accept-encoding", ae)];
        if let Some(ad) = ad {
            h.push(("available-dictionary", ad));
        }
        let got = get(&q, "/app.v2.css", &h).await;
        assert_eq!(got.status, 200);
        assert_ne!(got.header("content-encoding"), Some("dcz"), "{ae} {ad:?}");
        let coding = got
            .header("content-encoding")
            .unwrap_or("identity")
            .to_owned();
        assert_eq!(decode(&coding, &got.body), v2, "{ae} {ad:?}");
    }
    // The dictionary itself is not made against itself, and all of it came from the
    // cache: one trip each.
    let got = get(
        &q,
        "/app.v1.css",
        &[("accept-encoding", DCZ), ("available-dictionary", &ad)],
    )
    .await;
    assert_ne!(got.header("content-encoding"), Some("dcz"));
    assert_eq!(
        (origin.hits("/app.v1.css"), origin.hits("/app.v2.css")),
        (1, 1)
    );
    let text = metrics_text(&q).await;
    assert_eq!(
        metric(&text, "quire_origin_dictionaries_total{result=\"kept\"}"),
        1.0
    );
    assert_eq!(
        metric(&text, "quire_origin_dictionaries_bytes"),
        v1.len() as f64
    );
    q.shutdown().await;
}

#[tokio::test]
async fn a_dictionary_quire_cannot_read_or_hold_is_never_used() {
    let origin = Origin::start().await;
    let v1 = stylesheet(400, 1);
    origin.route("/a.v1.css", css(v1.clone(), Some(r#"match="/a.:v.css""#)));
    origin.route("/b.v1.css", css(v1.clone(), Some(r#"match="/b.*.css""#)));
    origin.route("/a.v2.css", css(stylesheet(400, 2), None));
    origin.route("/b.v2.css", css(stylesheet(400, 2), None));
    let mut q = Quire::start(&origin, |c| {
        c.encodings.origin_dictionary_max = quire_server::config::ByteSize(1024)
    })
    .await;
    for p in ["/a.v1.css", "/b.v1.css", "/a.v2.css", "/b.v2.css"] {
        assert_eq!(get(&q, p, &[]).await.status, 200);
        settle(&q).await;
    }
    let ad = Dictionary::new(v1).available_value();
    for p in ["/a.v2.css", "/b.v2.css"] {
        let got = get(
            &q,
            p,
            &[("accept-encoding", DCZ), ("available-dictionary", &ad)],
        )
        .await;
        assert_eq!(got.status, 200);
        assert_ne!(got.header("content-encoding"), Some("dcz"), "{p}");
    }
    let text = metrics_text(&q).await;
    assert_eq!(
        metric(
            &text,
            "quire_origin_dictionaries_total{result=\"unsupported\"}"
        ),
        1.0
    );
    assert_eq!(
        metric(&text, "quire_origin_dictionaries_total{result=\"size\"}"),
        1.0
    );
    assert_eq!(metric(&text, "quire_origin_dictionaries_bytes"), 0.0);
    q.shutdown().await;
}

/// An HTML page of a site whose pages share their chrome.
fn html_page(i: usize) -> Vec<u8> {
    let nav: String = (0..60)
        .map(|n| format!("<li><a href=\"/p/{n}\">Chapter {n} of the handbook</a></li>"))
        .collect();
    format!(
        "<!doctype html><html><head><title>Page {i}</title><link rel=stylesheet href=/s.css></head>\
         <body><nav><ul>{nav}</ul></nav><main><h1>Page {i}</h1><p>{}</p></main>\
         <footer>Published with care. Every page ends like this one.</footer></body></html>",
        format!("Words of page {i}. ").repeat(20)
    )
    .into_bytes()
}

#[tokio::test]
async fn a_hosts_pages_get_a_dictionary_made_of_them_and_go_dcz_against_it() {
    let origin = Origin::start().await;
    for i in 0..6 {
        origin.route(
            &format!("/p/{i}"),
            Route::ok(
                html_page(i),
                &[
                    ("content-type", "text/html; charset=utf-8"),
                    ("cache-control", "max-age=600"),
                ],
            ),
        );
    }
    let mut q = Quire::start(&origin, |c| {
        c.dictionaries.hosts = vec!["127.0.0.1".into()];
        c.dictionaries.sample_pages = 3;
    })
    .await;
    for i in 0..3 {
        assert_eq!(get(&q, &format!("/p/{i}"), &[]).await.status, 200);
        settle(&q).await;
    }
    let built = || async {
        metric(
            &metrics_text(&q).await,
            "quire_host_dictionaries_built_total",
        )
    };
    for _ in 0..200 {
        if built().await == 1.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(built().await, 1.0, "no dictionary made of three pages");
    // A page stored since names the dictionary.
    assert_eq!(get(&q, "/p/3", &[]).await.status, 200);
    settle(&q).await;
    let hit = get(&q, "/p/3", &[]).await;
    let link = hit
        .header("link")
        .expect("a Link to the dictionary")
        .to_owned();
    assert!(link.contains("rel=\"compression-dictionary\""), "{link}");
    let path = link
        .split_once('<')
        .and_then(|(_, l)| l.split_once('>'))
        .unwrap()
        .0
        .to_owned();
    let d = get(&q, &path, &[]).await;
    assert_eq!(d.status, 200, "served without the admin token");
    assert!(d
        .header("use-as-dictionary")
        .unwrap()
        .contains("match=\"/*\""));
    assert!(d.header("cache-control").unwrap().contains("immutable"));
    let dict = Dictionary::new(d.body.to_vec());
    assert!(path.contains(&dict.hex()), "{path} is named by its hash");
    let br = get(&q, &path, &[("accept-encoding", "br")]).await;
    assert_eq!(br.header("content-encoding"), Some("br"));
    assert_eq!(decode("br", &br.body), d.body);
    // The page goes dcz to a browser holding it, and decodes to the page.
    let got = until_dcz(&q, "/p/3", &dict.available_value()).await;
    let decoded = quire_server::compress::decode_dcz(&got.body, &dict, 1 << 24).unwrap();
    assert_eq!(decoded, html_page(3));
    let brotli = get(&q, "/p/3", &[("accept-encoding", "br")]).await;
    assert!(
        got.body.len() * 2 < brotli.body.len(),
        "dcz {} against brotli {}",
        got.body.len(),
        brotli.body.len()
    );
    // Not on another host, not at another hash, and the admin API is still shut.
    let other = get(&q, &path, &[("host", "elsewhere.test")]).await;
    assert_eq!(other.status, 404);
    assert_eq!(get(&q, "/_quire/dictionary/00.dict", &[]).await.status, 404);
    assert_ne!(get(&q, "/_quire/metrics", &[]).await.status, 200);
    q.shutdown().await;
}

#[tokio::test]
async fn a_configured_asset_pattern_makes_each_version_the_dictionary_of_the_next() {
    let origin = Origin::start().await;
    let script = |n: usize| {
        let mut s = String::new();
        for i in 0..300 {
            s.push_str(&format!(
                "function step{i}(x) {{ return x * {} + {i}; }}\n",
                if i == 150 { n } else { 7 }
            ));
        }
        s.into_bytes()
    };
    for v in 1..=2 {
        origin.route(
            &format!("/static/app.v{v}.js"),
            Route::ok(
                script(v),
                &[
                    ("content-type", "text/javascript"),
                    ("cache-control", "max-age=600"),
                ],
            ),
        );
    }
    let mut q = Quire::start(&origin, |c| {
        c.dictionaries.assets = vec!["/static/app.*.js".into()]
    })
    .await;
    assert_eq!(get(&q, "/static/app.v1.js", &[]).await.body, script(1));
    settle(&q).await;
    let hit = get(&q, "/static/app.v1.js", &[]).await;
    assert_eq!(
        hit.header("use-as-dictionary"),
        Some(r#"match="/static/app.*.js", match-dest=("script")"#),
        "the stored version is marked"
    );
    assert_eq!(get(&q, "/static/app.v2.js", &[]).await.body, script(2));
    let dict = Dictionary::new(script(1));
    let got = until_dcz(&q, "/static/app.v2.js", &dict.available_value()).await;
    let decoded = quire_server::compress::decode_dcz(&got.body, &dict, 1 << 24).unwrap();
    assert_eq!(decoded, script(2));
    assert!(got.body.len() < 200, "a delta of {} bytes", got.body.len());
    q.shutdown().await;
}
