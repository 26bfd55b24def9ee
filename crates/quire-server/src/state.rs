//! The state every request shares: the policy the configuration decides
//! ([`crate::policy`], swapped whole on reload), the store, the origin client, the
//! fill registry and the metrics. Built once at start-up; afterwards only the
//! policy is replaced, and only the lock-free parts change.

use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use quire_http::key::{self, MethodClass, NormalizedUrl, VaryFields};
use quire_store::{Engine as _, Options, Store};

use crate::cache::invalidate::Invalidations;
use crate::cache::key_epoch::KeyEpochs;
use crate::clock::Clock;
use crate::config::Config;
use crate::fill::coalesce::Fills;
use crate::fill::compress_pool::CompressPool;
use crate::metrics::Metrics;
pub(crate) use crate::policy::StartError;
use crate::policy::{Policy, Reloaded};
use crate::request::hit::Records;
use crate::upstream::origin::{Origin, OriginOptions};
use crate::upstream::{versioned, Audience, Upstream};

/// What a store key is made of beyond the URL: the upstream's content version (with
/// the key epoch folded in) and, for a signed-in reader's request, the audience.
///
/// An audience's keys end in `#` and its id, after the version suffix: a key is a
/// length-prefixed URL then `@version` or nothing, then `#audience` or nothing, so no
/// anonymous key is ever an audience's, and no audience's is another's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope {
    /// The content version and key epoch, mixed.
    pub version: u64,
    /// The audience whose entry this is; `None` for the anonymous cache.
    pub audience: Option<Audience>,
}

impl Scope {
    /// `key` in this scope.
    fn apply(self, key: Vec<u8>) -> Vec<u8> {
        let mut key = versioned(key, self.version);
        if let Some(a) = self.audience {
            key.push(b'#');
            key.extend_from_slice(&a.id().to_le_bytes());
        }
        key
    }
}

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
        residency: cfg.cache.residency.into(),
        huge_pages: cfg.cache.huge_pages.into(),
        ..Options::default()
    };
    Store::open(&cfg.cache.path, cfg.cache.size.0, options).map_err(|source| StartError::Store {
        path: cfg.cache.path.display().to_string(),
        source,
    })
}

/// Decoded records kept ready (a few hundred bytes to a few KiB each).
const RECORDS_CACHED: usize = 32 * 1024;

/// Shared state of a running server.
#[derive(Debug)]
pub struct Ctx {
    /// What the configuration decides per request; swapped on reload.
    policy: ArcSwap<Policy>,
    /// The epoch of the running `[keys]` scheme, in every key (see
    /// [`crate::cache::key_epoch`]).
    key_epochs: KeyEpochs,
    /// The cache.
    pub store: Store,
    /// Where fills and passed requests go: the origin client, or the renderer of
    /// `quire serve`.
    pub origin: Arc<dyn Upstream>,
    /// A cluster's shared invalidation log, once one is attached (see
    /// [`crate::ops::bus`]); never set without `[cluster]`.
    bus: std::sync::OnceLock<Arc<dyn crate::ops::bus::Bus>>,
    /// Unix milliseconds before which every stored response counts as stale (0:
    /// none): a soft purge of everything at the cost of one atomic load per hit,
    /// set by a cluster node that cannot know what it missed (see `quire-cluster`).
    stale_before_ms: std::sync::atomic::AtomicU64,
    /// While set, nothing held is fresh, whenever it was received (see
    /// [`Ctx::revalidate_every_use`]).
    stale_always: std::sync::atomic::AtomicBool,
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
    /// When the server started.
    pub started: Instant,
    /// The wall clock freshness is decided by (tests move it forward).
    pub clock: Clock,
    /// TLS on the listener, when configured.
    pub tls: Option<Arc<crate::edge::tls::Tls>>,
    /// Serialises reloads (two `SIGHUP`s at once build one policy each, in turn).
    reloading: std::sync::Mutex<()>,
    /// Reloads, for the metrics.
    pub reloads: crate::policy::ReloadStats,
    /// The per-client rate limits' buckets (their rates are the policy's).
    pub limiter: crate::edge::rate_limit::Limiter,
    /// Upgraded connections (WebSocket) passed through.
    pub tunnels: crate::edge::upgrades::Tunnels,
    /// Records a refresh-ahead was started for (`crate::cache::refreshed`).
    pub(crate) refreshed: crate::cache::refreshed::Refreshed,
    /// The dictionaries the origin named (`crate::fill::dictionaries`).
    pub(crate) dictionaries: crate::fill::dictionaries::OriginDictionaries,
    /// The dictionaries made from `[dictionaries]` hosts' pages
    /// (`crate::fill::host_dictionaries`).
    pub(crate) host_dictionaries: crate::fill::host_dictionaries::HostDictionaries,
    /// Stored entries whose slow codings wait for a second read.
    pub(crate) deferred: crate::fill::deferred::Deferred,
    /// The budget of uncached work every client shares (`[budget]`, see
    /// `crate::edge::budget`).
    pub budget: crate::edge::budget::Budget,
    /// Crawlers with slots of their own (`[[budget.crawlers]]`, see
    /// `crate::edge::crawlers`).
    pub(crate) crawlers: crate::edge::crawlers::Crawlers,
    /// Cold entries being read into memory on the blocking pool, at most
    /// [`COLD_READS_MAX`] at once (see `crate::request::cold`).
    pub cold_reads: Arc<tokio::sync::Semaphore>,
    /// The queue of URLs a purge asked to be fetched again (`refill`), attached
    /// by the server as it starts (see `crate::ops::purge_api`).
    refills: std::sync::OnceLock<Box<dyn crate::ops::refill::Refill>>,
    /// The sampler and exporter of `[tracing]`, when it is on (`crate::trace`).
    pub tracer: Option<Arc<crate::trace::Tracer>>,
}

/// The slots `cfg`'s `[budget]` gives uncached work with `origin` as the upstream.
pub(crate) fn budget_slots(cfg: &Config, origin: &dyn Upstream) -> usize {
    match cfg.budget.slots {
        0 => crate::edge::budget::auto_slots(origin.works_here()),
        n => n,
    }
}

/// Cold entries read into memory at once, at most: each holds a blocking thread
/// while the disk answers.
pub(crate) const COLD_READS_MAX: usize = 32;

impl Ctx {
    /// Validates `cfg`, opens the volume and builds the shared state of a proxy in
    /// front of `cfg.origin`.
    pub fn new(cfg: Config) -> Result<Arc<Ctx>, StartError> {
        cfg.validate()?;
        let upstream = Ctx::proxy_upstream(&cfg)?;
        Ctx::with_upstream(cfg, upstream)
    }

    /// The upstream of a proxy configured by `cfg`: its `origin`, or its
    /// `[[origins]]` (with their health checks started).
    pub fn proxy_upstream(cfg: &Config) -> Result<Arc<dyn Upstream>, StartError> {
        if !cfg.origins.is_empty() {
            return Ok(Arc::new(crate::upstream::origins::Origins::new(cfg)?));
        }
        let origin_url = cfg.origin.clone().ok_or(StartError::NoOrigin)?;
        Ok(Arc::new(Origin::new(
            &origin_url,
            &OriginOptions::from_config(cfg),
        )?))
    }

    /// Validates `cfg`, opens the volume and builds the shared state of a server
    /// that fills from `origin` (`cfg.origin` is not used).
    pub fn with_upstream(cfg: Config, origin: Arc<dyn Upstream>) -> Result<Arc<Ctx>, StartError> {
        cfg.validate()?;
        let fresh = !cfg.cache.path.exists();
        let store = open_store(&cfg)?;
        let tls = crate::edge::tls::Tls::from_config(&cfg.tls)?.map(Arc::new);
        let fills = Fills::new(cfg.limits.fills, cfg.limits.fills_per_client);
        let tunnels = crate::edge::upgrades::Tunnels::new(&cfg.limits);
        let e = &cfg.encodings;
        let cpu = crate::fill::compress_pool::CpuLimits {
            large_bytes: e.large_bytes.0,
            burst: e.background_cpu_burst.0,
            share: e.background_cpu_share,
        };
        let compress = CompressPool::with_limits(e.threads, e.budget.0, cpu);
        let budget = crate::edge::budget::Budget::new(budget_slots(&cfg, origin.as_ref()));
        let crawlers = crate::edge::crawlers::Crawlers::new(&cfg.budget.crawlers);
        let tracer = crate::trace::Tracer::from_config(&cfg.tracing)?.map(Arc::new);
        let policy = Policy::build(cfg, store.object_bytes_max(), origin.as_ref(), None)?;
        let key_epochs = KeyEpochs::open(&policy.cfg.cache.path, fresh, &policy.keys);
        Ok(Arc::new(Ctx {
            key_epochs,
            policy: ArcSwap::from_pointee(policy),
            fills,
            records: Records::new(RECORDS_CACHED),
            compress,
            invalidations: Invalidations::default(),
            metrics: Metrics::new(),
            started: Instant::now(),
            clock: Clock::default(),
            tls,
            store,
            origin,
            bus: std::sync::OnceLock::new(),
            stale_before_ms: std::sync::atomic::AtomicU64::new(0),
            stale_always: std::sync::atomic::AtomicBool::new(false),
            reloading: std::sync::Mutex::new(()),
            reloads: crate::policy::ReloadStats::default(),
            limiter: crate::edge::rate_limit::Limiter::default(),
            tunnels,
            cold_reads: Arc::new(tokio::sync::Semaphore::new(COLD_READS_MAX)),
            budget,
            crawlers,
            refreshed: Default::default(),
            dictionaries: Default::default(),
            host_dictionaries: Default::default(),
            deferred: Default::default(),
            refills: std::sync::OnceLock::new(),
            tracer,
        }))
    }

    /// Attaches a cluster's invalidation bus; `false` if one was attached already.
    pub fn attach_bus(&self, bus: Arc<dyn crate::ops::bus::Bus>) -> bool {
        self.bus.set(bus).is_ok()
    }

    /// The cluster's invalidation bus, if one is attached.
    pub fn bus(&self) -> Option<&Arc<dyn crate::ops::bus::Bus>> {
        self.bus.get()
    }

    /// Attaches the queue purged URLs are fetched again from (a purge's
    /// `refill`; the server attaches a prefill queue as it starts); `false` if one
    /// was attached already.
    pub(crate) fn attach_refills(&self, queue: Box<dyn crate::ops::refill::Refill>) -> bool {
        self.refills.set(queue).is_ok()
    }

    /// The queue purged URLs are fetched again from, once attached.
    pub(crate) fn refills(&self) -> Option<&dyn crate::ops::refill::Refill> {
        self.refills.get().map(|q| q.as_ref())
    }

    /// Entries the store holds now (responses, their variants and bodies).
    pub fn store_entries(&self) -> u64 {
        self.store.stats().entries
    }

    /// Makes every response received before `t` stale: each is revalidated on its
    /// next use (its body stays). Never moves back.
    pub fn stale_everything_before(&self, t: std::time::SystemTime) {
        let ms = t
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        self.stale_before_ms
            .fetch_max(ms, std::sync::atomic::Ordering::AcqRel);
    }

    /// While `on`, every response held is stale on every use, received before or
    /// after this call: each is revalidated, and what the origin answers is served.
    /// For a cluster node cut off from its invalidation log, where a purge it cannot
    /// see may be acknowledged at any instant, also just after a revalidation stored
    /// a copy; an instant ([`Ctx::stale_everything_before`]) moved on a tick leaves
    /// what was stored since the last tick fresh.
    pub fn revalidate_every_use(&self, on: bool) {
        self.stale_always
            .store(on, std::sync::atomic::Ordering::Release);
    }

    /// The instant set by [`Ctx::stale_everything_before`], if any.
    pub fn stale_before(&self) -> Option<std::time::SystemTime> {
        match self
            .stale_before_ms
            .load(std::sync::atomic::Ordering::Acquire)
        {
            0 => None,
            ms => Some(std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms)),
        }
    }

    /// `p`'s timing as reuse decisions must read it: expired when it was received
    /// before [`Ctx::stale_before`], or at all while [`Ctx::revalidate_every_use`].
    pub(crate) fn timing_of(
        &self,
        p: &crate::request::hit::Prepared,
    ) -> quire_http::freshness::StoredTiming {
        self.timing_as_reused(*p.timing())
    }

    /// A record's timing `t` (a copy of [`crate::request::hit::Prepared::timing`])
    /// as [`Ctx::timing_of`] gives it.
    pub(crate) fn timing_as_reused(
        &self,
        t: quire_http::freshness::StoredTiming,
    ) -> quire_http::freshness::StoredTiming {
        if self.stale_always.load(std::sync::atomic::Ordering::Acquire) {
            return t.expired();
        }
        match self.stale_before() {
            Some(before) if t.received() < before => t.expired(),
            _ => t,
        }
    }

    /// The policy now: what a request reads once and keeps (a lock-free load).
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.load_full()
    }

    /// The policy now, without taking a reference count: for a read that ends
    /// before the caller next awaits.
    pub fn peek(&self) -> arc_swap::Guard<Arc<Policy>> {
        self.policy.load()
    }

    /// Applies `cfg` to requests that start from now on; requests in flight finish
    /// under the policy they started with. An invalid `cfg` (or an access log that
    /// cannot be opened) changes nothing. Settings sized at start-up are left as
    /// they are and listed in the answer (see [`crate::policy`]).
    pub fn reload(&self, cfg: Config) -> Result<Reloaded, StartError> {
        let _one_at_a_time = self.reloading.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.policy.load_full();
        let needs_restart = crate::policy::needs_restart(&old.cfg, &cfg);
        let new = Policy::build(
            cfg,
            self.store.object_bytes_max(),
            self.origin.as_ref(),
            Some(&old),
        )
        .inspect_err(|_| self.reloads.failed())?;
        // A changed `[keys]` takes a new key-scheme epoch (crate::cache::key_epoch). A
        // request between these two lines keys a URL normalised the old way under
        // the new epoch: it fetched what it keyed, so the entry is right for its key.
        self.key_epochs.adopt(&new.keys);
        self.budget
            .resize(budget_slots(&new.cfg, self.origin.as_ref()));
        self.crawlers.configure(&new.cfg.budget.crawlers);
        self.policy.store(Arc::new(new));
        self.reloads.applied();
        Ok(Reloaded { needs_restart })
    }

    /// The anonymous scope of `url` now: the version [`Upstream::key_version`]
    /// gives it, with the key epoch. Read it once per request and pass it to
    /// [`Ctx::primary_key`] and [`Ctx::variant_key`], so that one request's keys
    /// agree.
    pub fn key_version(&self, url: &NormalizedUrl) -> Scope {
        Scope {
            version: crate::cache::key_epoch::mix(
                self.origin.key_version(url),
                self.key_epochs.current(),
            ),
            audience: None,
        }
    }

    /// The scope of `url` for `audience` now ([`Upstream::audience_version`]), or
    /// `None` when the upstream cannot version it yet.
    pub fn audience_scope(&self, url: &NormalizedUrl, audience: Audience) -> Option<Scope> {
        let v = self.origin.audience_version(url, audience)?;
        Some(Scope {
            version: crate::cache::key_epoch::mix(v, self.key_epochs.current()),
            audience: Some(audience),
        })
    }

    /// The scope of `url`'s `nth` previous version for `audience`
    /// ([`Upstream::previous_version`]), under the current key epoch (so a purge
    /// of everything reaches previous versions too), or `None`.
    pub fn previous_scope(
        &self,
        url: &NormalizedUrl,
        audience: Option<Audience>,
        nth: usize,
    ) -> Option<Scope> {
        let v = self.origin.previous_version(url, audience, nth)?;
        Some(Scope {
            version: crate::cache::key_epoch::mix(v, self.key_epochs.current()),
            audience,
        })
    }

    /// The key of `url`'s primary record in `scope`.
    pub fn primary_key(&self, class: MethodClass, url: &NormalizedUrl, scope: Scope) -> Vec<u8> {
        scope.apply(key::primary_key(class, url))
    }

    /// The key of one variant of `url` in `scope`.
    pub fn variant_key(
        &self,
        class: MethodClass,
        url: &NormalizedUrl,
        vary: &VaryFields,
        headers: &http::HeaderMap,
        scope: Scope,
    ) -> Vec<u8> {
        scope.apply(key::variant_key(class, url, vary, headers))
    }
}

/// A context for unit tests: an origin nobody listens on, and an 8 MiB volume in
/// `dir`.
#[cfg(test)]
pub(crate) fn test_ctx(dir: &std::path::Path) -> Arc<Ctx> {
    let mut cfg = crate::Config {
        origin: Some("http://127.0.0.1:9".into()),
        ..Default::default()
    };
    cfg.cache.path = dir.join("c.vol");
    cfg.cache.size = crate::config::ByteSize(8 << 20);
    Ctx::new(cfg).unwrap()
}
