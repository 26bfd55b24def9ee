//! TLS on the listener: the certificate read from PEM files ([`load`], errors that
//! name the file), presented by a resolver that can swap it while connections stay
//! up ([`resolve`]), and rustls' server settings.
//!
//! Key decisions:
//! - **rustls with the ring provider**: memory-safe, no OpenSSL, and ring builds with
//!   the C compiler every machine has (aws-lc-rs, rustls' default, also needs cmake).
//! - **ALPN offers `h2` then `http/1.1`**: browsers get HTTP/2; HTTP/1.1 clients (and
//!   every benchmark tool's default) keep the fast path, which runs over TLS too
//!   (see [`crate::wire`]).
//! - **TLS 1.3 and 1.2** (rustls' safe defaults: no CBC suites, no renegotiation, no
//!   compression). **Resumption by stateless tickets** (rotated every 6 hours by
//!   rustls' ticketer) plus a bounded session cache for TLS 1.2 clients without
//!   ticket support: a returning visitor skips the signature, and no client can grow
//!   server memory with sessions. **No 0-RTT**: early data can be replayed, and a
//!   replayed `PURGE` or `POST` is not something a cache should accept.
//! - **The handshake is bounded** (`tls.handshake_timeout`) and runs inside the
//!   connection's slot, so a flood of handshakes is held to the same connection
//!   limits as any other client and never delays an established connection's reads.

mod load;
mod resolve;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use http::HeaderValue;
use tokio_rustls::TlsAcceptor;

pub use load::{certified, load, Loaded, TlsError};

use crate::config::TlsSection;

/// Sessions remembered for TLS 1.2 clients that do not take tickets.
const SESSION_CACHE_ENTRIES: usize = 4096;

/// The listener's TLS: settings, current certificate, and where it came from.
#[derive(Debug)]
pub struct Tls {
    config: Arc<rustls::ServerConfig>,
    certs: Arc<resolve::Certs>,
    files: (PathBuf, PathBuf),
    hsts: Option<HeaderValue>,
    handshake_timeout: Duration,
    /// ACME HTTP-01 challenges pending: token → key authorization (answered on
    /// `listen_http`, see [`crate::redirect`]).
    http01: RwLock<HashMap<String, String>>,
}

impl Tls {
    /// TLS as the `[tls]` section configures it; `None` when it is off.
    pub fn from_config(section: &TlsSection) -> Result<Option<Tls>, TlsError> {
        let (Some(cert), Some(key)) = (&section.cert, &section.key) else {
            return Ok(None);
        };
        let loaded = load(cert, key, SystemTime::now())?;
        let certs = Arc::new(resolve::Certs::new(loaded.key));
        let config = server_config(certs.clone());
        let hsts = section
            .hsts
            .as_deref()
            .and_then(|h| HeaderValue::from_str(h).ok());
        Ok(Some(Tls {
            config,
            certs,
            files: (cert.clone(), key.clone()),
            hsts,
            handshake_timeout: section.handshake_timeout.0,
            http01: RwLock::default(),
        }))
    }

    /// Reads the certificate files again and presents what they hold from the next
    /// handshake on; on an error the current certificate stays.
    pub fn reload(&self) -> Result<Loaded, TlsError> {
        let loaded = load(&self.files.0, &self.files.1, SystemTime::now())?;
        self.certs.swap(loaded.key.clone());
        Ok(loaded)
    }

    /// The certificate chain presented now (the site's first), DER.
    pub fn chain(&self) -> Vec<Vec<u8>> {
        self.certs
            .current()
            .cert
            .iter()
            .map(|c| c.as_ref().to_vec())
            .collect()
    }

    /// The acceptor for new connections.
    pub(crate) fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.config.clone())
    }

    /// The `Strict-Transport-Security` value HTTPS responses carry, if configured.
    pub(crate) fn hsts(&self) -> Option<&HeaderValue> {
        self.hsts.as_ref()
    }

    /// The key authorization for an HTTP-01 challenge `token`, while one is pending.
    pub(crate) fn http01(&self, token: &str) -> Option<String> {
        let pending = self.http01.read().unwrap_or_else(|p| p.into_inner());
        pending.get(token).cloned()
    }

    /// Longest a handshake may take.
    pub(crate) fn handshake_timeout(&self) -> Duration {
        self.handshake_timeout
    }
}

/// rustls' server settings around `certs` (see the module doc).
fn server_config(certs: Arc<resolve::Certs>) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring supports rustls' default protocol versions")
        .with_no_client_auth()
        .with_cert_resolver(certs);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(SESSION_CACHE_ENTRIES);
    match rustls::crypto::ring::Ticketer::new() {
        Ok(t) => config.ticketer = t,
        // Only fails when the system has no randomness; the session cache still
        // resumes TLS 1.2 and 1.3 sessions then.
        Err(e) => tracing::warn!(error = %e, "TLS session tickets are off"),
    }
    Arc::new(config)
}
