//! `[cluster]` for `quire proxy` and `quire serve`: peer fill around the origin,
//! joining the invalidation log before the server takes requests, and for
//! `quire serve` the sessions and view counts the nodes share (see the
//! `quire-cluster` crate and `quire_site::shared`). Without `[cluster]` none of
//! it does anything.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use quire_cluster::bus::RedisBus;
use quire_cluster::{Cluster, PeerFill, SignOutTable, ViewTotals};
use quire_server::bus::SESSION_SECRET_LEN_MIN;
use quire_server::origin::OriginOptions;
use quire_server::upstream::Upstream;
use quire_server::{Config, Ctx, StartError};
use quire_site::shared::{SessionMode, Shared, SharedError, SharedErrorKind};
use quire_site::Site;
use quire_vault::views::ViewSink;

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

/// How `quire serve` keeps sessions under `cfg`: shared by the cluster, signed
/// with its secret (from the configuration, or the file it names), or the vault's
/// own without `[cluster]`.
pub(crate) fn session_mode(cfg: &Config) -> anyhow::Result<SessionMode> {
    let Some(c) = &cfg.cluster else {
        return Ok(SessionMode::Local);
    };
    let secret = match (&c.session_secret, &c.session_secret_file) {
        (Some(s), _) => Some(s.0.trim().as_bytes().to_vec()),
        (None, Some(path)) => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("cluster.session_secret_file {}", path.display()))?;
            let secret = bytes.trim_ascii().to_vec();
            if secret.len() < SESSION_SECRET_LEN_MIN {
                anyhow::bail!(
                    "cluster.session_secret_file {}: it holds {} bytes; it needs \
                     {SESSION_SECRET_LEN_MIN} or more random bytes (e.g. `openssl rand -hex 32`)",
                    path.display(),
                    secret.len()
                );
            }
            Some(secret)
        }
        (None, None) => {
            eprintln!(
                "quire: cluster sessions are signed with this vault's .quire/secret: a reader \
                 signed in here is signed in on another node only if its vault holds the same \
                 file (or set cluster.session_secret_file)"
            );
            None
        }
    };
    Ok(SessionMode::Cluster { secret })
}

/// Joins the cluster as a publishing node: [`join`], with the site's sessions
/// kept by the cluster and its views added to the cluster's totals.
pub(crate) async fn join_site(
    ctx: &Arc<Ctx>,
    cfg: &Config,
    site: &Site,
) -> anyhow::Result<Option<Cluster>> {
    let Some(section) = &cfg.cluster else {
        return Ok(None);
    };
    let sessions: Arc<dyn SignOutTable> = Arc::new(SiteSessions(site.clone()));
    let c = Cluster::start_with(ctx, section, &cfg.cache.path, Some(sessions)).await?;
    let totals = ViewTotals::start(&c.bus);
    site.views()
        .share_with(Arc::new(ViewsToCluster(totals.clone())));
    site.share_with(Arc::new(SiteLink {
        bus: c.bus.clone(),
        totals,
        rt: tokio::runtime::Handle::current(),
    }));
    eprintln!(
        "quire: cluster node {} on {} (stream {}; sessions and views shared)",
        section.node, section.redis, section.stream
    );
    Ok(Some(c))
}

/// Longest a sign-out or `/_views` waits for Redis.
const SHARED_WAIT: Duration = Duration::from_secs(2);

/// The site's sessions, as the cluster updates them.
struct SiteSessions(Site);

impl SignOutTable for SiteSessions {
    fn adopt(&self, epoch: u64, generations: HashMap<String, u64>) {
        self.0.sessions().adopt_sign_outs(epoch, generations);
    }

    fn raise(&self, name: &str, generation: u64) {
        self.0.sessions().raise_sign_out(name, generation);
    }
}

/// The site's views, on their way to the cluster's totals.
struct ViewsToCluster(Arc<ViewTotals>);

impl ViewSink for ViewsToCluster {
    fn add(&self, batch: &[(Arc<str>, u64)]) {
        self.0.add(batch.iter().map(|(path, n)| (&**path, *n)));
    }
}

/// The cluster, as the site asks it (from the blocking pool).
#[derive(Debug)]
struct SiteLink {
    bus: Arc<RedisBus>,
    totals: Arc<ViewTotals>,
    rt: tokio::runtime::Handle,
}

impl SiteLink {
    fn wait<T, E: std::fmt::Display>(
        &self,
        f: impl std::future::Future<Output = Result<T, E>>,
    ) -> Result<T, SharedError> {
        match self.rt.block_on(tokio::time::timeout(SHARED_WAIT, f)) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(SharedError::new(
                SharedErrorKind::Unavailable,
                format!("bus: {e}"),
            )),
            Err(_) => Err(SharedError::new(
                SharedErrorKind::Timeout,
                format!("bus: no answer within {SHARED_WAIT:?}"),
            )),
        }
    }
}

impl Shared for SiteLink {
    fn sign_out(&self, name: &str) -> Result<u64, SharedError> {
        self.wait(self.bus.sign_out(name))
    }

    fn view_totals(&self) -> Result<Vec<(String, u64)>, SharedError> {
        self.wait(async {
            self.totals.push().await;
            self.bus.view_totals().await
        })
    }
}
