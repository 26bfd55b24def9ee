//! Scenario 6, warm restart: run a read-mostly Zipf stream, measure the hit ratio over a
//! fixed segment of it, close the engine, reopen the same volume, replay the same
//! segment and measure again. A warm restart keeps the ratio (after/before near 1); a
//! cold one falls to what the segment's own refills give back.

use std::time::{Duration, Instant};

use super::content::SizeModel;
use super::mixed::{OpStats, Versions, Worker};
use super::tally::Tally;
use super::workload::Op;
use quire_store::{Engine, Result, Stats};

/// What the restart scenario saw.
#[derive(Debug, Clone)]
pub(crate) struct Restart {
    pub before: OpStats,
    pub after: OpStats,
    pub stats_before: Stats,
    pub stats_after_open: Stats,
    pub close_time: Duration,
    pub reopen_time: Duration,
}

impl Restart {
    pub(crate) fn hit_ratio_before(&self) -> f64 {
        self.before.hit_ratio()
    }
    pub(crate) fn hit_ratio_after(&self) -> f64 {
        self.after.hit_ratio()
    }
}

/// Opens with `open`, runs `warmup` then `segment` (counted), closes with `close`,
/// reopens with `open`, replays `segment` (counted) and closes again. Every hit after the reopen is
/// checked byte for byte; before it, one in `check_every`.
#[expect(
    clippy::too_many_arguments,
    reason = "a scenario's knobs, each named by the driver that sets it; a struct would be built only to be taken apart here"
)]
pub(crate) fn run<E: Engine>(
    open: impl Fn() -> Result<E>,
    close: impl Fn(E) -> Result<()>,
    warmup: &[Op],
    segment: &[Op],
    sizes: &SizeModel,
    versions: &Versions,
    check_every: u64,
    tally: &Tally,
) -> Result<Restart> {
    let engine = open()?;
    let mut w = Worker::new(&engine, sizes, versions, tally, "restart", check_every);
    for &op in warmup {
        w.run(op);
    }
    w.stats = OpStats::default();
    for &op in segment {
        w.run(op);
    }
    let before = std::mem::take(&mut w.stats);
    drop(w);
    let stats_before = engine.stats();
    let t0 = Instant::now();
    close(engine)?;
    let close_time = t0.elapsed();

    let t0 = Instant::now();
    let engine = open()?;
    let reopen_time = t0.elapsed();
    let stats_after_open = engine.stats();
    let mut w = Worker::new(&engine, sizes, versions, tally, "restart (reopened)", 1);
    for &op in segment {
        w.run(op);
    }
    let after = std::mem::take(&mut w.stats);
    drop(w);
    close(engine)?;
    Ok(Restart {
        before,
        after,
        stats_before,
        stats_after_open,
        close_time,
        reopen_time,
    })
}
