//! `quire-chaos hostile --suite cluster`: the cluster attacks of issue 28 (a key's
//! owner lagging behind the invalidation log, a node partitioned from Redis, Redis
//! losing the log, nodes whose clocks are wrong) against three real `quire proxy`
//! nodes with `[cluster]` and peer fill, a real `redis-server` and the chaos origin,
//! with a relay between each node and Redis that can slow or silence its link
//! ([`rig`], [`relay`]).
//!
//! Every case holds the same promise, judged the same way ([`judge`]): after a purge
//! with `wait=all` is acknowledged, no node answers with the bytes it removed, a hit
//! or not, whatever the lagging or cut-off node holds; an acknowledgement names every
//! node that did not confirm.
//!
//! Key decisions:
//! - **A case starts its own Redis, origin and nodes**, like the proxy suite's cases,
//!   so one can be run alone (`--case NAME`) and none inherits another's log.
//! - **No `redis-server` is a skip, said out loud**: every case is reported skipped
//!   with the reason, and the suite passes without judging anything (CI installs it).

mod judge;
mod lag;
mod loss;
mod partition;
mod redis;
mod relay;
mod rig;
mod skew;

use super::{Env, Outcome};

/// Every cluster case by name, in the order they run.
pub(crate) const CASES: &[&str] = &["owner_lag", "partition", "redis_loss", "clock_skew"];

/// Runs one case by name.
pub(crate) async fn run_case(env: &Env, name: &str) -> anyhow::Result<Outcome> {
    if let Err(why) = redis::Redis::installed() {
        let mut o = Outcome::new(name);
        o.skipped = Some(why);
        return Ok(o);
    }
    match name {
        "owner_lag" => lag::owner_lag(env).await,
        "partition" => partition::partition(env).await,
        "redis_loss" => loss::redis_loss(env).await,
        "clock_skew" => skew::clock_skew(env).await,
        other => anyhow::bail!("no case {other:?}; the cases: {}", CASES.join(", ")),
    }
}
