//! The `quire bench store` driver: the parameters of the quick and full runs, scratch
//! directories, and the scenario-by-scenario run of both concrete engines (quire's
//! [`Store`], then the [`FileStore`] baseline, each in a fresh directory removed after)
//! that fills in a [`Report`].

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::content::SizeModel;
use super::eviction::{self, SweepSpec};
use super::lru;
use super::mixed::{self, Versions};
use super::ram_tier;
use super::report::{
    EngineSeries, EvictionReport, MixedEngine, MixedReport, OverflowReport, RamTierRow, Report,
    RestartReport, WarmRow,
};
use super::restart;
use super::s3fifo::S3Fifo;
use super::tally::Tally;
use super::warm;
use super::workload::{self, Mix, Shift, StreamSpec};
use super::wtinylfu::WTinyLfu;
use super::Scenario;
use crate::baseline::{FileOptions, FileStore};
use crate::machine::{CpuTimes, Machine};
use quire_store::{Engine, Options, Store};

/// Errors that stop the benchmark (an engine that cannot be opened, a scratch directory
/// that cannot be made).
pub(crate) type BenchError = Box<dyn std::error::Error + Send + Sync>;

const MIB: u64 = 1 << 20;

/// Times the news stream's popular set moves over each thread's stream (warm-up
/// included).
const NEWS_SHIFTS: usize = 100;
/// Share of the key space that becomes the new top ranks at each move: over a run,
/// half the key space takes its turn at the top.
const NEWS_STEP: f64 = 0.005;

/// What to run.
#[derive(Debug, Clone, Default)]
pub(crate) struct BenchConfig {
    /// The CI smoke run: smaller and shorter everywhere.
    pub quick: bool,
    /// Where scratch directories go (a fresh subdirectory is made and removed);
    /// `None` is the system temp directory.
    pub dir: Option<PathBuf>,
    /// Run only this scenario.
    pub only: Option<Scenario>,
    /// Seeds every op stream.
    pub seed: u64,
}

/// One object size of the warm-read scenario.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WarmCase {
    pub size: usize,
    pub objects: usize,
    pub cap: u64,
    /// quire's region size (`None`: derived from the cap).
    pub region_bytes: Option<u64>,
}

impl WarmCase {
    /// `objects` objects of `size` bytes in a cap that holds them comfortably: twice
    /// the data, at least 64 MiB.
    fn comfortable(size: usize, objects: usize, region_bytes: Option<u64>) -> WarmCase {
        WarmCase {
            size,
            objects,
            cap: (2 * (objects * size) as u64)
                .next_power_of_two()
                .max(64 * MIB),
            region_bytes,
        }
    }
}

/// Sizes and durations of every scenario.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Params {
    pub warm: Vec<WarmCase>,
    pub warm_threads: Vec<usize>,
    pub warm_duration: Duration,
    pub mixed_threads: usize,
    pub mixed_cap: u64,
    /// Per thread.
    pub mixed_warmup_ops: usize,
    /// Per thread.
    pub mixed_measured_ops: usize,
    pub mixed_sizes: SizeModel,
    pub scan_share: f64,
    pub sweep_objects: u64,
    pub sweep_cap: u64,
    pub sweep_batch: u64,
    pub sweep_sizes: SizeModel,
    pub overflow_cap: u64,
    /// Bytes written = cap × this.
    pub overflow_factor: u64,
    /// Puts between disk samples.
    pub overflow_batch: u64,
    pub overflow_sizes: SizeModel,
    pub restart_cap: u64,
    /// The restart working set's bytes as a share of its cap.
    pub restart_fill: f64,
    pub restart_sizes: SizeModel,
    /// The RAM-tier comparison reads the `warm` cases of these sizes (their objects, cap
    /// and `warm_duration`) with these thread counts.
    pub ram_sizes: Vec<usize>,
    pub ram_threads: Vec<usize>,
    /// A small hot set that sits in a region or two, and its thread counts.
    pub ram_hot: WarmCase,
    pub ram_hot_threads: Vec<usize>,
    /// Rounds each RAM-tier timed read is cut into, alternating off and on.
    pub ram_rounds: usize,
    /// One hit in this many is checked byte for byte.
    pub check_every: u64,
}

impl Params {
    /// The op streams of a hit-ratio scenario (`Mixed`, `MixedScan`, `Zipf08` or
    /// `News`): the realistic mix over a working set twice the cap, Zipf 0.99 but for
    /// `Zipf08`; `MixedScan` adds the one-hit scan keys, `News` a [`Shift`] of
    /// [`NEWS_STEP`] of the keys [`NEWS_SHIFTS`] times over each thread's stream.
    pub(crate) fn stream_spec(&self, scenario: Scenario, seed: u64) -> StreamSpec {
        let keys = self.mixed_sizes.keys_for_bytes(2 * self.mixed_cap);
        let ops = self.mixed_warmup_ops + self.mixed_measured_ops;
        let news = Shift {
            every: (ops / NEWS_SHIFTS).max(1),
            step: ((keys as f64 * NEWS_STEP) as usize).max(1),
        };
        let (zipf_s, scan, shift) = match scenario {
            Scenario::MixedScan => (0.99, self.scan_share, None),
            Scenario::Zipf08 => (0.8, 0.0, None),
            Scenario::News => (0.99, 0.0, Some(news)),
            _ => (0.99, 0.0, None),
        };
        StreamSpec {
            threads: self.mixed_threads,
            warmup_ops: self.mixed_warmup_ops,
            measured_ops: self.mixed_measured_ops,
            keys,
            zipf_s,
            mix: Mix::REALISTIC.with_scan(scan),
            seed,
            shift,
        }
    }

    /// The quick run's parameters (`quick`) or the full run's.
    pub(crate) fn new(quick: bool) -> Params {
        if quick {
            Params::quick()
        } else {
            Params::full()
        }
    }

    /// The full run: sizes and durations of the figures worth recording.
    fn full() -> Params {
        let mixed_sizes = SizeModel::LogNormal {
            median: 8192.0,
            sigma: 1.3,
            min: 1024,
            max: 1 << 20,
        };
        let warm = WarmCase::comfortable;
        Params {
            warm: vec![
                warm(100, 10_000, None),
                warm(10_000, 10_000, None),
                warm(1 << 20, 200, Some(4 * MIB)),
            ],
            warm_threads: vec![1, 2, 4, 8, 16, 64],
            warm_duration: Duration::from_secs(1),
            mixed_threads: 8,
            mixed_cap: 256 * MIB,
            mixed_warmup_ops: 10_000,
            mixed_measured_ops: 40_000,
            mixed_sizes,
            scan_share: 0.10,
            sweep_objects: 100_000,
            sweep_cap: 64 * MIB,
            sweep_batch: 10_000,
            sweep_sizes: SizeModel::Uniform {
                lo: 4096,
                hi: 16384,
            },
            overflow_cap: 16 * MIB,
            overflow_factor: 10,
            overflow_batch: 64,
            overflow_sizes: SizeModel::Uniform {
                lo: 8192,
                hi: 32768,
            },
            restart_cap: 128 * MIB,
            restart_fill: 0.75,
            restart_sizes: SizeModel::LogNormal {
                median: 8192.0,
                sigma: 1.0,
                min: 1024,
                max: 256 << 10,
            },
            ram_sizes: vec![100, 10_000],
            ram_threads: vec![1, 2, 8],
            ram_hot: warm(100, 2_000, None),
            ram_hot_threads: vec![2, 8],
            ram_rounds: 4,
            check_every: 64,
        }
    }

    /// The quick run (the CI smoke run): the full run, smaller and shorter.
    fn quick() -> Params {
        let warm = WarmCase::comfortable;
        // The baseline creates a file per put, which costs ~0.3-1 ms on a virtualised
        // disk: quick sizes keep its share of the run to seconds, so the whole quick run
        // stays well under a minute on 2 cores even with other work on the machine.
        Params {
            warm: vec![
                warm(100, 2_000, None),
                warm(10_000, 1_000, None),
                warm(1 << 20, 32, Some(4 * MIB)),
            ],
            warm_duration: Duration::from_millis(200),
            mixed_cap: 16 * MIB,
            mixed_warmup_ops: 750,
            mixed_measured_ops: 2_500,
            // A 16 MiB volume has 128 KiB regions by default: keep every object small
            // enough for one, so both engines see the same objects stored.
            mixed_sizes: SizeModel::LogNormal {
                median: 8192.0,
                sigma: 1.3,
                min: 1024,
                max: 96 << 10,
            },
            sweep_objects: 20_000,
            sweep_cap: 16 * MIB,
            sweep_batch: 2_000,
            overflow_factor: 5,
            restart_cap: 32 * MIB,
            ram_threads: vec![1, 8],
            ..Params::full()
        }
    }
}

/// A directory of scratch directories, removed with everything in it when dropped.
#[derive(Debug)]
pub(crate) struct Scratch {
    root: PathBuf,
}

impl Scratch {
    /// Makes `base/quire-bench-<pid>-<nanos>` (`base` defaults to the temp directory).
    pub(crate) fn new(base: Option<&Path>) -> std::io::Result<Scratch> {
        let base = base.map_or_else(std::env::temp_dir, Path::to_path_buf);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let root = base.join(format!("quire-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&root)?;
        Ok(Scratch { root })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.root
    }

    /// A fresh, empty directory `name` inside, removed when the guard drops.
    pub(crate) fn fresh(&self, name: &str) -> std::io::Result<ScratchDir> {
        let path = self.root.join(name);
        if path.exists() {
            std::fs::remove_dir_all(&path)?;
        }
        std::fs::create_dir_all(&path)?;
        Ok(ScratchDir { path })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// One engine's scratch directory; removed when dropped.
#[derive(Debug)]
pub(crate) struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
    /// Where quire's volume file goes.
    pub(crate) fn volume(&self) -> PathBuf {
        self.path.join("volume.quire")
    }
    /// Where the baseline's directory goes.
    pub(crate) fn files(&self) -> PathBuf {
        self.path.join("files")
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn open_quire(dir: &ScratchDir, cap: u64, options: Options) -> Result<Store, BenchError> {
    let path = dir.volume();
    Store::open(&path, cap, options).map_err(|e| {
        format!(
            "opening the quire volume {} (cap {cap}): {e}",
            path.display()
        )
        .into()
    })
}

fn close_quire(store: Store) -> Result<(), BenchError> {
    store
        .close()
        .map_err(|e| format!("closing the quire volume: {e}").into())
}

fn open_baseline(dir: &ScratchDir, cap: u64) -> Result<FileStore, BenchError> {
    let path = dir.files();
    FileStore::open(&path, cap, FileOptions::default()).map_err(|e| {
        format!(
            "opening the baseline directory {} (cap {cap}): {e}",
            path.display()
        )
        .into()
    })
}

/// Bytes the file at `path` occupies on disk (allocated blocks, not its length).
pub(crate) fn allocated_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
}

fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Runs the configured scenarios, reporting progress lines to `progress`.
pub(crate) fn measure(
    config: &BenchConfig,
    progress: &mut dyn FnMut(&str),
) -> Result<Report, BenchError> {
    let params = Params::new(config.quick);
    let scratch = Scratch::new(config.dir.as_deref())
        .map_err(|e| format!("making a scratch directory: {e}"))?;
    progress(&format!("scratch directory {}", scratch.path().display()));
    let tally = Tally::new();
    let mut machine = Machine::probe();
    let cpu_start = CpuTimes::now();
    let t0 = Instant::now();
    let mut report = Report {
        mode: if config.quick { "quick" } else { "full" }.to_string(),
        seed: config.seed,
        ..Report::default()
    };
    let wants = |s: Scenario| config.only.is_none_or(|o| o == s);
    let b = Bench {
        params: &params,
        scratch: &scratch,
        tally: &tally,
        seed: config.seed,
    };

    if wants(Scenario::WarmReads) {
        report.warm_reads = Some(b.warm_reads(progress)?);
    }
    if wants(Scenario::Mixed) {
        let (r, per_entry) = b.stream(Scenario::Mixed, progress)?;
        report.mixed = Some(r);
        report.index_bytes_per_entry = per_entry;
    }
    if wants(Scenario::MixedScan) {
        let (r, per_entry) = b.stream(Scenario::MixedScan, progress)?;
        report.mixed_scan = Some(r);
        report.index_bytes_per_entry = report.index_bytes_per_entry.or(per_entry);
    }
    if wants(Scenario::Zipf08) {
        report.zipf08 = Some(b.stream(Scenario::Zipf08, progress)?.0);
    }
    if wants(Scenario::News) {
        report.news = Some(b.stream(Scenario::News, progress)?.0);
    }
    if wants(Scenario::Eviction) {
        let (r, series) = b.eviction(progress)?;
        report.eviction = Some(r);
        report.eviction_batches = Some(series);
    }
    if wants(Scenario::Overflow) {
        report.overflow = Some(b.overflow(progress)?);
    }
    if wants(Scenario::Restart) {
        report.restart = Some(b.restart(progress)?);
    }
    if wants(Scenario::RamTier) {
        report.ram_tier = Some(b.ram_tier(progress)?);
    }

    machine.finish(cpu_start, CpuTimes::now());
    report.machine = machine;
    report.mismatches = tally.mismatches();
    report.errors = tally.errors();
    report.declined_too_large = tally.too_large();
    report.declined_no_space = tally.no_space();
    report.problems = tally.notes();
    report.elapsed_secs = t0.elapsed().as_secs_f64();
    Ok(report)
}

struct Bench<'a> {
    params: &'a Params,
    scratch: &'a Scratch,
    tally: &'a Tally,
    seed: u64,
}

impl Bench<'_> {
    /// Replays the mixed op `streams` against `engine`, fresh versions per engine.
    fn run_mixed<E: Engine>(
        &self,
        engine: &E,
        streams: &workload::Streams,
        sizes: &SizeModel,
        keys: usize,
        name: &str,
    ) -> mixed::MixedOutcome {
        let versions = Versions::new(keys);
        let p = self.params;
        mixed::run(
            engine,
            streams,
            sizes,
            &versions,
            p.check_every,
            name,
            self.tally,
        )
    }

    /// Fills `engine` with a warm-read case's objects, then times reads at every
    /// thread count.
    fn fill_and_read<E: Engine>(
        &self,
        engine: &E,
        case: &WarmCase,
    ) -> (warm::Fill, Vec<warm::Reads>) {
        let p = self.params;
        let fill = warm::fill(engine, case.objects, case.size, self.tally);
        let reads = p
            .warm_threads
            .iter()
            .map(|&t| {
                warm::reads(
                    engine,
                    case.objects,
                    case.size,
                    t,
                    p.warm_duration,
                    p.check_every,
                    self.tally,
                )
            })
            .collect();
        (fill, reads)
    }

    fn warm_reads(&self, progress: &mut dyn FnMut(&str)) -> Result<Vec<WarmRow>, BenchError> {
        let p = self.params;
        let mut rows = Vec::new();
        for case in &p.warm {
            progress(&format!(
                "warm reads, {} objects of {} B: quire",
                case.objects, case.size
            ));
            let dir = self.scratch.fresh("warm-quire")?;
            let store = open_quire(
                &dir,
                case.cap,
                Options {
                    region_bytes: case.region_bytes,
                    ..Options::default()
                },
            )?;
            let (qfill, q) = self.fill_and_read(&store, case);
            close_quire(store)?;
            drop(dir);

            progress(&format!(
                "warm reads, {} objects of {} B: baseline",
                case.objects, case.size
            ));
            let dir = self.scratch.fresh("warm-baseline")?;
            let files = open_baseline(&dir, case.cap)?;
            let (bfill, b) = self.fill_and_read(&files, case);
            drop(files);
            drop(dir);

            for (qr, br) in q.iter().zip(&b) {
                rows.push(WarmRow {
                    threads: qr.threads,
                    size_bytes: case.size,
                    quire_ops_per_sec: qr.ops_per_sec(),
                    baseline_ops_per_sec: br.ops_per_sec(),
                    quire_hit_ratio: qr.hit_ratio(),
                    baseline_hit_ratio: br.hit_ratio(),
                    objects: case.objects,
                    quire_stored: qfill.stored,
                    baseline_stored: bfill.stored,
                });
            }
        }
        Ok(rows)
    }

    /// A hit-ratio scenario: the yardsticks replay its streams, then quire runs them,
    /// then (for `Mixed` and `MixedScan` only) the baseline.
    fn stream(
        &self,
        scenario: Scenario,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(MixedReport, Option<f64>), BenchError> {
        let p = self.params;
        let name = scenario.name();
        let sizes = p.mixed_sizes;
        let spec = p.stream_spec(scenario, self.seed);
        let keys = spec.keys;
        let working_set: u64 = (0..keys as u64).map(|id| sizes.object_bytes(id)).sum();
        progress(&format!("{name}: generating streams and the yardsticks"));
        let streams = workload::generate(&spec);
        let lru = lru::simulate(p.mixed_cap, &streams, &sizes);
        let s3fifo = lru::replay(&mut S3Fifo::new(p.mixed_cap), &streams, &sizes);
        let held =
            (keys as u128 * u128::from(p.mixed_cap) / u128::from(working_set.max(1))) as usize;
        let wtinylfu = lru::replay(&mut WTinyLfu::new(p.mixed_cap, held), &streams, &sizes);

        progress(&format!("{name}: quire"));
        let dir = self.scratch.fresh(&format!("{name}-quire"))?;
        let store = open_quire(&dir, p.mixed_cap, Options::default())?;
        let q = self.run_mixed(&store, &streams, &sizes, keys, name);
        close_quire(store)?;
        drop(dir);

        let baseline = if matches!(scenario, Scenario::Mixed | Scenario::MixedScan) {
            progress(&format!("{name}: baseline"));
            let dir = self.scratch.fresh(&format!("{name}-baseline"))?;
            let files = open_baseline(&dir, p.mixed_cap)?;
            let b = self.run_mixed(&files, &streams, &sizes, keys, name);
            drop(files);
            drop(dir);
            Some(MixedEngine::from(&b))
        } else {
            None
        };

        let per_entry =
            (q.stats.entries > 0).then(|| q.stats.index_bytes as f64 / q.stats.entries as f64);
        Ok((
            MixedReport {
                quire: MixedEngine::from(&q),
                baseline,
                lru_hit_ratio: lru.hit_ratio(),
                s3fifo_hit_ratio: s3fifo.hit_ratio(),
                wtinylfu_hit_ratio: wtinylfu.hit_ratio(),
                threads: p.mixed_threads,
                keys,
                cap_bytes: p.mixed_cap,
                working_set_bytes: working_set,
                warmup_ops: p.mixed_warmup_ops * p.mixed_threads,
                measured_ops: streams.measured_ops(),
                scan_share: spec.mix.scan,
                zipf_s: spec.zipf_s,
                shift_every: spec.shift.map(|s| s.every),
                shift_step: spec.shift.map(|s| s.step),
            },
            per_entry,
        ))
    }

    fn eviction(
        &self,
        progress: &mut dyn FnMut(&str),
    ) -> Result<(EvictionReport, EngineSeries), BenchError> {
        let p = self.params;
        let readback = 1000;
        let quire_options = Options {
            admission: false,
            ..Options::default()
        };
        let admission = quire_options.admission;

        let spec = SweepSpec {
            objects: p.sweep_objects,
            batch: p.sweep_batch,
            sizes: &p.sweep_sizes,
            readback,
            check_every: p.check_every,
            scenario: "eviction",
            tally: self.tally,
        };

        progress("eviction sweep: quire");
        let dir = self.scratch.fresh("eviction-quire")?;
        let store = open_quire(&dir, p.sweep_cap, quire_options)?;
        let q = spec.run(&store, |_| {});
        let q_stats = store.stats();
        close_quire(store)?;
        drop(dir);

        progress("eviction sweep: baseline");
        let dir = self.scratch.fresh("eviction-baseline")?;
        let files = open_baseline(&dir, p.sweep_cap)?;
        let b = spec.run(&files, |_| {});
        let b_stats = files.stats();
        drop(files);
        drop(dir);

        let report = EvictionReport {
            quire_ops_per_sec: q.ops_per_sec(),
            baseline_ops_per_sec: b.ops_per_sec(),
            quire_max_stall_ms: q.max_put.as_secs_f64() * 1e3,
            baseline_max_stall_ms: b.max_put.as_secs_f64() * 1e3,
            objects: p.sweep_objects,
            cap_bytes: p.sweep_cap,
            batch: p.sweep_batch,
            quire_stored: q.stored,
            baseline_stored: b.stored,
            quire_readback_hit_ratio: ratio(q.readback_hits, q.readback_gets),
            baseline_readback_hit_ratio: ratio(b.readback_hits, b.readback_gets),
            quire_admission: admission,
            quire_stats: q_stats,
            baseline_stats: b_stats,
        };
        let series = EngineSeries {
            quire: q.batches,
            baseline: b.batches,
        };
        Ok((report, series))
    }

    fn overflow(&self, progress: &mut dyn FnMut(&str)) -> Result<OverflowReport, BenchError> {
        let p = self.params;
        let total = p.overflow_cap * p.overflow_factor;
        let quire_options = Options {
            admission: false,
            ..Options::default()
        };

        progress("overflow: quire");
        let dir = self.scratch.fresh("overflow-quire")?;
        let volume = dir.volume();
        let store = open_quire(&dir, p.overflow_cap, quire_options)?;
        let q = eviction::overflow(
            &store,
            total,
            p.overflow_batch,
            &p.overflow_sizes,
            p.check_every,
            self.tally,
            |_| allocated_bytes(&volume),
        );
        close_quire(store)?;
        drop(dir);

        progress("overflow: baseline");
        let dir = self.scratch.fresh("overflow-baseline")?;
        let files = open_baseline(&dir, p.overflow_cap)?;
        let b = eviction::overflow(
            &files,
            total,
            p.overflow_batch,
            &p.overflow_sizes,
            p.check_every,
            self.tally,
            FileStore::disk_bytes,
        );
        drop(files);
        drop(dir);

        Ok(OverflowReport {
            cap_bytes: p.overflow_cap,
            quire_peak_bytes: q.peak_disk_bytes,
            baseline_peak_bytes: b.peak_disk_bytes,
            quire_peak_bytes_used: q.peak_bytes_used,
            baseline_peak_bytes_used: b.peak_bytes_used,
            bytes_written: q.bytes_written,
            quire_ops_per_sec: q.sweep.ops_per_sec(),
            baseline_ops_per_sec: b.sweep.ops_per_sec(),
            quire_samples: q.samples,
            baseline_samples: b.samples,
        })
    }

    /// quire alone, RAM tier off and on: two volumes filled alike and both warmed up,
    /// then for each thread count timed reads of the one without the tier and of the one
    /// with it, in alternating rounds.
    fn ram_tier(&self, progress: &mut dyn FnMut(&str)) -> Result<Vec<RamTierRow>, BenchError> {
        let p = self.params;
        let warm = p
            .warm
            .iter()
            .filter(|c| p.ram_sizes.contains(&c.size))
            .map(|c| ("warm", c, &p.ram_threads));
        let hot = std::iter::once(("few_regions", &p.ram_hot, &p.ram_hot_threads));
        let mut rows = Vec::new();
        for (name, case, threads) in warm.chain(hot) {
            progress(&format!(
                "ram tier ({name}), {} objects of {} B: quire off vs on",
                case.objects, case.size
            ));
            let off_dir = self.scratch.fresh("ram-tier-off")?;
            let on_dir = self.scratch.fresh("ram-tier-on")?;
            let options = Options {
                region_bytes: case.region_bytes,
                ..Options::default()
            };
            let off = open_quire(&off_dir, case.cap, options.clone())?;
            let on = open_quire(
                &on_dir,
                case.cap,
                Options {
                    ram_tier_bytes: case.cap,
                    ..options
                },
            )?;
            for store in [&off, &on] {
                warm::fill(store, case.objects, case.size, self.tally);
                ram_tier::warm_up(store, case.objects, case.size, self.tally);
            }
            let on_stats = on.stats();
            let regions = on_stats.bytes_used.div_ceil(on.region_bytes().max(1));
            for &t in threads {
                let c = ram_tier::compare(
                    &off,
                    &on,
                    case.objects,
                    case.size,
                    t,
                    p.warm_duration,
                    p.ram_rounds,
                    p.check_every,
                    self.tally,
                );
                let (round_ratio_min, round_ratio_max) = c.round_range();
                rows.push(RamTierRow {
                    size_bytes: case.size,
                    objects: case.objects,
                    threads: t,
                    off_ops_per_sec: c.off.ops_per_sec(),
                    on_ops_per_sec: c.on.ops_per_sec(),
                    ratio: c.on_over_off(),
                    ram_hit_share: c.ram_hit_share,
                    case: name.to_string(),
                    regions,
                    ram_bytes: on_stats.ram_bytes,
                    off_hit_ratio: c.off.hit_ratio(),
                    on_hit_ratio: c.on.hit_ratio(),
                    rounds: c.round_ratios.len(),
                    round_ratio_min,
                    round_ratio_max,
                });
            }
            close_quire(off)?;
            close_quire(on)?;
            drop((off_dir, on_dir));
        }
        Ok(rows)
    }

    fn restart(&self, progress: &mut dyn FnMut(&str)) -> Result<RestartReport, BenchError> {
        let p = self.params;
        let sizes = p.restart_sizes;
        let keys = sizes.keys_for_bytes((p.restart_cap as f64 * p.restart_fill) as u64);
        let spec = StreamSpec::restart(keys, self.seed ^ 0x7265_7374);
        let streams = workload::generate(&spec);
        let versions = Versions::new(keys);
        progress("restart: quire");
        let dir = self.scratch.fresh("restart-quire")?;
        let volume = dir.volume();
        let r = restart::run(
            || Store::open(&volume, p.restart_cap, Options::default()),
            Store::close,
            &streams.warmup[0],
            &streams.measured[0],
            &sizes,
            &versions,
            p.check_every,
            self.tally,
        )
        .map_err(|e| format!("restart scenario on {}: {e}", volume.display()))?;
        drop(dir);
        let (before, after) = (r.hit_ratio_before(), r.hit_ratio_after());
        Ok(RestartReport {
            hit_ratio_before: before,
            hit_ratio_after: after,
            after_over_before: if before > 0.0 { after / before } else { 0.0 },
            keys,
            cap_bytes: p.restart_cap,
            warmup_ops: spec.warmup_ops,
            segment_ops: spec.measured_ops,
            entries_before: r.stats_before.entries,
            entries_after_open: r.stats_after_open.entries,
            close_ms: r.close_time.as_secs_f64() * 1e3,
            reopen_ms: r.reopen_time.as_secs_f64() * 1e3,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quick_params_are_smaller_than_full() {
        let (q, f) = (Params::new(true), Params::new(false));
        assert!(q.mixed_measured_ops < f.mixed_measured_ops);
        assert!(q.sweep_objects < f.sweep_objects);
        assert!(q.warm_duration < f.warm_duration);
        assert!(q.ram_threads.len() < f.ram_threads.len());
        for p in [&q, &f] {
            // The RAM-tier comparison reuses warm cases: each of its sizes must have one.
            for size in &p.ram_sizes {
                assert_eq!(
                    p.warm.iter().filter(|c| c.size == *size).count(),
                    1,
                    "no single warm case of {size} B"
                );
            }
            assert!(
                p.ram_hot.objects * p.ram_hot.size <= 1 << 20,
                "not a small hot set"
            );
        }
        for case in q.warm.iter().chain(&f.warm).chain([&q.ram_hot, &f.ram_hot]) {
            assert!(
                (case.objects * case.size) as u64 * 2 <= case.cap,
                "{case:?} does not fit comfortably"
            );
        }
    }

    #[test]
    fn scratch_dirs_are_removed() {
        let base = std::env::temp_dir().join(format!("quire-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&base).expect("base");
        let root;
        {
            let s = Scratch::new(Some(&base)).expect("scratch");
            root = s.path().to_path_buf();
            let d = s.fresh("x").expect("fresh");
            std::fs::write(d.path().join("f"), b"1").expect("write");
            let inner = d.path().to_path_buf();
            drop(d);
            assert!(!inner.exists());
            let _kept = s.fresh("y").expect("fresh");
        }
        assert!(!root.exists());
        assert!(base.exists());
        std::fs::remove_dir_all(&base).expect("cleanup");
    }
}
