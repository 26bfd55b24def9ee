//! A chaos run of `quire proxy`: the origin and quire started, the load and the editor
//! running, SIGKILLs and origin faults on the seeded timetable, a final sweep, and the
//! figures. `soak` is the same run without kills or faults, with quire's memory
//! sampled every second.
//!
//! Key decisions:
//! - **quire is configured to fail fast on a sick origin** (`origin_read_timeout` 2 s,
//!   connect 1 s), so a fault's effects land inside its window plus a short grace.
//! - **The volume is small for the catalogue** (64 MiB by default against hundreds of
//!   MB of bodies), so reclaim runs all the time, under hits and under slow readers;
//!   64 MiB makes 512 KiB regions, so bodies over 256 KiB are stored too (by a
//!   streaming fill).
//! - **A crash is not a kill**: quire exiting on its own is recorded (and restarted),
//!   and fails the run.
//! - **The sweep** asks, once everything is quiet, for every edited URL (up to a
//!   bound), URLs asked during faults and the most popular ones, in identity and the
//!   codings: each must be the current version now, so nothing broken or purged is
//!   still stored.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::task::JoinHandle;

use crate::content::Catalog;
use crate::kills::{self, Chaos, KillFigures};
use crate::load::{self, ClientKind, Edits, World};
use crate::origin::Origin;
use crate::quire::{self, Quire, Rss};
use crate::schedule::{self, FaultKind, Window, FAULT_GRACE};
use crate::tally::{self, Counts, Restart, Sample, Warmth};

/// How long after a fault's grace its "after" figures are counted.
const AFTER_FAULT: Duration = Duration::from_secs(5);

/// How long quire has to become healthy at the first start.
const START_WITHIN: Duration = Duration::from_secs(60);

/// URLs the sweep checks at most (each in up to three codings).
const SWEEP_URLS_MAX: usize = 600;

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The quire binary.
    pub(crate) quire: PathBuf,
    /// How long the load runs.
    pub(crate) duration: Duration,
    /// SIGKILLs.
    pub(crate) kills: usize,
    /// Whether the origin shows faults.
    pub(crate) faults: bool,
    /// The run's seed.
    pub(crate) seed: u64,
    /// URLs in the catalogue.
    pub(crate) urls: usize,
    /// quire's `--cache-size`.
    pub(crate) cache_size: String,
    /// Clients: HTTP/1.1, h2c, slow readers.
    pub(crate) clients: (usize, usize, usize),
    /// Mean time between edits.
    pub(crate) edit_every: Duration,
    /// Whether quire's memory is sampled every second.
    pub(crate) sample_rss: bool,
    /// Break the run on purpose, to prove the checks can fail.
    pub(crate) sabotage: Option<Sabotage>,
}

/// A deliberate break of the run's own rules: the run must then fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Sabotage {
    /// Edits are recorded as acknowledged without a purge: lost invalidations follow.
    SkipPurge,
    /// The origin flips a byte in one body of 50: wrong bytes follow.
    CorruptOrigin,
}

/// One fault's outcome.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FaultOutcome {
    /// The fault.
    pub(crate) kind: FaultKind,
    /// Its window, seconds from the run's start.
    start_s: f64,
    /// Its end.
    end_s: f64,
    /// Requests that reached the origin during the window (the fault met them).
    pub(crate) origin_requests: u64,
    /// Requests overlapping the window and its grace (restarts and other faults
    /// excluded).
    pub(crate) during: Counts,
    /// Requests sent in the 5 s after the grace (restarts and other faults excluded):
    /// must all be right.
    pub(crate) after: Counts,
}

/// The figures of a proxy run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    /// Seconds of load.
    pub(crate) duration_s: f64,
    /// The kills and restarts.
    #[serde(flatten)]
    pub(crate) kills: KillFigures,
    /// Every request of the load.
    pub(crate) totals: Counts,
    /// Requests outside every fault window and restart: errors here are unexplained.
    pub(crate) outside_windows: Counts,
    /// Each fault's outcome.
    pub(crate) faults: Vec<FaultOutcome>,
    /// Hit ratios around restarts.
    pub(crate) warmth: Warmth,
    /// What the editor did.
    pub(crate) edits: Edits,
    /// The final sweep.
    pub(crate) sweep: Counts,
    /// Requests for the last purged URLs right after each restart (judged with the
    /// rest; a purge lost to the kill shows there first).
    pub(crate) checked_after_restart: u64,
    /// URLs that were hits right before a kill (clients held), unchanged, asked again
    /// first thing after the restart.
    pub(crate) warm_probe_asked: u64,
    /// Of those, hits: a warm restart keeps every entry.
    pub(crate) warm_probe_hit: u64,
    /// Requests of the slow readers (large bodies read slowly while reclaim runs).
    pub(crate) slow_readers: Counts,
    /// Entries reclaim evicted and carried forward, summed over quire's lives (read
    /// from its metrics before each kill and at the end).
    pub(crate) reclaim_evicted: u64,
    /// Entries carried forward.
    pub(crate) reclaim_carried: u64,
    /// Requests the origin answered.
    pub(crate) origin_requests: u64,
    /// The first wrong responses, described.
    pub(crate) wrong_examples: Vec<String>,
    /// The first lost invalidations, described.
    pub(crate) lost_examples: Vec<String>,
    /// Panic lines in quire's log.
    pub(crate) panics: Vec<String>,
    /// Whether quire drained and exited 0 on SIGTERM at the end.
    pub(crate) stopped_cleanly: bool,
    /// quire's memory, sampled every second (soak).
    pub(crate) rss: Option<RssFigures>,
}

impl Report {
    /// Why the run failed (empty: it passed). `strict` also fails unexplained errors.
    pub(crate) fn failures(&self, strict: bool) -> Vec<String> {
        let mut f = Vec::new();
        let wrong = self.totals.wrong + self.sweep.wrong;
        let lost = self.totals.lost_invalidations + self.sweep.lost_invalidations;
        if wrong > 0 {
            f.push(format!("{wrong} wrong responses"));
        }
        if lost > 0 {
            f.push(format!("{lost} lost invalidations"));
        }
        self.kills.failures("", &mut f);
        if !self.panics.is_empty() {
            f.push(format!("{} panics in quire's log", self.panics.len()));
        }
        if self.sweep.errors() > 0 {
            f.push(format!("{} errors in the final sweep", self.sweep.errors()));
        }
        if self.edits.unacked > 0 {
            f.push(format!("{} purges never acknowledged", self.edits.unacked));
        }
        if strict && self.totals.errors() > 0 {
            f.push(format!(
                "{} errors (a soak expects none)",
                self.totals.errors()
            ));
        } else if self.outside_windows.errors() > 0 {
            f.push(format!(
                "{} errors outside every fault window and restart",
                self.outside_windows.errors()
            ));
        }
        f
    }
}

/// quire's memory over a run, after the warm-up (the first 10 %).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct RssFigures {
    /// Samples taken after the warm-up.
    pub(crate) samples: usize,
    /// Smallest and largest `VmRSS`, KiB.
    pub(crate) total_min_kib: u64,
    /// Largest `VmRSS`.
    pub(crate) total_max_kib: u64,
    /// Smallest and largest `RssAnon`, KiB.
    pub(crate) anon_min_kib: u64,
    /// Largest `RssAnon`.
    pub(crate) anon_max_kib: u64,
    /// `VmRSS` stayed within 5 % of its smallest value.
    pub(crate) total_flat: bool,
    /// `RssAnon` stayed within 5 % of its smallest value.
    pub(crate) anon_flat: bool,
    /// The trend, apart from the noise: the median `RssAnon` of the last quarter
    /// after the warm-up against that of the first, in percent.
    pub(crate) anon_trend_pct: f64,
    /// The last sample.
    pub(crate) last: Rss,
    /// Every sample after the warm-up: seconds from the start, `VmRSS` and `RssAnon`
    /// in KiB (to see a trend, not just the range).
    pub(crate) series: Vec<(u32, u64, u64)>,
}

/// The figures of `samples` (ms from the start, memory) taken after `warmup_ms`.
fn rss_figures(samples: &[(u32, Rss)], warmup_ms: u32) -> Option<RssFigures> {
    let after: Vec<&(u32, Rss)> = samples.iter().filter(|(ms, _)| *ms >= warmup_ms).collect();
    let kept: Vec<Rss> = after.iter().map(|&&(_, r)| r).collect();
    let series = after
        .iter()
        .map(|&&(ms, r)| (ms / 1000, r.total_kib, r.anon_kib))
        .collect();
    let last = *kept.last()?;
    let (tmin, tmax) = min_max(kept.iter().map(|r| r.total_kib));
    let (amin, amax) = min_max(kept.iter().map(|r| r.anon_kib));
    let flat = |min: u64, max: u64| (max as f64) <= (min as f64) * 1.05;
    let quarter = (kept.len() / 4).max(1);
    let median = |part: &[Rss]| {
        let mut v: Vec<u64> = part.iter().map(|r| r.anon_kib).collect();
        v.sort_unstable();
        v[v.len() / 2] as f64
    };
    let first = median(&kept[..quarter]);
    let last_q = median(&kept[kept.len() - quarter..]);
    Some(RssFigures {
        samples: kept.len(),
        total_min_kib: tmin,
        total_max_kib: tmax,
        anon_min_kib: amin,
        anon_max_kib: amax,
        total_flat: flat(tmin, tmax),
        anon_flat: flat(amin, amax),
        anon_trend_pct: (last_q / first.max(1.0) - 1.0) * 100.0,
        last,
        series,
    })
}

fn min_max(values: impl Iterator<Item = u64>) -> (u64, u64) {
    values.fold((u64::MAX, 0), |(lo, hi), v| (lo.min(v), hi.max(v)))
}

/// quire's arguments for proxy mode.
fn quire_args(
    origin: &Origin,
    addr: std::net::SocketAddr,
    dir: &Path,
    plan: &Plan,
) -> anyhow::Result<Vec<OsString>> {
    let config = dir.join("chaos.toml");
    std::fs::write(
        &config,
        "[limits]\norigin_read_timeout = \"2s\"\norigin_connect_timeout = \"1s\"\n",
    )?;
    let mut args =
        crate::disk_full::proxy_args(origin, addr, &dir.join("proxy.vol"), &plan.cache_size);
    args.extend(["--config".into(), config.into_os_string()]);
    Ok(args)
}

/// Runs `plan` in `dir` (its volume, config and quire's log go there).
pub(crate) async fn run(plan: &Plan, dir: &Path) -> anyhow::Result<Report> {
    let catalog = Arc::new(Catalog::new(plan.seed, plan.urls));
    let origin = Arc::new(Origin::start(catalog.clone()).await?);
    let addr = quire::free_addr()?;
    let args = quire_args(&origin, addr, dir, plan)?;
    let mut q = Quire::new(&plan.quire, args, addr, dir.join("quire-proxy.log"));
    q.start(START_WITHIN).await?;
    let t0 = Instant::now();
    let world = Arc::new(World::new(catalog, addr, t0));
    match plan.sabotage {
        Some(Sabotage::SkipPurge) => world.skip_purges(),
        Some(Sabotage::CorruptOrigin) => origin.corrupt_bodies(),
        None => {}
    }
    let pid = Arc::new(AtomicU32::new(q.pid().unwrap_or(0)));
    let background = Background::spawn(plan, &world, &origin, &pid, t0);
    let kill_at = schedule::kill_times(plan.seed, plan.duration, plan.kills);
    let mut hooks = KillAfterAck::new(world.clone());
    let chaos = kills::drive(&mut q, &kill_at, t0, plan.duration, &pid, &mut hooks).await;
    world.stop();
    let (windows, met, rss) = background.join().await;
    let samples = world.tally.samples();
    let sweep = if chaos.restart_failed.is_none() {
        sweep(&world, &samples, &windows).await
    } else {
        Counts::default()
    };
    hooks.add_reclaim().await;
    let stopped_cleanly = q.stop(Duration::from_secs(40)).await.unwrap_or(false);
    let warmup_ms = (plan.duration / 10).as_millis() as u32;
    Ok(report(ReportParts {
        plan,
        world: &world,
        samples: &samples,
        windows: &windows,
        met: &met,
        chaos,
        sweep,
        checked_after_restart: hooks.checked_after_restart,
        warm_probe: (hooks.warm_asked, hooks.warm_hit),
        reclaim: (hooks.evicted, hooks.carried),
        origin_requests: origin.requests(),
        panics: q.panics(),
        stopped_cleanly,
        rss: plan
            .sample_rss
            .then(|| rss_figures(&rss, warmup_ms))
            .flatten(),
    }))
}

/// The tasks that run beside the kills until the world stops: the clients, the
/// editor, the origin's faults and quire's memory sampler.
struct Background {
    clients: Vec<JoinHandle<()>>,
    editor: JoinHandle<()>,
    faults: Option<JoinHandle<()>>,
    sampler: Option<JoinHandle<()>>,
    /// The fault windows as they happened, with the origin requests each met.
    windows: Arc<Mutex<Vec<(Window, u64)>>>,
    /// quire's memory: ms from the start, and the sample.
    rss: Arc<Mutex<Vec<(u32, Rss)>>>,
}

impl Background {
    /// Starts the clients (`plan.clients` of each kind), the editor, the faults (when
    /// `plan.faults`) and the sampler (when `plan.sample_rss`).
    fn spawn(
        plan: &Plan,
        world: &Arc<World>,
        origin: &Arc<Origin>,
        pid: &Arc<AtomicU32>,
        t0: Instant,
    ) -> Background {
        let (h1, h2, slow) = plan.clients;
        let kinds = std::iter::repeat_n(ClientKind::H1, h1)
            .chain(std::iter::repeat_n(ClientKind::H2, h2))
            .chain(std::iter::repeat_n(ClientKind::Slow, slow));
        let clients = kinds
            .enumerate()
            .map(|(k, kind)| {
                tokio::spawn(load::client(
                    world.clone(),
                    kind,
                    plan.seed.wrapping_mul(31).wrapping_add(k as u64),
                ))
            })
            .collect();
        let editor = tokio::spawn(load::editor(
            world.clone(),
            plan.seed,
            plan.edit_every,
            Duration::from_secs(30),
        ));
        let windows = Arc::new(Mutex::new(Vec::new()));
        let faults = plan.faults.then(|| {
            tokio::spawn(drive_faults(
                origin.clone(),
                schedule::fault_windows(plan.seed, plan.duration),
                t0,
                windows.clone(),
            ))
        });
        let rss = Arc::new(Mutex::new(Vec::new()));
        let sampler = plan
            .sample_rss
            .then(|| tokio::spawn(sample_rss(pid.clone(), t0, plan.duration, rss.clone())));
        Background {
            clients,
            editor,
            faults,
            sampler,
            windows,
            rss,
        }
    }

    /// Waits for every task (the world has stopped); returns the fault windows, the
    /// origin requests each met, and the memory samples.
    async fn join(self) -> (Vec<Window>, Vec<u64>, Vec<(u32, Rss)>) {
        for t in self.clients {
            let _ = t.await;
        }
        let _ = self.editor.await;
        if let Some(f) = self.faults {
            let _ = f.await;
        }
        if let Some(s) = self.sampler {
            let _ = s.await;
        }
        let (windows, met): (Vec<Window>, Vec<u64>) = self
            .windows
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .copied()
            .unzip();
        let rss = self.rss.lock().unwrap_or_else(|e| e.into_inner()).clone();
        (windows, met, rss)
    }
}

/// Every other kill lands right after a purge's ack (the moment a purge not yet
/// durable would be lost); after every restart, the last edit's URLs are asked for
/// at once, before anything else can refill them.
struct KillAfterAck {
    world: Arc<World>,
    kills: usize,
    checked_after_restart: u64,
    /// URLs (and their versions) that were hits just before the kill.
    warm: Vec<(usize, u32)>,
    /// Warm URLs asked again first thing after restarts, unchanged since.
    warm_asked: u64,
    /// Of those, hits.
    warm_hit: u64,
    /// Reclaim's counters over the lives of quire so far.
    evicted: u64,
    carried: u64,
}

/// URLs probed for warmth around each kill.
const WARM_PROBE_URLS: usize = 20;

impl KillAfterAck {
    /// Hooks for a run in `world`, nothing counted yet.
    fn new(world: Arc<World>) -> KillAfterAck {
        KillAfterAck {
            world,
            kills: 0,
            checked_after_restart: 0,
            warm: Vec::new(),
            warm_asked: 0,
            warm_hit: 0,
            evicted: 0,
            carried: 0,
        }
    }

    /// With the clients held, asks for recently hit long-lived URLs and keeps those
    /// that are hits now: they must still be hits right after the restart.
    async fn probe_warm(&mut self) {
        self.warm.clear();
        let cat = &self.world.catalog;
        let candidates = self.world.tally.recent_hits(400);
        let long_lived = candidates
            .into_iter()
            .map(|u| u as usize)
            .filter(|&i| cat.spec(i).max_age_secs > crate::content::SHORT_MAX_AGE_SECS)
            .take(WARM_PROBE_URLS);
        for i in long_lived.collect::<Vec<_>>() {
            let v = cat.version(i);
            let (o, hit) = load::check_now(&self.world, i, Vec::new()).await;
            if hit && o.right() {
                self.warm.push((i, v));
            }
        }
    }

    /// Right after the restart, before the clients are released: how many warm URLs
    /// are hits again (those an edit moved meanwhile are not counted).
    async fn recheck_warm(&mut self) {
        for (i, v) in std::mem::take(&mut self.warm) {
            let (o, hit) = load::check_now(&self.world, i, Vec::new()).await;
            if self.world.catalog.version(i) != v {
                continue;
            }
            self.warm_asked += 1;
            self.warm_hit += u64::from(hit && o.right());
        }
    }

    /// Adds the running quire's reclaim counters (before it dies).
    async fn add_reclaim(&mut self) {
        if let Some(m) = quire::metrics(self.world.addr).await {
            self.evicted += quire::metric(&m, "quire_store_evicted_total") as u64;
            self.carried += quire::metric(&m, "quire_store_carried_total") as u64;
        }
    }
}

impl kills::Hooks for KillAfterAck {
    fn before_kill(&mut self) -> kills::HookFuture<'_> {
        self.kills += 1;
        Box::pin(async move {
            self.add_reclaim().await;
            if self.kills.is_multiple_of(2) {
                self.world.next_ack(Duration::from_secs(3)).await;
                // Right after the ack: no probe in between.
                self.world.hold(true);
            } else {
                self.world.hold(true);
                self.probe_warm().await;
            }
        })
    }

    fn after_restart(&mut self) -> kills::HookFuture<'_> {
        Box::pin(async move {
            self.recheck_warm().await;
            for i in self.world.last_acked() {
                load::check_recorded(&self.world, i).await;
                self.checked_after_restart += 1;
            }
            self.world.hold(false);
        })
    }
}

/// Shows each fault of `plan` over its window, recording the windows as they happened
/// with the origin requests each met.
async fn drive_faults(
    origin: Arc<Origin>,
    plan: Vec<Window>,
    t0: Instant,
    done: Arc<Mutex<Vec<(Window, u64)>>>,
) {
    for w in plan {
        tokio::time::sleep_until((t0 + w.start).into()).await;
        let start = t0.elapsed();
        let met_before = origin.faulted(w.kind);
        if let Err(e) = origin.set_fault(Some(w.kind)).await {
            eprintln!(
                "quire-chaos: could not start fault {}: {e:#}",
                w.kind.name()
            );
        }
        tokio::time::sleep_until((t0 + w.end).into()).await;
        if let Err(e) = origin.set_fault(None).await {
            eprintln!("quire-chaos: could not end fault {}: {e:#}", w.kind.name());
        }
        let window = Window {
            kind: w.kind,
            start,
            end: t0.elapsed(),
        };
        let met = origin.faulted(w.kind) - met_before;
        done.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((window, met));
    }
}

/// Samples the memory of the process in `pid` every second until `duration` passed.
async fn sample_rss(
    pid: Arc<AtomicU32>,
    t0: Instant,
    duration: Duration,
    out: Arc<Mutex<Vec<(u32, Rss)>>>,
) {
    while t0.elapsed() < duration {
        if let Some(r) = quire::rss(pid.load(Ordering::Relaxed)) {
            let ms = t0.elapsed().as_millis() as u32;
            out.lock().unwrap_or_else(|e| e.into_inner()).push((ms, r));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The URLs the sweep checks: edited ones, ones asked during faults, popular ones.
fn sweep_urls(world: &World, samples: &[Sample], windows: &[Window]) -> Vec<usize> {
    let mut urls: Vec<usize> = world.edits().edited.into_iter().collect();
    let stride = urls.len().div_ceil(SWEEP_URLS_MAX / 2).max(1);
    urls = urls.into_iter().step_by(stride).collect();
    let in_faults = samples.iter().filter(|s| {
        windows.iter().any(|w| {
            let (a, b) = tally::fault_span(w, FAULT_GRACE);
            tally::overlaps(s, a, b)
        })
    });
    urls.extend(in_faults.map(|s| s.url as usize).take(SWEEP_URLS_MAX / 3));
    urls.extend(0..(SWEEP_URLS_MAX / 6).min(world.catalog.len()));
    urls.sort_unstable();
    urls.dedup();
    urls
}

/// Checks the sweep's URLs, four at a time.
async fn sweep(world: &Arc<World>, samples: &[Sample], windows: &[Window]) -> Counts {
    let urls = sweep_urls(world, samples, windows);
    let mut tasks = Vec::new();
    for part in 0..4 {
        let world = world.clone();
        let mine: Vec<usize> = urls.iter().copied().skip(part).step_by(4).collect();
        tasks.push(tokio::spawn(async move {
            let mut out = Vec::new();
            for i in mine {
                let mut asks = vec![Vec::new()];
                if world.catalog.spec(i).text {
                    asks.push(vec![("accept-encoding", "gzip".to_string())]);
                    asks.push(vec![("accept-encoding", "br".to_string())]);
                }
                for fields in asks {
                    let (outcome, hit) = load::check_now(&world, i, fields).await;
                    out.push(Sample {
                        url: i as u32,
                        sent_ms: 0,
                        done_ms: 0,
                        outcome,
                        hit,
                        stale: false,
                        slow_reader: false,
                    });
                }
            }
            out
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap_or_default());
    }
    Counts::of(&all)
}

struct ReportParts<'a> {
    plan: &'a Plan,
    world: &'a World,
    samples: &'a [Sample],
    windows: &'a [Window],
    met: &'a [u64],
    chaos: Chaos,
    sweep: Counts,
    checked_after_restart: u64,
    warm_probe: (u64, u64),
    reclaim: (u64, u64),
    origin_requests: u64,
    panics: Vec<String>,
    stopped_cleanly: bool,
    rss: Option<RssFigures>,
}

fn report(p: ReportParts<'_>) -> Report {
    let restarts = &p.chaos.restarts;
    let faults = p
        .windows
        .iter()
        .zip(p.met)
        .map(|(w, &met)| FaultOutcome {
            origin_requests: met,
            ..fault_outcome(w, p.windows, p.samples, restarts)
        })
        .collect();
    let (wrong_examples, lost_examples) = p.world.tally.examples();
    Report {
        duration_s: p.plan.duration.as_secs_f64(),
        kills: p.chaos.figures(p.plan.kills),
        totals: Counts::of(p.samples),
        outside_windows: Counts::of(tally::outside(p.samples, p.windows, FAULT_GRACE, restarts)),
        faults,
        warmth: tally::warmth(p.samples, restarts),
        edits: p.world.edits(),
        sweep: p.sweep,
        checked_after_restart: p.checked_after_restart,
        warm_probe_asked: p.warm_probe.0,
        warm_probe_hit: p.warm_probe.1,
        slow_readers: Counts::of(p.samples.iter().filter(|s| s.slow_reader)),
        reclaim_evicted: p.reclaim.0,
        reclaim_carried: p.reclaim.1,
        origin_requests: p.origin_requests,
        wrong_examples,
        lost_examples,
        panics: p.panics,
        stopped_cleanly: p.stopped_cleanly,
        rss: p.rss,
    }
}

fn fault_outcome(
    w: &Window,
    windows: &[Window],
    samples: &[Sample],
    restarts: &[Restart],
) -> FaultOutcome {
    let (a, b) = tally::fault_span(w, FAULT_GRACE);
    let after_end = b + AFTER_FAULT.as_millis() as u32;
    let elsewhere = |s: &Sample| {
        restarts.iter().any(|r| {
            let (x, y) = tally::restart_span(r);
            tally::overlaps(s, x, y)
        }) || windows.iter().any(|o| {
            let (x, y) = tally::fault_span(o, FAULT_GRACE);
            o != w && tally::overlaps(s, x, y)
        })
    };
    let during = samples
        .iter()
        .filter(|s| tally::overlaps(s, a, b) && !elsewhere(s));
    let after = samples
        .iter()
        .filter(|s| s.sent_ms > b && s.sent_ms <= after_end && !elsewhere(s));
    FaultOutcome {
        kind: w.kind,
        start_s: w.start.as_secs_f64(),
        end_s: w.end.as_secs_f64(),
        origin_requests: 0,
        during: Counts::of(during),
        after: Counts::of(after),
    }
}
