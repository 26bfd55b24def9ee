//! `https://` origins through real sockets: a CA and certificates made in the test,
//! an origin behind a TLS acceptor, quire in front. Trust comes from
//! `origin_ca_file`; a certificate that fails the checks is an origin failure (502,
//! nothing stored) named in words; `origin_insecure_skip_verify` skips the checks
//! but not TLS; a bad `origin_ca_file` stops start-up naming the file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use quire_server::origin::{empty_body, Origin as OriginClient, OriginError, OriginOptions};
use quire_server::{Config, Ctx};
use quire_store::Engine;
use quire_testkit::https_origin::{Leaf, TestCa};
use quire_testkit::*;

/// A cacheable page at `/a` on `o`.
fn route_page(o: &Origin) {
    o.route(
        "/a",
        Route::ok(
            page(3000),
            &[
                ("cache-control", "max-age=60"),
                ("content-type", "text/html"),
            ],
        ),
    );
}

/// `ca`'s certificate in a PEM file under `dir`.
fn ca_file(ca: &TestCa, dir: &Path) -> PathBuf {
    let path = dir.join("origin-ca.pem");
    ca.write_pem(&path);
    path
}

/// quire in front of `url`, trusting `ca_file` (if any) besides the system's roots.
async fn quire_for(o: &Origin, url: String, ca_file: Option<PathBuf>) -> Quire {
    Quire::start(o, move |c| {
        c.origin = Some(url);
        c.origin_ca_file = ca_file;
    })
    .await
}

/// Why a direct request to `url` fails, as the fill's log line says it.
async fn failure(url: &str, ca_file: Option<PathBuf>) -> String {
    let opts = OriginOptions {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(2),
        ca_file,
        ..OriginOptions::default()
    };
    let origin = OriginClient::new(url, &opts).unwrap();
    let req = http::Request::get("/a").body(empty_body()).unwrap();
    match origin.send(req).await {
        Err(OriginError::Failed(why)) => why.to_string(),
        Err(e) => panic!("expected a failure, got {e}"),
        Ok(r) => panic!("expected a failure, got {}", r.status()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_over_https_is_stored_and_the_next_request_hits() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("quire test CA");
    let o = Origin::start_https(ca.leaf(&["localhost", "127.0.0.1"]).server_config()).await;
    route_page(&o);
    // By name (SNI and the DNS name checked) and by address (the IP entry checked).
    for host in ["localhost", "127.0.0.1"] {
        let q = quire_for(&o, o.https_url(host), Some(ca_file(&ca, dir.path()))).await;
        let first = get(&q, "/a", &[]).await;
        assert_eq!(first.status, 200, "{host}: {}", first.cache_status());
        assert_eq!(first.cache_status(), "quire; fwd=uri-miss; stored");
        assert_eq!(first.body, page(3000));
        settle(&q).await;
        let second = get(&q, "/a", &[]).await;
        assert_eq!(second.body, page(3000));
        assert!(
            second.cache_status().starts_with("quire; hit"),
            "{host}: {}",
            second.cache_status()
        );
    }
    assert_eq!(o.hits("/a"), 2, "one fill per quire");
    // SNI names the host; an address is not sent (RFC 6066 §3).
    let mut names = o.server_names();
    names.dedup();
    assert_eq!(names, [Some("localhost".to_string()), None]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_origin_certificate_given_as_origin_ca_file_is_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let leaf = Leaf::self_signed(&["localhost"]);
    let pinned = dir.path().join("origin.pem");
    std::fs::write(&pinned, leaf.pem()).unwrap();
    let o = Origin::start_https(leaf.server_config()).await;
    route_page(&o);
    let q = quire_for(&o, o.https_url("localhost"), Some(pinned)).await;
    let r = get(&q, "/a", &[]).await;
    assert_eq!(r.status, 200, "{}", r.cache_status());
    assert_eq!(r.body, page(3000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_certificate_from_an_unknown_ca_is_a_502_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let trusted = TestCa::new("quire test CA");
    let unknown = TestCa::new("somebody else's CA");
    let o = Origin::start_https(unknown.leaf(&["localhost"]).server_config()).await;
    route_page(&o);
    let url = o.https_url("localhost");
    let q = quire_for(&o, url.clone(), Some(ca_file(&trusted, dir.path()))).await;
    for _ in 0..2 {
        let r = get(&q, "/a", &[]).await;
        assert_eq!(r.status, 502);
        assert!(
            r.cache_status().contains("origin-error"),
            "{}",
            r.cache_status()
        );
    }
    settle(&q).await;
    assert_eq!(q.ctx.store.stats().admitted, 0, "nothing was stored");
    assert_eq!(o.hits("/a"), 0, "no request crossed a failed handshake");
    let metrics = get(
        &q,
        "/_quire/metrics",
        &[("authorization", &format!("Bearer {TOKEN}"))],
    )
    .await;
    let metrics = String::from_utf8_lossy(&metrics.body);
    assert!(
        metrics.lines().any(|l| l == "quire_origin_errors_total 2"),
        "counted as origin errors"
    );
    let why = failure(&url, Some(ca_file(&trusted, dir.path()))).await;
    assert!(
        why.contains("TLS handshake with the origin failed: certificate not trusted"),
        "{why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_certificate_for_another_name_is_a_502() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("quire test CA");
    let o = Origin::start_https(ca.leaf(&["other.test"]).server_config()).await;
    route_page(&o);
    for host in ["localhost", "127.0.0.1"] {
        let url = o.https_url(host);
        let q = quire_for(&o, url.clone(), Some(ca_file(&ca, dir.path()))).await;
        let r = get(&q, "/a", &[]).await;
        assert_eq!(r.status, 502, "{host}");
        settle(&q).await;
        assert_eq!(
            q.ctx.store.stats().admitted,
            0,
            "{host}: nothing was stored"
        );
        let why = failure(&url, Some(ca_file(&ca, dir.path()))).await;
        assert!(why.contains("name mismatch"), "{host}: {why}");
        assert!(why.contains(host), "{host}: names the host checked: {why}");
    }
    assert_eq!(o.hits("/a"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_insecure_skip_verify_accepts_any_certificate_but_still_needs_tls() {
    let unknown = TestCa::new("somebody else's CA");
    let o = Origin::start_https(unknown.leaf(&["other.test"]).server_config()).await;
    route_page(&o);
    let url = o.https_url("localhost");
    let q = Quire::start(&o, |c| {
        c.origin = Some(url);
        c.origin_insecure_skip_verify = true;
    })
    .await;
    let first = get(&q, "/a", &[]).await;
    assert_eq!(first.status, 200, "{}", first.cache_status());
    assert_eq!(first.body, page(3000));
    settle(&q).await;
    assert!(get(&q, "/a", &[])
        .await
        .cache_status()
        .starts_with("quire; hit"));
    // An origin that does not speak TLS is still refused, and said to be plain.
    let plain = Origin::start().await;
    route_page(&plain);
    let url = plain.https_url("localhost");
    let q = Quire::start(&plain, |c| {
        c.origin = Some(url.clone());
        c.origin_insecure_skip_verify = true;
    })
    .await;
    assert_eq!(get(&q, "/a", &[]).await.status, 502);
    let why = failure(&url, None).await;
    assert!(why.contains("did not answer in TLS"), "{why}");
}

/// The start-up error of a proxy in front of `url` with `origin_ca_file = path`.
fn start_error(url: &str, path: PathBuf) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = Config {
        listen: "127.0.0.1:0".parse().unwrap(),
        origin: Some(url.into()),
        origin_ca_file: Some(path),
        ..Config::default()
    };
    cfg.cache.path = dir.path().join("cache.vol");
    cfg.cache.size = quire_server::config::ByteSize(8 << 20);
    match Ctx::new(cfg) {
        Ok(_) => panic!("started with a bad origin_ca_file"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_origin_ca_file_stops_start_up_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new("quire test CA");
    let key_only = dir.path().join("key-only.pem");
    std::fs::write(
        &key_only,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let not_pem = dir.path().join("not-pem.crt");
    std::fs::write(&not_pem, "just some text\n").unwrap();
    let truncated = dir.path().join("truncated.pem");
    let pem = ca.pem();
    std::fs::write(&truncated, &pem[..pem.len() / 2]).unwrap();
    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let cases: [(PathBuf, &str); 5] = [
        (dir.path().join("missing.pem"), "No such file"),
        (empty, "no PEM certificate"),
        (not_pem, "no PEM certificate"),
        (key_only, "no PEM certificate"),
        (
            truncated,
            "not PEM: a section has no `-----END CERTIFICATE-----` line",
        ),
    ];
    for (path, why) in cases {
        // Checked whatever the origin's scheme.
        for url in ["https://localhost:1", "http://localhost:1"] {
            let e = start_error(url, path.clone());
            assert!(e.contains(&path.display().to_string()), "{url}: {e}");
            assert!(
                e.contains("origin_ca_file") && e.contains(why),
                "{url}: {e}"
            );
        }
    }
    // The good file starts.
    let good = ca_file(&ca, dir.path());
    let o = Origin::start_https(ca.leaf(&["localhost"]).server_config()).await;
    route_page(&o);
    let q = quire_for(&o, o.https_url("localhost"), Some(good)).await;
    assert_eq!(get(&q, "/a", &[]).await.status, 200);
}
