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

pub use crate::config::{ClusterSection, ClusterSectionError, Secret, SESSION_SECRET_LEN_MIN};
use crate::error::{Fault, Side};

/// The field a node answers a peer's request with: its position in the log when
/// it looked the request up (see the module doc).
pub const PEER_POSITION_HEADER: &str = "quire-peer-position";

/// What to purge: what an invalidation names, here beside it so the port imports
/// nothing of the purge that applies it (`crate::ops::purge`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every variant of one URL, normalised (a [`NormalizedUrl`](quire_http::key::NormalizedUrl)'s text: the form
    /// keys and tags are made of, so it crosses a cluster's bus unchanged).
    Url(String),
    /// Everything under a directory (`scheme://host/dir/`).
    Directory(String),
    /// Everything carrying a surrogate key.
    Key(String),
}

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
pub type PublishFuture<'a> = Pin<Box<dyn Future<Output = Result<Receipt, BusError>> + Send + 'a>>;

/// Why the log did not take an entry ([`Bus::publish`]): nothing was purged anywhere.
#[derive(Debug, thiserror::Error)]
#[error("{context}")]
pub struct BusError {
    kind: BusErrorKind,
    context: String,
}

/// What kind of failure a [`BusError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BusErrorKind {
    /// The log could not be reached (refused, dropped connection): it took nothing.
    Unavailable,
    /// The log did not answer in time: it may or may not have taken the entry.
    Timeout,
    /// The log answered with a refusal or an answer the bus cannot read.
    Refused,
}

impl BusError {
    /// A failure of `kind`; `context` says what happened, for the operator.
    pub fn new(kind: BusErrorKind, context: impl Into<String>) -> BusError {
        BusError {
            kind,
            context: context.into(),
        }
    }

    /// What kind of failure it is.
    pub fn kind(&self) -> BusErrorKind {
        self.kind
    }
}

impl Fault for BusError {
    fn side(&self) -> Side {
        Side::Upstream
    }

    /// An unreachable log took nothing, so the purge can be sent again; after a
    /// timeout it may have taken it (sending again appends it twice, which purges
    /// commute through, but the caller cannot know), and a refusal repeats.
    fn retry(&self) -> bool {
        self.kind == BusErrorKind::Unavailable
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_that_took_nothing_can_be_tried_again_and_a_refusal_cannot() {
        let e = |kind| BusError::new(kind, "redis: connection refused");
        assert!(e(BusErrorKind::Unavailable).retry());
        assert!(!e(BusErrorKind::Timeout).retry());
        assert!(!e(BusErrorKind::Refused).retry());
        assert_eq!(e(BusErrorKind::Refused).side(), Side::Upstream);
        // The message is the context alone: the admin API's 503 reads as before.
        assert_eq!(
            e(BusErrorKind::Unavailable).to_string(),
            "redis: connection refused"
        );
    }

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
        assert!(c.validate().unwrap_err().to_string().contains("32 or more"));
        let long = "0123456789abcdef0123456789abcdef";
        c.session_secret = Some(Secret(long.into()));
        assert_eq!(c.validate(), Ok(()));
        assert!(!format!("{c:?}").contains(long), "not in Debug output");
        c.session_secret_file = Some("/etc/quire/secret".into());
        assert!(c.validate().unwrap_err().to_string().contains("not both"));
    }

    fn trusted_of(cfg: &crate::Config) -> crate::edge::client::TrustedProxies {
        let p = crate::policy::check(cfg);
        assert!(p.is_ok(), "{p:?}");
        crate::policy::trusted_for_tests(cfg)
    }

    #[test]
    fn a_section_with_bad_fields_is_refused() {
        let mut c = ClusterSection::new("http://redis", "a");
        assert!(c.validate().unwrap_err().to_string().contains("redis://"));
        c.redis = "redis://r:6379".into();
        c.node = "a b".into();
        assert!(c.validate().is_err());
        c.node = "a".into();
        c.peers.insert("b".into(), "http://10.0.0.2".into());
        assert!(c.validate().unwrap_err().to_string().contains("this node"));
        c.peers.insert("a".into(), "ftp://x".into());
        assert!(c.validate().is_err());
    }
}
