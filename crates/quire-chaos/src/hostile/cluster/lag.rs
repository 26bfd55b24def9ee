//! `owner_lag`: the owner of every URL checked is one node whose link to Redis
//! gains 0, 1, 2 and then 5 s per round trip; at each lag, URLs it owns are
//! held by every node, changed at the origin, purged with `wait=all` on another
//! node, and asked of every node right after the answer (issue 28, item 4: with
//! the owner a second or two behind, the others refilled the old copy from it and
//! served it as a hit).
//!
//! Key decision: **one lag at a time, set before the URLs are warmed**, and the
//! purges of one lag run at once, so `wait=all` meets an owner that is behind on
//! every exchange with Redis, its heartbeats included, not only on one read.

use std::sync::Arc;
use std::time::Duration;

use super::judge::{batch, not_owner};
use super::rig::Rig;
use crate::hostile::{Env, Outcome};

/// The node whose link lags (and which owns every URL checked).
const LAGGING: usize = 1;

/// The lags tried, seconds per round trip.
const LAGS_S: [u64; 4] = [0, 1, 2, 5];

pub(crate) async fn owner_lag(env: &Env) -> anyhow::Result<Outcome> {
    let mut o = Outcome::new("owner_lag");
    let rig = Arc::new(Rig::start(env, "owner_lag", &[]).await?);
    // Six answers per URL: 24 URLs per lag check 576 answers at full scale.
    let per_lag = env.scale.pick(4, 24);
    let (urls, _) = rig
        .urls_owned(0, per_lag * LAGS_S.len(), |owner| owner == LAGGING)
        .await?;
    let name = &rig.nodes[LAGGING].name;
    for (k, lag_s) in LAGS_S.into_iter().enumerate() {
        let lag = Duration::from_secs(lag_s);
        rig.nodes[LAGGING].relay.set_lag(lag);
        // Long enough for every exchange in flight to have met the lag.
        tokio::time::sleep(lag + Duration::from_millis(500)).await;
        let mine = &urls[k * per_lag..(k + 1) * per_lag];
        for &(i, _) in mine {
            rig.warm(i).await?;
        }
        let (tally, acks) = batch(&rig, mine, not_owner).await;
        let prefix = format!("lag_{lag_s}s");
        tally.report(&mut o, &prefix);
        let waited_for = acks.iter().filter(|a| a.applied(name)).count();
        o.figure(
            &format!("{prefix}.acks_with_owner_applied"),
            waited_for as f64,
        );
    }
    rig.nodes[LAGGING].relay.set_lag(Duration::ZERO);
    Ok(o)
}
