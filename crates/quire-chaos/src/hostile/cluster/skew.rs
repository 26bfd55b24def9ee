//! `clock_skew`: two of the three nodes run with their wall clock off, one 10 s
//! behind and one 10 s ahead (libfaketime preloaded, `FAKETIME=-10s` / `+10s`; the
//! monotonic clock is left alone), and URLs are changed, purged with `wait=all` on
//! the node whose clock is right, and asked of every node (issue 28, item 5: a node
//! whose clock was 10 s behind was never counted live, so `wait=all` never waited
//! for it, and it served old bytes after the acknowledgement).
//!
//! It fails on a stale answer, or on an acknowledgement that does not name both
//! skewed nodes `applied` (they are connected and keeping up: liveness comes from
//! Redis's `TIME`, so their clocks must not matter). Without libfaketime (Debian's
//! `faketime` package) the case is skipped with that reason: a process's clock
//! cannot be moved without root otherwise; the cluster model test
//! (`crates/quire-cluster/tests/model.rs`) covers skew in-process either way.
//!
//! The skew is checked, not assumed: each skewed node's `Date` field must be off
//! from the runner's clock by about the offset, or the case fails.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::judge::batch;
use super::rig::{libfaketime, NodeOpts, Rig};
use crate::content::HOST;
use crate::hostile::{Env, Outcome};

/// Each node's clock offset, seconds (node 0, where purges are sent, is right).
const OFFSETS_S: [i64; 3] = [0, -10, 10];

pub(crate) async fn clock_skew(env: &Env) -> anyhow::Result<Outcome> {
    let mut o = Outcome::new("clock_skew");
    let Some(lib) = libfaketime() else {
        o.skipped = Some(
            "libfaketime is not installed (apt-get install faketime); the model test covers skew"
                .into(),
        );
        return Ok(o);
    };
    let opts: Vec<NodeOpts> = OFFSETS_S
        .iter()
        .map(|&s| NodeOpts {
            faketime: (s != 0).then(|| (lib.clone(), format!("{s:+}s"))),
        })
        .collect();
    let rig = Arc::new(Rig::start(env, "clock_skew", &opts).await?);
    for (n, &want) in OFFSETS_S.iter().enumerate() {
        let off = date_offset_s(&rig, n).await?;
        o.figure(&format!("n{n}.clock_offset_s"), off as f64);
        o.check((off - want).abs() <= 2, || {
            format!("n{n}'s clock is {off:+} s off, not {want:+} s: the skew did not take")
        });
    }
    let (urls, _) = rig.urls_owned(0, env.scale.pick(6, 30), |_| true).await?;
    for &(i, _) in &urls {
        rig.warm(i).await?;
    }
    let mut all = super::judge::Tally::default();
    let mut missing = 0;
    for group in urls.chunks(6) {
        let (t, acks) = batch(&rig, group, |_, _| 0).await;
        all.merge(t);
        missing += acks
            .iter()
            .filter(|a| a.ok() && !(a.applied("n1") && a.applied("n2")))
            .count();
    }
    all.report(&mut o, "skewed");
    o.figure("acks_without_a_skewed_node", missing as f64);
    o.check(missing == 0, || {
        format!("{missing} acknowledgements did not name a skewed node applied")
    });
    Ok(o)
}

/// How far node `n`'s `Date` field is from the runner's clock, whole seconds (of
/// `/_quire/health`, answered by the node itself: a fill could carry a peer's).
async fn date_offset_s(rig: &Rig, n: usize) -> anyhow::Result<i64> {
    let mut conn = crate::client::Conn::connect(rig.nodes[n].addr, crate::client::Proto::H1, None)
        .await
        .map_err(|f| anyhow::anyhow!("connecting to n{n}: {}", f.name()))?;
    let r = conn
        .send(
            http::Method::GET,
            "/_quire/health",
            HOST,
            &[],
            bytes::Bytes::new(),
            None,
        )
        .await
        .map_err(|f| anyhow::anyhow!("GET on n{n}: {}", f.name()))?;
    let theirs = r
        .header("date")
        .and_then(|d| httpdate::parse_http_date(d).ok())
        .ok_or_else(|| anyhow::anyhow!("n{n}: no Date field"))?;
    let secs = |t: SystemTime| {
        let d = t
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
    };
    Ok(secs(theirs) - secs(SystemTime::now()))
}
