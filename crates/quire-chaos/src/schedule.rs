//! When things go wrong: the seeded timetable of a run's SIGKILLs and origin faults.
//! Pure functions of the seed and the run's length, so a seed names a run.
//!
//! Key decisions:
//! - **Chaos lives in the middle 80 % of a run.** The first 10 % warms the cache, the
//!   last 10 % is quiet, so the run ends on a healthy system whose final answers must
//!   all be right.
//! - **Kills are spread, not clustered**: one per equal slot, jittered within the
//!   middle third of the slot, so every restart gets load before the next kill.
//! - **Faults cycle through every kind** in a seeded order, so even a short run sees
//!   each kind once.

use std::time::Duration;

use serde::Serialize;

use crate::content::SplitMix;

/// A fault the origin can be told to show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum FaultKind {
    /// The listener is closed and open connections dropped: connection refused.
    Down,
    /// Up to 3 s before the head, then the body trickled in small pieces.
    Slow,
    /// The head and half the body, then a TCP reset.
    Reset,
    /// A garbage head, or a chunked body with a broken chunk.
    Malformed,
}

impl FaultKind {
    /// Every kind.
    pub(crate) const ALL: [FaultKind; 4] = [
        FaultKind::Down,
        FaultKind::Slow,
        FaultKind::Reset,
        FaultKind::Malformed,
    ];

    /// The kind's name in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            FaultKind::Down => "down",
            FaultKind::Slow => "slow",
            FaultKind::Reset => "reset",
            FaultKind::Malformed => "malformed",
        }
    }
}

/// One fault: a kind over a span of the run (offsets from its start).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Window {
    /// The fault.
    pub(crate) kind: FaultKind,
    /// When it starts.
    pub(crate) start: Duration,
    /// When it ends.
    pub(crate) end: Duration,
}

/// How long each fault lasts.
const FAULT_SECS: u64 = 3;

/// What a fault's effects may outlast it by: quire's origin read timeout (2 s, set by
/// the runner) and a second.
pub(crate) const FAULT_GRACE: Duration = Duration::from_secs(3);

/// The span where chaos happens: the middle 80 % of `run`.
fn chaos_span(run: Duration) -> (Duration, Duration) {
    (run / 10, run * 9 / 10)
}

/// `n` instants spread over `[from, to)`, one per equal slot, jittered within the
/// slot's middle third.
fn spread(rng: &mut SplitMix, (from, to): (Duration, Duration), n: usize) -> Vec<Duration> {
    let slot = (to - from) / n.max(1) as u32;
    let third_ms = (slot.as_millis() / 3).max(1) as u64;
    (0..n)
        .map(|k| from + slot * k as u32 + Duration::from_millis(third_ms + rng.below(third_ms)))
        .collect()
}

/// When to SIGKILL quire: `kills` instants in a run of `run`.
pub(crate) fn kill_times(seed: u64, run: Duration, kills: usize) -> Vec<Duration> {
    let mut rng = SplitMix(seed ^ 0x6b69_6c6c);
    spread(&mut rng, chaos_span(run), kills)
}

/// The origin's faults in a run of `run`: one per 15 s, at least one of each kind,
/// between 10 % and 80 % of the run (so the last one's effects end before the quiet
/// tail), each with its grace clear of the next when the run is long enough (40 s).
pub(crate) fn fault_windows(seed: u64, run: Duration) -> Vec<Window> {
    let mut rng = SplitMix(seed ^ 0x6661_756c);
    let n = ((run.as_secs() / 15) as usize).max(FaultKind::ALL.len());
    let mut order = FaultKind::ALL;
    for k in (1..order.len()).rev() {
        order.swap(k, rng.below(k as u64 + 1) as usize);
    }
    let (from, to) = (run / 10, run * 8 / 10);
    let slot = (to - from) / n as u32;
    let len = Duration::from_secs(FAULT_SECS);
    let room_ms = slot.saturating_sub(len + FAULT_GRACE).as_millis() as u64;
    (0..n)
        .map(|k| {
            let start = from + slot * k as u32 + Duration::from_millis(rng.below(room_ms + 1));
            Window {
                kind: order[k % order.len()],
                start,
                end: start + len,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_names_a_timetable_inside_the_chaos_span() {
        let run = Duration::from_secs(60);
        let kills = kill_times(9, run, 5);
        assert_eq!(kills, kill_times(9, run, 5));
        assert_eq!(kills.len(), 5);
        assert!(kills.windows(2).all(|w| w[0] < w[1]));
        assert!(kills.iter().all(|&k| k >= run / 10 && k <= run * 9 / 10));
    }

    #[test]
    fn every_fault_kind_appears_and_windows_do_not_overlap() {
        let windows = fault_windows(3, Duration::from_secs(40));
        for kind in FaultKind::ALL {
            assert!(windows.iter().any(|w| w.kind == kind));
        }
        assert!(windows
            .windows(2)
            .all(|w| w[0].end + FAULT_GRACE <= w[1].start));
        assert!(windows
            .iter()
            .all(|w| w.end + FAULT_GRACE <= Duration::from_secs(32)));
        assert_eq!(fault_windows(3, Duration::from_secs(600)).len(), 40);
    }
}
