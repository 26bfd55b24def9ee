//! Peer fill: on a miss, ask the key's owner before the origin, so the origin sees
//! about one fetch per object for the whole cluster.
//!
//! Key decisions:
//! - **The owner is chosen by rendezvous hashing** over the hash of quire's
//!   normalised key (the fill's primary key, not the raw URL): each node scores
//!   `xxh3(node name, key hash)` and the highest wins. Every node computes the same
//!   owner without talking, and a node joining or leaving moves only its own keys.
//! - **Only fills go to peers** (the fill path marks them, see
//!   `quire_server::upstream::FillMark`): a passed request (a cookie, a POST) goes
//!   to the origin, since the owner could not store it anyway; so does a fill for a
//!   signed-in audience (`quire_server::upstream::Audience`), rendered locally.
//! - **The owner never forwards a peer's request** to another peer: the request
//!   carries `quire-peer: <node>`, and the owner's fill for it goes to the origin.
//!   So a request crosses at most one hop even while two nodes disagree about the
//!   peer list.
//! - **An owner that is down, slow or failing is skipped**: no response head
//!   within `peer_timeout`, a connection failure, or a 5xx, and this node fills from
//!   the origin itself. The owner's answer is stored like the origin's, with its
//!   `Age`, so it keeps the origin's freshness; its `Cache-Status` is dropped.
//! - **A peer's copy is never older than what this node applied.** The owner
//!   answers with its log position taken before its lookup
//!   (`quire_server::bus::PEER_POSITION_HEADER`); the answer is taken only if that
//!   position covers this node's floor, read when the answer arrives: every entry
//!   its reader applied and every purge it appended and applied itself, in the
//!   same incarnation of the log (`crate::bus::Stamp::covers`). An owner that lags
//!   behind the log, was cut off, or answers without a position is skipped like
//!   one that failed, and this node fills from the origin (counted in
//!   `quire_cluster_peer_answers_refused_total`). A node that is itself cut off
//!   from the log takes no peer answer at all. So a purge this node applied, or
//!   that `wait=all` reported applied here, is never undone by a lagging owner's
//!   old copy.
//! - The owner honours `quire-peer` only from a configured peer's address (see
//!   `quire_server::bus`): a client's own `quire-peer` is dropped at the door, so
//!   it neither turns peer fill off nor poses as a node.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Request, Response};
use http_body::Body as _;
use quire_server::bus::{Bus, PEER_POSITION_HEADER};
use quire_server::origin::{copy_head, Origin, OriginOptions, OutBody};
use quire_server::upstream::{Audience, FillMark, UpBody, UpFuture, Upstream, PEER_HEADER};
use xxhash_rust::xxh3::xxh3_64_with_seed;

use crate::bus::Stamp;

/// One other node.
#[derive(Debug)]
struct Peer {
    name: String,
    client: Origin,
}

/// An upstream that fills from each key's owner first.
#[derive(Debug)]
pub struct PeerFill {
    inner: Arc<dyn Upstream>,
    me: String,
    /// Every node, this one included (`client` unused for it), by name.
    peers: Vec<Peer>,
    timeout: Duration,
    stats: PeerStats,
    /// The node's bus, once the cluster started (see [`Upstream::attach_bus`]).
    bus: std::sync::OnceLock<Arc<dyn Bus>>,
}

#[derive(Debug, Default)]
struct PeerStats {
    from_peer: AtomicU64,
    own_keys: AtomicU64,
    fallback: AtomicU64,
    served_to_peers: AtomicU64,
    refused: AtomicU64,
}

impl PeerFill {
    /// Wraps `inner` (the origin) for node `me` among `peers` (name → URL, this
    /// node included).
    pub fn new(
        inner: Arc<dyn Upstream>,
        me: &str,
        peers: &std::collections::BTreeMap<String, String>,
        timeout: Duration,
        opts: &OriginOptions,
    ) -> Result<PeerFill, quire_server::origin::OriginSetupError> {
        let opts = OriginOptions {
            connect_timeout: timeout,
            read_timeout: inner.read_timeout(),
            ..opts.clone()
        };
        let peers = peers
            .iter()
            .map(|(name, url)| {
                Ok(Peer {
                    name: name.clone(),
                    client: Origin::new(url, &opts)?,
                })
            })
            .collect::<Result<Vec<_>, quire_server::origin::OriginSetupError>>()?;
        Ok(PeerFill {
            inner,
            me: me.into(),
            peers,
            timeout,
            stats: PeerStats::default(),
            bus: std::sync::OnceLock::new(),
        })
    }

    /// The owner of the key whose hash is `key_hash`.
    fn owner(&self, key_hash: u64) -> Option<&Peer> {
        self.peers
            .iter()
            .max_by_key(|p| xxh3_64_with_seed(p.name.as_bytes(), key_hash))
    }

    async fn send_to(
        &self,
        req: Request<OutBody>,
    ) -> Result<Response<UpBody>, quire_server::origin::OriginError> {
        let Some(mark) = req.extensions().get::<FillMark>().copied() else {
            return self.inner.send(req).await;
        };
        // A fill for a signed-in audience is rendered here: the owner would get it
        // without the audience (an extension does not cross the wire), so it
        // could only answer the anonymous page.
        if req.extensions().get::<Audience>().is_some() {
            self.stats.own_keys.fetch_add(1, Ordering::Relaxed);
            return self.inner.send(req).await;
        }
        if mark.from_peer {
            self.stats.served_to_peers.fetch_add(1, Ordering::Relaxed);
            return self.inner.send(req).await;
        }
        let owner = match self.owner(mark.key_hash) {
            Some(p) if p.name != self.me && req.body().is_end_stream() => p,
            _ => {
                self.stats.own_keys.fetch_add(1, Ordering::Relaxed);
                return self.inner.send(req).await;
            }
        };
        let spare = copy_head(&req);
        let mut to_peer = copy_head(&req);
        if let Ok(v) = HeaderValue::from_str(&self.me) {
            to_peer.headers_mut().insert(PEER_HEADER, v);
        }
        let span =
            quire_server::trace::outbound("peer fill", to_peer.headers_mut()).map(|mut s| {
                s.set("quire.peer", owner.name.clone());
                s
            });
        let asked =
            tokio::time::timeout(self.timeout, Upstream::send(&owner.client, to_peer)).await;
        if let Some(mut s) = span {
            match &asked {
                Ok(Ok(r)) => s.set("http.response.status_code", i64::from(r.status().as_u16())),
                _ => s.fail(),
            }
            s.end();
        }
        match asked {
            Ok(Ok(mut resp)) if !resp.status().is_server_error() => {
                if !self.recent_enough(&resp) {
                    self.stats.refused.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(peer = %owner.name, "peer fill: the owner's copy may be older than what this node applied; filling from the origin");
                    return self.inner.send(spare).await;
                }
                resp.headers_mut().remove("cache-status");
                resp.headers_mut().remove(PEER_POSITION_HEADER);
                self.stats.from_peer.fetch_add(1, Ordering::Relaxed);
                Ok(resp)
            }
            _ => {
                self.stats.fallback.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(peer = %owner.name, "peer fill: the owner did not answer in time; filling from the origin");
                self.inner.send(spare).await
            }
        }
    }
}

impl PeerFill {
    /// Whether the owner's answer `resp` covers every invalidation this node
    /// applied (see the module doc).
    fn recent_enough<B>(&self, resp: &Response<B>) -> bool {
        let floor = self
            .bus
            .get()
            .and_then(|b| b.floor())
            .and_then(|f| Stamp::parse(&f));
        let theirs = resp
            .headers()
            .get(PEER_POSITION_HEADER)
            .and_then(|v| v.to_str().ok())
            .and_then(Stamp::parse);
        match (theirs, floor) {
            (Some(t), Some(f)) => t.covers(&f),
            _ => false,
        }
    }
}

impl Upstream for PeerFill {
    fn send(&self, req: Request<OutBody>) -> UpFuture<'_> {
        Box::pin(self.send_to(req))
    }

    fn read_timeout(&self) -> Duration {
        self.inner.read_timeout()
    }

    fn key_version(&self, url: &quire_http::key::NormalizedUrl) -> u64 {
        self.inner.key_version(url)
    }

    fn audience(
        &self,
        url: &quire_http::key::NormalizedUrl,
        headers: &http::HeaderMap,
    ) -> Option<Audience> {
        self.inner.audience(url, headers)
    }

    fn audience_version(
        &self,
        url: &quire_http::key::NormalizedUrl,
        audience: Audience,
    ) -> Option<u64> {
        self.inner.audience_version(url, audience)
    }

    fn previous_version(
        &self,
        url: &quire_http::key::NormalizedUrl,
        audience: Option<Audience>,
        nth: usize,
    ) -> Option<u64> {
        self.inner.previous_version(url, audience, nth)
    }

    fn served(&self, target: &str) {
        self.inner.served(target);
    }

    fn compress_passes(&self) -> bool {
        self.inner.compress_passes()
    }

    fn works_here(&self) -> bool {
        self.inner.works_here()
    }

    fn span_name(&self) -> &'static str {
        self.inner.span_name()
    }

    fn answers_admin_path(&self, path: &str) -> bool {
        self.inner.answers_admin_path(path)
    }

    fn negotiate(
        &self,
        url: &quire_http::key::NormalizedUrl,
        headers: &http::HeaderMap,
    ) -> Option<quire_http::key::NormalizedUrl> {
        self.inner.negotiate(url, headers)
    }

    fn negotiated_field(&self) -> Option<&'static str> {
        self.inner.negotiated_field()
    }

    fn dictionary_for(
        &self,
        headers: &http::HeaderMap,
    ) -> Option<Arc<quire_http::dictionary::Dictionary>> {
        self.inner.dictionary_for(headers)
    }

    fn query_paths(&self) -> Option<Vec<String>> {
        self.inner.query_paths()
    }

    fn attach_bus(&self, bus: &Arc<dyn Bus>) {
        let _ = self.bus.set(bus.clone());
        self.inner.attach_bus(bus);
    }

    fn metrics(&self, out: &mut String) {
        self.inner.metrics(out);
        let s = &self.stats;
        out.push_str("# HELP quire_cluster_peer_fills_total Fills by where they went: peer (the key's owner answered), own (this node owns the key), fallback (the owner did not answer in time; the origin did), refused (the owner's position did not cover this node's; the origin did), for_peer (a peer's fill this node made as the owner).\n# TYPE quire_cluster_peer_fills_total counter\n");
        for (name, v) in [
            ("peer", &s.from_peer),
            ("own", &s.own_keys),
            ("fallback", &s.fallback),
            ("refused", &s.refused),
            ("for_peer", &s.served_to_peers),
        ] {
            let _ = writeln!(
                out,
                "quire_cluster_peer_fills_total{{result=\"{name}\"}} {}",
                v.load(Ordering::Relaxed)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node-{i}")).collect()
    }

    fn owner_of(nodes: &[String], key: u64) -> &str {
        nodes
            .iter()
            .max_by_key(|n| xxh3_64_with_seed(n.as_bytes(), key))
            .unwrap()
    }

    #[test]
    fn owners_spread_evenly_and_a_leaving_node_moves_only_its_keys() {
        let three = names(3);
        let mut counts = [0usize; 3];
        for k in 0..30_000u64 {
            let o = owner_of(&three, k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            counts[three.iter().position(|n| n == o).unwrap()] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        let two = names(2);
        for k in 0..10_000u64 {
            let key = k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let before = owner_of(&three, key);
            if before != "node-2" {
                assert_eq!(owner_of(&two, key), before, "only node-2's keys move");
            }
        }
    }
}
