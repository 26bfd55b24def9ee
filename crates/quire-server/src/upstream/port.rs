//! Where fills and passed requests go: the [`Upstream`] trait.
//!
//! `quire proxy` fills from an HTTP origin (`crate::upstream::origin::Origin`, which
//! implements this port: the port imports no implementation); `quire serve`
//! fills from a renderer in the same process (the `quire-site` crate). Both answer a
//! request with a response head and a streamed body, and everything after that —
//! storability, compression into every coding, coalescing, `Cache-Status`, the fast
//! path — is the same code. That is how a published page takes the hit path of a
//! proxied one.
//!
//! Key decision: **an upstream may version its keys.** [`Upstream::key_version`] is
//! folded into every cache key of a URL (see [`versioned`]). A renderer that knows
//! when a page's content changed returns a new version at that moment, so the next
//! request misses at once, and a fill that started before the change can only ever
//! be stored under the old key, which no request computes any more. Tag purges then
//! only reclaim space; correctness does not wait for them. An HTTP origin has no such
//! knowledge and returns 0 (no suffix: the keys of `quire proxy` are unchanged).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::BodyExt;
use quire_http::key::NormalizedUrl;

use crate::upstream::error::OriginError;

/// The request field a cluster node sends when it fills from the key's owner (see
/// `quire-cluster`): the owner then fills from the origin itself, never from
/// another peer, so a request never loops between nodes.
pub const PEER_HEADER: &str = "quire-peer";

/// An extension on every request the fill path sends upstream (never on a pass):
/// which key it fills, and whether a peer asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillMark {
    /// The hash of the fill's primary key (`quire_http::key::key_hash`).
    pub key_hash: u64,
    /// The client request carried [`PEER_HEADER`].
    pub from_peer: bool,
    /// No request waited for this fill when it started: a prefill, or the fill
    /// behind an answer from a previous version. An upstream may do its work at a
    /// lower priority (a request that joins it meanwhile waits for it).
    pub background: bool,
}

/// A class of signed-in readers who are all answered the same bytes, named by the
/// upstream ([`Upstream::audience`]): their pages are cached under keys of the
/// audience, never of a person.
///
/// An audience is a **canonical set of grants** (what its members may see, e.g.
/// `private`, `draft`): its id is the hash of the sorted, deduplicated set, so two
/// audiences with the same grants are one, whatever they are called, and a tier or a
/// group added later is one more grant. The label names it in `Cache-Status`.
///
/// A fill for an audience carries the audience as a request extension (never a
/// header, so nothing a client sends can pose as one), and no cookie: the upstream
/// renders for the audience, not for whoever asked first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Audience {
    id: u64,
    label: &'static str,
}

impl Audience {
    /// The audience of `grants`, labelled `label` (an RFC 8941 token, e.g. `reader`).
    pub fn new(label: &'static str, grants: &[&str]) -> Audience {
        let mut set: Vec<&str> = grants.to_vec();
        set.sort_unstable();
        set.dedup();
        let mut bytes = Vec::new();
        for g in set {
            bytes.extend_from_slice(&(g.len() as u32).to_le_bytes());
            bytes.extend_from_slice(g.as_bytes());
        }
        Audience {
            id: quire_http::key::key_hash(&bytes),
            label,
        }
    }

    /// The id every key of the audience carries.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Its name in `Cache-Status` (`detail=audience-<label>`).
    pub fn label(&self) -> &'static str {
        self.label
    }
}

/// An extension on a passed request: the normalised host and path its URL was
/// keyed by. A passed request carries the client's own target and `Host`; an
/// upstream that routes ([`crate::upstream::origins`]) routes on these instead, so a pass
/// goes to the pool a fill of the same URL would (`/api/%2e%2e/admin` is
/// `/admin`, `/%61pi/x` is `/api/x`, `a.example.` is `a.example`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteBy {
    /// The normalised host (lower case, no trailing dot, aliases folded; no port).
    pub host: String,
    /// The normalised path.
    pub path: String,
}

/// The body quire sends to the origin, and the body of a request quire serves: the
/// same type, so a request passed through forwards its body as it is. (Boxed with a
/// concrete error type so the fast path can hand `service` a request hyper never saw;
/// a boxed `dyn Error` here trips rustc's higher-ranked `Send` inference.)
pub type OutBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// Errors a response body may end with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A response body from an upstream.
pub type UpBody = UnsyncBoxBody<Bytes, BoxError>;

/// What [`Upstream::send`] returns.
pub type UpFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Response<UpBody>, OriginError>> + Send + 'a>>;

/// A source of responses: an HTTP origin or an in-process renderer.
pub trait Upstream: Send + Sync + fmt::Debug + 'static {
    /// Sends `req` (origin-form target, the fields quire chose to forward) and
    /// resolves to the response head; the body streams after.
    fn send(&self, req: Request<OutBody>) -> UpFuture<'_>;

    /// How long to wait for a head, and between body chunks.
    fn read_timeout(&self) -> Duration;

    /// The URL whose stored answer a request for `url` with `headers` wants instead
    /// of `url`'s own, when the upstream serves another representation of `url` at a
    /// URL of its own and picks it by a request field (`quire serve`: a note as
    /// markdown at `<note>.md`, by `Accept`). The request is then keyed, looked up,
    /// filled and passed as a request for that URL. Called on every request, the fast
    /// path's too: it must be cheap and lock-free. `None` (the default): `url` itself.
    fn negotiate(&self, url: &NormalizedUrl, headers: &http::HeaderMap) -> Option<NormalizedUrl> {
        let _ = (url, headers);
        None
    }

    /// The request field [`Upstream::negotiate`] reads (lower-case). The upstream's
    /// responses name it in `Vary`, for the caches after quire; quire's own keys
    /// leave it out, since the URL [`Upstream::negotiate`] picks keys it already.
    fn negotiated_field(&self) -> Option<&'static str> {
        None
    }

    /// Whether the upstream answers `path`, under the admin prefix (`/_quire/`),
    /// itself: such a request is routed as any other (rate limits, the budget, a
    /// pass for an unsafe method) instead of to the admin API, and needs no admin
    /// token. `quire serve` answers its MCP endpoint this way. None by default.
    fn answers_admin_path(&self, path: &str) -> bool {
        let _ = path;
        false
    }

    /// The name of the trace span of a request sent here (`crate::trace`): what
    /// the upstream does with it — `origin` by default, `render` for a renderer,
    /// `peer fill` for a cluster peer.
    fn span_name(&self) -> &'static str {
        "origin"
    }

    /// The content version of `url`, folded into its cache keys; 0 means
    /// unversioned. Called on every lookup, so it must be a lock-free read.
    fn key_version(&self, url: &NormalizedUrl) -> u64 {
        let _ = url;
        0
    }

    /// The audience a request for `url` that carries a session cookie is answered as, when the
    /// upstream can tell and every member of it gets the same bytes: the request is
    /// then served from (and fills) the cache under that audience's keys. `None`
    /// (the default, and for a cookie that names no valid session) means the request
    /// bypasses the cache, as any request with a session cookie does. Called once
    /// per such request on the runtime: it must not block.
    fn audience(&self, url: &NormalizedUrl, headers: &http::HeaderMap) -> Option<Audience> {
        let _ = (url, headers);
        None
    }

    /// The content version of `url` for `audience`, folded into its keys like
    /// [`Upstream::key_version`]. `None` when the upstream cannot say yet (the
    /// request then bypasses the cache). Lock-free, like `key_version`.
    fn audience_version(&self, url: &NormalizedUrl, audience: Audience) -> Option<u64> {
        let _ = (url, audience);
        None
    }

    /// The `nth` previous version of `url` (0 the newest) whose stored answer may
    /// serve a request that misses under the current one, while the current one is
    /// made in the background; for `audience`'s keys, or the anonymous cache's.
    ///
    /// For an upstream whose versions change for two reasons: what a page says, and
    /// how every page is presented (a renderer's templates). When only the second
    /// changed, the page stored under the previous presentation says what the
    /// current one will, and answering it keeps a site-wide re-render off every
    /// reader's path. An upstream offers a version here only then, and only for a
    /// bounded time; `None` (the default) when the page itself changed or there is
    /// no such version. Lock-free, like `key_version`: called on misses.
    fn previous_version(
        &self,
        url: &NormalizedUrl,
        audience: Option<Audience>,
        nth: usize,
    ) -> Option<u64> {
        let _ = (url, audience, nth);
        None
    }

    /// A GET for `target` (the request's path and query, as sent) was answered
    /// 200 or 304, from the cache or not. Called on the hit path: it must not block
    /// or wait (a view counter enqueues and returns).
    fn served(&self, target: &str) {
        let _ = target;
    }

    /// Whether answers that bypass the cache are compressed on the way out when the
    /// client accepts a coding (see `pass`). An HTTP origin compresses its own
    /// answers, or chose not to: false. A renderer in the same process produces
    /// identity bodies and wants them coded like its cached pages: true.
    fn compress_passes(&self) -> bool {
        false
    }

    /// Whether the upstream's work runs on this machine's cores (a renderer in the
    /// process) rather than an origin's: `budget.slots = 0` then means twice the
    /// cores, not a remote origin's sixteen per core (see `crate::edge::budget`).
    fn works_here(&self) -> bool {
        false
    }

    /// The paths whose responses depend on their query string; `None` (the default)
    /// for all of them, as an HTTP origin's may. Every other path is keyed and
    /// fetched without its query (see `quire_http::key::KeyConfig::query_paths`).
    fn query_paths(&self) -> Option<Vec<String>> {
        None
    }

    /// The compression dictionary (RFC 9842) a response with these headers is also
    /// stored `dcz` against, in the background like brotli; `None` (the default)
    /// for none. The hit path offers that body only to a client that holds the
    /// same dictionary, so the upstream may change it at any time.
    fn dictionary_for(
        &self,
        headers: &http::HeaderMap,
    ) -> Option<std::sync::Arc<quire_http::dictionary::Dictionary>> {
        let _ = headers;
        None
    }

    /// Appends the upstream's own Prometheus families to `/_quire/metrics`.
    fn metrics(&self, out: &mut String) {
        let _ = out;
    }

    /// The cluster's bus, once it is attached to the server (peer fill reads the
    /// node's position in the log from it; see `crate::ops::bus`).
    fn attach_bus(&self, bus: &std::sync::Arc<dyn crate::ops::bus::Bus>) {
        let _ = bus;
    }
}

/// What [`read_ahead`] read of a body.
#[derive(Debug)]
pub enum Ahead {
    /// The whole body.
    Ended(Vec<Frame<Bytes>>),
    /// Its start; the rest is still to come (slower than the wait, or larger).
    More(Vec<Frame<Bytes>>),
    /// It failed before it was all read (what had arrived is dropped).
    Failed(OriginError),
}

/// Reads the frames of `body` that arrive within `wait`, up to about `max_bytes`.
///
/// Used before a response is answered: a body that fails at once (a malformed
/// chunk, a reset) is then a 502 the client can read, instead of a status line
/// followed by a cut connection, and a body at hand is answered whole.
pub async fn read_ahead(body: &mut UpBody, wait: Duration, max_bytes: u64) -> Ahead {
    use http_body::Body as _;
    let deadline = tokio::time::Instant::now() + wait;
    let mut frames = Vec::new();
    let mut total = 0u64;
    loop {
        if body.is_end_stream() {
            return Ahead::Ended(frames);
        }
        // (`frame()` is cancel-safe: a timeout loses no bytes.)
        match tokio::time::timeout_at(deadline, body.frame()).await {
            Ok(None) => return Ahead::Ended(frames),
            Ok(Some(Ok(f))) => {
                total += f.data_ref().map_or(0, |d| d.len() as u64);
                frames.push(f);
                if total > max_bytes {
                    return Ahead::More(frames);
                }
            }
            Ok(Some(Err(e))) => {
                return Ahead::Failed(OriginError::failed(
                    crate::upstream::error::FailureKind::Protocol,
                    format!("origin body failed: {e}"),
                ))
            }
            Err(_) => return Ahead::More(frames),
        }
    }
}

/// `frames` (read by [`read_ahead`]) followed by the rest of `rest`; `ended` says
/// `rest` has nothing more (it is then not polled again).
pub fn prepend(frames: Vec<Frame<Bytes>>, rest: UpBody, ended: bool) -> UpBody {
    Prepended {
        frames: frames.into(),
        rest,
        ended,
    }
    .boxed_unsync()
}

/// See [`prepend`].
struct Prepended {
    frames: std::collections::VecDeque<Frame<Bytes>>,
    rest: UpBody,
    ended: bool,
}

impl http_body::Body for Prepended {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(f) = self.frames.pop_front() {
            return std::task::Poll::Ready(Some(Ok(f)));
        }
        if self.ended {
            return std::task::Poll::Ready(None);
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.frames.is_empty() && (self.ended || self.rest.is_end_stream())
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let ahead: u64 = self
            .frames
            .iter()
            .filter_map(|f| f.data_ref())
            .map(|d| d.len() as u64)
            .sum();
        if self.ended {
            return http_body::SizeHint::with_exact(ahead);
        }
        let rest = self.rest.size_hint();
        let mut h = http_body::SizeHint::new();
        h.set_lower(rest.lower() + ahead);
        if let Some(u) = rest.upper() {
            h.set_upper(u + ahead);
        }
        h
    }
}

/// `key` with `version` appended (nothing for version 0). Keys are length-prefixed
/// up to their end, so the suffix cannot be confused with key material.
pub fn versioned(mut key: Vec<u8>, version: u64) -> Vec<u8> {
    if version != 0 {
        key.push(b'@');
        key.extend_from_slice(&version.to_le_bytes());
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_audience_is_its_set_of_grants() {
        let a = Audience::new("reader", &["private"]);
        assert_eq!(a, Audience::new("reader", &["private", "private"]));
        let admin = Audience::new("admin", &["draft", "private"]);
        assert_eq!(admin.id(), Audience::new("x", &["private", "draft"]).id());
        assert_ne!(a.id(), admin.id());
        // Length-prefixed: ["ab"] is not ["a", "b"].
        assert_ne!(
            Audience::new("a", &["ab"]).id(),
            Audience::new("a", &["a", "b"]).id()
        );
    }

    #[test]
    fn version_zero_leaves_keys_alone_and_others_differ() {
        let k = b"\x01Pkey".to_vec();
        assert_eq!(versioned(k.clone(), 0), k);
        let a = versioned(k.clone(), 1);
        let b = versioned(k.clone(), 2);
        assert_ne!(a, k);
        assert_ne!(a, b);
        assert!(a.starts_with(&k));
    }
}
