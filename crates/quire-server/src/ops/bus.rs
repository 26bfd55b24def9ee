//! The hook through which several quire nodes share invalidations: the [`Bus`]
//! trait, which `quire-cluster` implements on Redis Streams, and what the server
//! does with it.
//!
//! Without `[cluster]` there is no bus and nothing here runs: a purge is applied
//! where it was received, as it always was.
//!
//! With a bus:
//! - **A purge is appended to the shared log before anything is purged**, and
//!   answered only after the log accepted it; the node then applies it at once,
//!   before it answers, so no request it answers after the purge sees the old
//!   bytes. Every other node applies it when it reads it from the log. With
//!   `wait=all`, the answer waits until every live node says it applied it.
//! - **A bus that cannot take the entry fails the purge with 503** and nothing is
//!   purged anywhere: an operator never gets a silent purge of one node.
//! - **An unsafe method's invalidation is applied here at once and handed to the
//!   bus to append** ([`Bus::publish_later`]): the origin has already acted on the
//!   request, so it cannot be refused; a bus that is down keeps it until it is back.
//! - Purges commute: removing or marking stale what a tag names gives the same
//!   store whichever order two purges are applied in, and applying one twice only
//!   costs a refill or a revalidation. So a node applying its own purge ahead of
//!   the log's order, or applying it again when it reads it back, never serves what
//!   a purge removed.
//! - **A peer's copy is never older than what the asking node applied.** The
//!   cluster's peer requests ([`crate::upstream::PEER_HEADER`]) are honoured only
//!   from an address of a configured peer ([`Bus::is_peer`]); anyone else's is
//!   dropped at the door, so a client cannot turn peer fill off or pose as a node.
//!   A peer's request is answered with this node's log position taken *before*
//!   the lookup ([`PEER_POSITION_HEADER`], from [`Bus::position`]): every
//!   invalidation up to it was applied before the answer was chosen, and the
//!   asking node refuses an answer whose position is below its own. An answer from
//!   a fill another request had started (`collapsed`) goes out unstamped: that
//!   fill may predate invalidations applied before the position was taken.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::ops::purge::Target;

/// The field a node answers a peer's request with: its position in the log when
/// it looked the request up (see the module doc).
pub const PEER_POSITION_HEADER: &str = "quire-peer-position";

/// One invalidation, as it crosses the bus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalidation {
    /// What it names.
    pub targets: Vec<Target>,
    /// Mark stale instead of removing.
    pub soft: bool,
    /// An unsafe method's invalidation (RFC 9111 §4.4), not an operator's purge:
    /// applied quietly (no log line, not counted as a purge).
    pub implicit: bool,
}

/// Where the log put an invalidation (its entry id there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    /// The entry's id in the log.
    pub id: String,
    /// The incarnation of the log the id belongs to: ids of two incarnations
    /// (before and after Redis lost the stream) do not compare.
    pub incarnation: u64,
}

/// Whether one node has applied an entry, for `wait=all`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAck {
    /// The node's name.
    pub node: String,
    /// Whether it applied the entry before the wait ended.
    pub applied: bool,
    /// Whether it was live (its heartbeat recent, by the bus's clock): a node that
    /// is not was not waited for, and is named as unreachable.
    pub live: bool,
}

/// What [`Bus::publish`] returns.
pub type PublishFuture<'a> = Pin<Box<dyn Future<Output = Result<Receipt, String>> + Send + 'a>>;

/// What [`Bus::wait_all`] returns.
pub type WaitFuture<'a> = Pin<Box<dyn Future<Output = Vec<NodeAck>> + Send + 'a>>;

/// A shared, ordered log of invalidations that every node applies.
pub trait Bus: Send + Sync + fmt::Debug + 'static {
    /// Appends `inv`; resolves once the log holds it, or fails saying why (the bus
    /// is down, the log refused it).
    fn publish(&self, inv: &Invalidation) -> PublishFuture<'_>;

    /// Resolves when every live node has applied the entry of `receipt`, or after
    /// `timeout`, with each node's status.
    fn wait_all(&self, receipt: &Receipt, timeout: Duration) -> WaitFuture<'_>;

    /// Appends `inv` in the background, keeping it until the log takes it.
    fn publish_later(&self, inv: Invalidation);

    /// Appends the bus's own Prometheus families to `/_quire/metrics`.
    fn metrics(&self, out: &mut String);

    /// Whether `addr` is one of the cluster's peers (whose peer requests are
    /// honoured).
    fn is_peer(&self, _addr: std::net::IpAddr) -> bool {
        false
    }

    /// This node's position in the log now (every entry up to it applied here), as
    /// a peer's answer carries it; `None` when it does not know one.
    fn position(&self) -> Option<String> {
        None
    }

    /// The least position a peer's answer must carry to be taken here (every
    /// invalidation this node applied, its own included); `None`: take none.
    fn floor(&self) -> Option<String> {
        None
    }

    /// A line for `/_quire/health` when the node is degraded (cut off from the
    /// log, say), saying what it does about it.
    fn health(&self) -> Option<String> {
        None
    }
}

/// On a request that carries [`crate::upstream::PEER_HEADER`]: drops the field
/// unless `from` is a configured peer, else this node's position, taken now
/// (before the lookup), for the answer's [`PEER_POSITION_HEADER`].
pub(crate) fn peer_request(
    ctx: &crate::state::Ctx,
    headers: &mut http::HeaderMap,
    from: std::net::IpAddr,
) -> Option<http::HeaderValue> {
    if !headers.contains_key(crate::upstream::PEER_HEADER) {
        return None;
    }
    let Some(bus) = ctx.bus().filter(|b| b.is_peer(from)) else {
        headers.remove(crate::upstream::PEER_HEADER);
        return None;
    };
    let pos = bus.position().unwrap_or_default();
    http::HeaderValue::from_str(&pos).ok()
}

/// Whether `resp` answered from a fill another request had started (RFC 9211
/// `collapsed`): that fill may have begun before invalidations this node applied
/// before its position was taken, so the position does not vouch for its bytes and
/// the answer goes out unstamped (the asking node then refuses it and asks the
/// origin). A fill this request led began after the position was taken.
pub(crate) fn joined_an_earlier_fill(resp: &http::Response<crate::request::body::Body>) -> bool {
    resp.headers()
        .get("cache-status")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("; collapsed"))
}

/// Applies `inv` to this node's store: what a node does with an entry it read
/// from the log, and what the receiving node does at once. Returns the entries
/// touched.
pub fn apply(ctx: &crate::state::Ctx, inv: &Invalidation) -> u64 {
    if inv.implicit {
        crate::ops::purge::invalidate(ctx, &inv.targets);
        0
    } else {
        crate::ops::purge::run(ctx, &inv.targets, inv.soft)
    }
}

/// The `[cluster]` section: this node, its peers and the bus. Only read by
/// `quire-cluster`; a configuration without it runs no cluster code.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// The Redis (or Valkey) server holding the log: `redis://host:port[/db]`.
    pub redis: String,
    /// This node's name, unique in the cluster.
    pub node: String,
    /// Every node by name (this one included) and the URL its listener answers on;
    /// fills go to a key's owner among them. Empty: no peer fill.
    #[serde(default)]
    pub peers: std::collections::BTreeMap<String, String>,
    /// The stream's key.
    #[serde(default = "default_stream")]
    pub stream: String,
    /// About how many entries the stream keeps (`XADD MAXLEN ~`).
    #[serde(default = "default_stream_max")]
    pub stream_max: u64,
    /// Longest a fill waits for the key's owner before it asks the origin itself.
    #[serde(default = "default_peer_timeout")]
    pub peer_timeout: crate::config::Secs,
    /// `quire serve`: the secret every node signs session cookies with (32 bytes
    /// or more), so a reader signed in on one node is signed in on all. Without it
    /// (or `session_secret_file`) each node uses its vault's `.quire/secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_secret: Option<Secret>,
    /// `quire serve`: a file holding that secret (read at start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_secret_file: Option<std::path::PathBuf>,
}

/// A secret in the configuration: never in `Debug` output.
#[derive(Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(not shown)")
    }
}

/// Shortest session secret accepted, bytes (as the vault's `.quire/secret`).
pub const SESSION_SECRET_LEN_MIN: usize = 32;

fn default_stream() -> String {
    "quire:invalidations".into()
}

fn default_stream_max() -> u64 {
    100_000
}

fn default_peer_timeout() -> crate::config::Secs {
    crate::config::Secs(Duration::from_millis(200))
}

impl ClusterSection {
    /// A section for `node` on `redis` with every default.
    pub fn new(redis: &str, node: &str) -> ClusterSection {
        ClusterSection {
            redis: redis.into(),
            node: node.into(),
            peers: std::collections::BTreeMap::new(),
            stream: default_stream(),
            stream_max: default_stream_max(),
            peer_timeout: default_peer_timeout(),
            session_secret: None,
            session_secret_file: None,
        }
    }

    /// The addresses of the peers whose URL names one (not a host name).
    pub fn peer_addresses(&self) -> Vec<std::net::IpAddr> {
        self.peers
            .values()
            .filter_map(|url| crate::upstream::origin::Origin::parse(url).ok())
            .filter_map(|u| u.host().trim_matches(['[', ']']).parse().ok())
            .collect()
    }

    /// Checks the section alone.
    pub fn validate(&self) -> Result<(), String> {
        let name_ok = |n: &str| {
            !n.is_empty()
                && n.len() <= 64
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if !name_ok(&self.node) {
            return Err("cluster.node must be 1-64 letters, digits, `-` or `_`".into());
        }
        let schemes = ["redis://", "rediss://", "unix://", "valkey://"];
        if !schemes.iter().any(|s| self.redis.starts_with(s)) {
            return Err("cluster.redis must be a redis:// (or rediss://, unix://) URL".into());
        }
        if self.stream.is_empty() || self.stream_max < 1000 {
            return Err("cluster.stream must be named and cluster.stream_max at least 1000".into());
        }
        if self.peer_timeout.0.is_zero() {
            return Err("cluster.peer_timeout must be above 0".into());
        }
        for (name, url) in &self.peers {
            if !name_ok(name) {
                return Err(format!("cluster.peers: `{name}` is not a node name"));
            }
            crate::upstream::origin::Origin::parse(url)
                .map_err(|e| format!("cluster.peers.{name}: {e}"))?;
        }
        match (&self.session_secret, &self.session_secret_file) {
            (Some(_), Some(_)) => {
                return Err("cluster: give session_secret or session_secret_file, not both".into())
            }
            (Some(s), None) if s.0.trim().len() < SESSION_SECRET_LEN_MIN => {
                return Err(format!(
                    "cluster.session_secret must be {SESSION_SECRET_LEN_MIN} or more random \
                     bytes (e.g. `openssl rand -hex 32`)"
                ))
            }
            _ => {}
        }
        if !self.peers.is_empty() && !self.peers.contains_key(&self.node) {
            return Err(format!(
                "cluster.peers must list this node (`{}`) too, with its own URL",
                self.node
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_named_by_address_are_trusted_proxies() {
        let mut c = ClusterSection::new("redis://127.0.0.1:6379", "a");
        c.peers.insert("a".into(), "http://10.0.0.1:8080".into());
        c.peers.insert("b".into(), "http://[fd00::2]:8080".into());
        c.peers
            .insert("c".into(), "http://node-c.internal:8080".into());
        c.validate().unwrap();
        let addrs: Vec<String> = c.peer_addresses().iter().map(ToString::to_string).collect();
        assert_eq!(
            addrs,
            ["10.0.0.1", "fd00::2"],
            "host names are not resolved"
        );
        let cfg = crate::Config {
            cluster: Some(c),
            ..crate::Config::default()
        };
        let t = trusted_of(&cfg);
        assert!(t.contains("10.0.0.1".parse().unwrap()));
        assert!(t.contains("fd00::2".parse().unwrap()));
        assert!(!t.contains("10.0.0.9".parse().unwrap()));
    }

    #[test]
    fn the_session_secret_is_checked_and_never_shown() {
        let mut c = ClusterSection::new("redis://127.0.0.1:6379", "a");
        c.session_secret = Some(Secret("too short".into()));
        assert!(c.validate().unwrap_err().contains("32 or more"));
        let long = "0123456789abcdef0123456789abcdef";
        c.session_secret = Some(Secret(long.into()));
        assert_eq!(c.validate(), Ok(()));
        assert!(!format!("{c:?}").contains(long), "not in Debug output");
        c.session_secret_file = Some("/etc/quire/secret".into());
        assert!(c.validate().unwrap_err().contains("not both"));
    }

    fn trusted_of(cfg: &crate::Config) -> crate::edge::client::TrustedProxies {
        let p = crate::policy::check(cfg);
        assert!(p.is_ok(), "{p:?}");
        crate::policy::trusted_for_tests(cfg)
    }

    #[test]
    fn a_section_with_bad_fields_is_refused() {
        let mut c = ClusterSection::new("http://redis", "a");
        assert!(c.validate().unwrap_err().contains("redis://"));
        c.redis = "redis://r:6379".into();
        c.node = "a b".into();
        assert!(c.validate().is_err());
        c.node = "a".into();
        c.peers.insert("b".into(), "http://10.0.0.2".into());
        assert!(c.validate().unwrap_err().contains("this node"));
        c.peers.insert("a".into(), "ftp://x".into());
        assert!(c.validate().is_err());
    }

    #[test]
    fn an_answer_from_a_joined_fill_is_never_stamped_with_a_position() {
        let with = |status: Option<&str>| {
            let mut r = http::Response::new(crate::request::body::Body::Empty);
            if let Some(v) = status {
                r.headers_mut()
                    .insert("cache-status", http::HeaderValue::from_str(v).unwrap());
            }
            joined_an_earlier_fill(&r)
        };
        assert!(with(Some("quire; fwd=miss; collapsed")));
        assert!(with(Some("quire; fwd=miss; stored; collapsed")));
        assert!(!with(Some("quire; fwd=miss; stored")));
        assert!(!with(Some("quire; hit")));
        assert!(!with(None));
    }
}
