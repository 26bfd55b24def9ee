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
