//! Upgraded connections (WebSocket, and any `Upgrade`, RFC 9110 §7.8) passed
//! through to the origin untouched.
//!
//! An HTTP/1.1 request with `Upgrade` and `Connection: upgrade` is forwarded with
//! those two fields (every other hop-by-hop field is dropped, as for any pass). When
//! the origin answers `101 Switching Protocols`, the client gets the origin's 101,
//! and from then on bytes are copied both ways between the two connections until
//! either side closes; quire reads none of them. Any other answer goes back as it
//! came, with `Connection: close`: the framing guard stopped following that
//! connection's requests at the upgrade request, so nothing more is read from it.
//!
//! Upgraded connections have their own limit, `limits.upgrades` (default 1,024): a
//! tunnel holds its slot for as long as it is open (a WebSocket can stay for hours,
//! so there is no idle timeout), and a request for one more is answered `503` with
//! `Retry-After` without reaching the origin. Tunnels count in
//! `quire_upgrades_open` and `quire_upgrades_total{result}`. HTTP/2 has no
//! `Upgrade` (RFC 9113 §8.2.2), and quire does not offer extended CONNECT, so
//! browsers open WebSockets over HTTP/1.1.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode, Version};
use hyper_util::rt::TokioIo;
use quire_http::status::{CacheStatus, Fwd};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::body::Body;
use crate::exchange::{Answered, Exchange};
use crate::metrics::Outcome;
use crate::origin::{self, OutBody};
use crate::reply;

/// The upgraded connections: their slots and counters.
#[derive(Debug)]
pub struct Tunnels {
    slots: Arc<Semaphore>,
    max: usize,
    opened: AtomicU64,
    refused: AtomicU64,
    declined: AtomicU64,
}

impl Tunnels {
    /// At most `max` tunnels open at once.
    pub fn new(max: usize) -> Tunnels {
        Tunnels {
            slots: Arc::new(Semaphore::new(max)),
            max,
            opened: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            declined: AtomicU64::new(0),
        }
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
             # HELP quire_upgrades_total Upgrade requests: tunnelled (the origin switched protocols), declined (it answered otherwise), refused (no slot free).\n\
             # TYPE quire_upgrades_total counter\n\
             quire_upgrades_total{{result=\"tunnelled\"}} {}\n\
             quire_upgrades_total{{result=\"declined\"}} {}\n\
             quire_upgrades_total{{result=\"refused\"}} {}",
            self.opened.load(Ordering::Relaxed),
            self.declined.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        );
    }
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
        let Ok(slot) = tunnels.slots.clone().try_acquire_owned() else {
            tunnels.refused.fetch_add(1, Ordering::Relaxed);
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
        tokio::spawn(copy_both_ways(from_client, from_origin, slot));
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
    client: &crate::client::Client,
    scheme: &str,
) -> Request<OutBody> {
    let mut headers = origin::pass_headers(req.headers(), client);
    origin::set_forwarded_proto(&mut headers, scheme);
    if let Some(u) = req.headers().get(header::UPGRADE) {
        headers.insert(header::UPGRADE, u.clone());
    }
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    let mut out = Request::new(origin::empty_body());
    *out.method_mut() = req.method().clone();
    *out.uri_mut() = req.uri().clone();
    *out.headers_mut() = headers;
    out
}

/// Once both sides have switched, copies bytes between them until either ends;
/// the slot is held until then.
async fn copy_both_ways(
    client: hyper::upgrade::OnUpgrade,
    origin: hyper::upgrade::OnUpgrade,
    slot: OwnedSemaphorePermit,
) {
    let (client, origin) = match tokio::join!(client, origin) {
        (Ok(c), Ok(o)) => (c, o),
        (c, o) => {
            tracing::debug!(
                client = c.is_ok(),
                origin = o.is_ok(),
                "an upgrade did not complete"
            );
            return;
        }
    };
    let (mut c, mut o) = (TokioIo::new(client), TokioIo::new(origin));
    if let Err(e) = tokio::io::copy_bidirectional(&mut c, &mut o).await {
        tracing::debug!(error = %e, "tunnel ended with an error");
    }
    drop(slot);
}
