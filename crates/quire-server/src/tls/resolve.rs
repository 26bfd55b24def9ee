//! The certificate a handshake presents, swappable while connections stay up.
//!
//! Every handshake asks the resolver; a new certificate (a reload, a renewal) is
//! stored in place and the next handshake presents it, while connections already
//! established keep the session they negotiated. The read lock is held only to
//! clone an `Arc`.

use std::sync::{Arc, RwLock};

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

/// The listener's current certificate.
#[derive(Debug)]
pub(crate) struct Certs {
    current: RwLock<Arc<CertifiedKey>>,
}

impl Certs {
    /// Starts with `key`.
    pub(crate) fn new(key: Arc<CertifiedKey>) -> Certs {
        Certs {
            current: RwLock::new(key),
        }
    }

    /// Presents `key` from the next handshake on.
    pub(crate) fn swap(&self, key: Arc<CertifiedKey>) {
        // A poisoned lock only means a panic elsewhere while it was held; the value
        // (an Arc) is whole either way.
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = key;
    }

    /// What is presented now.
    pub(crate) fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl ResolvesServerCert for Certs {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}
