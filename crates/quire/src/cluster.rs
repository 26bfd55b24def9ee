//! `[cluster]` for `quire proxy` and `quire serve`: peer fill around the origin,
//! and joining the invalidation log before the server takes requests (see the
//! `quire-cluster` crate). Without `[cluster]` neither does anything.

use std::sync::Arc;

use quire_cluster::{Cluster, PeerFill};
use quire_server::origin::OriginOptions;
use quire_server::upstream::Upstream;
use quire_server::{Config, Ctx, StartError};

/// `upstream` behind peer fill when `cfg` names a cluster with peers.
pub(crate) fn with_peer_fill(
    upstream: Arc<dyn Upstream>,
    cfg: &Config,
) -> Result<Arc<dyn Upstream>, StartError> {
    let Some(c) = cfg.cluster.as_ref().filter(|c| !c.peers.is_empty()) else {
        return Ok(upstream);
    };
    let opts = OriginOptions::from_config(cfg);
    let fill = PeerFill::new(upstream, &c.node, &c.peers, c.peer_timeout.0, &opts)?;
    Ok(Arc::new(fill))
}

/// Joins the cluster `cfg` names: applies what the log holds past this volume's
/// position, then keeps reading it. `None` without `[cluster]`.
pub(crate) async fn join(ctx: &Arc<Ctx>, cfg: &Config) -> anyhow::Result<Option<Cluster>> {
    let Some(section) = &cfg.cluster else {
        return Ok(None);
    };
    let c = Cluster::start(ctx, section, &cfg.cache.path).await?;
    eprintln!(
        "quire: cluster node {} on {} (stream {})",
        section.node, section.redis, section.stream
    );
    Ok(Some(c))
}
