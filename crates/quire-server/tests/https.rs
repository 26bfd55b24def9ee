//! HTTPS on the listener, end to end over real sockets: a test CA and a
//! certificate made here with rcgen, quire with `[tls]`, and real clients (rustls,
//! curl) that trust only that CA. Covers the protocols ALPN picks, the fast path
//! over TLS, keys that carry the scheme, HSTS, the plain-HTTP redirect listener,
//! a certificate swapped under open connections, and hostile clients on the TLS
//! port.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use quire_server::metrics::Handshake;
use quire_testkit::*;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// A CA and a `localhost`/`127.0.0.1` certificate it signed, written as PEM files.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_params: rcgen::CertificateParams,
    ca_key: rcgen::KeyPair,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "quire test CA");
        let ca = params.self_signed(&ca_key).unwrap();
        let pki = Pki {
            dir: tempfile::tempdir().unwrap(),
            ca,
            ca_params: params,
            ca_key,
        };
        std::fs::write(pki.ca_file(), pki.ca.pem()).unwrap();
        pki
    }

    fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Issues a leaf for `localhost` and 127.0.0.1 named `cn`; writes
    /// `NAME.crt` (leaf then CA) and `NAME.key`; returns their paths.
    fn issue(&self, name: &str, cn: &str) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params =
            rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
                .unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let issuer = rcgen::Issuer::from_params(&self.ca_params, &self.ca_key);
        let leaf = params.signed_by(&key, &issuer).unwrap();
        let (c, k) = (
            self.dir.path().join(format!("{name}.crt")),
            self.dir.path().join(format!("{name}.key")),
        );
        std::fs::write(&c, format!("{}{}", leaf.pem(), self.ca.pem())).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }

    /// A rustls client that trusts only this CA and offers `alpn`.
    fn client(&self, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsConnector::from(Arc::new(cfg))
    }
}

/// quire with TLS from `pki` (certificate `name`), in front of `o`.
async fn https_quire(
    o: &Origin,
    pki: &Pki,
    tweak: impl FnOnce(&mut quire_server::Config),
) -> Quire {
    let (cert, key) = pki.issue("site", "first");
    Quire::start(o, |c| {
        c.tls.cert = Some(cert);
        c.tls.key = Some(key);
        tweak(c);
    })
    .await
}

/// A TLS connection to quire offering `alpn`.
async fn connect(q: &Quire, pki: &Pki, alpn: &[&[u8]]) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(q.addr).await.unwrap();
    let name = ServerName::try_from("localhost").unwrap();
    pki.client(alpn).connect(name, tcp).await.unwrap()
}

/// One HTTP/1.1 `GET` on an open connection: the head and the body.
async fn get_on<S: AsyncReadExt + AsyncWriteExt + Unpin>(
    s: &mut S,
    path: &str,
) -> (String, Vec<u8>) {
    let req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed before a full head");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let len: usize = field(&head, "content-length").map_or(0, |v| v.parse().unwrap());
    let mut body = buf[head_end..].to_vec();
    while body.len() < len {
        let mut chunk = vec![0u8; len - body.len()];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed inside a body");
        body.extend_from_slice(&chunk[..n]);
    }
    (head, body)
}

/// The value of field `name` in a response head.
fn field<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (n, v) = l.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn cacheable(o: &Origin, path: &str, body: &str) {
    o.route(
        path,
        Route::ok(
            body.as_bytes().to_vec(),
            &[("cache-control", "max-age=600")],
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_http1_hits_are_served_by_the_fast_path_under_an_https_key() {
    let o = Origin::start().await;
    cacheable(&o, "/a", "alpha");
    let pki = Pki::new();
    let q = https_quire(&o, &pki, |c| c.expose_key = true).await;
    let mut s = connect(&q, &pki, &[b"http/1.1"]).await;
    assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
    let (head, body) = get_on(&mut s, "/a").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"alpha");
    settle(&q).await;
    let (head, body) = get_on(&mut s, "/a").await;
    let status = field(&head, "cache-status").unwrap();
    assert!(status.contains("hit"), "{head}");
    assert!(status.contains("key=\"https://localhost/a\""), "{head}");
    assert_eq!(body, b"alpha");
    // The miss and the hit on one keep-alive connection, both without hyper.
    assert_eq!(q.ctx.metrics.handovers(), 0);
    assert_eq!(q.ctx.metrics.handshakes(Handshake::Http1), 1);
    // The origin was told the scheme, and only once.
    let seen = o.seen("/a");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["x-forwarded-proto"], "https");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_zero_window_streams_over_tls_are_reset_after_send_stall() {
    // The send deadline holds over TLS too: an HTTP/2 client that keeps every
    // stream's window at zero (and answers PINGs) loses its hits.
    let o = Origin::start().await;
    let big = "x".repeat(100_000);
    cacheable(&o, "/big", &big);
    let pki = Pki::new();
    let q = https_quire(&o, &pki, |c| {
        c.limits.send_stall = "300ms".parse().unwrap();
    })
    .await;
    let tls = connect(&q, &pki, &[b"h2"]).await;
    let (mut send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(0)
            .handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut bodies = Vec::new();
    for _ in 0..3 {
        let req = http::Request::get("https://localhost/big")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        assert_eq!(resp.status(), 200);
        bodies.push(resp.into_body());
    }
    for mut b in bodies {
        let end = tokio::time::timeout(
            Duration::from_secs(30),
            http_body_util::BodyExt::frame(&mut b),
        )
        .await
        .expect("the stalled stream was never reset");
        assert!(matches!(end, Some(Err(_))), "{end:?}");
    }
    let (streams, conns) = q.ctx.metrics.send_stalls();
    assert_eq!((streams, conns), (3, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_offers_h2_gets_http2() {
    let o = Origin::start().await;
    cacheable(&o, "/b", "bravo");
    let pki = Pki::new();
    let q = https_quire(&o, &pki, |_| {}).await;
    let tls = connect(&q, &pki, &[b"h2", b"http/1.1"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    for round in 0..2 {
        let req = http::Request::get("https://localhost/b")
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        let resp = send.send_request(req).await.unwrap();
        assert_eq!(resp.version(), http::Version::HTTP_2);
        let status = resp.headers()["cache-status"].to_str().unwrap().to_owned();
        let body = http_body_util::BodyExt::collect(resp.into_body())
            .await
            .unwrap()
            .to_bytes();
        assert_eq!(&body[..], b"bravo");
        if round == 1 {
            assert!(status.contains("hit"), "{status}");
        }
        settle(&q).await;
    }
    assert_eq!(q.ctx.metrics.handshakes(Handshake::H2), 1);
    assert_eq!(o.hits("/b"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hsts_is_on_every_https_answer_when_configured() {
    let o = Origin::start().await;
    cacheable(&o, "/c", "charlie");
    o.route("/nope", Route::ok("gone", &[]).status(404));
    let pki = Pki::new();
    let q = https_quire(&o, &pki, |c| c.tls.hsts = Some("max-age=63072000".into())).await;
    let mut s = connect(&q, &pki, &[b"http/1.1"]).await;
    // A miss (the service), a hit (the fast path), an error passed through.
    for path in ["/c", "/c", "/nope"] {
        let (head, _) = get_on(&mut s, path).await;
        assert_eq!(
            field(&head, "strict-transport-security"),
            Some("max-age=63072000"),
            "{path}: {head}"
        );
        settle(&q).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_beside_https_redirects_with_308_to_the_same_host_and_path() {
    let o = Origin::start().await;
    let pki = Pki::new();
    let q = https_quire(&o, &pki, |c| {
        c.listen_http = Some("127.0.0.1:0".parse().unwrap())
    })
    .await;
    let plain = q.redirect_addr.expect("a redirect listener");
    let r = raw_async(
        plain,
        b"GET /a/b?x=1 HTTP/1.1\r\nHost: example.org\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 308"), "{r}");
    let location = format!("https://example.org:{}/a/b?x=1", q.addr.port());
    assert_eq!(field(&r, "location"), Some(location.as_str()), "{r}");
    // A Host that is not a plain host is never echoed into a Location.
    let r = raw_async(
        plain,
        b"GET / HTTP/1.1\r\nHost: evil.example/x@y\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert!(field(&r, "location").is_none(), "{r}");
    // Nothing went to the origin or the cache.
    assert!(o.seen_all().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_certificate_is_presented_to_new_connections_while_open_ones_go_on() {
    let o = Origin::start().await;
    cacheable(&o, "/d", "delta");
    let pki = Pki::new();
    let (cert, key) = pki.issue("site", "first");
    let q = Quire::start(&o, |c| {
        c.tls.cert = Some(cert.clone());
        c.tls.key = Some(key.clone());
    })
    .await;
    let mut old = connect(&q, &pki, &[b"http/1.1"]).await;
    assert_eq!(common_name(&old), "first");
    get_on(&mut old, "/d").await;
    // Renewed in place (as an operator's deploy or an ACME renewal writes it).
    let (new_cert, new_key) = pki.issue("renewed", "second");
    std::fs::copy(&new_cert, &cert).unwrap();
    std::fs::copy(&new_key, &key).unwrap();
    q.ctx.tls.as_ref().unwrap().reload().unwrap();
    let fresh = connect(&q, &pki, &[b"http/1.1"]).await;
    assert_eq!(common_name(&fresh), "second");
    let (head, body) = get_on(&mut old, "/d").await;
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "the open connection goes on: {head}"
    );
    assert_eq!(body, b"delta");
    // A reload that fails keeps what is presented.
    std::fs::write(&key, "not a key").unwrap();
    assert!(q.ctx.tls.as_ref().unwrap().reload().is_err());
    let still = connect(&q, &pki, &[b"http/1.1"]).await;
    assert_eq!(common_name(&still), "second");
}

/// The common name of the certificate the server presented.
fn common_name(s: &TlsStream<TcpStream>) -> String {
    let chain: &[CertificateDer<'_>] = s.get_ref().1.peer_certificates().unwrap();
    let (_, cert) = x509_parser::parse_x509_certificate(&chain[0]).unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap();
    cn.as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_stalled_handshakes_leave_established_connections_alone() {
    let o = Origin::start().await;
    cacheable(&o, "/e", "echo");
    let pki = Pki::new();
    let q = https_quire(&o, &pki, |c| {
        c.tls.handshake_timeout = quire_server::config::Secs(Duration::from_millis(500));
        c.limits.connections_per_client = 4096;
    })
    .await;
    let mut est = connect(&q, &pki, &[b"http/1.1"]).await;
    get_on(&mut est, "/e").await;
    settle(&q).await;
    // 100 connections of garbage, 100 that stop half-way through a ClientHello.
    let mut stalled = Vec::new();
    for i in 0..200 {
        let mut s = TcpStream::connect(q.addr).await.unwrap();
        if i % 2 == 0 {
            let _ = s
                .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n\x00\xff garbage")
                .await;
        } else {
            // A TLS record header announcing a handshake, then nothing.
            let _ = s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).await;
        }
        stalled.push(s);
        if i % 20 == 0 {
            let (head, body) = get_on(&mut est, "/e").await;
            assert!(head.contains("hit"), "{head}");
            assert_eq!(body, b"echo");
        }
    }
    assert!(
        wait_for(|| q.ctx.metrics.handshakes(Handshake::Failed) >= 100).await,
        "every garbage connection failed its handshake"
    );
    assert!(
        wait_for(|| q.ctx.metrics.handshakes(Handshake::TimedOut) >= 100).await,
        "every stalled handshake was cut at the timeout"
    );
    let (head, body) = get_on(&mut est, "/e").await;
    assert!(head.contains("hit"), "{head}");
    assert_eq!(body, b"echo");
    assert_eq!(o.hits("/e"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_certificate_or_key_stops_start_up_naming_the_file() {
    let o = Origin::start().await;
    let pki = Pki::new();
    let (cert, _) = pki.issue("one", "one");
    let (_, other_key) = pki.issue("two", "two");
    let missing = pki.dir.path().join("missing.pem");
    for (c, k, expect) in [
        (missing.clone(), other_key.clone(), "missing.pem"),
        (
            cert.clone(),
            other_key.clone(),
            "two.key does not belong to the certificate in",
        ),
        (cert.clone(), cert.clone(), "no private key found"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = quire_server::Config {
            origin: Some(o.url()),
            ..Default::default()
        };
        cfg.cache.path = dir.path().join("c.vol");
        cfg.cache.size = quire_server::config::ByteSize(8 << 20);
        cfg.tls.cert = Some(c);
        cfg.tls.key = Some(k);
        let e = quire_server::Ctx::new(cfg).unwrap_err().to_string();
        assert!(e.contains(expect), "{e}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(not(has_curl), ignore = "curl not found on PATH")]
async fn curl_trusting_the_test_ca_gets_http2_and_https_http1() {
    let o = Origin::start().await;
    cacheable(&o, "/page", &String::from_utf8(page(20_000)).unwrap());
    let pki = Pki::new();
    let q = https_quire(&o, &pki, |_| {}).await;
    let url = format!("https://localhost:{}/page", q.addr.port());
    let ca = pki.ca_file();
    let run = move |proto: &'static str| {
        let (url, ca) = (url.clone(), ca.clone());
        tokio::task::spawn_blocking(move || {
            let out = std::process::Command::new("curl")
                .args(["-s", "-o", "/dev/null", "--cacert"])
                .arg(&ca)
                .args([proto, "-w", "%{http_version} %{http_code}", &url])
                .output()
                .unwrap();
            String::from_utf8(out.stdout).unwrap()
        })
    };
    assert_eq!(run("--http2").await.unwrap(), "2 200");
    settle(&q).await;
    assert_eq!(run("--http1.1").await.unwrap(), "1.1 200");
    assert_eq!(o.hits("/page"), 1, "the HTTP/1.1 request was a hit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_on_the_plain_http_port_is_held_to_the_per_client_cap() {
    let o = Origin::start().await;
    let pki = Pki::new();
    let q = https_quire(&o, &pki, |c| {
        c.listen_http = Some("127.0.0.1:0".parse().unwrap());
        c.limits.connections_per_client = 2;
    })
    .await;
    let plain = q.redirect_addr.unwrap();
    // Two idle keep-alive connections hold this client's share...
    let _held: Vec<TcpStream> = futures_hold(plain, 2).await;
    // ...so a third is told so and closed, and nothing else is spent on it.
    let r = raw_async(plain, b"GET / HTTP/1.1\r\nHost: example.org\r\n\r\n").await;
    assert!(r.starts_with("HTTP/1.1 429"), "{r}");
    // HTTPS clients are not affected by port 80's state.
    let mut s = connect(&q, &pki, &[b"http/1.1"]).await;
    cacheable(&o, "/f", "foxtrot");
    let (head, body) = get_on(&mut s, "/f").await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(body, b"foxtrot");
}

/// `n` keep-alive connections to `addr`, each admitted (it answered a request)
/// and left open.
async fn futures_hold(addr: std::net::SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let (head, _) = get_on(&mut s, "/").await;
        assert!(head.starts_with("HTTP/1.1 308"), "{head}");
        held.push(s);
    }
    held
}
