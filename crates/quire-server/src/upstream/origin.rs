//! The origin: where misses, revalidations and passed requests go, and what quire
//! sends there.
//!
//! Key decisions:
//! - **Fills send the origin only what the key covers.** A request that may be
//!   stored goes out with the normalised path and host, quire's own
//!   `Accept-Encoding: identity` (quire compresses once, itself), and the fields the
//!   URL's stored `Vary` names — nothing else. Cookies, `User-Agent`, `Accept`,
//!   `Accept-Language`, `X-Forwarded-Host` and every other field outside the key
//!   never reach the origin on a fill, so they can never change a stored response
//!   (the classic cache-poisoning route: an origin that reflects `User-Agent`
//!   without declaring `Vary` would otherwise show the first client's value to all).
//!   The first fill of a URL cannot know its `Vary`: it sends none of these fields
//!   and stores the origin's default representation under the key of "field
//!   absent". Once the stored `Vary` names a field, later fills forward it and key
//!   on it; a client whose own value differs from what the first fill sent is not
//!   given that fill's response (`crate::request::service`), it fetches its own variant.
//!   `fill_headers = "all"` restores nginx's and Varnish's forward-everything
//!   behaviour for origins that need more and declare `Vary` for what they use.
//! - **Passed requests (bypass, unsafe methods) go out as the client sent them**,
//!   minus hop-by-hop fields (RFC 9110 §7.6.1), plus `Via` and `X-Forwarded-For`.
//! - Timeouts: connect ([`Limits::origin_connect_timeout`](crate::config::Limits)) in
//!   the connector; time to the response head here; between body chunks in the fill.
//! - **`http://` and `https://` origins through one pool.** The TLS side — trusted
//!   roots, `origin_ca_file`, `origin_insecure_skip_verify`, handshake failures in
//!   words — is [`tls`]'s. A failed handshake is an origin failure like any other
//!   (502, or the stale copy `stale-if-error` allows); its log line names what failed.
//! - **Framing the origin did not see honoured never goes back to the pool.** A
//!   pooled connection is only as good as the last request's framing: an origin that
//!   answers before reading a body skips the length it was *told*, so a head that
//!   announces more than is sent makes it eat the next client's request. Every
//!   request leaves through [`Origin::send_once`], which keeps `Content-Length` only
//!   when it equals the length of the body actually attached ([`vouch_framing`]);
//!   otherwise the field goes and hyper frames the message from the body itself
//!   (`Transfer-Encoding` is hop-by-hop and never forwarded). A body that then ends
//!   short of its length, or fails, makes hyper close that connection instead of
//!   returning it to the pool, and a response that arrives before the body was sent
//!   leaves the connection busy until it was. So the pool only ever holds a
//!   connection whose every byte quire wrote was framed by quire.

mod slots;
mod tls;

pub(crate) use slots::{family, label, write_families, Outcome, Row};

pub use crate::config::{OriginUrl, OriginUrlError};
pub use crate::upstream::error::{Failure, FailureKind, OriginError};
pub use crate::upstream::port::OutBody;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, Uri};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use crate::upstream::{UpFuture, Upstream};

/// Hop-by-hop fields (RFC 9110 §7.6.1) never forwarded in either direction.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authorization",
];

/// Why the origin client could not be built at start-up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OriginSetupError {
    /// The origin URL is invalid.
    #[error(transparent)]
    Url(#[from] OriginUrlError),
    /// `origin_ca_file` cannot be used.
    #[error("origin_ca_file {}: {why}", path.display())]
    CaFile {
        /// The file, as configured.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// An `https://` origin, and no CA certificate to check it against.
    #[error(
        "the https origin cannot be checked: this machine has no CA certificates \
         (install ca-certificates) and origin_ca_file is not set"
    )]
    NoRoots,
    /// rustls refused the client configuration.
    #[error("origin TLS client: {0}")]
    Tls(String),
    /// `[[origins]]` cannot be used as written.
    #[error("{0}")]
    Config(String),
    /// Neither `origin` nor `[[origins]]` is configured.
    #[error(
        "no origin: give --origin http(s)://host[:port], or `origin` or `[[origins]]` in the \
         config file"
    )]
    NoOrigin,
}

impl Upstream for Origin {
    fn send(&self, req: Request<OutBody>) -> UpFuture<'_> {
        Box::pin(async move { Ok(self.exchange(req).await?) })
    }

    fn read_timeout(&self) -> Duration {
        Origin::read_timeout(self)
    }

    fn metrics(&self, out: &mut String) {
        write_families(out, &[self.metrics_row()]);
    }
}

/// How quire reaches the origin: timeouts and the TLS settings of the
/// configuration's top level (see [`OriginOptions::from_config`]).
#[derive(Debug, Clone)]
pub struct OriginOptions {
    /// TCP connect timeout (`limits.origin_connect_timeout`).
    pub connect_timeout: Duration,
    /// Time to the response head, and between body chunks
    /// (`limits.origin_read_timeout`).
    pub read_timeout: Duration,
    /// PEM CA certificates trusted besides the system's (`origin_ca_file`).
    pub ca_file: Option<PathBuf>,
    /// Accept any certificate from an https origin
    /// (`origin_insecure_skip_verify`; never the default).
    pub insecure_skip_verify: bool,
    /// Requests in flight at once (`limits.origin_connections`).
    pub max_connections: usize,
    /// Idle keep-alive connections kept open (`limits.origin_idle_connections`).
    pub max_idle: usize,
}

impl OriginOptions {
    /// The options `cfg` describes.
    pub fn from_config(cfg: &crate::config::Config) -> OriginOptions {
        OriginOptions {
            connect_timeout: cfg.limits.origin_connect_timeout.0,
            read_timeout: cfg.limits.origin_read_timeout.0,
            ca_file: cfg.origin_ca_file.clone(),
            insecure_skip_verify: cfg.origin_insecure_skip_verify,
            max_connections: cfg.limits.origin_connections,
            max_idle: cfg.limits.origin_idle_connections,
        }
    }
}

/// The TLS client configuration quire's own clients use for an `https://` server
/// (the origin pool's, and `quire warm`'s): the system's roots plus `ca_file`,
/// certificates checked, ALPN `http/1.1`.
pub fn https_client_config(
    ca_file: Option<PathBuf>,
) -> Result<Arc<rustls::ClientConfig>, OriginSetupError> {
    let opts = OriginOptions {
        ca_file,
        insecure_skip_verify: false,
        ..OriginOptions::default()
    };
    tls::client_config(true, &opts).map(Arc::new)
}

impl Default for OriginOptions {
    fn default() -> Self {
        OriginOptions::from_config(&crate::config::Config::default())
    }
}

/// At most one `warn` line per this interval for failed origin handshakes (each
/// fill fails the same way while a certificate is wrong); the rest stay at `debug`
/// in the fill's own line.
const TLS_WARN_EVERY: Duration = Duration::from_secs(10);

/// When the next failed-handshake warning may be logged.
#[derive(Debug)]
struct TlsWarnings {
    since: Instant,
    next_ms: AtomicU64,
}

impl TlsWarnings {
    fn new() -> TlsWarnings {
        TlsWarnings {
            since: Instant::now(),
            next_ms: AtomicU64::new(0),
        }
    }

    /// Whether a warning is due now (and if so, the next one is not until later).
    fn due(&self) -> bool {
        let now = u64::try_from(self.since.elapsed().as_millis()).unwrap_or(u64::MAX);
        let next = self.next_ms.load(Ordering::Relaxed);
        let after = now.saturating_add(TLS_WARN_EVERY.as_millis() as u64);
        now >= next
            && self
                .next_ms
                .compare_exchange(next, after, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }
}

/// Why one request to one origin failed (see [`Origin::exchange`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SendError {
    /// No connection: refused, unreachable, connect timeout, TLS handshake. The
    /// request was not sent, so another origin may take it.
    #[error("{0}")]
    Connect(String),
    /// Every connection slot stayed taken (see [`slots`]); not sent either.
    #[error("origin busy: every connection slot stayed in use")]
    Busy,
    /// No response head within the read timeout.
    #[error("origin timed out")]
    Timeout,
    /// Sent, and failed: a reset, a malformed response.
    #[error("{0}")]
    Failed(String),
}

impl SendError {
    /// Whether the request never reached the origin (another may take it).
    pub(crate) fn unsent(&self) -> bool {
        matches!(self, SendError::Connect(_) | SendError::Busy)
    }
}

impl From<SendError> for OriginError {
    fn from(e: SendError) -> OriginError {
        match e {
            SendError::Connect(why) => OriginError::failed(FailureKind::Connect, why),
            SendError::Failed(why) => OriginError::failed(FailureKind::Protocol, why),
            SendError::Busy => OriginError::failed(
                FailureKind::Busy,
                "origin busy: every connection slot stayed in use",
            ),
            SendError::Timeout => OriginError::Timeout,
        }
    }
}

/// The origin's address and the client that talks to it.
#[derive(Debug, Clone)]
pub struct Origin {
    url: OriginUrl,
    client: Client<tls::Connector, OutBody>,
    read_timeout: Duration,
    connect_timeout: Duration,
    tls_warnings: Arc<TlsWarnings>,
    slots: Arc<slots::Slots>,
    stats: Arc<slots::OriginStats>,
}

impl Origin {
    /// Checks an origin URL: `http://host[:port]` or `https://host[:port]`, with
    /// nothing after an optional `/` (see [`OriginUrl::parse`]).
    pub fn parse(url: &str) -> Result<OriginUrl, OriginUrlError> {
        OriginUrl::parse(url)
    }

    /// An origin client for `url` with `opts`; an `https://` origin gets the TLS
    /// client (see [`tls`]).
    pub fn new(url: &str, opts: &OriginOptions) -> Result<Origin, OriginSetupError> {
        let url = Origin::parse(url)?;
        let mut tcp = HttpConnector::new();
        tcp.set_connect_timeout(Some(opts.connect_timeout));
        tcp.set_nodelay(true);
        let connector = tls::connector(tcp, url.is_https(), opts)?;
        if opts.insecure_skip_verify && url.is_https() {
            tracing::warn!(
                "origin_insecure_skip_verify is on: the certificate of {url} is NOT \
                 checked; whoever answers on the way to it is trusted as the origin, \
                 and what it sends is cached and served"
            );
        } else if opts.insecure_skip_verify {
            tracing::warn!("origin_insecure_skip_verify has no effect: the origin {url} is http");
        }
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(opts.max_idle)
            .build(connector);
        Ok(Origin {
            url,
            client,
            read_timeout: opts.read_timeout,
            connect_timeout: opts.connect_timeout,
            tls_warnings: Arc::new(TlsWarnings::new()),
            slots: Arc::new(slots::Slots::new(opts.max_connections)),
            stats: Arc::new(slots::OriginStats::default()),
        })
    }

    /// The origin's URL.
    pub fn url(&self) -> &OriginUrl {
        &self.url
    }

    /// Sends `req` within the origin's connection limit (waiting at most the
    /// connect timeout for a slot) and resolves to the response head; the slot is
    /// held until the body ends. Counted in the origin's metrics.
    pub(crate) async fn exchange(
        &self,
        req: Request<OutBody>,
    ) -> Result<Response<crate::upstream::UpBody>, SendError> {
        let Some(permit) = self.slots.take(self.connect_timeout).await else {
            self.stats.count(Outcome::Busy);
            return Err(SendError::Busy);
        };
        let sent = self.send_once(req).await;
        self.stats.count(match &sent {
            Ok(_) => Outcome::Ok,
            Err(SendError::Timeout) => Outcome::TimedOut,
            Err(_) => Outcome::Failed,
        });
        let resp = sent?;
        Ok(resp.map(|b| {
            let b = b.map_err(crate::upstream::BoxError::from).boxed_unsync();
            slots::Permitted::wrap(b, permit).boxed_unsync()
        }))
    }

    /// This origin's rows of the per-origin metrics.
    pub(crate) fn metrics_row(&self) -> Row<'_> {
        Row {
            url: self.url.to_string(),
            stats: &self.stats,
            slots: &self.slots,
        }
    }

    /// Sends `req` (its URI path-and-query only; the scheme and authority are the
    /// origin's) and waits for the response head. Outside the connection limit and
    /// the metrics: [`Upstream::send`](crate::upstream::Upstream::send) is the
    /// counted way.
    pub async fn send(&self, req: Request<OutBody>) -> Result<Response<Incoming>, OriginError> {
        Ok(self.send_once(req).await?)
    }

    async fn send_once(&self, mut req: Request<OutBody>) -> Result<Response<Incoming>, SendError> {
        let pq = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        *req.uri_mut() = Uri::builder()
            .scheme(self.url.scheme.clone())
            .authority(self.url.authority.clone())
            .path_and_query(pq)
            .build()
            .map_err(|e| SendError::Failed(format!("bad request target: {e}")))?;
        vouch_framing(&mut req);
        match tokio::time::timeout(self.read_timeout, self.client.request(req)).await {
            Err(_) => Err(SendError::Timeout),
            Ok(Err(e)) if e.is_connect() => Err(SendError::Connect(self.failure(&e))),
            Ok(Err(e)) => Err(SendError::Failed(self.failure(&e))),
            Ok(Ok(resp)) => Ok(resp),
        }
    }

    /// The read timeout (also used between body chunks).
    pub fn read_timeout(&self) -> Duration {
        self.read_timeout
    }

    /// Why a request failed, as the log says it. A failed TLS handshake is named
    /// in words and also logged at `warn` (at most once per [`TLS_WARN_EVERY`]): it
    /// is a configuration to fix, not a passing fault.
    fn failure(&self, e: &hyper_util::client::legacy::Error) -> String {
        let Some(tls) = tls::describe(e) else {
            return error_chain(e);
        };
        let why = format!("TLS handshake with the origin failed: {tls}");
        if self.tls_warnings.due() {
            tracing::warn!(origin = %self.url, "{why}");
        }
        why
    }
}

/// Keeps `Content-Length` only when it is the length of the body attached, so the
/// origin is never told of bytes that will not come (see the module doc): an
/// upgrade or a resend carries the client's head but no body.
pub(crate) fn vouch_framing<B: http_body::Body>(req: &mut Request<B>) {
    req.headers_mut().remove(header::TRANSFER_ENCODING);
    let exact = req.body().size_hint().exact();
    let declared = req.headers().get_all(header::CONTENT_LENGTH);
    let mut lengths = declared
        .iter()
        .map(|v| v.to_str().ok()?.parse::<u64>().ok());
    let agrees = matches!(
        (lengths.next(), lengths.next(), exact),
        (Some(Some(n)), None, Some(e)) if n == e
    );
    if !agrees {
        req.headers_mut().remove(header::CONTENT_LENGTH);
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// A body hyper received, as quire's own body type.
pub fn boxed_incoming(body: Incoming) -> OutBody {
    body.map_err(std::io::Error::other).boxed_unsync()
}

/// A bodiless copy of `req`'s head — method, target, version, fields and the fill
/// mark (other extensions do not survive): what resending a request to another
/// origin or peer needs. Only for a request whose own body is empty.
pub fn copy_head(req: &Request<OutBody>) -> Request<OutBody> {
    let mut r = Request::new(empty_body());
    *r.method_mut() = req.method().clone();
    *r.uri_mut() = req.uri().clone();
    *r.version_mut() = req.version();
    *r.headers_mut() = req.headers().clone();
    if let Some(m) = req.extensions().get::<crate::upstream::FillMark>() {
        r.extensions_mut().insert(*m);
    }
    r
}

/// An empty outgoing body.
pub fn empty_body() -> OutBody {
    Empty::<Bytes>::new()
        .map_err(|never| -> std::io::Error { match never {} })
        .boxed_unsync()
}

/// Fields `Connection` may not remove: the message is not the same message without
/// them (a request without `Host` would reach the origin's default site).
const NEVER_HOP_BY_HOP: [HeaderName; 2] = [header::HOST, header::CONTENT_LENGTH];

/// Removes hop-by-hop fields and the fields `Connection` names (RFC 9110 §7.6.1),
/// but never `Host` or `Content-Length`.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .filter(|n| !NEVER_HOP_BY_HOP.contains(n))
        .collect();
    for n in named {
        headers.remove(n);
    }
    for n in HOP_BY_HOP {
        headers.remove(n);
    }
}

/// Fills announce that quire reads `Surrogate-Control` (Edge Architecture 1.0 §2.2).
const SURROGATE_CAPABILITY: HeaderName = HeaderName::from_static("surrogate-capability");
const CAPABILITY: HeaderValue = HeaderValue::from_static("quire=\"Surrogate/1.0\"");

/// `Via` (RFC 9110 §7.6.3) value quire adds.
const VIA: HeaderValue = HeaderValue::from_static("1.1 quire");

/// The head of a passed request: the client's fields minus hop-by-hop fields and
/// names with `_` (see [`forwardable`]), `Cookie` crumbs joined into one field, plus
/// `Via` and `X-Forwarded-For` (ending with the client `from` resolved to).
pub fn pass_headers(client: &HeaderMap, from: &crate::edge::client::Client) -> HeaderMap {
    let mut h = client.clone();
    strip_hop_by_hop(&mut h);
    forwardable(&mut h);
    // A cluster's marker is between quire nodes; the origin never sees it.
    h.remove(crate::upstream::PEER_HEADER);
    h.append(header::VIA, VIA);
    set_forwarded_for(&mut h, from);
    h
}

/// Makes client fields safe to forward over HTTP/1.1:
/// - names with `_` are dropped: CGI-style origins read `Transfer_Encoding` as
///   `Transfer-Encoding` and `X_Forwarded_For` as `X-Forwarded-For`, so they could
///   reframe a request or forge what quire vouches for (nginx drops them too);
/// - `Cookie` crumbs (HTTP/2 sends one field per cookie) are joined with `; ` into
///   one field (RFC 9113 §8.2.3), as an HTTP/1.1 origin expects.
fn forwardable(h: &mut HeaderMap) {
    let underscored: Vec<HeaderName> = h
        .keys()
        .filter(|k| k.as_str().contains('_'))
        .cloned()
        .collect();
    for k in underscored {
        h.remove(k);
    }
    if h.get_all(header::COOKIE).iter().nth(1).is_some() {
        let joined: Vec<&[u8]> = h
            .get_all(header::COOKIE)
            .iter()
            .map(|v| v.as_bytes())
            .collect();
        if let Ok(v) = HeaderValue::from_bytes(&joined.join(&b"; "[..])) {
            h.insert(header::COOKIE, v);
        }
    }
}

/// Sets `X-Forwarded-For` to what `from` resolved (see [`crate::edge::client`]).
fn set_forwarded_for(h: &mut HeaderMap, from: &crate::edge::client::Client) {
    match HeaderValue::from_str(&from.forwarded_for) {
        Ok(v) => h.insert("x-forwarded-for", v),
        Err(_) => h.remove("x-forwarded-for"),
    };
}

/// Sets `X-Forwarded-Proto` to the scheme the client used (see
/// [`crate::edge::client::Peer::scheme`]), replacing whatever the client sent: an origin
/// that builds absolute links from it builds them for the key the response is
/// stored under.
pub fn set_forwarded_proto(h: &mut HeaderMap, scheme: &str) {
    if let Ok(v) = HeaderValue::from_str(scheme) {
        h.insert("x-forwarded-proto", v);
    }
}

/// The head of a fill: only the fields a stored response may depend on (see the module
/// doc). `host` is the normalised authority, `vary` the field names the URL's stored
/// `Vary` selects on (lower-case).
pub fn fill_headers(
    client: &HeaderMap,
    host: &str,
    vary: &[String],
    from: &crate::edge::client::Client,
) -> HeaderMap {
    let mut h = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(host) {
        h.insert(header::HOST, v);
    }
    for name in vary {
        let Ok(name) = HeaderName::from_bytes(name.as_bytes()) else {
            continue;
        };
        if name == header::ACCEPT_ENCODING || h.contains_key(&name) {
            continue;
        }
        for v in client.get_all(&name) {
            h.append(name.clone(), v.clone());
        }
    }
    h.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    h.insert(header::VIA, VIA);
    if let Ok(v) = HeaderValue::from_str(&from.ip.to_string()) {
        h.insert("x-forwarded-for", v);
    }
    h
}

/// Request fields a fill never forwards in `all` mode: a fill fetches the whole
/// representation, and answers conditionals and ranges itself.
const FILL_NEVER: [HeaderName; 7] = [
    header::IF_MATCH,
    header::IF_NONE_MATCH,
    header::IF_MODIFIED_SINCE,
    header::IF_UNMODIFIED_SINCE,
    header::IF_RANGE,
    header::RANGE,
    header::ACCEPT_ENCODING,
];

/// The head of a fill in `all` mode (`fill_headers = "all"`): the client's fields as
/// for a pass, minus conditionals and ranges, with the normalised `Host` and
/// `Accept-Encoding: identity`.
pub fn fill_headers_all(
    client: &HeaderMap,
    host: &str,
    from: &crate::edge::client::Client,
) -> HeaderMap {
    let mut h = pass_headers(client, from);
    for n in FILL_NEVER {
        h.remove(n);
    }
    if let Ok(v) = HeaderValue::from_str(host) {
        h.insert(header::HOST, v);
    }
    h.insert(
        header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    h.insert(SURROGATE_CAPABILITY, CAPABILITY);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peer() -> crate::edge::client::Client {
        crate::edge::client::Client::direct("192.0.2.7:5555".parse().unwrap())
    }

    #[test]
    fn origin_urls_are_checked() {
        assert!(Origin::parse("http://127.0.0.1:9000").is_ok());
        assert!(Origin::parse("http://example.com/").is_ok());
        assert!(Origin::parse("https://example.com").is_ok());
        assert!(Origin::parse("http://example.com/app").is_err());
        assert!(Origin::parse("https://example.com/app").is_err());
        assert!(Origin::parse("https://example.com/?a=1").is_err());
        assert!(Origin::parse("https://user:secret@example.com").is_err());
        assert!(Origin::parse("ftp://example.com").is_err());
        assert!(Origin::parse("example.com").is_err());
        assert!(Origin::parse("").is_err());
    }

    #[test]
    fn https_origins_parse_with_their_port() {
        let u = Origin::parse("https://origin.example:8443").unwrap();
        assert!(u.is_https());
        assert_eq!((u.host(), u.port()), ("origin.example", 8443));
        assert_eq!(u.to_string(), "https://origin.example:8443");
        let u = Origin::parse("https://origin.example/").unwrap();
        assert_eq!(u.port(), 443, "https's default port");
        let u = Origin::parse("HTTPS://127.0.0.1").unwrap();
        assert!(u.is_https());
        assert_eq!((u.host(), u.port()), ("127.0.0.1", 443));
        let u = Origin::parse("https://[::1]:9443").unwrap();
        assert_eq!((u.host(), u.port()), ("[::1]", 9443));
        let u = Origin::parse("http://origin.example").unwrap();
        assert!(!u.is_https());
        assert_eq!(u.port(), 80);
    }

    #[test]
    fn failed_handshake_warnings_are_spaced() {
        let w = TlsWarnings::new();
        assert!(w.due(), "the first one is logged");
        assert!(!w.due(), "the next one waits");
    }

    #[test]
    fn fills_forward_only_keyed_fields() {
        let mut c = HeaderMap::new();
        c.insert(header::COOKIE, "_ga=1".parse().unwrap());
        c.insert("x-forwarded-host", "evil.example".parse().unwrap());
        c.insert("x-original-url", "/admin".parse().unwrap());
        c.insert(header::ACCEPT_LANGUAGE, "de".parse().unwrap());
        c.insert("x-device", "mobile".parse().unwrap());
        c.insert(header::ACCEPT_ENCODING, "br".parse().unwrap());
        c.insert(header::IF_NONE_MATCH, "\"x\"".parse().unwrap());
        c.insert(header::USER_AGENT, "reflected/1.0".parse().unwrap());
        c.insert(header::ACCEPT, "text/x-evil".parse().unwrap());
        let h = fill_headers(&c, "example.com", &["x-device".into()], &peer());
        assert_eq!(h[header::HOST], "example.com");
        assert!(
            !h.contains_key(header::ACCEPT_LANGUAGE),
            "not named by Vary"
        );
        assert!(!h.contains_key(header::USER_AGENT));
        assert!(!h.contains_key(header::ACCEPT));
        let h = fill_headers(&c, "example.com", &["accept-language".into()], &peer());
        assert_eq!(h[header::ACCEPT_LANGUAGE], "de", "named by the stored Vary");
        let h = fill_headers(&c, "example.com", &["x-device".into()], &peer());
        assert_eq!(h["x-device"], "mobile");
        assert_eq!(h[header::ACCEPT_ENCODING], "identity");
        assert!(!h.contains_key(header::COOKIE));
        assert!(!h.contains_key("x-forwarded-host"));
        assert!(!h.contains_key("x-original-url"));
        assert!(!h.contains_key(header::IF_NONE_MATCH));
        assert_eq!(h["x-forwarded-for"], "192.0.2.7");
    }

    #[test]
    fn fills_in_all_mode_forward_fields_but_not_conditionals() {
        let mut c = HeaderMap::new();
        c.insert("x-custom", "1".parse().unwrap());
        c.insert(header::IF_NONE_MATCH, "\"x\"".parse().unwrap());
        c.insert(header::RANGE, "bytes=0-1".parse().unwrap());
        c.insert(header::ACCEPT_ENCODING, "br".parse().unwrap());
        c.insert(header::HOST, "Example.COM".parse().unwrap());
        let h = fill_headers_all(&c, "example.com", &peer());
        assert_eq!(h["x-custom"], "1");
        assert_eq!(h[header::HOST], "example.com");
        assert_eq!(h[header::ACCEPT_ENCODING], "identity");
        assert!(!h.contains_key(header::IF_NONE_MATCH));
        assert!(!h.contains_key(header::RANGE));
    }

    #[test]
    fn passes_strip_hop_by_hop_and_connection_named() {
        let mut c = HeaderMap::new();
        c.insert(header::CONNECTION, "close, x-secret".parse().unwrap());
        c.insert("x-secret", "1".parse().unwrap());
        c.insert(header::TE, "trailers".parse().unwrap());
        c.insert(header::COOKIE, "session=abc".parse().unwrap());
        c.insert("x-forwarded-for", "10.0.0.1".parse().unwrap());
        let from = crate::edge::client::Client::resolve(
            "192.0.2.7:5555".parse().unwrap(),
            &c,
            &Default::default(),
        )
        .unwrap();
        let h = pass_headers(&c, &from);
        assert!(!h.contains_key(header::CONNECTION));
        assert!(!h.contains_key("x-secret"));
        assert!(!h.contains_key(header::TE));
        assert_eq!(h[header::COOKIE], "session=abc");
        assert_eq!(h["x-forwarded-for"], "10.0.0.1, 192.0.2.7");
        assert_eq!(h[header::VIA], "1.1 quire");
    }

    #[test]
    fn passes_never_drop_host_and_drop_underscored_names() {
        let mut c = HeaderMap::new();
        c.insert(header::HOST, "site.example".parse().unwrap());
        c.insert(header::CONNECTION, "Host, Content-Length".parse().unwrap());
        c.insert(header::CONTENT_LENGTH, "5".parse().unwrap());
        c.insert("transfer_encoding", "chunked".parse().unwrap());
        c.insert("x_forwarded_for", "1.2.3.4".parse().unwrap());
        c.append(header::COOKIE, "a=1".parse().unwrap());
        c.append(header::COOKIE, "b=2".parse().unwrap());
        let h = pass_headers(&c, &peer());
        assert_eq!(h[header::HOST], "site.example");
        assert_eq!(h[header::CONTENT_LENGTH], "5");
        assert!(h.keys().all(|k| !k.as_str().contains('_')), "{h:?}");
        let cookies: Vec<_> = h.get_all(header::COOKIE).iter().collect();
        assert_eq!(cookies, ["a=1; b=2"]);
    }

    #[test]
    fn a_length_the_body_does_not_have_is_never_announced() {
        let with = |cl: &[&str], body: OutBody| {
            let mut r = Request::new(body);
            for v in cl {
                r.headers_mut()
                    .append(header::CONTENT_LENGTH, v.parse().unwrap());
            }
            r.headers_mut()
                .insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
            vouch_framing(&mut r);
            assert!(!r.headers().contains_key(header::TRANSFER_ENCODING));
            r.headers()
                .get(header::CONTENT_LENGTH)
                .map(|v| v.to_str().unwrap().to_owned())
        };
        let full = || {
            http_body_util::Full::new(Bytes::from_static(b"hello"))
                .map_err(|never| -> std::io::Error { match never {} })
                .boxed_unsync()
        };
        assert_eq!(
            with(&["5"], empty_body()),
            None,
            "an upgrade's head, no body"
        );
        assert_eq!(with(&["0"], empty_body()), Some("0".into()));
        assert_eq!(with(&["5"], full()), Some("5".into()));
        assert_eq!(with(&["4"], full()), None);
        assert_eq!(with(&["5", "5"], full()), None, "one length, not two");
        assert_eq!(with(&["x"], full()), None);
    }

    #[test]
    fn the_cluster_marker_never_reaches_the_origin() {
        let mut c = HeaderMap::new();
        c.insert(crate::upstream::PEER_HEADER, "b".parse().unwrap());
        assert!(!pass_headers(&c, &peer()).contains_key(crate::upstream::PEER_HEADER));
    }
}
