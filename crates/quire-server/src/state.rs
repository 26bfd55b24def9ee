//! The state every request shares: configuration turned into the policy structs of
//! `quire-http`, the store, the origin client, the fill registry and the metrics.
//! Built once at start-up; read-only afterwards except for the lock-free parts.

use std::sync::Arc;
use std::time::Instant;

use quire_http::bypass::BypassConfig;
use quire_http::encoding::Coding;
use quire_http::freshness::{ReuseConfig, StorageConfig};
use quire_http::key::{self, KeyConfig, MethodClass, NormalizedUrl, VaryFields};
use quire_store::{Options, Store};

use crate::client::TrustedProxies;
use crate::clock::Clock;
use crate::compress::Levels;
use crate::compress_pool::CompressPool;
use crate::config::Config;
use crate::fill::Fills;
use crate::hit::Records;
use crate::invalidate::Invalidations;
use crate::metrics::Metrics;
use crate::origin::{Origin, OriginOptions};
use crate::upstream::{versioned, Upstream};

/// Store-entry overhead kept free when deriving the largest body from the region
/// size: entry header, key, tags and the record are far below this. A quarter of
/// the region at most, so the smallest volumes (64 KiB regions below 16 MiB) still
/// store bodies of up to 48 KiB — a fixed 64 KiB left them storing nothing at all,
/// silently. (A put whose record turns out larger is declined by the store.)
/// Opens (or creates) the configured cache volume, with its directory.
fn open_store(cfg: &Config) -> Result<Store, StartError> {
    if let Some(dir) = cfg
        .cache
        .path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
    {
        std::fs::create_dir_all(dir).map_err(|source| StartError::Dir {
            path: dir.display().to_string(),
            source,
        })?;
    }
    let options = Options {
        admission: cfg.cache.admission,
        ram_tier_bytes: cfg.cache.ram_tier.0,
        ..Options::default()
    };
    Store::open(&cfg.cache.path, cfg.cache.size.0, options).map_err(|source| StartError::Store {
        path: cfg.cache.path.display().to_string(),
        source,
    })
}

/// The largest response stored: `limits.object_bytes`, or less when the volume's
/// regions cannot hold it (said once in the log, with the size that would).
fn object_limit(cfg: &Config, store: &Store) -> u64 {
    let store_max = store.object_bytes_max();
    let object_limit = cfg
        .limits
        .object_bytes
        .0
        .min(store_max - entry_overhead_bytes(store_max));
    if object_limit < cfg.limits.object_bytes.0 / 2 {
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
            StartError::Config(crate::config::ConfigError(format!(
                "the admin token (admin_token or QUIRE_ADMIN_TOKEN) {e}"
            )))
        })?;
    }
    Ok(token)
}

fn entry_overhead_bytes(object_bytes_max: u64) -> u64 {
    (64 << 10).min(object_bytes_max / 4)
}

/// Decoded records kept ready (a few hundred bytes to a few KiB each).
const RECORDS_CACHED: usize = 32 * 1024;

/// Shared state of a running server.
#[derive(Debug)]
pub struct Ctx {
    /// The configuration as loaded.
    pub cfg: Config,
    /// The cache.
    pub store: Store,
    /// Where fills and passed requests go: the origin client, or the renderer of
    /// `quire serve`.
    pub origin: Arc<dyn Upstream>,
    /// Fills in flight.
    pub fills: Fills,
    /// Decoded records, by content.
    pub records: Records,
    /// The compression pool (fills' codings, bounded).
    pub compress: CompressPool,
    /// The invalidation log and commit gate.
    pub invalidations: Invalidations,
    /// Counters for `/_quire/metrics`.
    pub metrics: Metrics,
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
    /// When the server started.
    pub started: Instant,
    /// The wall clock freshness is decided by (tests move it forward).
    pub clock: Clock,
    /// TLS on the listener, when configured.
    pub tls: Option<Arc<crate::tls::Tls>>,
    /// The access log, when configured.
    pub access_log: Option<Arc<crate::access_log::AccessLog>>,
}

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
    #[error("no origin: give --origin http(s)://host[:port] or `origin` in the config file")]
    NoOrigin,
    /// The origin client cannot be built: a bad URL, `origin_ca_file`, or no CA
    /// certificates for an https origin.
    #[error(transparent)]
    Origin(#[from] crate::origin::OriginSetupError),
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
    Tls(#[from] crate::tls::TlsError),
    /// The access log cannot be opened.
    #[error(transparent)]
    Log(#[from] crate::access_log::LogError),
}

impl Ctx {
    /// Validates `cfg`, opens the volume and builds the shared state of a proxy in
    /// front of `cfg.origin`.
    pub fn new(cfg: Config) -> Result<Arc<Ctx>, StartError> {
        cfg.validate()?;
        let origin_url = cfg.origin.clone().ok_or(StartError::NoOrigin)?;
        let origin = Origin::new(&origin_url, &OriginOptions::from_config(&cfg))?;
        Ctx::with_upstream(cfg, Arc::new(origin))
    }

    /// Validates `cfg`, opens the volume and builds the shared state of a server
    /// that fills from `origin` (`cfg.origin` is not used).
    pub fn with_upstream(cfg: Config, origin: Arc<dyn Upstream>) -> Result<Arc<Ctx>, StartError> {
        cfg.validate()?;
        let store = open_store(&cfg)?;
        let object_limit = object_limit(&cfg, &store);
        let codings = derived_codings(&cfg);
        let admin_token = admin_token(&cfg)?;
        let trusted_proxies = TrustedProxies::parse(&cfg.trusted_proxies)
            .map_err(|e| StartError::Config(crate::config::ConfigError(e)))?;
        let mut keys = cfg.key_config();
        keys.query_paths = origin.query_paths();
        let tls = crate::tls::Tls::from_config(&cfg.tls)?.map(Arc::new);
        let access_log = crate::access_log::AccessLog::open(&cfg.log)?;
        Ok(Arc::new(Ctx {
            keys,
            bypass: cfg.bypass_config(),
            storage: cfg.storage_config(),
            reuse: cfg.reuse_config(),
            levels: cfg.encodings.levels(),
            fills: Fills::new(cfg.limits.fills, cfg.limits.fills_per_client),
            records: Records::new(RECORDS_CACHED),
            compress: CompressPool::new(cfg.encodings.threads, cfg.encodings.budget.0),
            invalidations: Invalidations::default(),
            metrics: Metrics::new(),
            codings,
            object_limit,
            admin_token,
            trusted_proxies,
            started: Instant::now(),
            clock: Clock::default(),
            tls,
            access_log,
            store,
            origin,
            cfg,
        }))
    }

    /// The version [`Upstream::key_version`] gives `url` now. Read it once per
    /// request and pass it to [`Ctx::primary_key`] and [`Ctx::variant_key`], so that
    /// one request's keys agree.
    pub fn key_version(&self, url: &NormalizedUrl) -> u64 {
        self.origin.key_version(url)
    }

    /// The key of `url`'s primary record at `version`.
    pub fn primary_key(&self, class: MethodClass, url: &NormalizedUrl, version: u64) -> Vec<u8> {
        versioned(key::primary_key(class, url), version)
    }

    /// The key of one variant of `url` at `version`.
    pub fn variant_key(
        &self,
        class: MethodClass,
        url: &NormalizedUrl,
        vary: &VaryFields,
        headers: &http::HeaderMap,
        version: u64,
    ) -> Vec<u8> {
        versioned(key::variant_key(class, url, vary, headers), version)
    }
}
