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

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use quire_http::status::{CacheStatus, Fwd};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::edge::conns::ClientKey;
use crate::metrics::Outcome;
use crate::request::body::Body;
use crate::request::exchange::{Answered, Exchange};
use crate::request::reply;
use crate::upstream::origin::{self, OutBody};

/// Tunnels open per client (only clients with one open).
type Held = Arc<Mutex<HashMap<ClientKey, usize>>>;

/// The upgraded connections: their slots and counters.
#[derive(Debug)]
pub struct Tunnels {
    slots: Arc<Semaphore>,
    max: usize,
    per_client: usize,
    idle: Duration,
    held: Held,
    opened: AtomicU64,
    refused: AtomicU64,
    refused_client: AtomicU64,
    malformed: AtomicU64,
    declined: AtomicU64,
    idled: AtomicU64,
}

/// One tunnel's claim: a slot of `limits.upgrades` and one of its client's share;
/// dropping it gives both back.
#[derive(Debug)]
struct Claim {
    _slot: OwnedSemaphorePermit,
    held: Held,
    client: ClientKey,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = held.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.client);
            }
        }
    }
}

impl Tunnels {
    /// The limits `limits.upgrades`, `limits.upgrades_per_client` and
    /// `limits.tunnel_idle`.
    pub fn new(limits: &crate::config::Limits) -> Tunnels {
        Tunnels {
            slots: Arc::new(Semaphore::new(limits.upgrades)),
            max: limits.upgrades,
            per_client: limits.upgrades_per_client,
            idle: limits.tunnel_idle.0,
            held: Arc::default(),
            opened: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            refused_client: AtomicU64::new(0),
            malformed: AtomicU64::new(0),
            declined: AtomicU64::new(0),
            idled: AtomicU64::new(0),
        }
    }

    /// A slot for one more tunnel of `client`; `None` when it holds its share or
    /// every slot is taken (each counted).
    fn claim(&self, client: ClientKey) -> Option<Claim> {
        let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
        let n = held.entry(client).or_insert(0);
        if *n >= self.per_client {
            self.refused_client.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        let Ok(slot) = self.slots.clone().try_acquire_owned() else {
            if *n == 0 {
                held.remove(&client);
            }
            self.refused.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        *n += 1;
        Some(Claim {
            _slot: slot,
            held: self.held.clone(),
            client,
        })
    }

    /// The counters in Prometheus text format.
    pub fn write_metrics(&self, out: &mut String) {
        use std::fmt::Write as _;
        let open = self.max - self.slots.available_permits();
        let _ = writeln!(
            out,
            "# HELP quire_upgrades_open Upgraded connections (WebSocket) open now.\n\
             # TYPE quire_upgrades_open gauge\n\
             quire_upgrades_open {open}\n\
             # HELP quire_upgrades_total Upgrade requests: tunnelled (the origin switched protocols), declined (it answered otherwise), refused (no slot free), refused_client (the client held its share, limits.upgrades_per_client), bad_request (body framing on an upgrade: 400).\n\
             # TYPE quire_upgrades_total counter\n\
             quire_upgrades_total{{result=\"tunnelled\"}} {}\n\
             quire_upgrades_total{{result=\"declined\"}} {}\n\
             quire_upgrades_total{{result=\"refused\"}} {}\n\
             quire_upgrades_total{{result=\"refused_client\"}} {}\n\
             quire_upgrades_total{{result=\"bad_request\"}} {}\n\
             # HELP quire_upgrades_idle_closed_total Tunnels closed after carrying nothing for limits.tunnel_idle.\n\
             # TYPE quire_upgrades_idle_closed_total counter\n\
             quire_upgrades_idle_closed_total {}",
            self.opened.load(Ordering::Relaxed),
            self.declined.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
            self.refused_client.load(Ordering::Relaxed),
            self.malformed.load(Ordering::Relaxed),
            self.idled.load(Ordering::Relaxed),
        );
    }
}

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
