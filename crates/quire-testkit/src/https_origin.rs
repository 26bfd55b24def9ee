//! https for the tests: a certificate authority made in the test ([`TestCa`]), the
//! leaf certificates it signs ([`Leaf`]), and the scripted [`Origin`] behind a TLS
//! acceptor ([`Origin::start_https`]).
//!
//! Certificates are made fresh by rcgen in each test (nothing is checked in, so
//! nothing expires in the repository); keys and signatures come from ring, as in
//! quire itself.

use std::path::Path;
use std::sync::Arc;

use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::TcpListener;

use crate::{answer, Origin, OriginState};

/// A certificate authority made for one test.
#[derive(Debug)]
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    /// A new self-signed CA with the common name `name`.
    pub fn new(name: &str) -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().unwrap();
        TestCa {
            issuer: CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// Writes the CA certificate (PEM) to `path`.
    pub fn write_pem(&self, path: &Path) {
        std::fs::write(path, self.pem()).unwrap();
    }

    /// A server certificate this CA signs, valid for `names` (host names, or IP
    /// addresses as text, which become IP address entries).
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "quire test origin");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf::new(&cert, &key)
    }
}

/// A server certificate and its key.
#[derive(Debug)]
pub struct Leaf {
    /// The certificate (the CA's is not sent: a client trusts it or not).
    pub chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
    pem: String,
}

impl Leaf {
    fn new(cert: &rcgen::Certificate, key: &KeyPair) -> Leaf {
        Leaf {
            chain: vec![cert.der().clone()],
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
            pem: cert.pem(),
        }
    }

    /// A self-signed server certificate (no CA) valid for `names`.
    pub fn self_signed(names: &[&str]) -> Leaf {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .self_signed(&key)
            .unwrap();
        Leaf::new(&cert, &key)
    }

    /// The certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    /// A rustls server configuration presenting this certificate, offering
    /// `http/1.1` by ALPN.
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                self.chain.clone(),
                PrivateKeyDer::Pkcs8(self.key.clone_key()),
            )
            .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

impl Origin {
    /// Starts an origin on a free loopback port that speaks HTTP/1.1 over TLS with
    /// `tls`; routes and what it saw work as for [`Origin::start`]. A failed
    /// handshake closes that connection only.
    pub async fn start_https(tls: Arc<rustls::ServerConfig>) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(OriginState::default());
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                let Some(stream) = super::accept_until_stopped(&listener, &st).await else {
                    return;
                };
                let (st, acceptor) = (st.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let sni = stream.get_ref().1.server_name().map(str::to_owned);
                    st.server_names.lock().unwrap().push(sni);
                    let for_svc = st.clone();
                    let svc = service_fn(move |req| answer(for_svc.clone(), req));
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc);
                    super::until_stopped(&st, conn).await;
                });
            }
        });
        Origin { addr, state }
    }

    /// The SNI name of each TLS connection it accepted (`None`: the client sent
    /// none, as for an address).
    pub fn server_names(&self) -> Vec<Option<String>> {
        self.state.server_names.lock().unwrap().clone()
    }

    /// Its https URL under the name `host` (`https://host:port`): the name quire
    /// sends by SNI and checks the certificate against.
    pub fn https_url(&self, host: &str) -> String {
        format!("https://{host}:{}", self.addr.port())
    }
}
