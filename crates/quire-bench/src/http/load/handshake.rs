//! `quire bench load --handshakes`: new TLS connections as fast as the server accepts
//! them. Each of `connections` tasks on one current-thread tokio runtime loops:
//! connect, a full TLS 1.3 handshake (resumption off: no session cache, no tickets
//! kept), one `GET` with `Connection: close`, read until the server closes. A request
//! counts when its answer is whole; its latency is the whole exchange, connect to
//! close. The requests cycle through the same path list as the load runs.
//!
//! Why not h2load: it resumes sessions when it reconnects (measured: every
//! reconnection after the first was a resumed session on nginx), and with the server
//! closing each connection its timed mode did not stop.
//!
//! Key decision: the client does not check the certificate. A full handshake costs a
//! client about as much as a server, and checking the chain and the handshake
//! signature would add two ECDSA verifications per connection on the client's one
//! core; the warm-up's client checks the same certificate against the run's CA
//! before any load. The cipher suite and group are the same as every other client's
//! (`super::super::tls`).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::engine::Config;
use super::request::Requests;
use super::stats::Stats;
use crate::http::tls::{self, Negotiated};

/// A verifier that accepts any certificate and signature (see the module doc).
#[derive(Debug)]
struct Unchecked(Vec<SignatureScheme>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.clone()
    }
}

/// The client: TLS 1.3 with the run's suite and group, ALPN `http/1.1`, no
/// resumption, no certificate check.
fn client_config() -> anyhow::Result<rustls::ClientConfig> {
    let provider = tls::provider();
    let schemes = provider
        .signature_verification_algorithms
        .supported_schemes();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Unchecked(schemes)))
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    cfg.resumption = rustls::client::Resumption::disabled();
    Ok(cfg)
}

/// One task's share of the run.
struct Task {
    connector: tokio_rustls::TlsConnector,
    addr: SocketAddr,
    name: ServerName<'static>,
    reqs: Arc<Requests>,
    timeout: Duration,
}

/// How one exchange ended.
enum Outcome {
    /// The answer was whole: its status and bytes.
    Answered(u16, u64),
    Connect,
    Handshake,
    Write,
    Read,
    Timeout,
}

impl Task {
    /// Connect, handshake, one request, read to the server's close.
    async fn exchange(&self, request: &[u8], seen: &mut Option<Negotiated>) -> Outcome {
        let run = async {
            let Ok(tcp) = tokio::net::TcpStream::connect(self.addr).await else {
                return Outcome::Connect;
            };
            let _ = tcp.set_nodelay(true);
            let Ok(mut s) = self.connector.connect(self.name.clone(), tcp).await else {
                return Outcome::Handshake;
            };
            if seen.is_none() {
                *seen = Some(negotiated(s.get_ref().1));
            }
            if s.write_all(request).await.is_err() || s.flush().await.is_err() {
                return Outcome::Write;
            }
            let mut buf = vec![0u8; 64 * 1024];
            let (mut total, mut status) = (0u64, 0u16);
            loop {
                match s.read(&mut buf).await {
                    Ok(0) => break,
                    Ok(n) => {
                        if total == 0 {
                            status = status_of(&buf[..n]);
                        }
                        total += n as u64;
                    }
                    // The server closed without close_notify after its answer.
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && total > 0 => break,
                    Err(_) => return Outcome::Read,
                }
            }
            if status == 0 {
                return Outcome::Read;
            }
            Outcome::Answered(status, total)
        };
        tokio::time::timeout(self.timeout, run)
            .await
            .unwrap_or(Outcome::Timeout)
    }

    /// Exchanges until `deadline`, starting at request `first` of the sequence and
    /// stepping by `step`, counting into its own stats.
    async fn run(self, t0: Instant, deadline: Instant, first: u64, step: u64) -> TaskResult {
        let mut stats = Stats::new(deadline - t0);
        let mut seen = None;
        let mut n = first;
        while Instant::now() < deadline {
            let start = Instant::now();
            match self.exchange(self.reqs.nth(n), &mut seen).await {
                Outcome::Answered(status, bytes) => {
                    let end = Instant::now();
                    stats.complete(status, bytes, end - start, end - t0);
                }
                Outcome::Connect => stats.errors.connect += 1,
                Outcome::Handshake | Outcome::Read => stats.errors.read += 1,
                Outcome::Write => stats.errors.write += 1,
                Outcome::Timeout => stats.errors.timeout += 1,
            }
            n += step;
        }
        TaskResult { stats, seen }
    }
}

/// What one task counted.
struct TaskResult {
    stats: Stats,
    seen: Option<Negotiated>,
}

/// What a connection negotiated.
fn negotiated(c: &rustls::ClientConnection) -> Negotiated {
    Negotiated {
        version: match c.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".into(),
            Some(v) => format!("{v:?}"),
            None => String::new(),
        },
        cipher: c
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .map(tls::openssl_name)
            .unwrap_or_default(),
        group: c
            .negotiated_key_exchange_group()
            .map(|g| format!("{:?}", g.name()))
            .unwrap_or_default(),
        alpn: c
            .alpn_protocol()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .unwrap_or_default(),
    }
}

/// The status code of a response's first bytes (`HTTP/1.1 200 OK`); 0 if none.
fn status_of(b: &[u8]) -> u16 {
    b.get(9..12)
        .and_then(|d| std::str::from_utf8(d).ok())
        .and_then(|d| d.parse().ok())
        .filter(|_| b.starts_with(b"HTTP/1."))
        .unwrap_or(0)
}

/// Adds one task's counts to the run's.
fn merge(into: &mut Stats, from: &Stats) {
    into.requests += from.requests;
    into.bytes += from.bytes;
    into.non_2xx += from.non_2xx;
    let (a, b) = (&mut into.errors, &from.errors);
    a.connect += b.connect;
    a.read += b.read;
    a.write += b.write;
    a.timeout += b.timeout;
    a.parse += b.parse;
    into.latency.merge(&from.latency);
    if into.timeline.len() < from.timeline.len() {
        into.timeline.resize(from.timeline.len(), 0);
    }
    for (i, n) in from.timeline.iter().enumerate() {
        into.timeline[i] += n;
    }
}

/// Runs the handshake load as `cfg` says (`rate` is not used: closed loop), the
/// requests from `reqs` (formatted with `Connection: close`), and returns what it
/// counted and what the first connection negotiated.
pub(crate) fn run(cfg: &Config, reqs: Requests) -> anyhow::Result<(Stats, Option<Negotiated>)> {
    anyhow::ensure!(cfg.connections > 0, "no connections");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client_config()?));
    let name = ServerName::IpAddress(cfg.addr.ip().into());
    let reqs = Arc::new(reqs);
    rt.block_on(async {
        let t0 = Instant::now();
        let deadline = t0 + cfg.duration;
        let mut set = tokio::task::JoinSet::new();
        let step = cfg.connections as u64;
        for k in 0..step {
            let task = Task {
                connector: connector.clone(),
                addr: cfg.addr,
                name: name.clone(),
                reqs: reqs.clone(),
                timeout: cfg.timeout,
            };
            set.spawn(task.run(t0, deadline, k, step));
        }
        let mut stats = Stats::new(cfg.duration);
        let mut seen = None;
        while let Some(r) = set.join_next().await {
            let r = r?;
            merge(&mut stats, &r.stats);
            seen = seen.or(r.seen);
        }
        stats.elapsed = t0.elapsed();
        Ok((stats, seen))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_merges() {
        assert_eq!(status_of(b"HTTP/1.1 200 OK\r\n"), 200);
        assert_eq!(status_of(b"HTTP/1.0 404 Not Found"), 404);
        assert_eq!(status_of(b"SSH-2.0-x"), 0);
        assert_eq!(status_of(b"HTTP/1.1"), 0);
        let mut a = Stats::new(Duration::from_secs(1));
        let mut b = Stats::new(Duration::from_secs(1));
        a.complete(200, 10, Duration::from_micros(5), Duration::from_millis(50));
        b.complete(500, 7, Duration::from_micros(9), Duration::from_millis(250));
        b.errors.connect = 2;
        merge(&mut a, &b);
        assert_eq!((a.requests, a.bytes, a.non_2xx), (2, 17, 1));
        assert_eq!(a.errors.connect, 2);
        assert_eq!(a.timeline, [1, 0, 1]);
        assert_eq!(a.latency.count(), 2);
    }

    /// A rustls server on the run's certificate, answering every connection with one
    /// `200` and closing it; counts the handshakes that resumed a session.
    fn server(resumed: Arc<std::sync::atomic::AtomicUsize>) -> SocketAddr {
        use std::io::{Read, Write};
        let pki = crate::http::tls::TestPki::make(tempfile::tempdir().unwrap()).unwrap();
        let mut cfg = crate::http::tls::test_server_config(&pki);
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        let cfg = Arc::new(cfg);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            for sock in listener.incoming() {
                let conn = rustls::ServerConnection::new(cfg.clone()).unwrap();
                let mut s = rustls::StreamOwned::new(conn, sock.unwrap());
                let mut req = Vec::new();
                let mut b = [0u8; 1024];
                while !req.ends_with(b"\r\n\r\n") {
                    match s.read(&mut b) {
                        Ok(n) if n > 0 => req.extend_from_slice(&b[..n]),
                        _ => break,
                    }
                }
                if s.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                    resumed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
                );
                s.conn.send_close_notify();
                let _ = s.flush();
            }
        });
        addr
    }

    #[test]
    fn every_request_is_a_full_handshake_on_a_new_connection() {
        let resumed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let addr = server(resumed.clone());
        let cfg = Config {
            addr,
            connections: 2,
            duration: Duration::from_millis(300),
            rate: None,
            timeout: Duration::from_secs(2),
            spin: false,
        };
        let paths = vec!["/a".to_owned(), "/b".to_owned()];
        let reqs = Requests::closing(&paths, &addr.to_string(), "gzip", None).unwrap();
        let (stats, seen) = run(&cfg, reqs).unwrap();
        assert!(stats.requests >= 2, "{}", stats.requests);
        assert_eq!(stats.errors.total(), 0, "{:?}", stats.errors);
        assert_eq!(stats.non_2xx, 0);
        assert_eq!(resumed.load(std::sync::atomic::Ordering::Relaxed), 0);
        let seen = seen.unwrap();
        assert_eq!(seen.version, "TLSv1.3");
        assert_eq!(seen.cipher, crate::http::tls::CIPHER);
        assert_eq!(seen.group, crate::http::tls::GROUP);
        assert_eq!(seen.alpn, "http/1.1");
    }

    #[test]
    fn the_client_resumes_nothing_and_offers_one_suite() {
        let cfg = client_config().unwrap();
        assert_eq!(cfg.alpn_protocols, [b"http/1.1".to_vec()]);
        assert_eq!(cfg.crypto_provider().cipher_suites.len(), 1);
        assert_eq!(cfg.crypto_provider().kx_groups.len(), 1);
    }
}
