//! `redis_loss`: Redis loses the log under the nodes, twice: `FLUSHALL`, then a
//! crash and a restart with no persistence, each time after an entry with an id
//! far in the future that every node has applied, so the ids Redis assigns next
//! are lower than every position the nodes hold (issue 28, item 5: later purges
//! were skipped while `wait=all` reported them applied). After each loss, URLs are
//! changed at the origin and purged with `wait=all`, and every node is asked for
//! them; after a settle, every URL purged is asked of every node again.
//!
//! It fails on a stale answer after an acknowledgement, on a node that did not
//! count the loss as a gap (`quire_cluster_revalidate_all_total` unchanged: it
//! cannot have known what it missed), and on a purge that is refused for longer
//! than [`RETRIES`] tries once Redis answers again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::judge::{check_all, not_owner, purge_and_check, Tally};
use super::rig::{Rig, NODES};
use crate::hostile::{Env, Outcome};

/// The log's key (the default `stream`).
const STREAM: &str = "quire:invalidations";

/// Tries of one purge after a loss (Redis restarting refuses the first ones).
const RETRIES: usize = 50;

/// How the log is lost.
#[derive(Debug, Clone, Copy)]
enum Loss {
    FlushAll,
    Restart,
}

pub(crate) async fn redis_loss(env: &Env) -> anyhow::Result<Outcome> {
    let mut o = Outcome::new("redis_loss");
    let rig = Arc::new(Rig::start(env, "redis_loss", &[]).await?);
    let per = env.scale.pick(4, 20);
    let (urls, _) = rig.urls_owned(0, per * 2, |_| true).await?;
    for &(i, _) in &urls {
        rig.warm(i).await?;
    }
    let mut floors = BTreeMap::new();
    for (k, loss) in [Loss::FlushAll, Loss::Restart].into_iter().enumerate() {
        let gaps_before = gaps(&rig).await?;
        lose(&rig, loss).await?;
        let mut t = Tally::default();
        for (j, &(i, owner)) in urls[k * per..(k + 1) * per].iter().enumerate() {
            if let Some(v) = purge_until_taken(&rig, &mut t, i, owner, j).await {
                floors.insert((i, owner), v);
            }
        }
        let prefix = match loss {
            Loss::FlushAll => "flushall",
            Loss::Restart => "restart",
        };
        t.report(&mut o, prefix);
        let gaps_after = gaps(&rig).await?;
        for n in 0..NODES {
            o.check(gaps_after[n] > gaps_before[n], || {
                format!("{prefix}: n{n} did not count the lost log as a gap")
            });
        }
    }
    // Every node has read the new log for a while: nothing purged comes back.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut after = Tally::default();
    for (&(i, owner), &v) in &floors {
        check_all(&rig, &mut after, i, owner, v).await;
    }
    after.report(&mut o, "after_settling");
    Ok(o)
}

/// Each node's `quire_cluster_revalidate_all_total`.
async fn gaps(rig: &Rig) -> anyhow::Result<Vec<f64>> {
    let mut out = Vec::new();
    for n in 0..NODES {
        out.push(rig.metric(n, "quire_cluster_revalidate_all_total").await?);
    }
    Ok(out)
}

/// An entry far in the future that every node applies, then the log lost.
async fn lose(rig: &Rig, loss: Loss) -> anyhow::Result<()> {
    let mut redis = rig.redis.lock().await;
    let fields = [
        "v", "1", "node", "x", "op", "purge", "soft", "0", "targets", "[]",
    ];
    let mut args = vec!["XADD", STREAM, "99999999999999-*"];
    args.extend(fields);
    redis.cli(&args).await?;
    // Every node reads it (a blocking read wakes at once; a second is plenty).
    tokio::time::sleep(Duration::from_secs(1)).await;
    match loss {
        Loss::FlushAll => {
            redis.cli(&["FLUSHALL"]).await?;
        }
        Loss::Restart => redis.restart().await?,
    }
    Ok(())
}

/// [`purge_and_check`] of URL `i` on a node other than its owner until a purge is
/// taken (at most [`RETRIES`] tries); the version the taken purge was for.
async fn purge_until_taken(
    rig: &Rig,
    t: &mut Tally,
    i: usize,
    owner: usize,
    j: usize,
) -> Option<u32> {
    for _ in 0..RETRIES {
        let (one, ack, version) = purge_and_check(rig, i, owner, not_owner(owner, j)).await;
        t.merge(one);
        if ack.ok() {
            return Some(version);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    t.errors += 1;
    t.example(format!("no purge of URL {i} was taken in {RETRIES} tries"));
    None
}
