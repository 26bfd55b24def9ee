//! Upgraded connections (WebSocket, and any `Upgrade`, RFC 9110 §7.8) passed
//! through to the origin untouched.
//!
//! An HTTP/1.1 request with `Upgrade` and `Connection: upgrade` is forwarded with
//! those two fields (every other hop-by-hop field is dropped, as for any pass). When
//! the origin answers `101 Switching Protocols`, the client gets the origin's 101,
//! and from then on bytes are copied both ways between the two connections until
//! either side closes or the tunnel idles; quire reads none of them. Any other
//! answer goes back as it came, with `Connection: close`: the framing guard stopped
//! following that connection's requests at the upgrade request, so nothing more is
//! read from it.
//!
//! Key decisions:
//! - **An upgrade request carries no body.** One with `Transfer-Encoding`, or a
//!   `Content-Length` other than 0, is answered `400` and never reaches the origin:
//!   quire forwards no body before the switch, and an origin told of a length it
//!   never receives (one that answers early, as an error page does) would take the
//!   next request on that pooled connection as the rest of the body. The origin
//!   client enforces the same for every request ([`crate::upstream::origin::vouch_framing`]).
//! - **Slots are shared out.** Upgraded connections have their own limit,
//!   `limits.upgrades` (default 1,024), and one client holds at most
//!   `limits.upgrades_per_client` of them (default 64; the client is the address
//!   `trusted_proxies` resolved, an IPv6 one its /64): a few addresses cannot hoard
//!   every slot. A request over either limit is answered `503` with `Retry-After`
//!   without reaching the origin.
//! - **A silent tunnel ends.** A tunnel that carries no byte either way for
//!   `limits.tunnel_idle` (default 1 h, generous: a WebSocket that pings at any
//!   sane interval never meets it) is closed and its slot freed.
//!
//! Tunnels count in `quire_upgrades_open` and `quire_upgrades_total{result}`. HTTP/2
//! has no `Upgrade` (RFC 9113 §8.2.2), and quire does not offer extended CONNECT, so
//! browsers open WebSockets over HTTP/1.1.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use quire_http::status::{CacheStatus, Fwd};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::edge::conns::ClientKey;
use crate::metrics::Outcome;
use crate::request::body::Body;
use crate::request::exchange::{Answered, Exchange};
use crate::request::reply;
use crate::upstream::origin::{self, OutBody};

/// Whether an upgrade request announces a body (any `Transfer-Encoding`, a
/// `Content-Length` other than 0): quire forwards none before the switch.
fn has_body_framing(req: &Request<OutBody>) -> bool {
    let h = req.headers();
    h.contains_key(header::TRANSFER_ENCODING)
        || h.get_all(header::CONTENT_LENGTH)
            .iter()
            .any(|v| v.as_bytes() != b"0")
}

/// Whether `req` asks to switch protocols (HTTP/1.1, `Upgrade` and a `Connection`
/// that lists `upgrade`).
pub(crate) fn is_upgrade(req: &Request<OutBody>) -> bool {
    let h = req.headers();
    req.version() == Version::HTTP_11
        && h.contains_key(header::UPGRADE)
        && h.get_all(header::CONNECTION).iter().any(|v| {
            v.as_bytes()
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"upgrade"))
        })
}

impl Exchange<'_> {
    /// Forwards an upgrade request; on `101`, copies bytes both ways (see the
    /// module doc).
    pub(crate) async fn tunnel(self) -> Answered {
        let tunnels = &self.ctx.tunnels;
        if has_body_framing(&self.req) {
            tunnels.malformed.fetch_add(1, Ordering::Relaxed);
            let why = "an upgrade request carries no body";
            return (reply::bad_request(why), Outcome::Error);
        }
        let Some(slot) = tunnels.claim(ClientKey::of(self.client.ip)) else {
            return (reply::no_tunnel_slot(), Outcome::Error);
        };
        let Exchange {
            ctx,
            mut req,
            client,
            url,
            ..
        } = self;
        let status = CacheStatus::forward(Fwd::Method).with_detail("upgrade");
        let from_client = hyper::upgrade::on(&mut req);
        let out = outbound(&req, &client, url.scheme());
        let mut resp = match ctx.origin.send(out).await {
            Ok(r) => r,
            Err(e) => return (reply::origin_error(&e, status), Outcome::Error),
        };
        if resp.status() != StatusCode::SWITCHING_PROTOCOLS {
            tunnels.declined.fetch_add(1, Ordering::Relaxed);
            let (mut parts, body) = resp.into_parts();
            origin::strip_hop_by_hop(&mut parts.headers);
            parts
                .headers
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            let cs = status.append_to_lines(parts.headers.get_all("cache-status"));
            parts.headers.insert("cache-status", cs);
            return (
                Response::from_parts(parts, Body::Origin(body)),
                Outcome::Pass,
            );
        }
        let from_origin = hyper::upgrade::on(&mut resp);
        tunnels.opened.fetch_add(1, Ordering::Relaxed);
        let ctx = ctx.clone();
        tokio::spawn(async move {
            let t = &ctx.tunnels;
            if copy_both_ways(from_client, from_origin, t.idle).await == End::Idle {
                t.idled.fetch_add(1, Ordering::Relaxed);
            }
            drop(slot);
        });
        let mut switched = Response::new(Body::Empty);
        *switched.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        *switched.headers_mut() = resp.headers().clone();
        (switched, Outcome::Pass)
    }
}

/// The request to the origin: the client's method and target, the fields a pass
/// forwards, and the upgrade itself.
fn outbound(
    req: &Request<OutBody>,
    client: &crate::edge::client::Client,
    scheme: &str,
) -> Request<OutBody> {
    let mut headers = origin::pass_headers(req.headers(), client);
    origin::set_forwarded_proto(&mut headers, scheme);
    if let Some(u) = req.headers().get(header::UPGRADE) {
        headers.insert(header::UPGRADE, u.clone());
    }
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    // No body goes before the switch (requests that announce one were refused).
    headers.remove(header::CONTENT_LENGTH);
    let mut out = Request::new(origin::empty_body());
    *out.method_mut() = req.method().clone();
    *out.uri_mut() = req.uri().clone();
    *out.headers_mut() = headers;
    out
}

/// How a tunnel ended.
#[derive(Debug, PartialEq, Eq)]
enum End {
    /// A side closed, failed, or never switched.
    Closed,
    /// Nothing moved for `limits.tunnel_idle`.
    Idle,
}

/// Once both sides have switched, copies bytes between them until either ends or
/// nothing moves either way for `idle`.
async fn copy_both_ways(
    client: hyper::upgrade::OnUpgrade,
    origin: hyper::upgrade::OnUpgrade,
    idle: Duration,
) -> End {
    let (client, origin) = match tokio::join!(client, origin) {
        (Ok(c), Ok(o)) => (c, o),
        (c, o) => {
            tracing::debug!(
                client = c.is_ok(),
                origin = o.is_ok(),
                "an upgrade did not complete"
            );
            return End::Closed;
        }
    };
    let moved = Arc::new(AtomicU64::new(0));
    let mut c = Moving::new(TokioIo::new(client), moved.clone());
    let mut o = Moving::new(TokioIo::new(origin), moved.clone());
    tokio::select! {
        r = tokio::io::copy_bidirectional(&mut c, &mut o) => {
            if let Err(e) = r {
                tracing::debug!(error = %e, "tunnel ended with an error");
            }
            End::Closed
        }
        () = quiet_for(&moved, idle) => End::Idle,
    }
}

/// Resolves once `moved` has not changed for `idle`.
async fn quiet_for(moved: &AtomicU64, idle: Duration) {
    let mut seen = moved.load(Ordering::Relaxed);
    loop {
        tokio::time::sleep(idle).await;
        let now = moved.load(Ordering::Relaxed);
        if now == seen {
            return;
        }
        seen = now;
    }
}

/// A tunnel's end that counts every read that brought bytes in `moved`.
struct Moving<T> {
    io: T,
    moved: Arc<AtomicU64>,
}

impl<T> Moving<T> {
    fn new(io: T, moved: Arc<AtomicU64>) -> Moving<T> {
        Moving { io, moved }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Moving<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.moved.fetch_add(1, Ordering::Relaxed);
        }
        r
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Moving<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        b: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, b)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
