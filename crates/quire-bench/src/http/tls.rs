//! What `quire bench http --tls` shares between the servers and the clients: a test
//! CA and a server certificate made for the run, what is measured over TLS
//! ([`Protocol`]), and the TLS parameters every client offers.
//!
//! Key decisions:
//! - **The certificate a site gets today**: ECDSA P-256, a leaf for `localhost` and
//!   `127.0.0.1` signed by a CA made in the same run (rcgen), written as PEM into the
//!   run's scratch directory: the cert file holds the leaf then the chain, the key
//!   file the leaf's PKCS#8 key. quire and nginx load the same two files.
//! - **One cipher suite and one key exchange, chosen by the clients**: every client
//!   (h2load, the warm-up's, the handshake client) offers TLS 1.3 with
//!   `TLS_AES_128_GCM_SHA256` and X25519 only, first choices of both rustls and
//!   OpenSSL, so both servers must negotiate exactly those or fail the handshake;
//!   nginx is configured with the same pair. What was negotiated is read back from
//!   h2load and the handshake client and printed with the figures.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;

/// The TLS 1.3 cipher suite every client offers (OpenSSL's name; rustls's is
/// `TLS13_AES_128_GCM_SHA256`).
pub(crate) const CIPHER: &str = "TLS_AES_128_GCM_SHA256";
/// The key exchange group every client offers.
pub(crate) const GROUP: &str = "X25519";

/// What a TLS run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// HTTP/1.1 over TLS on keep-alive connections (h2load `--h1`).
    Https1,
    /// HTTP/2 over TLS, several streams per connection (h2load).
    H2,
    /// A new TLS connection for every request: a full handshake (no resumption), one
    /// GET, closed by the server (`Connection: close`).
    Handshake,
}

impl Protocol {
    /// The suffix of a subject's name in tables and JSON (`quire/tls-h2`).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Protocol::Https1 => "tls-h1",
            Protocol::H2 => "tls-h2",
            Protocol::Handshake => "handshake",
        }
    }

    /// What the report and the JSON call it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Protocol::Https1 => "HTTP/1.1 over TLS",
            Protocol::H2 => "HTTP/2 over TLS",
            Protocol::Handshake => "a new TLS connection per request",
        }
    }

    /// The protocol a [`Protocol::label`] names.
    pub(crate) fn from_label(label: &str) -> Option<Protocol> {
        [Protocol::Https1, Protocol::H2, Protocol::Handshake]
            .into_iter()
            .find(|p| p.label() == label)
    }

    /// What one of its requests is called in the report.
    pub(crate) fn unit(self) -> &'static str {
        match self {
            Protocol::Handshake => "handshakes",
            Protocol::Https1 | Protocol::H2 => "requests",
        }
    }

    /// The ALPN protocol the server must select.
    pub(crate) fn alpn(self) -> &'static str {
        match self {
            Protocol::H2 => "h2",
            Protocol::Https1 | Protocol::Handshake => "http/1.1",
        }
    }
}

/// What a client saw negotiated (from h2load's output or the handshake client).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Negotiated {
    /// `TLSv1.3`.
    pub version: String,
    /// `TLS_AES_128_GCM_SHA256`.
    pub cipher: String,
    /// `X25519`.
    pub group: String,
    /// `h2` or `http/1.1`.
    pub alpn: String,
}

impl std::fmt::Display for Negotiated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}, {}, {}, ALPN {}",
            self.version, self.cipher, self.group, self.alpn
        )
    }
}

/// The run's test CA and server certificate, as files; removed on drop.
#[derive(Debug)]
pub(crate) struct TestPki {
    _dir: tempfile::TempDir,
    /// The server certificate then the CA's (PEM).
    pub cert: PathBuf,
    /// The server's private key (PEM, PKCS#8).
    pub key: PathBuf,
    /// The CA certificate alone (PEM): what the clients that check trust.
    pub ca: PathBuf,
    /// The warm-up's client: trusts the CA, offers [`CIPHER`] and [`GROUP`] only.
    pub client: Arc<rustls::ClientConfig>,
}

impl TestPki {
    /// Makes a CA and a certificate for `localhost` and `127.0.0.1` signed by it, in
    /// `dir` (a scratch directory the servers can read).
    pub(crate) fn make(dir: tempfile::TempDir) -> anyhow::Result<TestPki> {
        let (ca_key, ca_params) = (rcgen::KeyPair::generate()?, ca_params()?);
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let mut leaf =
            rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])?;
        leaf.distinguished_name
            .push(rcgen::DnType::CommonName, "localhost");
        leaf.use_authority_key_identifier_extension = true;
        leaf.key_usages
            .push(rcgen::KeyUsagePurpose::DigitalSignature);
        leaf.extended_key_usages
            .push(rcgen::ExtendedKeyUsagePurpose::ServerAuth);
        // KeyPair::generate is ECDSA P-256 with SHA-256.
        let leaf_key = rcgen::KeyPair::generate()?;
        let leaf_cert = leaf.signed_by(&leaf_key, &issuer)?;
        let path = |name: &str| dir.path().join(name);
        let (cert, key, ca) = (path("cert.pem"), path("key.pem"), path("ca.pem"));
        std::fs::write(&cert, leaf_cert.pem() + &ca_cert.pem())?;
        std::fs::write(&key, leaf_key.serialize_pem())?;
        std::fs::write(&ca, ca_cert.pem())?;
        let client = Arc::new(client_config(&ca)?);
        Ok(TestPki {
            _dir: dir,
            cert,
            key,
            ca,
            client,
        })
    }
}

/// The CA's parameters: a CA for certificates, nothing else.
fn ca_params() -> anyhow::Result<rcgen::CertificateParams> {
    let mut p = rcgen::CertificateParams::new(Vec::new())?;
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    p.distinguished_name
        .push(rcgen::DnType::CommonName, "quire bench test CA");
    p.key_usages.push(rcgen::KeyUsagePurpose::KeyCertSign);
    p.key_usages.push(rcgen::KeyUsagePurpose::DigitalSignature);
    Ok(p)
}

/// rustls with the ring provider cut down to [`CIPHER`] and [`GROUP`], TLS 1.3 only.
pub(crate) fn provider() -> rustls::crypto::CryptoProvider {
    let mut p = rustls::crypto::ring::default_provider();
    p.cipher_suites = vec![rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256];
    p.kx_groups = vec![rustls::crypto::ring::kx_group::X25519];
    p
}

/// A client that trusts only the CA in `ca` (PEM), speaking HTTP/1.1.
pub(crate) fn client_config(ca: &Path) -> anyhow::Result<rustls::ClientConfig> {
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_file_iter(ca)
        .with_context(|| format!("reading {}", ca.display()))?
    {
        roots.add(c.with_context(|| format!("parsing {}", ca.display()))?)?;
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(provider()))
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

/// The name a client verifies for `host` (`ip:port` or `name:port`).
pub(crate) fn server_name(host: &str) -> anyhow::Result<rustls_pki_types::ServerName<'static>> {
    let name = host.rsplit_once(':').map_or(host, |(h, _)| h);
    rustls_pki_types::ServerName::try_from(name.to_owned())
        .with_context(|| format!("{host}: not a TLS server name"))
}

/// rustls's name for a negotiated cipher suite, in OpenSSL's spelling (what h2load
/// prints): `TLS13_AES_128_GCM_SHA256` → `TLS_AES_128_GCM_SHA256`.
pub(crate) fn openssl_name(rustls_name: &str) -> String {
    rustls_name.replacen("TLS13_", "TLS_", 1)
}

/// A rustls server configuration on `pki`'s certificate (the tests' servers).
#[cfg(test)]
pub(crate) fn test_server_config(pki: &TestPki) -> rustls::ServerConfig {
    use rustls_pki_types::pem::PemObject;
    let chain: Vec<_> = rustls_pki_types::CertificateDer::pem_file_iter(&pki.cert)
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let key = rustls_pki_types::PrivateKeyDer::from_pem_file(&pki.key).unwrap();
    rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn the_certificate_verifies_against_the_ca_and_serves_a_handshake() {
        let pki = TestPki::make(tempfile::tempdir().unwrap()).unwrap();
        let pem = std::fs::read_to_string(&pki.cert).unwrap();
        assert_eq!(pem.matches("BEGIN CERTIFICATE").count(), 2, "leaf then CA");
        let key = std::fs::read_to_string(&pki.key).unwrap();
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"), "PKCS#8");
        // A rustls server on the files; the warm-up's client must accept it and
        // negotiate the one suite and group it offers.
        let server = test_server_config(&pki);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let t = std::thread::spawn(move || {
            let (sock, _) = listener.accept().unwrap();
            let conn = rustls::ServerConnection::new(Arc::new(server)).unwrap();
            let mut s = rustls::StreamOwned::new(conn, sock);
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).unwrap();
            s.write_all(b"pong").unwrap();
            s.conn.send_close_notify();
            s.flush().unwrap();
        });
        let conn =
            rustls::ClientConnection::new(pki.client.clone(), server_name(&host).unwrap()).unwrap();
        let mut c = rustls::StreamOwned::new(conn, std::net::TcpStream::connect(&host).unwrap());
        c.write_all(b"ping").unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"pong");
        let suite = c.conn.negotiated_cipher_suite().unwrap().suite();
        assert_eq!(openssl_name(suite.as_str().unwrap()), CIPHER);
        t.join().unwrap();
    }

    #[test]
    fn protocols_have_their_labels() {
        assert_eq!(Protocol::H2.alpn(), "h2");
        assert_eq!(Protocol::Handshake.alpn(), "http/1.1");
        assert_eq!(Protocol::Https1.label(), "tls-h1");
        for p in [Protocol::Https1, Protocol::H2, Protocol::Handshake] {
            assert_eq!(Protocol::from_label(p.label()), Some(p));
        }
        assert_eq!(Protocol::from_label("h3"), None);
        assert!(server_name("127.0.0.1:443").is_ok());
        assert!(server_name("localhost:8443").is_ok());
    }
}
