//! What the configuration decides for each request, built from a [`Config`] and
//! swapped whole when the configuration is reloaded (`SIGHUP`).
//!
//! A request reads the policy with [`crate::Ctx::policy`] (a lock-free load) and
//! keeps what it read: a reload applies to requests that start after it, and
//! requests in flight finish under the policy they started with. Everything the
//! server sized or opened at start-up stays as it was: the listeners, the workers,
//! the volume, the connection, fill and compression budgets, TLS, the origin. A
//! reload that changes one of those says which in its answer
//! ([`Reloaded::needs_restart`]) and in the log, and applies the rest.
//!
//! An invalid configuration changes nothing: [`Policy::build`] fails before the
//! swap, and the old policy stays.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use quire_http::bypass::BypassConfig;
use quire_http::encoding::Coding;
use quire_http::freshness::{ReuseConfig, StorageConfig};
use quire_http::key::KeyConfig;

use crate::config::{Config, ConfigError};
use crate::edge::client::TrustedProxies;
use crate::error::{Fault, Side};
use crate::fill::compress::Levels;
use crate::ops::access_log::AccessLog;
use crate::upstream::Upstream;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The cache volume could not be opened.
    #[error("cache volume {path}: {source}")]
    Store {
        /// The volume path.
        path: String,
        /// Why.
        source: quire_store::StoreError,
    },
    /// Creating the cache directory failed.
    #[error("cache directory {path}: {source}")]
    Dir {
        /// The directory.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// No origin configured.
    #[error(
        "no origin: give --origin http(s)://host[:port], or `origin` or `[[origins]]` in the \
         config file"
    )]
    NoOrigin,
    /// The origin client cannot be built: a bad URL, `origin_ca_file`, or no CA
    /// certificates for an https origin.
    #[error(transparent)]
    Origin(#[from] crate::upstream::origin::OriginSetupError),
    /// Binding the listener failed.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The TLS certificate or key cannot be used.
    #[error("tls: {0}")]
    Tls(#[from] crate::edge::tls::TlsError),
    /// The access log cannot be opened.
    #[error(transparent)]
    Log(#[from] crate::ops::access_log::LogError),
}

impl Fault for ConfigError {
    fn side(&self) -> Side {
        Side::Internal
    }

    fn retry(&self) -> bool {
        false
    }
}

impl Config {
    /// Checks every rule of the configuration: called once before serving, and on
    /// every reload before anything is swapped. The rules of plain data
    /// (`Config::check_fields`, beside the fields) first; then the ones only a
    /// feature's own parser can check, which is why they live here, above the
    /// configuration: the origin pools, the trusted proxies, the compression levels.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] naming the first rule broken.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_fields()?;
        crate::upstream::origins::validate(self)?;
        TrustedProxies::parse(&self.trusted_proxies)
            .map_err(|e| ConfigError::new(format!("trusted_proxies: {e}")))?;
        self.encodings
            .levels()
            .validate()
            .map_err(|e| ConfigError::new(e.to_string()))
    }
}

/// The per-request policy: the configuration and what is derived from it.
#[derive(Debug)]
pub struct Policy {
    /// The configuration it was built from.
    pub cfg: Config,
    /// Whose `X-Forwarded-For` names the client (`trusted_proxies`).
    pub trusted_proxies: TrustedProxies,
    /// URL normalisation.
    pub keys: KeyConfig,
    /// Bypass rules.
    pub bypass: BypassConfig,
    /// Storage rules.
    pub storage: StorageConfig,
    /// Reuse rules.
    pub reuse: ReuseConfig,
    /// Compression levels.
    pub levels: Levels,
    /// Codings compressed at fill time, besides identity.
    pub codings: Vec<Coding>,
    /// Largest body stored.
    pub object_limit: u64,
    /// The admin token (config or `QUIRE_ADMIN_TOKEN`).
    pub admin_token: Option<String>,
    /// The access log, when configured.
    pub access_log: Option<Arc<AccessLog>>,
}

impl Policy {
    /// Builds the policy of `cfg` (validated). `store_max` is the largest body the
    /// volume's regions hold; `prev` is the policy being replaced, whose access
    /// log is kept when the `[log]` section did not change.
    pub(crate) fn build(
        cfg: Config,
        store_max: u64,
        origin: &dyn Upstream,
        prev: Option<&Policy>,
    ) -> Result<Policy, StartError> {
        cfg.validate()?;
        let admin_token = admin_token(&cfg)?;
        let trusted_proxies = trusted(&cfg)?;
        let access_log = match prev {
            Some(p) if p.cfg.log == cfg.log => p.access_log.clone(),
            _ => AccessLog::open(&cfg.log)?,
        };
        let mut keys = cfg.key_config();
        keys.query_paths = origin.query_paths();
        Ok(Policy {
            trusted_proxies,
            keys,
            bypass: cfg.bypass_config(),
            storage: cfg.storage_config(),
            reuse: cfg.reuse_config(),
            levels: cfg.encodings.levels(),
            codings: derived_codings(&cfg),
            object_limit: object_limit(&cfg, store_max, prev.is_none()),
            admin_token,
            access_log,
            cfg,
        })
    }
}

/// The trusted proxies: `trusted_proxies`, and a cluster's peers named by address
/// (a peer that fills from this node is a proxy in front of it: its
/// `X-Forwarded-For` and `X-Forwarded-Proto` are believed, so a page is filled
/// under the scheme and for the client the asking node saw). Peers named by host
/// name are not resolved: list their addresses in `trusted_proxies`.
fn trusted(cfg: &Config) -> Result<TrustedProxies, StartError> {
    let mut entries = cfg.trusted_proxies.clone();
    if let Some(c) = &cfg.cluster {
        entries.extend(c.peer_addresses().iter().map(ToString::to_string));
    }
    TrustedProxies::parse(&entries)
        .map_err(|e| StartError::Config(crate::config::ConfigError::new(e.to_string())))
}

/// [`trusted`], for tests of other modules.
#[cfg(test)]
pub(crate) fn trusted_for_tests(cfg: &Config) -> TrustedProxies {
    trusted(cfg).expect("valid trusted proxies")
}

/// Whether a policy could be built from `cfg`, with every check [`Policy::build`]
/// makes (and TLS's, which [`crate::Ctx`] makes at start-up) — opening the access
/// log's file as it would, without starting its writer. A process about to take
/// over from another (a binary upgrade) checks this before the old one steps down.
pub fn check(cfg: &Config) -> Result<(), StartError> {
    cfg.validate()?;
    admin_token(cfg)?;
    trusted(cfg)?;
    AccessLog::check(&cfg.log)?;
    crate::edge::tls::Tls::from_config(&cfg.tls)?;
    Ok(())
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// The settings that changed but apply only after a restart (`listen`,
    /// `cache.size`, ...); everything else applies to new requests now.
    pub needs_restart: Vec<&'static str>,
}

/// Reloads counted for the metrics endpoint.
#[derive(Debug, Default)]
pub struct ReloadStats {
    ok: AtomicU64,
    failed: AtomicU64,
    /// Unix seconds of the last reload that applied (0: none yet).
    last_ok: AtomicU64,
}

impl ReloadStats {
    /// Counts a reload that applied.
    pub fn applied(&self) {
        self.ok.fetch_add(1, Ordering::Relaxed);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.last_ok.store(now, Ordering::Relaxed);
    }

    /// Counts a reload that changed nothing: the file did not read, parse or
    /// validate.
    pub fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters in Prometheus text format.
    pub fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = writeln!(
            out,
            "# HELP quire_config_reloads_total Configuration reloads (SIGHUP), by result: a failed one changed nothing.\n\
             # TYPE quire_config_reloads_total counter\n\
             quire_config_reloads_total{{result=\"ok\"}} {}\n\
             quire_config_reloads_total{{result=\"failed\"}} {}\n\
             # HELP quire_config_last_reload_success_timestamp_seconds When a reload last applied (0: none since start).\n\
             # TYPE quire_config_last_reload_success_timestamp_seconds gauge\n\
             quire_config_last_reload_success_timestamp_seconds {}",
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            self.last_ok.load(Ordering::Relaxed),
        );
    }
}

/// The settings of `new` that differ from `old` and that the running server cannot
/// take without a restart.
pub(crate) fn needs_restart(old: &Config, new: &Config) -> Vec<&'static str> {
    let l = (&old.limits, &new.limits);
    let e = (&old.encodings, &new.encodings);
    let checks = [
        ("listen", old.listen != new.listen),
        ("listen_http", old.listen_http != new.listen_http),
        ("workers", old.workers != new.workers),
        ("origin", old.origin != new.origin),
        ("origins", old.origins != new.origins),
        ("cluster", old.cluster != new.cluster),
        ("tracing", old.tracing != new.tracing),
        ("origin_ca_file", old.origin_ca_file != new.origin_ca_file),
        (
            "origin_insecure_skip_verify",
            old.origin_insecure_skip_verify != new.origin_insecure_skip_verify,
        ),
        ("cache", old.cache != new.cache),
        ("tls", old.tls != new.tls),
        ("limits.connections", l.0.connections != l.1.connections),
        (
            "limits.connections_per_client",
            l.0.connections_per_client != l.1.connections_per_client,
        ),
        ("limits.header_bytes", l.0.header_bytes != l.1.header_bytes),
        (
            "limits.client_idle_timeout",
            l.0.client_idle_timeout != l.1.client_idle_timeout,
        ),
        ("limits.fills", l.0.fills != l.1.fills),
        ("limits.upgrades", l.0.upgrades != l.1.upgrades),
        (
            "limits.upgrades_per_client",
            l.0.upgrades_per_client != l.1.upgrades_per_client,
        ),
        ("limits.tunnel_idle", l.0.tunnel_idle != l.1.tunnel_idle),
        (
            "limits.fills_per_client",
            l.0.fills_per_client != l.1.fills_per_client,
        ),
        (
            "limits.origin_connect_timeout",
            l.0.origin_connect_timeout != l.1.origin_connect_timeout,
        ),
        (
            "limits.origin_read_timeout",
            l.0.origin_read_timeout != l.1.origin_read_timeout,
        ),
        (
            "limits.origin_connections",
            l.0.origin_connections != l.1.origin_connections,
        ),
        (
            "limits.origin_idle_connections",
            l.0.origin_idle_connections != l.1.origin_idle_connections,
        ),
        ("encodings.threads", e.0.threads != e.1.threads),
        ("encodings.budget", e.0.budget != e.1.budget),
        ("encodings.large_bytes", e.0.large_bytes != e.1.large_bytes),
        (
            "encodings.background_cpu",
            e.0.background_cpu_burst != e.1.background_cpu_burst
                || e.0.background_cpu_share != e.1.background_cpu_share,
        ),
        (
            "sendfile_min_bytes",
            old.sendfile_min_bytes != new.sendfile_min_bytes,
        ),
    ];
    checks
        .into_iter()
        .filter_map(|(name, changed)| changed.then_some(name))
        .collect()
}

/// The codings derived from identity at commit, by preference.
fn derived_codings(cfg: &Config) -> Vec<Coding> {
    let e = &cfg.encodings;
    [
        (e.br, Coding::Br),
        (e.zstd, Coding::Zstd),
        (e.gzip, Coding::Gzip),
    ]
    .into_iter()
    .filter_map(|(on, c)| on.then_some(c))
    .collect()
}

/// The admin token: `QUIRE_ADMIN_TOKEN` over the config's, checked.
fn admin_token(cfg: &Config) -> Result<Option<String>, StartError> {
    let token = std::env::var("QUIRE_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.is_empty())
        .or_else(|| cfg.admin_token.clone());
    if let Some(t) = &token {
        crate::config::check_admin_token(t).map_err(|e| {
            StartError::Config(crate::config::ConfigError::new(format!(
                "the admin token (admin_token or QUIRE_ADMIN_TOKEN) {e}"
            )))
        })?;
    }
    Ok(token)
}

/// Store-entry overhead kept free when deriving the largest body from the region
/// size: entry header, key, tags and the record are far below this. A quarter of
/// the region at most, so the smallest volumes (64 KiB regions below 16 MiB) still
/// store bodies of up to 48 KiB — a fixed 64 KiB left them storing nothing at all,
/// silently. (A put whose record turns out larger is declined by the store.)
fn entry_overhead_bytes(object_bytes_max: u64) -> u64 {
    (64 << 10).min(object_bytes_max / 4)
}

/// The largest response stored: `limits.object_bytes`, or less when the volume's
/// regions cannot hold it (said in the log at start-up, with the size that would).
fn object_limit(cfg: &Config, store_max: u64, warn: bool) -> u64 {
    let object_limit = cfg
        .limits
        .object_bytes
        .0
        .min(store_max - entry_overhead_bytes(store_max));
    if warn && object_limit < cfg.limits.object_bytes.0 / 2 {
        // (A region is 1/128 of the volume, a power of two.)
        let region = (cfg.limits.object_bytes.0 + (64 << 10) + 64).next_power_of_two();
        tracing::warn!(
            "responses larger than {object_limit} bytes will not be stored: the \
             volume's regions are too small for limits.object_bytes ({}); a \
             cache.size of {} bytes or more stores them",
            cfg.limits.object_bytes.0,
            region.saturating_mul(128) + 4096
        );
    }
    object_limit
}
