//! The benchmark's results as plain serialisable data: what `quire bench store` prints
//! and writes with `--json`. The top-level keys `warm_reads`, `mixed`, `mixed_scan`,
//! `zipf08`, `news`, `eviction`, `overflow`, `restart` and `ram_tier` are a contract
//! (null for a scenario not run); the rest is extra detail.

use std::collections::BTreeMap;

use serde::Serialize;

use super::mixed::{MixedOutcome, OpStats};
use crate::histogram::Histogram;
use crate::machine::Machine;
use quire_store::Stats;

/// Everything one run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Report {
    pub warm_reads: Option<Vec<WarmRow>>,
    pub mixed: Option<MixedReport>,
    pub mixed_scan: Option<MixedReport>,
    /// The mix over Zipf 0.8 (no baseline).
    pub zipf08: Option<MixedReport>,
    /// The mix with a moving popular set (no baseline).
    pub news: Option<MixedReport>,
    pub eviction: Option<EvictionReport>,
    pub overflow: Option<OverflowReport>,
    pub restart: Option<RestartReport>,
    /// quire's warm reads with the RAM tier off and on.
    pub ram_tier: Option<Vec<RamTierRow>>,
    pub machine: Machine,
    /// "quick" or "full".
    pub mode: String,
    pub seed: u64,
    /// quire's key-index RAM per live entry (index_bytes / entries), from the mixed run.
    pub index_bytes_per_entry: Option<f64>,
    /// Puts per second of each batch of the eviction sweep.
    pub eviction_batches: Option<EngineSeries>,
    /// Hits whose bytes were wrong. Any makes the command fail.
    pub mismatches: u64,
    /// Puts or removes that failed with an error other than declining the object.
    /// Any makes the command fail.
    pub errors: u64,
    /// Puts declined with a `TooLarge` error (a cache may decline).
    pub declined_too_large: u64,
    /// Puts declined with a `NoSpace` error (every region pinned).
    pub declined_no_space: u64,
    /// The first few mismatches and errors, described.
    pub problems: Vec<String>,
    pub elapsed_secs: f64,
}

impl Report {
    /// True when no hit returned wrong bytes and no engine call failed.
    pub(crate) fn ok(&self) -> bool {
        self.mismatches == 0 && self.errors == 0
    }
}

/// One (size, threads) point of the warm-read scenario.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct WarmRow {
    pub threads: usize,
    pub size_bytes: usize,
    pub quire_ops_per_sec: f64,
    pub baseline_ops_per_sec: f64,
    pub quire_hit_ratio: f64,
    pub baseline_hit_ratio: f64,
    pub objects: usize,
    /// Objects each engine actually stored during the fill.
    pub quire_stored: u64,
    pub baseline_stored: u64,
}

/// One (case, size, threads) point of the RAM-tier comparison (quire only).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct RamTierRow {
    pub size_bytes: usize,
    pub objects: usize,
    pub threads: usize,
    /// Aggregate gets per second with the RAM tier off.
    pub off_ops_per_sec: f64,
    /// The same, with a RAM tier large enough for every object, warmed up.
    pub on_ops_per_sec: f64,
    /// on / off.
    pub ratio: f64,
    /// Hits served from RAM over all hits, during the timed reads with the tier on.
    pub ram_hit_share: f64,
    /// "warm" (a warm_reads case) or "few_regions" (a small hot set packed in a
    /// region or two, where every pinned read contends on the same pin counts).
    pub case: String,
    /// Regions the objects span (bytes written over the region size, rounded up).
    pub regions: u64,
    /// Bytes the RAM tier held after the warm-up.
    pub ram_bytes: u64,
    pub off_hit_ratio: f64,
    pub on_hit_ratio: f64,
    /// The timed reads alternate off and on in this many rounds; on/off of the round
    /// with the lowest and the highest ratio (how steady the comparison was).
    pub rounds: usize,
    pub round_ratio_min: f64,
    pub round_ratio_max: f64,
}

/// Latency percentiles of one kind of op, in microseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Latency {
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

impl From<&Histogram> for Latency {
    /// From a histogram of nanoseconds.
    fn from(h: &Histogram) -> Self {
        Latency {
            count: h.count(),
            p50_us: h.percentile(50.0) / 1000.0,
            p99_us: h.percentile(99.0) / 1000.0,
            p999_us: h.percentile(99.9) / 1000.0,
            max_us: h.max() as f64 / 1000.0,
            mean_us: h.mean() / 1000.0,
        }
    }
}

/// One engine's side of a mixed run.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct MixedEngine {
    pub ops_per_sec: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub hit_ratio: f64,
    pub max_us: f64,
    pub mean_us: f64,
    pub ops: u64,
    pub gets: u64,
    pub hits: u64,
    pub puts_stored: u64,
    pub puts_rejected: u64,
    pub elapsed_secs: f64,
    /// Latency by kind: "get_hit", "get_miss" (including its fill), "put", "delete".
    pub by_op: BTreeMap<String, Latency>,
    pub stats: Stats,
}

impl From<&MixedOutcome> for MixedEngine {
    fn from(m: &MixedOutcome) -> Self {
        let o: &OpStats = &m.ops;
        let all = Latency::from(&o.all);
        let mut by_op = BTreeMap::new();
        by_op.insert("get_hit".to_string(), Latency::from(&o.get_hit));
        by_op.insert("get_miss".to_string(), Latency::from(&o.get_miss));
        by_op.insert("put".to_string(), Latency::from(&o.put));
        by_op.insert("delete".to_string(), Latency::from(&o.delete));
        MixedEngine {
            ops_per_sec: m.ops_per_sec(),
            p50_us: all.p50_us,
            p99_us: all.p99_us,
            p999_us: all.p999_us,
            hit_ratio: o.hit_ratio(),
            max_us: all.max_us,
            mean_us: all.mean_us,
            ops: o.ops,
            gets: o.gets,
            hits: o.hits,
            puts_stored: o.puts_stored,
            puts_rejected: o.puts_rejected,
            elapsed_secs: m.elapsed.as_secs_f64(),
            by_op,
            stats: m.stats.clone(),
        }
    }
}

/// A run of one hit-ratio stream: quire, the baseline (on `mixed` and `mixed_scan`
/// only) and the yardsticks replaying the same streams at the same bytes.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct MixedReport {
    pub quire: MixedEngine,
    pub baseline: Option<MixedEngine>,
    pub lru_hit_ratio: f64,
    /// S3-FIFO's hit ratio on the same streams at the same bytes (a yardstick).
    pub s3fifo_hit_ratio: f64,
    /// W-TinyLFU's (foyer's `Lfu`) on the same streams at the same bytes.
    pub wtinylfu_hit_ratio: f64,
    pub threads: usize,
    pub keys: usize,
    pub cap_bytes: u64,
    /// Bytes of all key-space objects (key + meta + body), about twice the cap.
    pub working_set_bytes: u64,
    pub warmup_ops: usize,
    pub measured_ops: usize,
    pub scan_share: f64,
    pub zipf_s: f64,
    /// The news stream's popular set moves by `shift_step` keys every `shift_every`
    /// ops of each thread (null: it does not move).
    pub shift_every: Option<usize>,
    pub shift_step: Option<usize>,
}

impl MixedReport {
    /// The best yardstick's hit ratio and its name.
    pub(crate) fn best_yardstick(&self) -> (f64, &'static str) {
        [
            (self.lru_hit_ratio, "LRU"),
            (self.wtinylfu_hit_ratio, "W-TinyLFU"),
            (self.s3fifo_hit_ratio, "S3-FIFO"),
        ]
        .into_iter()
        .fold(
            (f64::NEG_INFINITY, ""),
            |best, y| {
                if y.0 > best.0 {
                    y
                } else {
                    best
                }
            },
        )
    }
}

/// The eviction sweep of both engines.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct EvictionReport {
    pub quire_ops_per_sec: f64,
    pub baseline_ops_per_sec: f64,
    pub quire_max_stall_ms: f64,
    pub baseline_max_stall_ms: f64,
    pub objects: u64,
    pub cap_bytes: u64,
    pub batch: u64,
    pub quire_stored: u64,
    pub baseline_stored: u64,
    /// Hits among gets of the last objects written.
    pub quire_readback_hit_ratio: f64,
    pub baseline_readback_hit_ratio: f64,
    pub quire_admission: bool,
    pub quire_stats: Stats,
    pub baseline_stats: Stats,
}

/// Puts per second of each batch, per engine.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct EngineSeries {
    pub quire: Vec<f64>,
    pub baseline: Vec<f64>,
}

/// Disk use while writing far past the cap.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct OverflowReport {
    pub cap_bytes: u64,
    /// quire: the volume file's allocated bytes; baseline: the directory's file sizes.
    pub quire_peak_bytes: u64,
    pub baseline_peak_bytes: u64,
    pub quire_peak_bytes_used: u64,
    pub baseline_peak_bytes_used: u64,
    pub bytes_written: u64,
    pub quire_ops_per_sec: f64,
    pub baseline_ops_per_sec: f64,
    pub quire_samples: Vec<u64>,
    pub baseline_samples: Vec<u64>,
}

/// quire's hit ratio over the same stream segment before and after close + reopen.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct RestartReport {
    pub hit_ratio_before: f64,
    pub hit_ratio_after: f64,
    pub after_over_before: f64,
    pub keys: usize,
    pub cap_bytes: u64,
    pub warmup_ops: usize,
    pub segment_ops: usize,
    pub entries_before: u64,
    pub entries_after_open: u64,
    pub close_ms: f64,
    pub reopen_ms: f64,
}
