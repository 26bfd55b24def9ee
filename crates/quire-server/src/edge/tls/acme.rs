//! Automatic certificates (ACME, RFC 8555): obtained when there is none or it is
//! due, renewed in the background, swapped in without dropping a connection.
//!
//! Key decisions:
//! - **`instant-acme` as the client** (a well-kept RFC 8555 client on hyper and
//!   rustls with the ring provider) and quire as the orchestrator: quire already
//!   holds the listener, the certificate resolver and the plain-HTTP listener the
//!   challenges are answered on, so the challenge answers live there and no second
//!   TLS stack or acceptor is needed. (`rustls-acme` drives its own acceptor and
//!   answers only TLS-ALPN-01.)
//! - **Both challenges**: TLS-ALPN-01 (RFC 8737, the default: a certificate
//!   carrying the key authorization's digest, presented only to handshakes that ask
//!   for `acme-tls/1`) and HTTP-01 (the token answered on `listen_http`).
//! - **State on disk, private**: the state directory is created `0700`; the account
//!   credentials, certificate and key are written `0600`, each to a temporary file
//!   renamed into place, and a new certificate is loaded and checked (key matches,
//!   validity) before it replaces the old one, on disk and in the resolver.
//! - **Renewal**: due when less than `renew_before` is left. Checked at start-up
//!   and then at least hourly; a failed order is retried after 1 minute, doubling
//!   to at most an hour, and the old certificate stays presented meanwhile.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use instant_acme::{
    Account, AccountCredentials, AuthorizationStatus, ChallengeType, Identifier, NewAccount,
    NewOrder, Order, OrderStatus, RetryPolicy,
};
use rustls::sign::CertifiedKey;

use super::load::acme_files;
use super::{Tls, TlsError};
use crate::config::{AcmeChallenge, AcmeSection};
use crate::error::{Fault, Side};

/// Why an order did not produce a certificate.
#[derive(Debug, thiserror::Error)]
#[error("ACME: {context}")]
pub(crate) struct AcmeError {
    kind: AcmeErrorKind,
    context: String,
}

/// What kind of failure an [`AcmeError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub(crate) enum AcmeErrorKind {
    /// The certificate authority failed or refused (its directory, the account,
    /// the order's state).
    Ca,
    /// A challenge could not be answered or was not validated.
    Challenge,
    /// The certificate the CA issued cannot be used.
    Certificate,
    /// The account or the certificate could not be stored here.
    Store,
    /// Certificates come from files: there is no ACME order to run.
    NotConfigured,
}

impl AcmeError {
    fn new(kind: AcmeErrorKind, context: impl Into<String>) -> AcmeError {
        AcmeError {
            kind,
            context: context.into(),
        }
    }
}

impl Fault for AcmeError {
    fn side(&self) -> Side {
        match self.kind {
            AcmeErrorKind::Ca | AcmeErrorKind::Challenge | AcmeErrorKind::Certificate => {
                Side::Upstream
            }
            AcmeErrorKind::Store | AcmeErrorKind::NotConfigured => Side::Internal,
        }
    }

    /// A CA or a challenge that failed may succeed on a later order (the renewal
    /// loop tries again with a growing pause); the rest fail the same way again.
    fn retry(&self) -> bool {
        matches!(self.kind, AcmeErrorKind::Ca | AcmeErrorKind::Challenge)
    }
}

impl From<instant_acme::Error> for AcmeError {
    fn from(e: instant_acme::Error) -> Self {
        AcmeError::new(AcmeErrorKind::Ca, e.to_string())
    }
}

impl From<TlsError> for AcmeError {
    fn from(e: TlsError) -> Self {
        AcmeError::new(
            AcmeErrorKind::Certificate,
            format!("the issued certificate: {e}"),
        )
    }
}

/// Keeps the certificate current until `stop` turns true: obtains one when there
/// is none or it is due, then sleeps until the next check.
pub(crate) async fn run(tls: Arc<Tls>, mut stop: tokio::sync::watch::Receiver<bool>) {
    let Some(renew_before) = tls.acme().map(|a| a.renew_before.0) else {
        return;
    };
    let mut failures = 0u32;
    loop {
        let wait = match until_due(tls.not_after(), renew_before, SystemTime::now()) {
            Duration::ZERO => match obtain(&tls).await {
                Ok(not_after) => {
                    failures = 0;
                    tracing::info!(expires = %httpdate::fmt_http_date(not_after), "ACME certificate obtained");
                    continue;
                }
                Err(e) => {
                    failures += 1;
                    let retry =
                        Duration::from_secs(60 << failures.min(6)).min(Duration::from_secs(3600));
                    tracing::warn!(error = %e, side = e.side().as_str(), retry_in = ?retry, "ACME order failed; the current certificate (if any) stays");
                    retry
                }
            },
            d => d.min(Duration::from_secs(3600)),
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = stop.wait_for(|s| *s) => return,
        }
    }
}

/// How long until a certificate expiring at `not_after` is due for renewal (zero
/// when there is none, or it is due now).
fn until_due(not_after: Option<SystemTime>, renew_before: Duration, now: SystemTime) -> Duration {
    let Some(not_after) = not_after else {
        return Duration::ZERO;
    };
    let due = not_after
        .checked_sub(renew_before)
        .unwrap_or(SystemTime::UNIX_EPOCH);
    due.duration_since(now).unwrap_or(Duration::ZERO)
}

/// Runs one order to its end: a certificate for every configured name, stored in
/// the state directory and presented from the next handshake on. Returns when it
/// expires.
pub(crate) async fn obtain(tls: &Tls) -> Result<SystemTime, AcmeError> {
    let acme = tls.acme().ok_or_else(|| {
        AcmeError::new(
            AcmeErrorKind::NotConfigured,
            "certificates come from files, not ACME",
        )
    })?;
    let account = account(acme).await?;
    let ids: Vec<Identifier> = acme
        .domains
        .iter()
        .map(|d| Identifier::Dns(d.clone()))
        .collect();
    let mut order = account.new_order(&NewOrder::new(&ids)).await?;
    let issued = issue(tls, acme, &mut order).await;
    tls.clear_challenges();
    let (chain, key) = issued?;
    install(tls, acme, &chain, &key)
}

/// Answers the order's challenges and collects the certificate chain and its key
/// (both PEM).
async fn issue(
    tls: &Tls,
    acme: &AcmeSection,
    order: &mut Order,
) -> Result<(String, String), AcmeError> {
    authorize(tls, acme, order).await?;
    let retry = RetryPolicy::default().timeout(Duration::from_secs(90));
    match order.poll_ready(&retry).await? {
        OrderStatus::Ready => {}
        s => {
            return Err(AcmeError::new(
                AcmeErrorKind::Ca,
                format!("the order is {s:?}, not ready"),
            ))
        }
    }
    let key = order.finalize().await?;
    let chain = order.poll_certificate(&retry).await?;
    Ok((chain, key))
}

/// Sets up the answer to each pending authorization's challenge and tells the CA
/// it may check.
async fn authorize(tls: &Tls, acme: &AcmeSection, order: &mut Order) -> Result<(), AcmeError> {
    let kind = match acme.challenge {
        AcmeChallenge::TlsAlpn01 => ChallengeType::TlsAlpn01,
        AcmeChallenge::Http01 => ChallengeType::Http01,
    };
    let mut authorizations = order.authorizations();
    while let Some(a) = authorizations.next().await {
        let mut a = a?;
        match a.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            s => {
                return Err(AcmeError::new(
                    AcmeErrorKind::Challenge,
                    format!("an authorization is {s:?}"),
                ))
            }
        }
        let mut challenge = a.challenge(kind.clone()).ok_or_else(|| {
            AcmeError::new(
                AcmeErrorKind::Challenge,
                format!("the CA offers no {kind:?} challenge"),
            )
        })?;
        let name = challenge.identifier().to_string();
        let key_authorization = challenge.key_authorization();
        match acme.challenge {
            AcmeChallenge::TlsAlpn01 => {
                let key = alpn_challenge(&name, key_authorization.digest().as_ref())?;
                tls.certs.set_challenge(&name, key);
            }
            AcmeChallenge::Http01 => {
                tls.set_http01(&challenge.token, key_authorization.as_str());
            }
        }
        challenge.set_ready().await?;
    }
    Ok(())
}

/// The TLS-ALPN-01 certificate for `name` (RFC 8737 §3): self-signed, `name` as
/// its only subject alternative name, the key authorization's SHA-256 in the
/// critical `acmeIdentifier` extension.
fn alpn_challenge(name: &str, digest: &[u8]) -> Result<Arc<CertifiedKey>, AcmeError> {
    let err = |e: rcgen::Error| {
        AcmeError::new(
            AcmeErrorKind::Challenge,
            format!("making the challenge certificate: {e}"),
        )
    };
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).map_err(err)?;
    params.custom_extensions = vec![rcgen::CustomExtension::new_acme_identifier(digest)];
    let key = rcgen::KeyPair::generate().map_err(err)?;
    let cert = params.self_signed(&key).map_err(err)?;
    let der = rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into());
    let signer = rustls::crypto::ring::sign::any_supported_type(&der)
        .map_err(|e| AcmeError::new(AcmeErrorKind::Challenge, format!("the challenge key: {e}")))?;
    Ok(Arc::new(CertifiedKey::new(
        vec![cert.der().clone()],
        signer,
    )))
}

/// Checks the issued chain and key, stores them in the state directory and
/// presents them; returns when the certificate expires.
fn install(tls: &Tls, acme: &AcmeSection, chain: &str, key: &str) -> Result<SystemTime, AcmeError> {
    let (cert_path, key_path) = acme_files(&acme.state_dir);
    let (cert_tmp, key_tmp) = (
        cert_path.with_extension("pem.new"),
        key_path.with_extension("pem.new"),
    );
    write_private(&cert_tmp, chain.as_bytes())?;
    write_private(&key_tmp, key.as_bytes())?;
    // Checked from the new files before they replace anything.
    super::load(&cert_tmp, &key_tmp, SystemTime::now())?;
    let io = |e: std::io::Error| {
        AcmeError::new(
            AcmeErrorKind::Store,
            format!("storing the certificate: {e}"),
        )
    };
    std::fs::rename(&key_tmp, &key_path).map_err(io)?;
    std::fs::rename(&cert_tmp, &cert_path).map_err(io)?;
    Ok(tls.reload()?.not_after)
}

/// Writes `bytes` to a new file readable by its owner only.
fn write_private(path: &Path, bytes: &[u8]) -> Result<(), AcmeError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        f.write_all(bytes)?;
        f.sync_all()
    };
    write().map_err(|e| {
        AcmeError::new(
            AcmeErrorKind::Store,
            format!("writing {}: {e}", path.display()),
        )
    })
}

/// The ACME account kept in the state directory for this directory URL, created
/// (and stored) on first use.
async fn account(acme: &AcmeSection) -> Result<Account, AcmeError> {
    let builder = || match &acme.ca_file {
        Some(ca) => Account::builder_with_root(ca),
        None => Account::builder(),
    };
    let path = acme.state_dir.join("account.json");
    if let Some(creds) = stored_account(&path, &acme.directory) {
        return Ok(builder()?.from_credentials(creds).await?);
    }
    let contact: Vec<String> = acme
        .contact
        .iter()
        .map(|c| {
            if c.contains(':') {
                c.clone()
            } else {
                format!("mailto:{c}")
            }
        })
        .collect();
    let contact: Vec<&str> = contact.iter().map(String::as_str).collect();
    let new = NewAccount {
        contact: &contact,
        terms_of_service_agreed: true,
        only_return_existing: false,
    };
    let (account, creds) = builder()?
        .create(&new, acme.directory.clone(), None)
        .await?;
    let stored = serde_json::json!({ "directory": acme.directory, "credentials": creds });
    write_private(&path, stored.to_string().as_bytes())?;
    Ok(account)
}

/// The credentials stored at `path` for `directory`, if any.
fn stored_account(path: &Path, directory: &str) -> Option<AccountCredentials> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut v: serde_json::Value = serde_json::from_str(&text).ok()?;
    if v.get("directory")?.as_str()? != directory {
        return None;
    }
    serde_json::from_value(v.get_mut("credentials")?.take()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_that_failed_is_tried_again_and_a_disk_that_failed_is_ours() {
        let ca = AcmeError::new(AcmeErrorKind::Ca, "the order is Invalid, not ready");
        assert!(ca.retry());
        assert_eq!(ca.side(), Side::Upstream);
        assert_eq!(ca.to_string(), "ACME: the order is Invalid, not ready");
        let disk = AcmeError::new(AcmeErrorKind::Store, "storing the certificate: ENOSPC");
        assert!(!disk.retry());
        assert_eq!(disk.side(), Side::Internal);
        assert_eq!(disk.kind, AcmeErrorKind::Store);
    }

    #[test]
    fn renewal_is_due_when_less_than_renew_before_is_left() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let day = Duration::from_secs(86_400);
        assert_eq!(until_due(None, day, now), Duration::ZERO, "none yet");
        assert_eq!(until_due(Some(now + day / 2), day, now), Duration::ZERO);
        assert_eq!(until_due(Some(now + 3 * day), day, now), 2 * day);
    }

    #[test]
    fn the_alpn_challenge_certificate_names_only_the_domain() {
        let key = alpn_challenge("quire.test", &[7u8; 32]).unwrap();
        let (_, cert) = x509_parser::parse_x509_certificate(&key.cert[0]).unwrap();
        let san = cert.subject_alternative_name().unwrap().unwrap();
        assert_eq!(san.value.general_names.len(), 1);
        // id-pe-acmeIdentifier, critical (RFC 8737 §3).
        let ext = cert
            .extensions()
            .iter()
            .find(|e| e.oid.to_id_string() == "1.3.6.1.5.5.7.1.31")
            .expect("the acmeIdentifier extension");
        assert!(ext.critical);
    }
}
