//! `partition`: one node's link to Redis falls silent for 10 s (held open, nothing
//! forwarded) while purges with `wait=all` run on the other nodes, each followed
//! by every node asked for the URL; then the link heals and every URL purged is
//! asked of every node again (issue 28, items 4 and 5: a partition over 5 s let all
//! three nodes serve old bytes, and the answer silently left the cut-off node out).
//!
//! It fails when an answer after an acknowledgement is stale (the cut-off node
//! included: it must revalidate, not serve what it holds), when an answer given
//! during the silence names the cut-off node `applied` (it cannot have read the
//! entry) or says `all_applied`, or when the node has not caught up within
//! [`CATCH_UP_MAX`] of the healing.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::judge::{check_all, purge_and_check, Tally};
use super::rig::{Ack, Rig, NODES};
use crate::hostile::{Env, Outcome};

/// The node cut off.
const CUT: usize = 2;

/// How long the link stays silent.
const SILENCE: Duration = Duration::from_secs(10);

/// Purges running at once during the silence.
const WORKERS: usize = 3;

/// Longest the healed node may take to say it reads the log again (a bound that
/// separates *catches up* from *never*).
const CATCH_UP_MAX: Duration = Duration::from_secs(30);

/// What the workers share.
#[derive(Debug, Default)]
struct Shared {
    tally: Tally,
    cut_node: Tally,
    /// Answers given during the silence that named the cut-off node `applied`
    /// or said `all_applied`.
    false_acks: u64,
    /// Answers given during the silence that named it not applied.
    acks_naming_cut: u64,
    /// Per URL, the version its last acknowledged purge was for.
    floors: BTreeMap<usize, u32>,
}

pub(crate) async fn partition(env: &Env) -> anyhow::Result<Outcome> {
    let mut o = Outcome::new("partition");
    let rig = Arc::new(Rig::start(env, "partition", &[]).await?);
    let (urls, _) = rig.urls_owned(0, env.scale.pick(9, 30), |_| true).await?;
    for &(i, _) in &urls {
        rig.warm(i).await?;
    }
    let shared = Arc::new(Mutex::new(Shared::default()));
    rig.nodes[CUT].relay.set_silent(true);
    let heal_at = Instant::now() + SILENCE;
    let mut set = tokio::task::JoinSet::new();
    for w in 0..WORKERS {
        let (rig, shared, urls) = (rig.clone(), shared.clone(), urls.clone());
        set.spawn(worker(rig, shared, urls, w, heal_at));
    }
    while set.join_next().await.is_some() {}
    rig.nodes[CUT].relay.set_silent(false);
    match rig.caught_up(CATCH_UP_MAX).await {
        Ok(d) => o.figure("catch_up_after_healing_s", d.as_secs_f64()),
        Err(e) => o.failures.push(format!("{e:#}")),
    }
    let s = std::mem::take(&mut *shared.lock().unwrap_or_else(|e| e.into_inner()));
    let mut after = Tally::default();
    for &(i, owner) in &urls {
        if let Some(&v) = s.floors.get(&i) {
            check_all(&rig, &mut after, i, owner, v).await;
        }
    }
    s.tally.report(&mut o, "during_silence");
    s.cut_node.report(&mut o, "cut_node_during_silence");
    after.report(&mut o, "after_healing");
    o.figure("acks_naming_the_cut_node", s.acks_naming_cut as f64);
    o.figure("false_acks", s.false_acks as f64);
    o.check(s.false_acks == 0, || {
        format!(
            "{} answers during the silence named the cut-off node applied",
            s.false_acks
        )
    });
    o.check(s.acks_naming_cut > 0, || {
        "no purge answered during the silence".into()
    });
    Ok(o)
}

/// Purges URLs in turn (from `w` on, every [`WORKERS`]-th) on a node that is not
/// cut off until the link heals, judging each acknowledgement and every answer.
async fn worker(
    rig: Arc<Rig>,
    shared: Arc<Mutex<Shared>>,
    urls: Vec<(usize, usize)>,
    w: usize,
    heal_at: Instant,
) {
    let cut_name = rig.nodes[CUT].name.clone();
    let mut k = w;
    while Instant::now() < heal_at {
        let (i, owner) = urls[k % urls.len()];
        let at = (CUT + 1 + k % (NODES - 1)) % NODES;
        let (t, ack, version) = purge_and_check(&rig, i, owner, at).await;
        let answered_in_silence = Instant::now() < heal_at;
        record(&shared, &ack, &cut_name, i, version, answered_in_silence, t);
        if ack.ok() && answered_in_silence {
            let mut cut = Tally::default();
            cut.judge(CUT, i, rig.read(CUT, i).await, version);
            shared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .cut_node
                .merge(cut);
        }
        k += WORKERS;
    }
}

/// Counts one purge's acknowledgement and tally into `shared`.
fn record(
    shared: &Mutex<Shared>,
    ack: &Ack,
    cut_name: &str,
    i: usize,
    version: u32,
    in_silence: bool,
    t: Tally,
) {
    let mut s = shared.lock().unwrap_or_else(|e| e.into_inner());
    if ack.ok() {
        s.floors.insert(i, version);
        if in_silence {
            if ack.applied(cut_name) || ack.all_applied {
                s.false_acks += 1;
            } else {
                s.acks_naming_cut += 1;
            }
        }
    }
    s.tally.merge(t);
}
