//! The TLS client of `https://` origins: which certificates are trusted, the
//! connector the origin pool dials through, and how a failed handshake reads in the
//! log.
//!
//! Key decisions:
//! - **hyper-rustls's connector, not one of our own.** Its `HttpsConnector` wraps
//!   hyper's `HttpConnector` (the connect timeout, `TCP_NODELAY`) and takes the
//!   rustls `ClientConfig` built here as it is, so every policy below is ours and
//!   the connector only dials and handshakes. One connector type serves `http://`
//!   and `https://` origins, so the pool and `Origin::send` have one shape.
//! - **Trusted roots: the system's plus `origin_ca_file`.** The system's bundle is
//!   read with rustls-native-certs (`SSL_CERT_FILE`/`SSL_CERT_DIR`, else the
//!   distribution's bundle: `/etc/ssl/certs/ca-certificates.crt` on Debian);
//!   every certificate in `origin_ca_file` (PEM) is added to it. A machine with no
//!   bundle works when `origin_ca_file` names the origin's CA; with neither, start-up
//!   fails rather than every fill. A bad `origin_ca_file` (missing, unreadable, not
//!   PEM, no certificate, a certificate that does not parse) is a start-up error
//!   naming the file, whatever the origin's scheme: a typo must not wait for the day
//!   the origin moves to https. A self-signed origin certificate is a valid entry.
//! - **Checks are on by default.** SNI is the origin's host name; the certificate
//!   must chain to a trusted root and name that host (an IP-literal origin is
//!   checked against the certificate's IP addresses). `origin_insecure_skip_verify`
//!   swaps in [`AnyCertificate`], which accepts any certificate but still checks the
//!   handshake's signatures; quire says so at start-up, at `warn`.
//! - **ALPN offers `http/1.1` only**: the origin pool speaks HTTP/1.1.
//! - **The ring provider, named here** rather than a process-wide default, so the
//!   client never depends on who installed what first.
//! - **A failed handshake is named in words** ([`describe`]): "certificate not
//!   trusted", "name mismatch", rather than rustls's variant names.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::{OriginOptions, OriginSetupError};

/// The largest `origin_ca_file` read: a whole distribution bundle is about 200 KiB.
const CA_FILE_BYTES_MAX: u64 = 8 << 20;

/// The connector of the origin pool: plain TCP for `http://`, TLS over it for
/// `https://`.
pub(super) type Connector = HttpsConnector<HttpConnector>;

/// The connector for an origin; `https` says whether the origin's scheme needs the
/// trusted roots (an `http://` origin never handshakes, so the system's bundle is
/// not read for it).
pub(super) fn connector(
    mut tcp: HttpConnector,
    https: bool,
    opts: &OriginOptions,
) -> Result<Connector, OriginSetupError> {
    tcp.enforce_http(false);
    let config = client_config(https, opts)?;
    Ok(HttpsConnector::from((tcp, config)))
}

/// The rustls client configuration of the origin pool.
pub(super) fn client_config(
    https: bool,
    opts: &OriginOptions,
) -> Result<ClientConfig, OriginSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    if let Some(path) = &opts.ca_file {
        add_ca_file(path, &mut roots)?;
    }
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| OriginSetupError::Tls(e.to_string()))?;
    let mut config = if https && opts.insecure_skip_verify {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(
                provider.signature_verification_algorithms,
            )))
            .with_no_client_auth()
    } else if https {
        add_system_roots(&mut roots);
        if roots.is_empty() {
            return Err(OriginSetupError::NoRoots);
        }
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| OriginSetupError::Tls(e.to_string()))?;
        builder.with_webpki_verifier(verifier).with_no_client_auth()
    } else {
        // Never used: an http origin's requests never reach the TLS side.
        builder.with_root_certificates(roots).with_no_client_auth()
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Adds every certificate of the PEM file `path` to `roots`; any failure names the
/// file.
fn add_ca_file(path: &Path, roots: &mut RootCertStore) -> Result<(), OriginSetupError> {
    let bad = |why: String| OriginSetupError::CaFile {
        path: path.to_owned(),
        why,
    };
    let mut pem = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(CA_FILE_BYTES_MAX + 1).read_to_end(&mut pem))
        .map_err(|e| bad(e.to_string()))?;
    if pem.len() as u64 > CA_FILE_BYTES_MAX {
        return Err(bad(format!(
            "larger than {CA_FILE_BYTES_MAX} bytes; a CA file holds a few certificates"
        )));
    }
    let mut added = 0usize;
    for (i, cert) in CertificateDer::pem_slice_iter(&pem).enumerate() {
        let cert = cert.map_err(|e| bad(format!("not PEM: {}", pem_in_words(&e))))?;
        roots
            .add(cert)
            .map_err(|e| bad(format!("certificate {}: {e}", i + 1)))?;
        added += 1;
    }
    if added == 0 {
        return Err(bad(
            "holds no PEM certificate (no `-----BEGIN CERTIFICATE-----` section)".into(),
        ));
    }
    tracing::debug!(
        path = %path.display(),
        certificates = added,
        "origin_ca_file read"
    );
    Ok(())
}

/// A PEM syntax error as an operator reads it (rustls-pki-types prints the
/// markers as byte lists).
fn pem_in_words(e: &rustls_pki_types::pem::Error) -> String {
    use rustls_pki_types::pem::Error as P;
    match e {
        P::MissingSectionEnd { end_marker } => format!(
            "a section has no `-----END {}-----` line (cut short?)",
            String::from_utf8_lossy(end_marker)
        ),
        P::IllegalSectionStart { line } => format!(
            "a malformed `-----BEGIN` line: `{}`",
            String::from_utf8_lossy(line)
        ),
        P::Base64Decode(why) => format!("a section is not base64: {why}"),
        other => other.to_string(),
    }
}

/// Adds the system's CA bundle to `roots`. A machine without one is not an error
/// here: `origin_ca_file` may carry the origin's CA (the caller checks that some
/// root is trusted).
fn add_system_roots(roots: &mut RootCertStore) {
    let found = rustls_native_certs::load_native_certs();
    for e in &found.errors {
        tracing::debug!(error = %e, "reading the system's CA certificates");
    }
    let (added, ignored) = roots.add_parsable_certificates(found.certs);
    tracing::debug!(added, ignored, "the system's CA certificates read");
}

/// The verifier of `origin_insecure_skip_verify = true`: any certificate is
/// accepted, for any name. The handshake's signatures are still checked (the peer
/// holds the key of the certificate it showed), so the connection is encrypted —
/// but to whoever answered.
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// The TLS failure behind `e`, in words, if a rustls error is in its chain (the
/// connector wraps it in `io::Error`s, whose `source` skips the wrapped error, so
/// each one is opened with `get_ref`).
pub(super) fn describe(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(found) = rustls_error(err) {
            return Some(in_words(found));
        }
        cur = err.source();
    }
    None
}

/// `e` itself, or the error an `io::Error` (or a chain of them) wraps, as rustls's.
fn rustls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(r) = e.downcast_ref::<rustls::Error>() {
        return Some(r);
    }
    let inner = e.downcast_ref::<std::io::Error>()?.get_ref()?;
    rustls_error(inner)
}

/// A rustls error as an operator reads it.
fn in_words(e: &rustls::Error) -> String {
    use rustls::Error as E;
    match e {
        E::InvalidCertificate(c) => certificate_in_words(c),
        E::AlertReceived(a) => format!("the origin refused the handshake (alert {a:?})"),
        E::NoApplicationProtocol => {
            "the origin does not speak HTTP/1.1 over TLS (ALPN found no common protocol)".into()
        }
        E::InvalidMessage(_) | E::InappropriateMessage { .. } => format!(
            "the origin did not answer in TLS (if it speaks plain HTTP, write the origin \
             as http://): {e}"
        ),
        E::PeerIncompatible(_) => format!("no TLS version or cipher suite in common: {e}"),
        E::NoCertificatesPresented => "the origin presented no certificate".into(),
        other => other.to_string(),
    }
}

/// A certificate failure as an operator reads it.
fn certificate_in_words(c: &CertificateError) -> String {
    use CertificateError as C;
    match c {
        C::UnknownIssuer => "certificate not trusted: its issuer is neither among the \
                             system's CA certificates nor in origin_ca_file"
            .into(),
        C::NotValidForName => "name mismatch: the certificate is not valid for the \
                               origin's host"
            .into(),
        C::NotValidForNameContext { .. } => format!("name mismatch: {c}"),
        C::Expired | C::ExpiredContext { .. } => format!("certificate expired ({c})"),
        C::NotValidYet | C::NotValidYetContext { .. } => {
            format!("certificate not valid yet ({c})")
        }
        C::Revoked => "certificate revoked".into(),
        C::BadEncoding => "certificate malformed (not DER)".into(),
        C::BadSignature => "certificate signature invalid".into(),
        C::InvalidPurpose | C::InvalidPurposeContext { .. } => {
            format!("certificate not for TLS servers: {c}")
        }
        other => format!("certificate rejected: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_wrapped(e: rustls::Error) -> Box<dyn std::error::Error + Send + Sync> {
        // As tokio-rustls, then hyper-rustls, wrap it.
        let inner = std::io::Error::new(std::io::ErrorKind::InvalidData, e);
        Box::new(std::io::Error::other(inner))
    }

    #[test]
    fn handshake_failures_are_named_in_words() {
        let e = io_wrapped(rustls::Error::InvalidCertificate(
            CertificateError::UnknownIssuer,
        ));
        let words = describe(e.as_ref()).unwrap();
        assert!(words.starts_with("certificate not trusted"), "{words}");
        let e = io_wrapped(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForNameContext {
                expected: ServerName::try_from("origin.test").unwrap(),
                presented: vec!["DnsName(\"other.test\")".into()],
            },
        ));
        let words = describe(e.as_ref()).unwrap();
        assert!(words.starts_with("name mismatch"), "{words}");
        assert!(words.contains("origin.test"), "{words}");
        let plain = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(describe(&plain), None, "not a TLS failure");
    }

    #[test]
    fn ca_file_errors_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut roots = RootCertStore::empty();
        let missing = dir.path().join("missing.pem");
        let e = add_ca_file(&missing, &mut roots).unwrap_err().to_string();
        assert!(e.contains("missing.pem"), "{e}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "").unwrap();
        let e = add_ca_file(&empty, &mut roots).unwrap_err().to_string();
        assert!(
            e.contains("empty.pem") && e.contains("no PEM certificate"),
            "{e}"
        );
        let garbage = dir.path().join("garbage.pem");
        std::fs::write(
            &garbage,
            "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let e = add_ca_file(&garbage, &mut roots).unwrap_err().to_string();
        assert!(e.contains("garbage.pem"), "{e}");
        assert!(roots.is_empty());
    }
}
