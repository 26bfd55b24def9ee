//! Server configuration: every knob of the proxy with its default, deserialised from
//! the `[server]`-level TOML the binary reads (`quire --config FILE`).
//!
//! Key decisions:
//! - **Sane defaults, nothing required but the origin.** `Config::default()` is a
//!   working shared cache with RFC 9111 behaviour exactly; grace periods, storing
//!   `private` or `Set-Cookie` responses and exposing keys are opt-in.
//! - **Unknown keys are errors** (`deny_unknown_fields`): a misspelt option must not
//!   silently do nothing.
//! - **Sizes and durations are written the way people write them** (`"64 MiB"`,
//!   `"2s"`, or plain integers of bytes and seconds), parsed by [`ByteSize`] and
//!   [`Secs`].
//! - [`Config::validate`] checks cross-field rules once at start-up, so the request
//!   path never meets an impossible setting.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod agents;
pub(crate) mod budget;
mod cluster;
pub(crate) mod dictionaries;
mod error;
mod log;
mod origin_url;
mod origins;
mod rate_limit;
mod traces;
mod units;

pub use agents::AgentsSection;
pub use budget::{BudgetSection, CrawlerClass};
pub use cluster::{ClusterSection, ClusterSectionError, Secret, SESSION_SECRET_LEN_MIN};
pub use dictionaries::DictionariesSection;
pub use error::ConfigError;
pub use log::{Format, LogSection};
pub use origin_url::{OriginUrl, OriginUrlError};
pub use origins::OriginEntry;
pub use rate_limit::RateLimitSection;
pub use traces::TracingSection;
pub use units::{ByteSize, Quantity, Secs, UnitError};

/// The whole configuration of a quire server.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// The origin, `http://host[:port]` or `https://host[:port]` (proxy mode).
    pub origin: Option<String>,
    /// Several origins, with weights, routing by host and path prefix, and health
    /// checks (see `origins`); instead of `origin`.
    pub origins: Vec<OriginEntry>,
    /// A PEM file of CA certificates trusted for an `https://` origin besides the
    /// system's (a private CA, or a self-signed origin certificate). Read at start-up
    /// whatever the origin's scheme: a missing, unreadable or empty file, or one
    /// without a PEM certificate, is an error naming it.
    pub origin_ca_file: Option<PathBuf>,
    /// Accept any certificate from an `https://` origin, for any name: the traffic is
    /// encrypted, but to whoever answers. Off by default, and logged at start-up as a
    /// warning when on; for a test origin, never for one across a network.
    pub origin_insecure_skip_verify: bool,
    /// Worker threads of the runtime; 0 means one per available core.
    pub workers: usize,
    /// Bearer token for `/_quire/*` admin endpoints and `PURGE`. The environment
    /// variable `QUIRE_ADMIN_TOKEN` overrides it. Without a token, admin endpoints
    /// answer 403 (health excepted).
    pub admin_token: Option<String>,
    /// The cache volume.
    pub cache: CacheConfig,
    /// Resource limits and timeouts.
    pub limits: Limits,
    /// URL normalisation before keying.
    pub keys: KeysConfig,
    /// Which requests bypass the anonymous cache.
    pub bypass: BypassSection,
    /// What is stored and how long it is reused.
    pub storage: StorageSection,
    /// Stored content encodings.
    pub encodings: EncodingsConfig,
    /// Put the cache key in `Cache-Status` (`key=`): useful to debug, but it shows
    /// clients how URLs are normalised.
    pub expose_key: bool,
    /// Which request fields a fill (a cacheable miss) forwards to the origin:
    /// `keyed` (default) sends only what the cache key covers — content negotiation
    /// fields and those the URL's `Vary` names — so no other field can change a stored
    /// response; `all` forwards every end-to-end field as the client sent it (as nginx
    /// and Varnish do), for origins that need more and whose responses declare `Vary`.
    pub fill_headers: FillHeaders,
    /// Fast-path hit bodies at least this large are sent with `sendfile` from the
    /// volume; smaller ones are copied from the mapping. 0 (the default) turns it off:
    /// only safe when no client shares this host's network stack (see `sendfile`).
    pub sendfile_min_bytes: ByteSize,
    /// Proxies (addresses or `address/prefix` blocks) whose `X-Forwarded-For` names
    /// the client: a TLS terminator or load balancer in front of quire. Empty (the
    /// default): the client is always the connection's peer. See `client`.
    pub trusted_proxies: Vec<String>,
    /// TLS on the listener: with a certificate, `listen` serves HTTPS (HTTP/2 and
    /// HTTP/1.1 by ALPN).
    pub tls: TlsSection,
    /// With TLS on, a second, plain-HTTP address whose every request is redirected to
    /// HTTPS (308, same host and path).
    pub listen_http: Option<SocketAddr>,
    /// The access log (off by default).
    pub log: LogSection,
    /// Per-client request rates.
    pub rate_limit: RateLimitSection,
    /// The budget of uncached work all clients share (see `budget`).
    pub budget: BudgetSection,
    /// Compression dictionaries made from an origin's pages, per host.
    pub dictionaries: DictionariesSection,
    /// Self-identified AI crawlers refused before the cache (none by default).
    pub agents: AgentsSection,
    /// Several nodes sharing invalidations and filling from each other (off when
    /// absent).
    pub cluster: Option<ClusterSection>,
    /// OpenTelemetry traces over OTLP/HTTP (off unless `endpoint` is set).
    pub tracing: TracingSection,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            origin: None,
            origins: Vec::new(),
            origin_ca_file: None,
            origin_insecure_skip_verify: false,
            workers: 0,
            admin_token: None,
            cache: CacheConfig::default(),
            limits: Limits::default(),
            keys: KeysConfig::default(),
            bypass: BypassSection::default(),
            storage: StorageSection::default(),
            encodings: EncodingsConfig::default(),
            expose_key: false,
            fill_headers: FillHeaders::Keyed,
            sendfile_min_bytes: ByteSize(0),
            trusted_proxies: Vec::new(),
            tls: TlsSection::default(),
            listen_http: None,
            log: LogSection::default(),
            rate_limit: RateLimitSection::default(),
            budget: BudgetSection::default(),
            dictionaries: DictionariesSection::default(),
            agents: AgentsSection::default(),
            cluster: None,
            tracing: TracingSection::default(),
        }
    }
}

/// The `[tls]` section: the listener's certificate and what HTTPS responses carry.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSection {
    /// The certificate chain, PEM: the site's certificate first, then the
    /// intermediates.
    pub cert: Option<PathBuf>,
    /// The certificate's private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
    /// A `Strict-Transport-Security` value added to every HTTPS response, e.g.
    /// `"max-age=63072000"`. Off by default: once a browser has seen it, the site
    /// cannot go back to plain HTTP for that long.
    pub hsts: Option<String>,
    /// Longest a client may take to complete the TLS handshake.
    pub handshake_timeout: Secs,
    /// Certificates obtained and renewed automatically (instead of `cert`/`key`).
    pub acme: Option<AcmeSection>,
}

/// Let's Encrypt's production directory, the default ACME server.
pub const LETS_ENCRYPT: &str = "https://acme-v02.api.letsencrypt.org/directory";

/// The `[tls.acme]` section: automatic certificates (RFC 8555).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AcmeSection {
    /// The names the certificate covers (DNS names pointing at this server).
    pub domains: Vec<String>,
    /// Contact addresses for the CA's expiry and policy mail (`mailto:` added when
    /// missing).
    pub contact: Vec<String>,
    /// The ACME directory URL.
    pub directory: String,
    /// Extra roots (PEM) trusted for the directory's HTTPS, for a test CA.
    pub ca_file: Option<PathBuf>,
    /// Where the account key and certificates are kept (created `0700`).
    pub state_dir: PathBuf,
    /// How the CA checks control of the names: `tls-alpn-01` on the HTTPS port
    /// (443), or `http-01` on `listen_http` (port 80).
    pub challenge: AcmeChallenge,
    /// Renew when the certificate has less than this left (or a third of its
    /// lifetime, if that is less).
    pub renew_before: Secs,
}

impl Default for AcmeSection {
    fn default() -> Self {
        AcmeSection {
            domains: Vec::new(),
            contact: Vec::new(),
            directory: LETS_ENCRYPT.to_owned(),
            ca_file: None,
            state_dir: PathBuf::from("quire-acme"),
            challenge: AcmeChallenge::TlsAlpn01,
            renew_before: Secs(Duration::from_secs(30 * 86_400)),
        }
    }
}

/// See [`AcmeSection::challenge`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum AcmeChallenge {
    /// RFC 8737: answered in the TLS handshake on the HTTPS listener.
    #[serde(rename = "tls-alpn-01")]
    TlsAlpn01,
    /// RFC 8555 §8.3: answered on the plain-HTTP listener.
    #[serde(rename = "http-01")]
    Http01,
}

impl Default for TlsSection {
    fn default() -> Self {
        TlsSection {
            cert: None,
            key: None,
            hsts: None,
            handshake_timeout: Secs(Duration::from_secs(10)),
            acme: None,
        }
    }
}

impl TlsSection {
    /// Whether TLS is on (a certificate is configured, or obtained by ACME).
    pub fn enabled(&self) -> bool {
        self.cert.is_some() || self.key.is_some() || self.acme.is_some()
    }

    /// Checks the section on its own: both files or neither, a well-formed HSTS
    /// value, a non-zero handshake timeout.
    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |s: &str| Err(ConfigError::new(s.into()));
        if self.cert.is_some() != self.key.is_some() {
            return bad("tls.cert and tls.key go together: give both or neither");
        }
        if let Some(h) = &self.hsts {
            let ok = h.trim_start().to_ascii_lowercase().starts_with("max-age=")
                && http::HeaderValue::from_str(h).is_ok();
            if !ok {
                return bad("tls.hsts must be a Strict-Transport-Security value starting with max-age=, e.g. \"max-age=63072000\"");
            }
        }
        if self.handshake_timeout.0.is_zero() {
            return bad("tls.handshake_timeout must be above 0");
        }
        if let Some(acme) = &self.acme {
            if self.cert.is_some() {
                return bad("tls.cert/tls.key and [tls.acme] exclude each other: give files or let ACME obtain them");
            }
            acme.validate()?;
        }
        Ok(())
    }
}

impl AcmeSection {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.domains.is_empty() {
            return Err(ConfigError::new(
                "tls.acme.domains: give at least one name".into(),
            ));
        }
        for d in &self.domains {
            if !is_dns_name(d) {
                return Err(ConfigError::new(format!(
                    "tls.acme.domains: {d:?} is not a DNS name (no wildcards, addresses or ports)"
                )));
            }
        }
        if !(self.directory.starts_with("https://") || self.directory.starts_with("http://")) {
            return Err(ConfigError::new(
                "tls.acme.directory must be an https:// URL".into(),
            ));
        }
        Ok(())
    }
}

/// A DNS name as a certificate may carry it: dot-separated labels of letters,
/// digits and inner hyphens, at most 253 bytes.
fn is_dns_name(s: &str) -> bool {
    s.len() <= 253
        && s.parse::<std::net::IpAddr>().is_err()
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// See [`Config::fill_headers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FillHeaders {
    /// Only fields the key covers.
    Keyed,
    /// Every end-to-end field.
    All,
}

/// The cache volume.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheConfig {
    /// The volume file (created, preallocated to `size`).
    pub path: PathBuf,
    /// Volume size: the cache's byte cap.
    pub size: ByteSize,
    /// RAM tier for the hot set (0 = off).
    pub ram_tier: ByteSize,
    /// Admission on: once full, a URL is stored on its second miss.
    pub admission: bool,
    /// When a hit checks that its entry is in memory before reading it, so a read
    /// that would wait on the disk happens off the request workers: `auto` (while
    /// the process has had major page faults lately: a volume bigger than the
    /// memory it may use), `always` or `never`.
    pub residency: Residency,
    /// Whether the volume's mapping asks the kernel for 2 MiB pages, which makes a
    /// hit's copy into the socket cheaper where the filesystem has large folios:
    /// `auto` (when the volume is at most half of the memory the process may use),
    /// `always` or `never`.
    pub huge_pages: HugePages,
}

/// `cache.huge_pages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum HugePages {
    /// When the volume fits in memory twice over.
    #[default]
    Auto,
    /// Always.
    Always,
    /// Never.
    Never,
}

impl From<HugePages> for quire_store::HugePages {
    fn from(h: HugePages) -> Self {
        match h {
            HugePages::Auto => quire_store::HugePages::Auto,
            HugePages::Always => quire_store::HugePages::Always,
            HugePages::Never => quire_store::HugePages::Never,
        }
    }
}

/// `cache.residency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Residency {
    /// While major faults happen.
    #[default]
    Auto,
    /// On every hit read from the volume.
    Always,
    /// Never: a cold read faults on the worker.
    Never,
}

impl From<Residency> for quire_store::Residency {
    fn from(r: Residency) -> Self {
        match r {
            Residency::Auto => quire_store::Residency::Auto,
            Residency::Always => quire_store::Residency::Always,
            Residency::Never => quire_store::Residency::Never,
        }
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            path: PathBuf::from("quire-cache/proxy.vol"),
            size: ByteSize(1 << 30),
            ram_tier: ByteSize(0),
            admission: true,
            residency: Residency::Auto,
            huge_pages: HugePages::Auto,
        }
    }
}

/// Limits and timeouts.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest request head (request line and headers) accepted; larger gets 431.
    pub header_bytes: ByteSize,
    /// Largest response body stored; larger responses stream through uncached.
    /// Also bounded by the volume's region size (1/128 of the volume).
    pub object_bytes: ByteSize,
    /// Open client connections; further connections wait in the listen backlog
    /// (idle keep-alive connections are closed first to make room).
    pub connections: usize,
    /// Open connections one client address may hold (trusted proxies are exempt);
    /// further ones are answered 429 and closed.
    pub connections_per_client: usize,
    /// Fills (origin fetches that will be stored) in flight at once. A miss that
    /// finds none free is passed to the origin uncoalesced and not stored.
    pub fills: usize,
    /// Fills one client address may lead at once (its further misses pass through).
    pub fills_per_client: usize,
    /// A fill still reading its body after this long stops counting as a fill: it is
    /// not stored, and streams on to its waiters as a pass-through.
    pub fill_deadline: Secs,
    /// Origin TCP connect timeout.
    pub origin_connect_timeout: Secs,
    /// Time to the origin's response head, and between body chunks.
    pub origin_read_timeout: Secs,
    /// Requests in flight to one origin at once (each `[[origins]]` entry may set
    /// its own `max_connections`). A request that finds none free within the connect
    /// timeout is not sent: 502, or the next origin.
    pub origin_connections: usize,
    /// Idle keep-alive connections kept open to one origin.
    pub origin_idle_connections: usize,
    /// A keep-alive client connection idle this long is closed.
    pub client_idle_timeout: Secs,
    /// On SIGTERM, in-flight requests get this long to finish.
    pub shutdown_grace: Secs,
    /// Upgraded connections (WebSocket) open at once.
    pub upgrades: usize,
    /// Upgraded connections one client may hold at once (its share of `upgrades`;
    /// the client is the address `trusted_proxies` resolved, an IPv6 client its /64).
    pub upgrades_per_client: usize,
    /// An upgraded connection that carries no byte either way for this long is
    /// closed.
    pub tunnel_idle: Secs,
    /// A response whose bytes do not move for this long (an HTTP/2 stream whose
    /// flow-control window stays shut, a client that stops reading) is reset and its
    /// store pins, connection slot and origin permit released.
    pub send_stall: Secs,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_bytes: ByteSize(64 << 10),
            object_bytes: ByteSize(8 << 20),
            connections: 10_000,
            connections_per_client: 256,
            fills: 256,
            fills_per_client: 64,
            fill_deadline: Secs(Duration::from_secs(60)),
            origin_connect_timeout: Secs(Duration::from_secs(2)),
            origin_read_timeout: Secs(Duration::from_secs(30)),
            origin_connections: 1024,
            origin_idle_connections: 256,
            client_idle_timeout: Secs(Duration::from_secs(60)),
            shutdown_grace: Secs(Duration::from_secs(30)),
            upgrades: 1024,
            upgrades_per_client: 64,
            tunnel_idle: Secs(Duration::from_secs(3600)),
            send_stall: Secs(Duration::from_secs(10)),
        }
    }
}

/// URL normalisation.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct KeysConfig {
    /// Query parameters dropped before keying (`name` or `prefix*`).
    pub drop_params: Vec<String>,
    /// Host aliases: `{ "www.example.com" = "example.com" }`.
    pub host_aliases: std::collections::BTreeMap<String, String>,
    /// Host used for requests without one.
    pub default_host: String,
    /// Which query parameters make the key: `"all"` (default), `"none"`, or a list
    /// of the ones kept; for every path, or as a table by path prefix (the longest
    /// matching prefix decides).
    pub query: QuerySetting,
}

impl Default for KeysConfig {
    fn default() -> Self {
        let k = quire_http::key::KeyConfig::default();
        KeysConfig {
            drop_params: k.drop_params,
            host_aliases: Default::default(),
            default_host: k.default_host,
            query: QuerySetting::One(QueryValue::Word("all".into())),
        }
    }
}

/// `[keys] query`: one rule for every path, or rules by path prefix.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum QuerySetting {
    /// `query = "none"`: every path.
    One(QueryValue),
    /// `[keys.query] "/" = "none"`, `"/search" = ["q"]`.
    ByPrefix(std::collections::BTreeMap<String, QueryValue>),
}

/// One query rule as written: `"all"`, `"none"`, or the parameters kept.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(untagged)]
pub enum QueryValue {
    /// `"all"` or `"none"`.
    Word(String),
    /// The parameters kept (`name` or `prefix*`).
    Params(Vec<String>),
}

impl QuerySetting {
    /// The rules by path prefix, checked.
    pub fn rules(&self) -> Result<Vec<(String, quire_http::key::QueryRule)>, ConfigError> {
        let pairs: Vec<(String, &QueryValue)> = match self {
            QuerySetting::One(v) => vec![("/".to_owned(), v)],
            QuerySetting::ByPrefix(m) => m.iter().map(|(p, v)| (p.clone(), v)).collect(),
        };
        pairs
            .into_iter()
            .map(|(prefix, v)| {
                if !prefix.starts_with('/') {
                    return Err(ConfigError::new(format!(
                        "keys.query: `{prefix}` is not a path prefix (it starts with /)"
                    )));
                }
                Ok((prefix, v.rule()?))
            })
            .collect()
    }
}

impl QueryValue {
    fn rule(&self) -> Result<quire_http::key::QueryRule, ConfigError> {
        use quire_http::key::QueryRule;
        match self {
            QueryValue::Word(w) if w == "all" => Ok(QueryRule::All),
            QueryValue::Word(w) if w == "none" => Ok(QueryRule::None),
            QueryValue::Word(w) => Err(ConfigError::new(format!(
                "keys.query: `{w}` is not \"all\", \"none\" or a list of parameters"
            ))),
            QueryValue::Params(p) => Ok(QueryRule::Only(p.clone())),
        }
    }
}

/// Bypass rules.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct BypassSection {
    /// Cookies that mark a session; empty means every cookie not ignored does.
    pub session_cookies: Vec<String>,
    /// Cookies that never mark a session (analytics by default).
    pub ignore_cookies: Vec<String>,
    /// Serve requests carrying `Authorization` from the cache (RFC 9111 §3.5 rules
    /// still apply to what is stored).
    pub allow_authorization: bool,
}

impl Default for BypassSection {
    fn default() -> Self {
        let b = quire_http::bypass::BypassConfig::default();
        BypassSection {
            session_cookies: b.session_cookies,
            ignore_cookies: b.ignore_cookies,
            allow_authorization: b.allow_authorization,
        }
    }
}

/// Storage and reuse rules.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageSection {
    /// Store `Cache-Control: private` responses (makes quire a private cache).
    pub store_private: bool,
    /// Store responses that carry `Set-Cookie` (the cookie is stored with them).
    pub store_set_cookie: bool,
    /// Heuristic freshness: share of the time since `Last-Modified`.
    pub heuristic_fraction: f64,
    /// Heuristic freshness: the longest lifetime for types not listed below.
    pub heuristic_max: Secs,
    /// Heuristic freshness by `Content-Type` prefix: `{ "text/html" = "10m" }`.
    /// Replaces the built-in table when given.
    pub heuristic_by_type: Option<std::collections::BTreeMap<String, Secs>>,
    /// Serve stale while revalidating for at least this long past expiry.
    pub stale_while_revalidate_grace: Secs,
    /// Serve stale when the origin fails for at least this long past expiry.
    pub stale_if_error_grace: Secs,
    /// Refresh-ahead: a hit within this last share of its freshness lifetime starts
    /// one background revalidation, so a popular response is refreshed before it
    /// expires (only when a slot of `[budget]` is free at once). 0 turns it off.
    pub refresh_ahead: f64,
    /// A hard purge fetches again, in the background, the URLs it removed that
    /// readers hit lately (a purge's own `refill` overrides this).
    pub refill_after_purge: bool,
}

impl Default for StorageSection {
    fn default() -> Self {
        let h = quire_http::freshness::HeuristicConfig::default();
        StorageSection {
            store_private: false,
            store_set_cookie: false,
            heuristic_fraction: h.fraction,
            heuristic_max: Secs(h.max),
            heuristic_by_type: None,
            stale_while_revalidate_grace: Secs(Duration::ZERO),
            stale_if_error_grace: Secs(Duration::ZERO),
            refresh_ahead: 0.1,
            refill_after_purge: false,
        }
    }
}

/// Stored encodings.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct EncodingsConfig {
    /// Compress into gzip at fill time.
    pub gzip: bool,
    /// Compress into brotli at fill time.
    pub br: bool,
    /// Compress into zstd at fill time.
    pub zstd: bool,
    /// libdeflater level, 1–12.
    pub gzip_level: i32,
    /// brotli quality at fill time, 0–11.
    pub brotli_level: u32,
    /// brotli quality the stored body is remade at in the background, off the request
    /// path (0, or not above `brotli_level`, turns it off).
    pub brotli_upgrade_level: u32,
    /// zstd level, 1–22.
    pub zstd_level: i32,
    /// Threads that compress (fills' gzip first, other codings in the background on
    /// all but one of them).
    pub threads: usize,
    /// Bytes of bodies queued or being compressed at once. Past it, a response is
    /// stored in identity only and its codings are not made (see `compress_pool`).
    pub budget: ByteSize,
    /// Bodies this long or longer are compressed at cheap levels (gzip 6, brotli 4,
    /// zstd 3, or the configured ones where lower).
    pub large_bytes: ByteSize,
    /// CPU time background compression (brotli, zstd after the commit) may spend at
    /// once; past it, background jobs are shed until it is earned back.
    pub background_cpu_burst: Secs,
    /// CPU-seconds per second background compression earns back (0.25: a quarter
    /// of one core on average).
    pub background_cpu_share: f64,
    /// Learn the dictionaries the origin names with `Use-As-Dictionary` (RFC 9842)
    /// and store later responses their pattern matches `dcz` against them too (needs
    /// `zstd`; see `fill::dictionaries`).
    pub origin_dictionaries: bool,
    /// Largest origin dictionary learned (at most 4 MiB).
    pub origin_dictionary_max: ByteSize,
    /// Bytes of origin dictionaries kept at once (the oldest go first).
    pub origin_dictionaries_memory: ByteSize,
}

impl Default for EncodingsConfig {
    fn default() -> Self {
        let l = Levels::default();
        EncodingsConfig {
            gzip: true,
            br: true,
            zstd: true,
            gzip_level: l.gzip,
            brotli_level: l.brotli,
            brotli_upgrade_level: 11,
            zstd_level: l.zstd,
            threads: 2,
            budget: ByteSize(64 << 20),
            large_bytes: ByteSize(1 << 20),
            background_cpu_burst: Secs(Duration::from_secs(10)),
            background_cpu_share: 0.25,
            origin_dictionaries: true,
            origin_dictionary_max: ByteSize(1 << 20),
            origin_dictionaries_memory: ByteSize(16 << 20),
        }
    }
}

impl EncodingsConfig {
    /// The levels as the compressor takes them.
    pub fn levels(&self) -> Levels {
        Levels {
            gzip: self.gzip_level,
            brotli: self.brotli_level,
            zstd: self.zstd_level,
        }
    }
}

/// Shortest admin token accepted.
pub const ADMIN_TOKEN_MIN: usize = 16;

/// Checks an admin token: at least [`ADMIN_TOKEN_MIN`] characters, none of them
/// whitespace or control characters (a token of spaces is no secret, and a
/// presented token is trimmed, so such a one could never match anyway).
///
/// # Errors
///
/// [`AdminTokenError`] saying which rule the token breaks.
pub fn check_admin_token(t: &str) -> Result<(), AdminTokenError> {
    if t.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(AdminTokenError::Blank);
    }
    if t.chars().count() < ADMIN_TOKEN_MIN {
        return Err(AdminTokenError::Short);
    }
    Ok(())
}

/// Why an admin token is refused ([`check_admin_token`]). The message completes a
/// sentence that starts with the token's name (`admin_token must ...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AdminTokenError {
    /// It holds whitespace or a control character.
    #[error("must not contain spaces or control characters")]
    Blank,
    /// It is shorter than [`ADMIN_TOKEN_MIN`] characters.
    #[error("must be at least {ADMIN_TOKEN_MIN} characters")]
    Short,
}

/// Compression levels per coding (defaults: gzip 9 with libdeflater's 1..=12 scale,
/// brotli quality 5, zstd 19).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Levels {
    /// gzip level on libdeflate's scale, 1..=12.
    pub gzip: i32,
    /// Brotli quality, 0..=11.
    pub brotli: u32,
    /// zstd level, 1..=22.
    pub zstd: i32,
}

impl Default for Levels {
    fn default() -> Self {
        Levels {
            gzip: 9,
            brotli: 5,
            zstd: 19,
        }
    }
}

impl Config {
    /// Checks the rules that need nothing but the configuration itself. The checks
    /// that need a feature's own parser (the origin pools, the trusted proxies, the
    /// compression levels) are made above, by `Config::validate` in `crate::policy`,
    /// which calls this first.
    pub(crate) fn check_fields(&self) -> Result<(), ConfigError> {
        let bad = |s: String| Err(ConfigError::new(s));
        if self.cache.size.0 < 1 << 20 {
            return bad(format!("cache.size {} is below 1 MiB", self.cache.size));
        }
        if self.limits.connections == 0 {
            return bad("limits.connections must be at least 1".into());
        }
        if self.limits.connections_per_client == 0 {
            return bad("limits.connections_per_client must be at least 1".into());
        }
        if self.limits.upgrades_per_client == 0 {
            return bad("limits.upgrades_per_client must be at least 1".into());
        }
        if self.limits.tunnel_idle.0.is_zero() || self.limits.send_stall.0.is_zero() {
            return bad("limits.tunnel_idle and limits.send_stall must be above 0".into());
        }
        if self.limits.fills == 0 {
            return bad("limits.fills must be at least 1".into());
        }
        if self.limits.fills_per_client == 0 {
            return bad("limits.fills_per_client must be at least 1".into());
        }
        if self.limits.origin_connections == 0 {
            return bad("limits.origin_connections must be at least 1".into());
        }
        if self.limits.fill_deadline.0.is_zero() {
            return bad("limits.fill_deadline must be above 0".into());
        }
        if self.encodings.threads == 0 || self.encodings.threads > 64 {
            return bad("encodings.threads must be within 1..=64".into());
        }
        if self.encodings.origin_dictionary_max.0 > 4 << 20 {
            return bad("encodings.origin_dictionary_max must be at most 4 MiB".into());
        }
        if self.limits.header_bytes.0 < 1024 {
            return bad("limits.header_bytes must be at least 1 KiB".into());
        }
        if !(0.0..=1.0).contains(&self.storage.heuristic_fraction) {
            return bad("storage.heuristic_fraction must be within 0..=1".into());
        }
        if !(0.0..=0.5).contains(&self.storage.refresh_ahead) {
            return bad(
                "storage.refresh_ahead must be within 0..=0.5 (a share of the lifetime)".into(),
            );
        }
        self.keys.query.rules()?;
        self.rate_limit.validate()?;
        self.budget.validate()?;
        self.dictionaries.validate()?;
        self.agents.validate()?;
        self.tracing.validate()?;
        if let Some(origin) = &self.origin {
            OriginUrl::parse(origin).map_err(|e| ConfigError::new(e.to_string()))?;
        }
        if let Some(c) = &self.cluster {
            c.validate().map_err(|e| ConfigError::new(e.to_string()))?;
        }
        if self
            .origin_ca_file
            .as_ref()
            .is_some_and(|p| p.as_os_str().is_empty())
        {
            return bad("origin_ca_file is empty: name a PEM file, or leave it out".into());
        }
        if let Some(t) = &self.admin_token {
            check_admin_token(t).map_err(|e| ConfigError::new(format!("admin_token {e}")))?;
        }
        let share = self.encodings.background_cpu_share;
        if !(share.is_finite() && share > 0.0 && share <= 64.0) {
            return bad(
                "encodings.background_cpu_share must be above 0 (CPU-seconds per second)".into(),
            );
        }
        if self.encodings.brotli_upgrade_level > 11 {
            return bad("encodings.brotli_upgrade_level must be within 0..=11".into());
        }
        self.tls.validate()?;
        self.validate_listen_http()
    }

    /// `listen_http` needs TLS and a port of its own, and HTTP-01 needs it.
    fn validate_listen_http(&self) -> Result<(), ConfigError> {
        let bad = |s: String| Err(ConfigError::new(s));
        match self.listen_http {
            Some(_) if !self.tls.enabled() => {
                return bad(
                    "listen_http redirects to HTTPS: it needs tls.cert and tls.key, or [tls.acme]"
                        .into(),
                )
            }
            None if self
                .tls
                .acme
                .as_ref()
                .is_some_and(|a| a.challenge == AcmeChallenge::Http01) =>
            {
                return bad(
                    "tls.acme.challenge = \"http-01\" is answered on listen_http: set it (port 80)"
                        .into(),
                )
            }
            Some(a) if a == self.listen && a.port() != 0 => {
                return bad(format!("listen_http {a} is the same address as listen"))
            }
            _ => {}
        }
        Ok(())
    }

    /// The key configuration for `quire-http`.
    pub fn key_config(&self) -> quire_http::key::KeyConfig {
        quire_http::key::KeyConfig {
            drop_params: self.keys.drop_params.clone(),
            host_aliases: self
                .keys
                .host_aliases
                .iter()
                .map(|(a, c)| (a.clone(), c.clone()))
                .collect(),
            default_host: self.keys.default_host.clone(),
            // Checked by `validate`; an unchecked config keeps every parameter.
            query_rules: self.keys.query.rules().unwrap_or_default(),
            ..quire_http::key::KeyConfig::default()
        }
    }

    /// The bypass configuration for `quire-http`.
    pub fn bypass_config(&self) -> quire_http::bypass::BypassConfig {
        quire_http::bypass::BypassConfig {
            session_cookies: self.bypass.session_cookies.clone(),
            ignore_cookies: self.bypass.ignore_cookies.clone(),
            allow_authorization: self.bypass.allow_authorization,
        }
    }

    /// The storage configuration for `quire-http`.
    pub fn storage_config(&self) -> quire_http::freshness::StorageConfig {
        let mut heuristic = quire_http::freshness::HeuristicConfig {
            fraction: self.storage.heuristic_fraction,
            max: self.storage.heuristic_max.0,
            ..Default::default()
        };
        if let Some(table) = &self.storage.heuristic_by_type {
            heuristic.by_content_type = table
                .iter()
                .map(|(t, d)| (t.to_ascii_lowercase(), d.0))
                .collect();
        }
        quire_http::freshness::StorageConfig {
            store_private: self.storage.store_private,
            store_set_cookie: self.storage.store_set_cookie,
            heuristic,
            ..Default::default()
        }
    }

    /// The reuse configuration for `quire-http`.
    pub fn reuse_config(&self) -> quire_http::freshness::ReuseConfig {
        quire_http::freshness::ReuseConfig {
            stale_while_revalidate_grace: self.storage.stale_while_revalidate_grace.0,
            stale_if_error_grace: self.storage.stale_if_error_grace.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_settings_that_cannot_work_are_refused() {
        let check = |f: &dyn Fn(&mut Config)| {
            let mut c = Config::default();
            f(&mut c);
            c.validate().map_err(|e| e.to_string())
        };
        let acme = |c: &mut Config| {
            c.tls.acme = Some(AcmeSection {
                domains: vec!["example.org".into()],
                ..AcmeSection::default()
            });
        };
        assert!(check(&|_| {}).is_ok());
        let e = check(&|c| c.tls.cert = Some("a.pem".into())).unwrap_err();
        assert!(e.contains("go together"), "{e}");
        let e = check(&|c| c.listen_http = Some("127.0.0.1:80".parse().unwrap())).unwrap_err();
        assert!(e.contains("needs tls.cert"), "{e}");
        let e = check(&|c| c.tls.hsts = Some("includeSubDomains".into())).unwrap_err();
        assert!(e.contains("max-age"), "{e}");
        assert!(check(&acme).is_ok());
        let e = check(&|c| {
            acme(c);
            c.tls.cert = Some("a".into());
            c.tls.key = Some("b".into());
        })
        .unwrap_err();
        assert!(e.contains("exclude each other"), "{e}");
        for bad in [
            "*.example.org",
            "127.0.0.1",
            "a..b",
            "-a.org",
            "a.org:443",
            "",
        ] {
            let e = check(&|c| {
                acme(c);
                c.tls.acme.as_mut().unwrap().domains = vec![bad.into()];
            });
            assert!(e.is_err(), "{bad:?} accepted");
        }
        let e = check(&|c| {
            acme(c);
            c.tls.acme.as_mut().unwrap().challenge = AcmeChallenge::Http01;
        })
        .unwrap_err();
        assert!(e.contains("listen_http"), "{e}");
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!("512".parse::<ByteSize>().unwrap().0, 512);
        assert_eq!("64 MiB".parse::<ByteSize>().unwrap().0, 64 << 20);
        assert_eq!("1G".parse::<ByteSize>().unwrap().0, 1 << 30);
        assert_eq!("1.5kb".parse::<ByteSize>().unwrap().0, 1500);
        assert!("12 parsecs".parse::<ByteSize>().is_err());
        assert!("-1".parse::<ByteSize>().is_err());
        assert!("".parse::<ByteSize>().is_err());
    }

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(
            "250ms".parse::<Secs>().unwrap().0,
            Duration::from_millis(250)
        );
        assert_eq!("2s".parse::<Secs>().unwrap().0, Duration::from_secs(2));
        assert_eq!("10m".parse::<Secs>().unwrap().0, Duration::from_secs(600));
        assert_eq!("1d".parse::<Secs>().unwrap().0, Duration::from_secs(86400));
        assert!("soon".parse::<Secs>().is_err());
        assert!("1e400s".parse::<Secs>().is_err());
    }

    #[test]
    fn defaults_validate() {
        Config::default().validate().unwrap();
        assert!(
            !Config::default().origin_insecure_skip_verify,
            "origin certificates are checked unless asked otherwise"
        );
    }

    #[test]
    fn validate_rejects_impossible_settings() {
        let mut c = Config::default();
        c.cache.size = ByteSize(1000);
        assert!(c.validate().is_err());
        let mut c = Config::default();
        c.encodings.origin_dictionary_max = ByteSize((4 << 20) + 1);
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("origin_dictionary_max"), "{e}");
        let c = Config {
            admin_token: Some("short".into()),
            ..Config::default()
        };
        assert!(c.validate().is_err());
        let c = Config {
            admin_token: Some(" ".repeat(16)),
            ..Config::default()
        };
        assert!(c.validate().is_err(), "a token of spaces");
        let c = Config {
            admin_token: Some("0123456789abcdef\n".into()),
            ..Config::default()
        };
        assert!(c.validate().is_err(), "a control character");
        let c = Config {
            trusted_proxies: vec!["10.0.0.0/40".into()],
            ..Config::default()
        };
        assert!(c.validate().is_err(), "a bad trusted proxy block");
        for share in [0.0, -1.0, f64::NAN, 1e9] {
            let mut c = Config::default();
            c.encodings.background_cpu_share = share;
            assert!(c.validate().is_err(), "background_cpu_share {share}");
        }
        let c = Config {
            origin: Some("ftp://example.com".into()),
            ..Config::default()
        };
        assert!(c.validate().is_err());
        let c = Config {
            origin: Some("https://example.com".into()),
            ..Config::default()
        };
        c.validate().unwrap();
        let c = Config {
            origin_ca_file: Some(PathBuf::new()),
            ..Config::default()
        };
        assert!(c.validate().is_err(), "an empty origin_ca_file");
        let mut c = Config::default();
        c.storage.heuristic_fraction = 2.0;
        assert!(c.validate().is_err());
    }
}
