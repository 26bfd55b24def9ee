//! The server configuration a command line describes, for `quire proxy`,
//! `quire serve` and `quire config check`: the TOML file read and checked, then the
//! flags the two commands share ([`ServerArgs`]) set over it, in one place.

use std::path::Path;

use anyhow::Context;
use quire_server::config::ByteSize;
use quire_server::Config;

use crate::cli::{LogArgs, ServerArgs, TlsArgs};

/// Reads a TOML configuration file; unknown keys and bad values are errors that
/// name the file and the key.
pub(crate) fn load_config(path: &Path) -> anyhow::Result<Config> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config {}", path.display()))?;
    parse_config(&text).with_context(|| format!("config {}", path.display()))
}

/// Parses configuration text.
pub(crate) fn parse_config(text: &str) -> anyhow::Result<Config> {
    Ok(toml::from_str(text)?)
}

/// Sets the flags shared by `quire proxy` and `quire serve` over `cfg` (all but
/// `--config`, which names the file `cfg` came from).
pub(crate) fn apply(cfg: &mut Config, args: &ServerArgs) -> anyhow::Result<()> {
    if let Some(l) = args.listen {
        cfg.listen = l;
    }
    if let Some(c) = &args.cache {
        cfg.cache.path = c.clone();
    }
    if let Some(s) = &args.cache_size {
        cfg.cache.size = s
            .parse::<ByteSize>()
            .map_err(|e| anyhow::anyhow!("--cache-size: {e}"))?;
    }
    if let Some(w) = args.workers {
        cfg.workers = w;
    }
    apply_tls(cfg, &args.tls);
    apply_log(cfg, &args.log);
    Ok(())
}

/// Sets the HTTPS flags over `cfg`.
fn apply_tls(cfg: &mut Config, tls: &TlsArgs) {
    if let (Some(cert), Some(key)) = (&tls.tls_cert, &tls.tls_key) {
        cfg.tls.cert = Some(cert.clone());
        cfg.tls.key = Some(key.clone());
    }
    if let Some(a) = tls.listen_http {
        cfg.listen_http = Some(a);
    }
    if !tls.acme_domains.is_empty() {
        let acme = cfg.tls.acme.get_or_insert_with(Default::default);
        acme.domains = tls.acme_domains.clone();
    }
}

/// Sets the access-log flags over `cfg`.
fn apply_log(cfg: &mut Config, log: &LogArgs) {
    if let Some(path) = &log.access_log {
        cfg.log.access = Some(path.clone());
    }
    match log.access_log_format.as_deref() {
        Some("json") => cfg.log.format = quire_server::access_log::Format::Json,
        Some(_) => cfg.log.format = quire_server::access_log::Format::Combined,
        None => {}
    }
}
