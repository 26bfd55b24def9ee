//! The budget's pace: how many slots a second it may hand out while the process is
//! busy, so that uncached work cheap enough to finish at once cannot fill the cores
//! and make the hits queue behind it.
//!
//! Slots bound the uncached work *in progress*; they do not bound its *rate*. When
//! each piece of it is cheap (a `quire serve` 404 or search takes a render thread
//! ~50 µs), two slots admit thousands a second, and each costs the request worker
//! its own part besides (the request's parse, the hand-over to the render thread and
//! back, the answer): a crowd asking as fast as it is answered then keeps the worker
//! busy all the time, and a reader's hit waits behind the crowd's requests queued
//! ahead of it on the worker (measured: hit p99 0.4 ms alone, 2–3 ms under a crowd
//! of 2,000 addresses making ~8,000 renders a second on one core).
//!
//! Key decisions:
//! - **Paced by the process's share of its cores.** Every [`TICK`] the controller
//!   (`Budget::pace`) reads the CPU time the process used over the last tick
//!   (`CLOCK_PROCESS_CPUTIME_ID`: the request workers, the render threads,
//!   compression), as a share of the cores it may use. While requests wait for a
//!   slot and the share is above `budget.cpu_busy_max`, slots are handed out at a
//!   rate, cut in proportion to the excess (at most by half a tick); below it the
//!   rate grows by a tenth a tick; when nobody waits and the share is below, the
//!   pace is lifted. The crowd's requests then wait in the budget's fair queue,
//!   which costs nothing while they wait, and the cores keep idle time for the hits.
//!   The first version read the request workers' busy time (tokio's
//!   `worker_total_busy_duration`) instead: under a serve crowd making 8,700
//!   renders a second it read 0.5, since the worker parks while each render runs on
//!   its thread, so the CPU was full and nothing was paced.
//! - **Smooth, not in bursts.** Tokens accrue continuously and at most
//!   [`BURST`] worth of them are kept, and while paced with requests waiting, the
//!   controller hands out slots every [`GRANT_EVERY`]: a tick's worth of grants at
//!   once would itself be the burst a hit queues behind.
//! - **A floor.** The rate never falls below [`FLOOR_PER_SLOT`] a second per slot:
//!   when hits alone keep the process above the share, misses are slowed, not
//!   stopped (a reader's miss still comes first by the budget's fairness).
//! - **The default share, 0.4, measured.** `scripts/crowd-figures.py --mode serve
//!   --spread few --seconds 30 --reader-process` on one core, two rounds each: a
//!   reader's hit p99 quiet → crowd was 0.52 → 1.89 and 0.49 → 2.97 ms with no pace
//!   (8,552 and 9,052 renders a second for the crowd), 0.60 → 0.62 and 0.53 → 0.83
//!   ms at 0.5 (3,389 and 3,110), 0.45 → 0.48 and 0.47 → 0.62 ms at 0.4 (2,654 and
//!   2,259), with 0 errors and 0 refusals in every run
//!   (`bench/runs/2026-11-29-vm-2core-crowd-pace/`). The proxy's crowd, bounded by
//!   the origin, never filled the core and was not paced.
//! - **Only the budget everyone shares is paced**: a crawler class's few slots are
//!   its own, and no controller runs for them.

use std::time::{Duration, Instant};

/// How often the controller measures the process and sets the rate.
pub(crate) const TICK: Duration = Duration::from_millis(25);
/// How often slots are handed out while paced and requests wait (tokio's timer
/// resolution: a millisecond).
pub(crate) const GRANT_EVERY: Duration = Duration::from_millis(1);
/// The grants a second per slot below which the pace never goes.
pub(crate) const FLOOR_PER_SLOT: f64 = 50.0;
/// Tokens kept, in time at the current rate (at least one token).
const BURST: Duration = Duration::from_millis(2);
/// The largest cut of the rate in one tick.
const CUT_MAX: f64 = 0.5;
/// The growth of the rate per tick below the share.
const GROWTH: f64 = 1.1;

/// The token bucket and its rate; under the budget's lock.
#[derive(Debug)]
pub(crate) struct Pace {
    /// Grants a second; `None`: not paced.
    rate: Option<f64>,
    tokens: f64,
    refilled: Instant,
    /// Grants since the last tick (the rate observed).
    granted: u64,
    /// The process's share of its cores at the last tick (0–1), if measured.
    busy: Option<f64>,
}

impl Pace {
    pub(crate) fn new(now: Instant) -> Pace {
        Pace {
            rate: None,
            tokens: 0.0,
            refilled: now,
            granted: 0,
            busy: None,
        }
    }

    /// Takes a token for one grant: always when not paced.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        if let Some(rate) = self.rate {
            let accrued = now.saturating_duration_since(self.refilled).as_secs_f64() * rate;
            self.refilled = now;
            let kept = (rate * BURST.as_secs_f64()).max(1.0);
            self.tokens = (self.tokens + accrued).min(kept);
            if self.tokens < 1.0 {
                return false;
            }
            self.tokens -= 1.0;
        }
        self.granted += 1;
        true
    }

    /// Whether slots are handed out at a rate now.
    pub(crate) fn paced(&self) -> bool {
        self.rate.is_some()
    }

    /// The rate (grants a second), 0 when not paced; the last busy share measured.
    pub(crate) fn gauges(&self) -> (f64, Option<f64>) {
        (self.rate.unwrap_or(0.0), self.busy)
    }

    /// One tick of the controller: the process used `busy` of its cores (a share,
    /// 0–1) over the last `dt`; `waiting` is whether requests wait for a slot now.
    /// A `max` of 1 or more never paces.
    pub(crate) fn adjust(
        &mut self,
        busy: f64,
        max: f64,
        waiting: bool,
        dt: Duration,
        slots: usize,
    ) {
        self.busy = Some(busy);
        let observed = self.granted as f64 / dt.as_secs_f64().max(1e-3);
        self.granted = 0;
        let floor = FLOOR_PER_SLOT * slots.max(1) as f64;
        if max >= 1.0 {
            self.rate = None;
        } else if busy > max && waiting {
            let from = self.rate.map_or(observed, |r| r.min(observed.max(floor)));
            let cut = (max / busy).max(CUT_MAX);
            self.set_rate((from * cut).max(floor));
        } else if busy <= max {
            match self.rate {
                Some(_) if !waiting => self.rate = None,
                // Grown, but never past twice what was granted: a pace the
                // slots (not the tokens) held back would otherwise grow without
                // bound, and stop pacing long after it should have.
                Some(r) => self.set_rate((r * GROWTH).min(2.0 * observed.max(floor))),
                None => {}
            }
        }
    }

    fn set_rate(&mut self, rate: f64) {
        debug_assert!(rate.is_finite() && rate > 0.0, "a pace of {rate}");
        if self.rate.is_none() {
            self.tokens = 0.0;
        }
        self.rate = Some(rate);
    }
}

/// The process's share of its cores since the last reading.
pub(crate) struct Busy {
    cpu: Duration,
    at: Instant,
    cores: f64,
}

impl Busy {
    /// Starts measuring this process (over the cores it may run on: its CPU
    /// affinity, or its cgroup's quota, as `available_parallelism` reads them).
    pub(crate) fn here() -> Busy {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Busy {
            cpu: Busy::cpu(),
            at: Instant::now(),
            cores: cores as f64,
        }
    }

    fn cpu() -> Duration {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
        Duration::new(
            t.tv_sec.max(0) as u64,
            t.tv_nsec.clamp(0, 999_999_999) as u32,
        )
    }

    /// The share (0–1) of its cores' time the process used since the last call,
    /// and that time.
    pub(crate) fn sample(&mut self) -> (f64, Duration) {
        let now = Instant::now();
        let cpu = Busy::cpu();
        let dt = now.saturating_duration_since(self.at);
        let used = cpu.saturating_sub(self.cpu);
        self.cpu = cpu;
        self.at = now;
        let share = used.as_secs_f64() / (self.cores * dt.as_secs_f64().max(1e-6));
        (share.clamp(0.0, 1.0), dt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DT: Duration = TICK;

    #[test]
    fn not_paced_until_the_process_passes_the_share_with_requests_waiting() {
        let now = Instant::now();
        let mut p = Pace::new(now);
        for _ in 0..100 {
            assert!(p.take(now));
        }
        p.adjust(0.9, 0.6, false, DT, 2);
        assert!(!p.paced(), "nobody waits: nothing to pace");
        for _ in 0..100 {
            assert!(p.take(now));
        }
        p.adjust(0.5, 0.6, true, DT, 2);
        assert!(!p.paced(), "below the share: not paced");
        for _ in 0..100 {
            assert!(p.take(now));
        }
        p.adjust(0.9, 0.6, true, DT, 2);
        assert!(p.paced());
        // 100 grants in 25 ms = 4,000 a second, cut by 0.6/0.9.
        let (rate, busy) = p.gauges();
        assert!((rate - 4000.0 * 0.6 / 0.9).abs() < 1.0, "{rate}");
        assert_eq!(busy, Some(0.9));
    }

    #[test]
    fn a_paced_bucket_hands_out_its_rate_and_no_burst() {
        let t0 = Instant::now();
        let mut p = Pace::new(t0);
        for _ in 0..50 {
            assert!(p.take(t0));
        }
        p.adjust(1.0, 0.5, true, DT, 1);
        let (rate, _) = p.gauges();
        assert!((rate - 1000.0).abs() < 1.0, "{rate}");
        assert!(!p.take(t0), "a new pace starts with no tokens");
        // A second idle: at most BURST's worth (2 ms at 1,000 a second = 2) kept.
        let later = t0 + Duration::from_secs(1);
        let got = (0..10).filter(|_| p.take(later)).count();
        assert_eq!(got, 2);
        // Then one per millisecond.
        let mut granted = 0;
        for ms in 1..=100 {
            let at = later + Duration::from_millis(ms);
            while p.take(at) {
                granted += 1;
            }
        }
        assert!((99..=101).contains(&granted), "{granted}");
    }

    #[test]
    fn the_rate_has_a_floor_grows_below_the_share_and_lifts_when_nobody_waits() {
        let t0 = Instant::now();
        let mut p = Pace::new(t0);
        // Nothing granted, fully busy: the floor (50 a second per slot).
        for _ in 0..20 {
            p.adjust(1.0, 0.6, true, DT, 2);
        }
        assert_eq!(p.gauges().0, 100.0);
        p.adjust(0.3, 0.6, true, DT, 2);
        assert!((p.gauges().0 - 110.0).abs() < 1e-9);
        p.adjust(0.3, 0.6, false, DT, 2);
        assert!(!p.paced());
        p.adjust(1.0, 1.0, true, DT, 2);
        assert!(!p.paced(), "a share of 1 never paces");
    }

    /// An unpaced bucket that has granted `n` slots in its first tick.
    fn granted(n: usize) -> Pace {
        let t0 = Instant::now();
        let mut p = Pace::new(t0);
        for _ in 0..n {
            assert!(p.take(t0));
        }
        p
    }

    #[test]
    fn the_rate_grows_to_twice_what_was_granted_at_most() {
        let mut p = granted(100);
        p.adjust(1.0, 0.5, true, DT, 1);
        assert_eq!(p.gauges().0, 2000.0);
        // Slot-bound: 10 grants a tick (400 a second) while the pace allows more.
        for _ in 0..10_000 {
            p.granted += 10;
            p.adjust(0.1, 0.5, true, DT, 1);
            let r = p.gauges().0;
            assert!(r.is_finite() && r <= 2000.0 * 1.1, "{r}");
        }
        assert!((p.gauges().0 - 800.0).abs() < 1.0, "{}", p.gauges().0);
    }

    #[test]
    fn one_tick_cuts_the_rate_by_half_at_most() {
        let mut p = granted(1000);
        p.adjust(1.0, 0.1, true, DT, 1);
        assert!((p.gauges().0 - 20_000.0).abs() < 1.0, "{}", p.gauges().0);
    }

    #[test]
    fn the_cpu_share_of_the_process_is_measured() {
        let mut b = Busy::here();
        // 30 ms of this thread's CPU, then a sleep of 30 ms.
        let mine = || rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        let t0 = mine();
        let spent = |t: rustix::time::Timespec| {
            let t1 = mine();
            (t1.tv_sec - t.tv_sec) as f64 + (t1.tv_nsec - t.tv_nsec) as f64 / 1e9
        };
        while spent(t0) < 0.030 {
            std::hint::spin_loop();
        }
        std::thread::sleep(Duration::from_millis(30));
        let (share, dt) = b.sample();
        // The spin is counted (other test threads may add to it, never take from
        // it), the sleep is not time this thread used.
        let used = dt.as_secs_f64() * share * b.cores;
        assert!(used >= 0.029 || share == 1.0, "{used} s of {dt:?}");
        assert!(share > 0.0);
    }
}
