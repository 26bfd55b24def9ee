//! Automatic certificates against Let's Encrypt's test CA, `pebble` (Debian's
//! package), run by the test with its own API certificate, and
//! `pebble-challtestsrv` as its DNS (every name resolves to 127.0.0.1). For each
//! challenge type: the first certificate is obtained and served (a client that
//! trusts only pebble's root verifies the chain quire presents for the name), renewed (pebble
//! issues one-hour certificates and quire renews with less than
//! `renew_before` left), and the new one is presented to new connections while a
//! connection opened before the renewal goes on.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quire_server::config::{AcmeChallenge, AcmeSection, Secs};
use quire_testkit::*;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

/// The name quire gets a certificate for (pebble's DNS answers 127.0.0.1).
const DOMAIN: &str = "quire.test";
/// How long pebble's certificates last.
const VALIDITY: Duration = Duration::from_secs(3600);

/// pebble and its DNS, killed when dropped.
struct Pebble {
    procs: Vec<Child>,
    dir: tempfile::TempDir,
    directory: String,
    /// pebble's management API (`/roots/0`: the root it issues under).
    management: u16,
}

impl Drop for Pebble {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.kill();
            let _ = p.wait();
        }
    }
}

impl Pebble {
    /// Starts pebble; its validation authority checks HTTP-01 on `http_port` and
    /// TLS-ALPN-01 on `tls_port` of 127.0.0.1.
    fn start(http_port: u16, tls_port: u16) -> Pebble {
        let dir = tempfile::tempdir().unwrap();
        // The package ships no certificate for pebble's own HTTPS API: make one.
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .unwrap();
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.path().join("api.crt"), cert.pem()).unwrap();
        std::fs::write(dir.path().join("api.key"), key.serialize_pem()).unwrap();
        let (api, mgmt, dns) = (free_port(), free_port(), free_port());
        let config = serde_json::json!({ "pebble": {
            "listenAddress": format!("127.0.0.1:{api}"),
            "managementListenAddress": format!("127.0.0.1:{mgmt}"),
            "certificate": dir.path().join("api.crt"),
            "privateKey": dir.path().join("api.key"),
            "httpPort": http_port,
            "tlsPort": tls_port,
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false,
            "certificateValidityPeriod": VALIDITY.as_secs(),
        }});
        std::fs::write(dir.path().join("pebble.json"), config.to_string()).unwrap();
        let log = |name: &str| Stdio::from(std::fs::File::create(dir.path().join(name)).unwrap());
        let challtest = Command::new("pebble-challtestsrv")
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""])
            .args(["-dns01", &format!("127.0.0.1:{dns}")])
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-management", &format!("127.0.0.1:{}", free_port())])
            .stdout(log("challtestsrv.log"))
            .stderr(log("challtestsrv.err"))
            .spawn()
            .expect("pebble-challtestsrv runs");
        let pebble = Command::new("pebble")
            .arg("-config")
            .arg(dir.path().join("pebble.json"))
            .args(["-dnsserver", &format!("127.0.0.1:{dns}")])
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            .stdout(log("pebble.log"))
            .stderr(log("pebble.err"))
            .spawn()
            .expect("pebble runs");
        let p = Pebble {
            procs: vec![challtest, pebble],
            directory: format!("https://127.0.0.1:{api}/dir"),
            management: mgmt,
            dir,
        };
        let up = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", api)).is_err() {
            assert!(
                up.elapsed() < Duration::from_secs(20),
                "pebble did not start: {}",
                p.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        p
    }

    fn ca_file(&self) -> PathBuf {
        self.dir.path().join("api.crt")
    }

    fn logs(&self) -> String {
        ["pebble.log", "pebble.err", "challtestsrv.err"]
            .iter()
            .map(|f| std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A rustls client trusting only `root`, offering `alpn`.
fn client(root: CertificateDer<'static>, alpn: &[u8]) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    tokio_rustls::TlsConnector::from(Arc::new(cfg))
}

impl Pebble {
    /// The root pebble issues under (made fresh at each start), from its
    /// management API.
    async fn issuing_root(&self) -> CertificateDer<'static> {
        let pem = std::fs::read(self.ca_file()).unwrap();
        let api_cert = CertificateDer::from_pem_slice(&pem).unwrap();
        let tcp = TcpStream::connect(("127.0.0.1", self.management))
            .await
            .unwrap();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let mut s = client(api_cert, b"http/1.1")
            .connect(name, tcp)
            .await
            .unwrap();
        s.write_all(b"GET /roots/0 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        // pebble may end without close_notify: what arrived is the answer.
        let _ = s.read_to_end(&mut answer).await;
        let body = answer.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        CertificateDer::from_pem_slice(&answer[body..])
            .expect("pebble's root, PEM")
            .into_owned()
    }
}

/// An HTTP/1.1 TLS connection to `addr` for `DOMAIN`, verified against `root`.
async fn connect(addr: SocketAddr, root: &CertificateDer<'static>) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.unwrap();
    client(root.clone(), b"http/1.1")
        .connect(ServerName::try_from(DOMAIN).unwrap(), tcp)
        .await
        .expect("the served chain verifies against pebble's root for the domain")
}

/// The leaf certificate the server presented on `s`.
fn presented(s: &TlsStream<TcpStream>) -> Vec<u8> {
    s.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}

/// The leaf certificate ACME stored in `state_dir`.
fn stored(state_dir: &Path) -> Vec<u8> {
    let pem = std::fs::read(state_dir.join("cert.pem")).unwrap();
    CertificateDer::pem_slice_iter(&pem)
        .next()
        .unwrap()
        .unwrap()
        .to_vec()
}

/// A keep-alive `GET /` on `s`; the status line.
async fn get_root(s: &mut TlsStream<TcpStream>) -> String {
    s.write_all(format!("GET / HTTP/1.1\r\nHost: {DOMAIN}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = Vec::new();
    loop {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return text.lines().next().unwrap().to_owned();
            }
        }
    }
}

/// Waits up to 60 s for `cond`.
async fn eventually(what: &str, pebble: &Pebble, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what}: timed out\n{}",
            pebble.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn obtain_serve_and_renew(challenge: AcmeChallenge) {
    let (https_port, http_port) = (free_port(), free_port());
    let pebble = Pebble::start(http_port, https_port);
    let state = tempfile::tempdir().unwrap();
    let o = Origin::start().await;
    o.route("/", Route::ok("home", &[("cache-control", "max-age=60")]));
    let q = Quire::start(&o, |c| {
        c.listen = SocketAddr::from(([127, 0, 0, 1], https_port));
        c.listen_http = Some(SocketAddr::from(([127, 0, 0, 1], http_port)));
        c.tls.acme = Some(AcmeSection {
            domains: vec![DOMAIN.to_owned()],
            contact: vec!["ops@quire.test".to_owned()],
            directory: pebble.directory.clone(),
            ca_file: Some(pebble.ca_file()),
            state_dir: state.path().join("acme"),
            challenge,
            // Renew a few seconds after each issue.
            renew_before: Secs(VALIDITY - Duration::from_secs(4)),
        });
    })
    .await;
    let tls = q.ctx.tls.clone().unwrap();
    eventually("the first certificate", &pebble, || {
        tls.not_after().is_some()
    })
    .await;
    let state_dir = state.path().join("acme");
    let first = stored(&state_dir);
    let root = pebble.issuing_root().await;
    let mut old = connect(q.addr, &root).await;
    assert_eq!(presented(&old), first, "the ACME certificate is served");
    assert!(get_root(&mut old).await.starts_with("HTTP/1.1 200"));
    let (_, cert) = x509_parser::parse_x509_certificate(&first).unwrap();
    let names = format!(
        "{:?}",
        cert.subject_alternative_name().unwrap().unwrap().value
    );
    assert!(names.contains(DOMAIN), "{names}");
    let issuer = cert.issuer().to_string();
    assert!(issuer.contains("Pebble"), "issued by pebble: {issuer}");
    // The state directory is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&state_dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
    let key_mode = std::fs::metadata(state_dir.join("key.pem"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(key_mode & 0o777, 0o600);

    eventually("the renewal", &pebble, || stored(&state_dir) != first).await;
    let renewed = stored(&state_dir);
    let fresh = connect(q.addr, &root).await;
    assert_eq!(
        presented(&fresh),
        renewed,
        "new connections get the renewed certificate"
    );
    assert!(
        get_root(&mut old).await.starts_with("HTTP/1.1 200"),
        "the connection opened before the renewal goes on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_pebble),
    ignore = "pebble not found on PATH (apt-get install pebble)"
)]
async fn acme_tls_alpn_01_obtains_serves_and_renews_without_dropping_a_connection() {
    obtain_serve_and_renew(AcmeChallenge::TlsAlpn01).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(has_pebble),
    ignore = "pebble not found on PATH (apt-get install pebble)"
)]
async fn acme_http_01_obtains_serves_and_renews_without_dropping_a_connection() {
    obtain_serve_and_renew(AcmeChallenge::Http01).await;
}
