//! The RAM-tier comparison (quire only): the same warm reads against two engines filled
//! alike, one without a RAM tier and one with a tier big enough for every object. For
//! each thread count the timed reads are cut into rounds that alternate off, on, on,
//! off, off, on, ... so that drift on the machine (other work starting or stopping)
//! hits both alike; the rounds' own on/off ratios show how steady the comparison was.
//!
//! The tier copies an entry into RAM on its second hit, so [`warm_up`] gets every object
//! twice (untimed) before the timed reads; [`compare`] then reads the share of the timed
//! hits the tier served from the engine's counters.

use std::time::Duration;

use super::content;
use super::tally::Tally;
use super::warm::{self, Reads};
use quire_store::{Engine, Stats};

/// One thread count of the comparison.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Compared {
    /// All rounds of each engine added up.
    pub off: Reads,
    pub on: Reads,
    /// Hits the tier-on engine served from RAM during its timed reads, over all its
    /// hits then.
    pub ram_hit_share: f64,
    /// on / off of each round.
    pub round_ratios: Vec<f64>,
}

impl Compared {
    /// Gets per second with the tier on over with it off (0 when off did nothing).
    pub(crate) fn on_over_off(&self) -> f64 {
        on_over_off(self.on.ops_per_sec(), self.off.ops_per_sec())
    }

    /// The lowest and highest on/off of the rounds ((0, 0) without rounds).
    pub(crate) fn round_range(&self) -> (f64, f64) {
        let r = &self.round_ratios;
        if r.is_empty() {
            return (0.0, 0.0);
        }
        let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = r.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        (lo, hi)
    }
}

/// `on / off`, or 0 when `off` is not positive.
pub(crate) fn on_over_off(on: f64, off: f64) -> f64 {
    if off > 0.0 && on.is_finite() {
        on / off
    } else {
        0.0
    }
}

/// The share of the hits between two snapshots of an engine's counters that were served
/// from RAM (0 when there were no hits).
pub(crate) fn ram_hit_share(before: &Stats, after: &Stats) -> f64 {
    let hits = after.hits.saturating_sub(before.hits);
    let ram = after.ram_hits.saturating_sub(before.ram_hits);
    if hits == 0 {
        0.0
    } else {
        ram as f64 / hits as f64
    }
}

/// Gets every object `0..objects` twice, in order (a second hit is what promotes an
/// entry into the RAM tier), checking every hit byte for byte. Returns the hits.
pub(crate) fn warm_up<E: Engine>(engine: &E, objects: usize, size: usize, tally: &Tally) -> u64 {
    let mut hits = 0;
    let mut key = Vec::new();
    for _ in 0..2 {
        for id in 0..objects as u64 {
            content::write_key(&mut key, id);
            if let Some(entry) = engine.get(&key) {
                hits += 1;
                if let Err(what) = content::verify_entry(&entry, id, Some(size), true) {
                    tally.mismatch(engine.name(), "ram_tier warm-up", what);
                }
            }
        }
    }
    hits
}

/// Two read phases of the same engine and threads added up: their ops, hits and time.
pub(crate) fn add(a: &Reads, b: &Reads) -> Reads {
    Reads {
        threads: a.threads.max(b.threads),
        ops: a.ops + b.ops,
        hits: a.hits + b.hits,
        elapsed: a.elapsed + b.elapsed,
    }
}

/// Whether round `round` reads the tier-on engine first: off-on, on-off, off-on, ...
/// (an off-on-on-off pattern, which cancels a steady drift between pairs of rounds).
pub(crate) fn on_first(round: usize) -> bool {
    round % 2 == 1
}

/// Timed warm reads with `threads` threads of `off` and of `on` (both filled with
/// objects `0..objects` of `size` bytes and warmed up), each for `duration` in all, cut
/// into `rounds` alternating rounds (see [`on_first`]).
#[expect(
    clippy::too_many_arguments,
    reason = "a scenario's knobs, each named by the driver that sets it; a struct would be built only to be taken apart here"
)]
pub(crate) fn compare<E: Engine>(
    off: &E,
    on: &E,
    objects: usize,
    size: usize,
    threads: usize,
    duration: Duration,
    rounds: usize,
    check_every: u64,
    tally: &Tally,
) -> Compared {
    let rounds = rounds.max(1);
    let slice = duration / rounds as u32;
    let read = |e: &E| warm::reads(e, objects, size, threads, slice, check_every, tally);
    let zero = Reads {
        threads,
        ops: 0,
        hits: 0,
        elapsed: Duration::ZERO,
    };
    let (mut off_all, mut on_all) = (zero, zero);
    let mut round_ratios = Vec::with_capacity(rounds);
    // The off engine's reads do not touch the on engine's counters.
    let before = on.stats();
    for round in 0..rounds {
        let (off_r, on_r) = if on_first(round) {
            let n = read(on);
            (read(off), n)
        } else {
            let o = read(off);
            (o, read(on))
        };
        round_ratios.push(on_over_off(on_r.ops_per_sec(), off_r.ops_per_sec()));
        off_all = add(&off_all, &off_r);
        on_all = add(&on_all, &on_r);
    }
    let after = on.stats();
    Compared {
        off: off_all,
        on: on_all,
        ram_hit_share: ram_hit_share(&before, &after),
        round_ratios,
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::MapEngine;
    use super::*;
    use quire_store::{Options, Store};

    #[test]
    fn ratio_and_share_arithmetic() {
        assert_eq!(on_over_off(3.0, 2.0), 1.5);
        assert_eq!(on_over_off(3.0, 0.0), 0.0);
        assert_eq!(on_over_off(f64::NAN, 2.0), 0.0);
        let before = Stats {
            hits: 100,
            ram_hits: 10,
            ..Stats::default()
        };
        let after = Stats {
            hits: 300,
            ram_hits: 160,
            ..Stats::default()
        };
        // Only the hits between the snapshots count: 150 of 200.
        assert_eq!(ram_hit_share(&before, &after), 0.75);
        assert_eq!(ram_hit_share(&after, &after), 0.0);
        assert_eq!(ram_hit_share(&Stats::default(), &before), 0.1);

        let r = |ops, hits, ms| Reads {
            threads: 2,
            ops,
            hits,
            elapsed: Duration::from_millis(ms),
        };
        let sum = add(&r(300, 200, 100), &r(100, 100, 300));
        assert_eq!(sum, r(400, 300, 400));
        assert_eq!(sum.ops_per_sec(), 1000.0);
        let mut c = Compared {
            off: r(100, 100, 100),
            on: r(150, 150, 100),
            ram_hit_share: 1.0,
            round_ratios: vec![],
        };
        assert_eq!(c.on_over_off(), 1.5);
        assert_eq!(c.round_range(), (0.0, 0.0));
        c.round_ratios = vec![1.2, 0.9, 1.7, 1.1];
        assert_eq!(c.round_range(), (0.9, 1.7));
        let order: Vec<bool> = (0..4).map(on_first).collect();
        assert_eq!(order, [false, true, false, true]);
    }

    #[test]
    fn an_engine_without_a_tier_has_no_ram_share() {
        let tally = Tally::new();
        let (off, on) = (MapEngine::new(1 << 20), MapEngine::new(1 << 20));
        for e in [&off, &on] {
            warm::fill(e, 100, 500, &tally);
            assert_eq!(warm_up(e, 100, 500, &tally), 200);
        }
        let c = compare(
            &off,
            &on,
            100,
            500,
            2,
            Duration::from_millis(30),
            3,
            8,
            &tally,
        );
        assert_eq!(c.ram_hit_share, 0.0);
        assert_eq!(c.round_ratios.len(), 3);
        assert!(c.round_ratios.iter().all(|r| *r > 0.0));
        // Every timed get of both engines hit, over all rounds.
        let gets = off.stats().hits + on.stats().hits - 400;
        assert_eq!(gets, c.off.ops + c.on.ops);
        assert!(c.off.ops > 0 && c.on.ops > 0);
        assert_eq!((c.off.threads, c.on.threads), (2, 2));
        assert!(c.on_over_off() > 0.0);
        assert_eq!((tally.mismatches(), tally.errors()), (0, 0));
    }

    #[test]
    fn after_the_warm_up_the_tier_serves_every_hit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tally = Tally::new();
        let (objects, size, cap) = (300, 1000, 16 << 20);
        let open = |name: &str, ram_tier_bytes: u64| {
            let options = Options {
                ram_tier_bytes,
                ..Options::default()
            };
            Store::open(dir.path().join(name), cap, options).expect("open")
        };
        let (off, on) = (open("off", 0), open("on", cap));
        for s in [&off, &on] {
            assert_eq!(warm::fill(s, objects, size, &tally).stored, objects as u64);
            assert_eq!(warm_up(s, objects, size, &tally), 2 * objects as u64);
        }
        assert_eq!(off.stats().ram_hits, 0);
        assert!(on.stats().ram_bytes > 0, "the warm-up promoted nothing");
        let c = compare(
            &off,
            &on,
            objects,
            size,
            2,
            Duration::from_millis(50),
            2,
            8,
            &tally,
        );
        assert!(c.on.hits > 0 && c.off.hits > 0);
        assert_eq!(c.ram_hit_share, 1.0, "every timed hit should come from RAM");
        assert_eq!(ram_hit_share(&Stats::default(), &off.stats()), 0.0);
        assert_eq!((tally.mismatches(), tally.errors()), (0, 0));
    }
}
