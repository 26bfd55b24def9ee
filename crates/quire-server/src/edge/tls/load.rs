//! Reading a certificate chain and its key from PEM files, with every way that can
//! go wrong reported against the file it concerns.
//!
//! The checks run at start-up (and on every reload), so a server never starts with
//! a certificate browsers would refuse for a reason quire can see itself: a file
//! that is missing or unreadable, holds no certificate or no key, a key of a kind
//! rustls cannot sign with, a key that belongs to another certificate, or a
//! certificate outside its validity period.
//!
//! ACME keeps the certificate it obtains as the same two files in its state directory
//! ([`acme_files`]), read here like the operator's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate or key could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The certificate file holds no PEM certificate.
    #[error("{}: no certificate found (expected PEM: -----BEGIN CERTIFICATE-----)", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// A certificate in the file is not PEM or DER that can be read.
    #[error("{}: not a readable certificate: {why}", path.display())]
    BadCertificate {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The key file holds no private key.
    #[error("{}: no private key found (expected PEM: PKCS#8, PKCS#1 or SEC1)", path.display())]
    NoKey {
        /// The file.
        path: PathBuf,
    },
    /// The key could not be used to sign.
    #[error("{}: unusable private key: {why}", path.display())]
    BadKey {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The key is not the certificate's.
    #[error("{} does not belong to the certificate in {}", key.display(), cert.display())]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// The certificate is outside its validity period.
    #[error("{}: the certificate {why}", path.display())]
    Validity {
        /// The file.
        path: PathBuf,
        /// `expired on ...` or `is not valid before ...`.
        why: String,
    },
}

/// A certificate chain and its key, checked, ready for rustls.
#[derive(Debug)]
pub struct Loaded {
    /// What the handshake presents.
    pub key: Arc<CertifiedKey>,
    /// When the site's certificate expires.
    pub not_after: SystemTime,
}

/// Reads and checks the chain in `cert` and the key in `key` at time `now`.
pub fn load(cert: &Path, key: &Path, now: SystemTime) -> Result<Loaded, TlsError> {
    let chain = read_chain(cert)?;
    let der = read_key(key)?;
    certified(chain, der, cert, key, now)
}

/// Checks a chain and key read from `cert` and `key` (named in errors): the key
/// signs, belongs to the first certificate, and that certificate is valid at `now`.
fn certified(
    chain: Vec<CertificateDer<'static>>,
    der: PrivateKeyDer<'static>,
    cert: &Path,
    key: &Path,
    now: SystemTime,
) -> Result<Loaded, TlsError> {
    let signer =
        rustls::crypto::ring::sign::any_supported_type(&der).map_err(|e| TlsError::BadKey {
            path: key.to_owned(),
            why: e.to_string(),
        })?;
    let certified = CertifiedKey::new(chain, signer);
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
        Err(rustls::Error::InconsistentKeys(_)) => {
            return Err(TlsError::Mismatch {
                cert: cert.to_owned(),
                key: key.to_owned(),
            })
        }
        Err(e) => {
            return Err(TlsError::BadCertificate {
                path: cert.to_owned(),
                why: e.to_string(),
            })
        }
    }
    let leaf = certified
        .end_entity_cert()
        .map_err(|_| TlsError::NoCertificate {
            path: cert.to_owned(),
        })?;
    let not_after = check_validity(leaf, cert, now)?;
    Ok(Loaded {
        key: Arc::new(certified),
        not_after,
    })
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// Every certificate in the file, in order (the site's first).
fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let chain = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::BadCertificate {
            path: path.to_owned(),
            why: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(TlsError::NoCertificate {
            path: path.to_owned(),
        });
    }
    Ok(chain)
}

/// The first private key in the file.
fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => TlsError::NoKey {
            path: path.to_owned(),
        },
        e => TlsError::BadKey {
            path: path.to_owned(),
            why: e.to_string(),
        },
    })
}

/// The certificate's expiry, after checking `now` lies within its validity.
fn check_validity(
    leaf: &CertificateDer<'_>,
    path: &Path,
    now: SystemTime,
) -> Result<SystemTime, TlsError> {
    let bad = |why: String| TlsError::Validity {
        path: path.to_owned(),
        why,
    };
    let (_, parsed) =
        x509_parser::parse_x509_certificate(leaf).map_err(|e| TlsError::BadCertificate {
            path: path.to_owned(),
            why: e.to_string(),
        })?;
    let validity = parsed.validity();
    let secs = |t: &x509_parser::time::ASN1Time| t.timestamp();
    let now_secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
    if now_secs > secs(&validity.not_after) {
        return Err(bad(format!("expired on {}", validity.not_after)));
    }
    if now_secs < secs(&validity.not_before) {
        return Err(bad(format!("is not valid before {}", validity.not_before)));
    }
    let after = u64::try_from(secs(&validity.not_after)).unwrap_or(0);
    Ok(SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(after))
}

/// The certificate and key files ACME keeps in `state_dir`.
pub(crate) fn acme_files(state_dir: &Path) -> (PathBuf, PathBuf) {
    (state_dir.join("cert.pem"), state_dir.join("key.pem"))
}

/// Creates ACME's state directory (and parents) and makes it `0700`.
pub(crate) fn prepare_state_dir(dir: &Path) -> Result<(), TlsError> {
    use std::os::unix::fs::PermissionsExt;
    let err = |source| TlsError::Read {
        path: dir.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(err)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let (c, k) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        (c, k)
    }

    #[test]
    fn a_matching_pair_loads() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = pair(dir.path(), "a");
        let loaded = load(&c, &k, SystemTime::now()).unwrap();
        assert_eq!(loaded.key.cert.len(), 1);
        assert!(loaded.not_after > SystemTime::now());
    }

    #[test]
    fn errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (c, k) = pair(dir.path(), "a");
        let (_, other_key) = pair(dir.path(), "b");
        let missing = dir.path().join("missing.pem");
        let now = SystemTime::now();
        let e = load(&missing, &k, now).unwrap_err().to_string();
        assert!(e.contains("missing.pem"), "{e}");
        let e = load(&c, &other_key, now).unwrap_err();
        assert!(matches!(e, TlsError::Mismatch { .. }), "{e}");
        assert!(e.to_string().contains("b.key"), "{e}");
        // The key file given as the certificate, and the reverse.
        let e = load(&k, &k, now).unwrap_err();
        assert!(matches!(e, TlsError::NoCertificate { .. }), "{e}");
        let e = load(&c, &c, now).unwrap_err();
        assert!(matches!(e, TlsError::NoKey { .. }), "{e}");
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(&garbage, "-----BEGIN CERTIFICATE-----\n!!!\n").unwrap();
        let e = load(&garbage, &k, now).unwrap_err();
        assert!(matches!(e, TlsError::BadCertificate { .. }), "{e}");
    }

    #[test]
    fn an_expired_certificate_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let cert = params.self_signed(&key).unwrap();
        let (c, k) = (dir.path().join("old.crt"), dir.path().join("old.key"));
        std::fs::write(&c, cert.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        let e = load(&c, &k, SystemTime::now()).unwrap_err();
        assert!(matches!(e, TlsError::Validity { .. }), "{e}");
        assert!(
            e.to_string()
                .contains("old.crt: the certificate expired on"),
            "{e}"
        );
    }
}
