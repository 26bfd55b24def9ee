//! `quire-cluster`: several quire nodes as one cache — a shared, ordered, durable
//! invalidation log on Redis (or Valkey) Streams that every node applies, and
//! peer fill by rendezvous hashing so the origin sees about one fetch per object.
//!
//! Nothing here runs without `[cluster]` in the configuration: a single node pays
//! nothing for it.
//!
//! - [`bus`]: appending to the log, `wait=all`, heartbeats, the queue of unsafe
//!   methods' invalidations while Redis is down ([`bus::RedisBus`] is the server's
//!   `quire_server::bus::Bus`).
//! - `reader`: applying the log in order, from the saved position; gaps.
//! - [`position`]: the last entry applied, saved beside the volume.
//! - [`wire`]: an invalidation as a stream entry's fields.
//! - [`peer`]: filling from the key's owner ([`peer::PeerFill`], an upstream).
//! - [`publishing`]: sign-outs and view counts shared by `quire serve` nodes.
//! - [`stream_id`]: stream entry ids.
//!
//! Why Redis Streams and not pub/sub: a stream is a log. An entry appended stays
//! (up to `stream_max`), so a node that was down or disconnected reads what it
//! missed from its saved position instead of losing it, and entries come back in
//! one order for every node. Pub/sub delivers only to whoever listens at that
//! moment, which is how purges get lost in the clusters this replaces.

#![forbid(unsafe_code)]

pub mod bus;
pub mod peer;
pub mod position;
pub mod publishing;
mod reader;
pub mod stream_id;
pub mod wire;

use std::collections::HashSet;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use quire_server::bus::{ClusterSection, ClusterSectionError};
use quire_server::Ctx;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

pub use peer::PeerFill;
pub use publishing::{SignOutTable, ViewTotals};

/// Why the cluster could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The Redis URL does not parse.
    #[error("cluster.redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// A peer's URL or the peer client cannot be used.
    #[error("cluster.peers: {0}")]
    Peer(#[from] quire_server::origin::OriginSetupError),
    /// The section is invalid.
    #[error("cluster: {0}")]
    Config(ClusterSectionError),
    /// The server has a bus already (the cluster was started on it twice).
    #[error("cluster: a bus is attached to this server already")]
    Attached,
}

/// A running cluster membership: the bus attached to the server, the reader and
/// the heartbeat running until [`Cluster::stop`] (or the runtime's end).
#[derive(Debug)]
pub struct Cluster {
    /// The bus (also attached to the server).
    pub bus: Arc<bus::RedisBus>,
    stop: tokio::sync::watch::Sender<bool>,
    reader: tokio::task::JoinHandle<()>,
}

/// Longest a starting node waits to apply what it missed before it serves.
pub const CATCH_UP_WAIT: Duration = Duration::from_secs(5);

/// A connection manager for `url` whose calls fail after `timeout` (a Redis that
/// is down fails a purge quickly; it connects lazily and reconnects on use).
fn manager(url: &str, timeout: Duration) -> Result<ConnectionManager, redis::RedisError> {
    let client = redis::Client::open(url)?;
    let cfg = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(1)
        .set_max_delay(Duration::from_millis(500));
    ConnectionManager::new_lazy_with_config(client, cfg)
}

/// The addresses of the cluster's peers, whose peer requests this node honours:
/// those their URLs name, and what their host names resolve to now (once, at
/// start; a name that does not resolve adds nothing and is logged).
async fn peer_addresses(section: &ClusterSection) -> HashSet<IpAddr> {
    let mut addrs: HashSet<IpAddr> = section.peer_addresses().into_iter().collect();
    for url in section.peers.values() {
        let Ok(origin) = quire_server::origin::Origin::parse(url) else {
            continue;
        };
        let host = origin.host().trim_matches(['[', ']']).to_owned();
        if host.parse::<IpAddr>().is_ok() {
            continue;
        }
        match tokio::net::lookup_host(format!("{host}:0")).await {
            Ok(found) => addrs.extend(found.map(|a| a.ip())),
            Err(e) => {
                tracing::warn!(peer = %host, error = %e, "cluster: a peer's name does not resolve: its peer requests are not honoured")
            }
        }
    }
    addrs
}

impl Cluster {
    /// Joins the cluster `section` describes with the server `ctx`, whose volume is
    /// at `volume`: attaches the bus, applies what the log holds past the saved
    /// position (for at most [`CATCH_UP_WAIT`]; past it, everything held is
    /// revalidated once), then leaves the reader and the heartbeat running. Call it
    /// before the server takes requests, inside a tokio runtime.
    pub async fn start(
        ctx: &Arc<Ctx>,
        section: &ClusterSection,
        volume: &Path,
    ) -> Result<Cluster, ClusterError> {
        Cluster::start_with(ctx, section, volume, None).await
    }

    /// [`Cluster::start`] for a publishing node: `sessions` gets the cluster's
    /// sign-out table before the node serves (when Redis answers in time), again on
    /// every reconnect, and each sign-out read from the log (see [`publishing`]).
    pub async fn start_with(
        ctx: &Arc<Ctx>,
        section: &ClusterSection,
        volume: &Path,
        sessions: Option<Arc<dyn SignOutTable>>,
    ) -> Result<Cluster, ClusterError> {
        section.validate().map_err(ClusterError::Config)?;
        let conn = manager(&section.redis, Duration::from_secs(1))?;
        let bus = Arc::new(bus::RedisBus::new(
            &section.node,
            &section.stream,
            section.stream_max,
            conn,
            peer_addresses(section).await,
            section.peers.keys().cloned().collect(),
        ));
        let dyn_bus: Arc<dyn quire_server::bus::Bus> = bus.clone();
        if !ctx.attach_bus(dyn_bus.clone()) {
            return Err(ClusterError::Attached);
        }
        ctx.origin.attach_bus(&dyn_bus);
        let path = position::path_for(volume);
        let mut reader = reader::Reader {
            bus: bus.clone(),
            ctx: ctx.clone(),
            pos: position::load(&path),
            path,
            conn: manager(&section.redis, reader::BLOCK + Duration::from_secs(2))?,
            connected: false,
            sessions: sessions.clone(),
            epoch: None,
        };
        reader.catch_up(CATCH_UP_WAIT).await;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let reader = tokio::spawn(reader.run(stopped));
        bus::spawn_background(&bus);
        reader::watch(&bus, ctx, sessions);
        Ok(Cluster { bus, stop, reader })
    }

    /// Stops the reader at its next wait and waits for it, and leaves the live set
    /// (`wait=all` stops waiting for this node): the server's state is then no
    /// longer held by the cluster. A batch cut short is not saved as
    /// applied, so it is applied again on the next start.
    pub async fn stop(self) {
        self.stop.send_replace(true);
        let _ = self.reader.await;
        self.bus.leave().await;
    }
}
