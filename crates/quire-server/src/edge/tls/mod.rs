//! TLS on the listener: the certificate read from PEM files ([`load`], errors that
//! name the file) or obtained and renewed by ACME (`acme`), presented by a
//! resolver that can swap it while connections stay up ([`resolve`]), and rustls'
//! server settings.
//!
//! Key decisions:
//! - **rustls with the ring provider**: memory-safe, no OpenSSL, and ring builds with
//!   the C compiler every machine has (aws-lc-rs, rustls' default, also needs cmake).
//! - **ALPN offers `h2` then `http/1.1`**: browsers get HTTP/2; HTTP/1.1 clients (and
//!   every benchmark tool's default) keep the fast path, which runs over TLS too
//!   (see `wire`). With ACME's TLS-ALPN-01, `acme-tls/1` is offered too; only a
//!   validator asks for it, and its connection is closed after the handshake.
//! - **TLS 1.3 and 1.2** (rustls' safe defaults: no CBC suites, no renegotiation, no
//!   compression). **Resumption by stateless tickets** (rotated every 6 hours by
//!   rustls' ticketer) plus a bounded session cache for TLS 1.2 clients without
//!   ticket support: a returning visitor skips the signature, and no client can grow
//!   server memory with sessions. **No 0-RTT**: early data can be replayed, and a
//!   replayed `PURGE` or `POST` is not something a cache should accept.
//! - **The handshake is bounded** (`tls.handshake_timeout`) and runs inside the
//!   connection's slot, so a flood of handshakes is held to the same connection
//!   limits as any other client and never delays an established connection's reads.

pub(crate) mod acme;
mod load;
mod resolve;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use http::HeaderValue;
use tokio_rustls::TlsAcceptor;

pub use load::{load, Loaded, TlsError};
pub(crate) use resolve::ACME_TLS_ALPN;

use crate::config::{AcmeChallenge, AcmeSection, TlsSection};

/// Sessions remembered for TLS 1.2 clients that do not take tickets.
const SESSION_CACHE_ENTRIES: usize = 4096;

/// Where the certificate comes from.
#[derive(Debug)]
enum Source {
    /// The operator's files.
    Files { cert: PathBuf, key: PathBuf },
    /// ACME, kept in its state directory.
    Acme(AcmeSection),
}

/// The listener's TLS: settings, current certificate, and where it came from.
#[derive(Debug)]
pub struct Tls {
    config: Arc<rustls::ServerConfig>,
    certs: Arc<resolve::Certs>,
    source: Source,
    hsts: Option<HeaderValue>,
    handshake_timeout: Duration,
    /// ACME HTTP-01 challenges pending: token → key authorization (answered on
    /// `listen_http`, see `redirect`).
    http01: RwLock<HashMap<String, String>>,
}

impl Tls {
    /// TLS as the `[tls]` section configures it; `None` when it is off. With ACME,
    /// a certificate kept from an earlier run is presented at once (if still
    /// valid); `acme::run` obtains one when there is none or it is due.
    pub fn from_config(section: &TlsSection) -> Result<Option<Tls>, TlsError> {
        let source = match (&section.cert, &section.key, &section.acme) {
            (Some(cert), Some(key), _) => Source::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            (_, _, Some(acme)) => Source::Acme(acme.clone()),
            _ => return Ok(None),
        };
        let certs = Arc::new(resolve::Certs::default());
        let alpn_challenge =
            matches!(&source, Source::Acme(a) if a.challenge == AcmeChallenge::TlsAlpn01);
        let tls = Tls {
            config: server_config(certs.clone(), alpn_challenge),
            certs,
            source,
            hsts: section
                .hsts
                .as_deref()
                .and_then(|h| HeaderValue::from_str(h).ok()),
            handshake_timeout: section.handshake_timeout.0,
            http01: RwLock::default(),
        };
        match &tls.source {
            Source::Files { .. } => {
                tls.reload()?;
            }
            Source::Acme(a) => {
                load::prepare_state_dir(&a.state_dir)?;
                if let Err(e) = tls.reload() {
                    tracing::info!(reason = %e, "no usable ACME certificate yet; one will be obtained");
                }
            }
        }
        Ok(Some(tls))
    }

    /// Reads the certificate files again (the operator's, or ACME's in its state
    /// directory) and presents what they hold from the next handshake on; on an
    /// error the current certificate stays.
    pub fn reload(&self) -> Result<Loaded, TlsError> {
        let loaded = match &self.source {
            Source::Files { cert, key } => load(cert, key, SystemTime::now())?,
            Source::Acme(a) => {
                let (cert, key) = load::acme_files(&a.state_dir);
                load(&cert, &key, SystemTime::now())?
            }
        };
        self.certs.swap(resolve::Current {
            key: loaded.key.clone(),
            not_after: loaded.not_after,
        });
        Ok(loaded)
    }

    /// When the certificate presented now expires; `None` before ACME has obtained
    /// a first one.
    pub fn not_after(&self) -> Option<SystemTime> {
        self.certs.current().map(|c| c.not_after)
    }

    /// Appends the certificate's Prometheus gauge to `out`:
    /// `quire_tls_certificate_expiry_timestamp_seconds`, when the certificate
    /// presented now expires (0 while ACME has not obtained one), for an alert well
    /// before a renewal that keeps failing runs out.
    pub fn write_metrics(&self, out: &mut String) {
        let expiry = self
            .not_after()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        out.push_str(
            "# HELP quire_tls_certificate_expiry_timestamp_seconds When the certificate presented now expires (Unix time; 0: none yet).\n\
             # TYPE quire_tls_certificate_expiry_timestamp_seconds gauge\n",
        );
        out.push_str(&format!(
            "quire_tls_certificate_expiry_timestamp_seconds {expiry}\n"
        ));
    }

    /// The ACME settings, when certificates come from ACME.
    pub fn acme(&self) -> Option<&AcmeSection> {
        match &self.source {
            Source::Acme(a) => Some(a),
            Source::Files { .. } => None,
        }
    }

    /// The acceptor for new connections.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.clone())
    }

    /// The `Strict-Transport-Security` value HTTPS responses carry, if configured.
    pub(crate) fn hsts(&self) -> Option<&HeaderValue> {
        self.hsts.as_ref()
    }

    /// Longest a handshake may take.
    pub(crate) fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }

    /// The key authorization for an HTTP-01 challenge `token`, while one is pending.
    pub(crate) fn http01(&self, token: &str) -> Option<String> {
        let pending = self.http01.read().unwrap_or_else(|p| p.into_inner());
        pending.get(token).cloned()
    }

    /// Answers the HTTP-01 challenge `token` with `key_authorization` until cleared.
    fn set_http01(&self, token: &str, key_authorization: &str) {
        let mut pending = self.http01.write().unwrap_or_else(|p| p.into_inner());
        pending.insert(token.to_owned(), key_authorization.to_owned());
    }

    /// Forgets every pending challenge (HTTP-01 tokens, TLS-ALPN-01 certificates).
    fn clear_challenges(&self) {
        self.http01
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        self.certs.clear_challenges();
    }
}

/// rustls' server settings around `certs` (see the module doc).
fn server_config(certs: Arc<resolve::Certs>, alpn_challenge: bool) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports rustls' default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    if alpn_challenge {
        config.alpn_protocols.push(ACME_TLS_ALPN.to_vec());
    }
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE_ENTRIES);
    match rustls::crypto::ring::Ticketer::new() {
        Ok(t) => config.ticketer = t,
        // Only fails when the system has no randomness; the session cache still
        // resumes TLS 1.2 and 1.3 sessions then.
        Err(e) => tracing::warn!(error = %e, "TLS session tickets are off"),
    }
    Arc::new(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_expiry_gauge_says_when_the_certificate_runs_out() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2090, 1, 1);
        let cert = params.self_signed(&key).unwrap();
        let (c, k) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        let section = TlsSection {
            cert: Some(c),
            key: Some(k),
            ..TlsSection::default()
        };
        let tls = Tls::from_config(&section).unwrap().unwrap();
        let mut out = String::new();
        tls.write_metrics(&mut out);
        // 2090-01-01T00:00:00Z
        assert!(
            out.contains("quire_tls_certificate_expiry_timestamp_seconds 3786912000\n"),
            "{out}"
        );
    }
}
