//! The certificate a handshake presents, swappable while connections stay up.
//!
//! Every handshake asks the resolver; a new certificate (a reload, a renewal) is
//! stored in place and the next handshake presents it, while connections already
//! established keep the session they negotiated. The locks are held only to clone
//! an `Arc`.
//!
//! A handshake that offers only the `acme-tls/1` protocol is an ACME server
//! checking a TLS-ALPN-01 challenge (RFC 8737): it gets the challenge certificate
//! made for the name it asks for, and nothing else does. Before ACME has obtained a
//! first certificate, other handshakes fail (there is nothing to present).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The ALPN protocol of TLS-ALPN-01 validation (RFC 8737 §6.2).
pub(crate) const ACME_TLS_ALPN: &[u8] = b"acme-tls/1";

/// A certificate in use, and when it expires.
#[derive(Debug, Clone)]
pub(crate) struct Current {
    pub(crate) key: Arc<CertifiedKey>,
    pub(crate) not_after: SystemTime,
}

/// The listener's current certificate and pending TLS-ALPN-01 challenges.
#[derive(Debug, Default)]
pub(crate) struct Certs {
    current: RwLock<Option<Current>>,
    /// Challenge certificates by the (lower-case) name they answer for.
    challenges: RwLock<HashMap<String, Arc<CertifiedKey>>>,
}

impl Certs {
    /// Presents `current` from the next handshake on.
    pub(crate) fn swap(&self, current: Current) {
        // A poisoned lock only means a panic elsewhere while it was held; the value
        // (an Arc and a time) is whole either way.
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Some(current);
    }

    /// What is presented now.
    pub(crate) fn current(&self) -> Option<Current> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Answers TLS-ALPN-01 validation for `name` with `key` until cleared.
    pub(crate) fn set_challenge(&self, name: &str, key: Arc<CertifiedKey>) {
        let mut c = self.challenges.write().unwrap_or_else(|p| p.into_inner());
        c.insert(name.to_ascii_lowercase(), key);
    }

    /// Forgets every challenge certificate.
    pub(crate) fn clear_challenges(&self) {
        self.challenges
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

impl ResolvesServerCert for Certs {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let validation = hello.alpn().is_some_and(|offered| {
            let offered: Vec<&[u8]> = offered.collect();
            !offered.is_empty() && offered.iter().all(|p| *p == ACME_TLS_ALPN)
        });
        if validation {
            let name = hello.server_name()?.to_ascii_lowercase();
            let c = self.challenges.read().unwrap_or_else(|p| p.into_inner());
            return c.get(&name).cloned();
        }
        self.current().map(|c| c.key)
    }
}
