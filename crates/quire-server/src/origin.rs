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
//!   given that fill's response (`crate::service`), it fetches its own variant.
//!   `fill_headers = "all"` restores nginx's and Varnish's forward-everything
//!   behaviour for origins that need more and declare `Vary` for what they use.
//! - **Passed requests (bypass, unsafe methods) go out as the client sent them**,
//!   minus hop-by-hop fields (RFC 9110 §7.6.1), plus `Via` and `X-Forwarded-For`.
//! - Timeouts: connect ([`Limits::origin_connect_timeout`](crate::config::Limits)) in
//!   the connector; time to the response head here; between body chunks in the fill.
//! - Only `http://` origins: quire has no TLS client built in yet, and says so.

use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

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

/// The body quire sends to the origin, and the body of a request quire serves: the
/// same type, so a request passed through forwards its body as it is. (Boxed with a
/// concrete error type so the fast path can hand `service` a request hyper never saw;
/// a boxed `dyn Error` here trips rustc's higher-ranked `Send` inference.)
pub type OutBody = UnsyncBoxBody<Bytes, std::io::Error>;

/// Why the origin gave no usable response.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    /// No response head within the read timeout (504).
    #[error("origin timed out")]
    Timeout,
    /// Connection refused/reset, or a malformed response (502).
    #[error("origin failed: {0}")]
    Failed(String),
}

impl OriginError {
    /// The status quire answers with when nothing stale can cover the failure.
    pub fn status(&self) -> http::StatusCode {
        match self {
            OriginError::Timeout => http::StatusCode::GATEWAY_TIMEOUT,
            OriginError::Failed(_) => http::StatusCode::BAD_GATEWAY,
        }
    }
}

/// A bad origin URL in the configuration.
#[derive(Debug, thiserror::Error)]
#[error("origin `{url}`: {why}")]
pub struct OriginUrlError {
    url: String,
    why: &'static str,
}

/// The origin's address and the client that talks to it.
#[derive(Debug, Clone)]
pub struct Origin {
    /// `host[:port]` as given.
    authority: http::uri::Authority,
    client: Client<HttpConnector, OutBody>,
    read_timeout: Duration,
}

impl Origin {
    /// Checks an origin URL: `http://host[:port]` with nothing after an optional `/`.
    pub fn parse(url: &str) -> Result<http::uri::Authority, OriginUrlError> {
        let err = |why| OriginUrlError {
            url: url.to_owned(),
            why,
        };
        let uri: Uri = url.parse().map_err(|_| err("not a URL"))?;
        match uri.scheme_str() {
            Some("http") => {}
            Some("https") => {
                return Err(err(
                    "https origins are not supported yet (quire has no TLS client); put the origin on http on a private address",
                ))
            }
            _ => return Err(err("the scheme must be http://")),
        }
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(err("an origin is scheme://host[:port], without a path"));
        }
        uri.authority().cloned().ok_or_else(|| err("no host"))
    }

    /// An origin client with the given timeouts.
    pub fn new(
        url: &str,
        connect_timeout: Duration,
        read_timeout: Duration,
    ) -> Result<Origin, OriginUrlError> {
        let authority = Origin::parse(url)?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(256)
            .build(connector);
        Ok(Origin {
            authority,
            client,
            read_timeout,
        })
    }

    /// Sends `req` (its URI path-and-query only; the authority is the origin's) and
    /// waits for the response head.
    pub async fn send(&self, mut req: Request<OutBody>) -> Result<Response<Incoming>, OriginError> {
        let pq = req
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_owned();
        *req.uri_mut() = Uri::builder()
            .scheme("http")
            .authority(self.authority.clone())
            .path_and_query(pq)
            .build()
            .map_err(|e| OriginError::Failed(format!("bad request target: {e}")))?;
        match tokio::time::timeout(self.read_timeout, self.client.request(req)).await {
            Err(_) => Err(OriginError::Timeout),
            Ok(Err(e)) => Err(OriginError::Failed(error_chain(&e))),
            Ok(Ok(resp)) => Ok(resp),
        }
    }

    /// The read timeout (also used between body chunks).
    pub fn read_timeout(&self) -> Duration {
        self.read_timeout
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
pub fn pass_headers(client: &HeaderMap, from: &crate::client::Client) -> HeaderMap {
    let mut h = client.clone();
    strip_hop_by_hop(&mut h);
    forwardable(&mut h);
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

/// Sets `X-Forwarded-For` to what `from` resolved (see [`crate::client`]).
fn set_forwarded_for(h: &mut HeaderMap, from: &crate::client::Client) {
    match HeaderValue::from_str(&from.forwarded_for) {
        Ok(v) => h.insert("x-forwarded-for", v),
        Err(_) => h.remove("x-forwarded-for"),
    };
}

/// Sets `X-Forwarded-Proto` to the scheme the client used (see
/// [`crate::client::Peer::scheme`]), replacing whatever the client sent: an origin
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
    from: &crate::client::Client,
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
pub fn fill_headers_all(client: &HeaderMap, host: &str, from: &crate::client::Client) -> HeaderMap {
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

    fn peer() -> crate::client::Client {
        crate::client::Client::direct("192.0.2.7:5555".parse().unwrap())
    }

    #[test]
    fn origin_urls_are_checked() {
        assert!(Origin::parse("http://127.0.0.1:9000").is_ok());
        assert!(Origin::parse("http://example.com/").is_ok());
        assert!(Origin::parse("https://example.com").is_err());
        assert!(Origin::parse("http://example.com/app").is_err());
        assert!(Origin::parse("example.com").is_err());
        assert!(Origin::parse("").is_err());
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
        let from = crate::client::Client::resolve(
            "192.0.2.7:5555".parse().unwrap(),
            &c,
            &Default::default(),
        );
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
}
