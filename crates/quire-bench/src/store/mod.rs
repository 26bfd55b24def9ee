//! `quire bench store`: the published comparison of a memory-mapped cache engine with a
//! file-per-entry disk cache (warm reads by thread count, a mixed load's tail, eviction,
//! the cap), reproduced with quire's [`Store`](quire_store::Store) and the file-per-entry
//! `FileStore` (in `baseline`), run scenario by scenario in one process.
//!
//! The scenarios ([`Scenario`]): warm reads across object sizes and thread counts; a
//! realistic Zipf mix of gets (cache-aside), puts and deletes over heavy-tailed sizes with
//! a working set twice the cap, with and without one-hit scans, its hit ratio read against
//! an exact LRU, W-TinyLFU and S3-FIFO replaying the very same op streams at the same
//! bytes; the same yardsticks on a Zipf 0.8 long tail and on a "news" stream whose
//! popular set moves (quire alone against them); an eviction sweep; writing ten times
//! the cap while watching the disk; a warm restart; and quire alone with its RAM tier
//! off and on.
//!
//! Everything but the `driver` is generic over [`Engine`](quire_store::Engine):
//!
//! - `content`: keys, metadata, bodies and sizes as functions of (id, version); the
//!   byte checker.
//! - `zipf`: the Zipf sampler and the rank → key permutation.
//! - `workload`: pre-generated per-thread op streams.
//! - `lru`: the exact-LRU reference; `s3fifo` and `wtinylfu`: the S3-FIFO and
//!   W-TinyLFU yardsticks beside it.
//! - `tally`: mismatches and errors seen.
//! - `warm`, `mixed`, `eviction`, `restart`, `ram_tier`: the scenarios.
//! - `report`: the results as serialisable data; `table`: as the printed table.
//! - `driver`: parameters, scratch directories, and the run of both engines.
//! - [`replay`]: a one-thread replay of the mix through the store alone, with where
//!   the cap's bytes go (the `replay` example).
//!
//! [`run`] is the command: it runs the driver, prints the table, writes `--json`, and
//! fails when a hit returned wrong bytes or an engine call failed.

mod content;
mod driver;
mod eviction;
mod lru;
mod mixed;
mod ram_tier;
pub mod replay;
mod report;
mod restart;
mod s3fifo;
mod table;
mod tally;
mod warm;
mod workload;
mod wtinylfu;
mod zipf;

#[cfg(test)]
mod testing;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context as _;
use clap::{Args, ValueEnum};

use driver::{measure, BenchConfig, Params};

/// Arguments of `quire bench store`.
#[derive(Debug, Clone, Args)]
pub struct BenchStoreArgs {
    /// Small and short: the CI smoke run (under a minute on 2 cores).
    #[arg(long)]
    pub quick: bool,
    /// Also write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Put the scratch volumes and directories under DIR (default: the system temp
    /// directory); they are removed afterwards.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Run only this scenario.
    #[arg(long, value_name = "SCENARIO", value_enum)]
    pub only: Option<ScenarioArg>,
    /// Seed of the op streams.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// `--only` values: the scenarios' keys in the JSON report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ScenarioArg {
    /// Warm reads across object sizes and thread counts.
    #[value(name = "warm_reads", alias = "warm-reads", alias = "warm")]
    WarmReads,
    /// Zipf mix of gets (cache-aside), puts and deletes, working set 2x the cap.
    #[value(name = "mixed")]
    Mixed,
    /// The mix with 10 % one-hit scan gets.
    #[value(name = "mixed_scan", alias = "mixed-scan")]
    MixedScan,
    /// The mix over a Zipf 0.8 long tail (quire and the yardsticks).
    #[value(name = "zipf08", alias = "zipf-0.8")]
    Zipf08,
    /// The mix with a popular set that moves over time (quire and the yardsticks).
    #[value(name = "news")]
    News,
    /// Stream new objects into a small cache, one thread.
    #[value(name = "eviction")]
    Eviction,
    /// Write ten times a 16 MiB cap and watch the disk.
    #[value(name = "overflow")]
    Overflow,
    /// Hit ratio before and after close + reopen (quire only).
    #[value(name = "restart")]
    Restart,
    /// Warm reads with quire's RAM tier off vs on (quire only).
    #[value(name = "ram_tier", alias = "ram-tier")]
    RamTier,
}

impl From<ScenarioArg> for Scenario {
    fn from(s: ScenarioArg) -> Scenario {
        match s {
            ScenarioArg::WarmReads => Scenario::WarmReads,
            ScenarioArg::Mixed => Scenario::Mixed,
            ScenarioArg::MixedScan => Scenario::MixedScan,
            ScenarioArg::Zipf08 => Scenario::Zipf08,
            ScenarioArg::News => Scenario::News,
            ScenarioArg::Eviction => Scenario::Eviction,
            ScenarioArg::Overflow => Scenario::Overflow,
            ScenarioArg::Restart => Scenario::Restart,
            ScenarioArg::RamTier => Scenario::RamTier,
        }
    }
}

/// Runs the benchmark as `args` say.
pub fn run(args: &BenchStoreArgs) -> anyhow::Result<ExitCode> {
    let config = BenchConfig {
        quick: args.quick,
        dir: args.dir.clone(),
        only: args.only.map(Into::into),
        seed: args.seed,
    };
    let t0 = Instant::now();
    let mut progress = |line: &str| {
        eprintln!("[{:6.1}s] {line}", t0.elapsed().as_secs_f64());
    };
    let report = measure(&config, &mut progress)
        .map_err(anyhow::Error::from_boxed)
        .context("quire bench store")?;
    print!("{}", table::render(&report));
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report).context("encoding the report")?;
        std::fs::write(path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if report.ok() {
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!(
            "quire bench store: FAILED: {} mismatched hits, {} engine errors",
            report.mismatches, report.errors
        );
        for p in &report.problems {
            eprintln!("  {p}");
        }
        Ok(ExitCode::FAILURE)
    }
}

/// The scenarios of `quire bench store`, named as in the JSON report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    /// Warm reads across object sizes and thread counts, both engines.
    WarmReads,
    /// The Zipf mix of gets, puts and deletes, both engines and the exact LRU.
    Mixed,
    /// The mix with one-hit scan gets.
    MixedScan,
    /// The mix over Zipf 0.8, quire and the yardsticks only.
    Zipf08,
    /// The mix with a moving popular set, quire and the yardsticks only.
    News,
    /// New objects streamed into a small cache.
    Eviction,
    /// Ten times the cap written while the disk is watched.
    Overflow,
    /// Hit ratio before and after close + reopen (quire only).
    Restart,
    /// Warm reads with the RAM tier off and on (quire only).
    RamTier,
}

impl Scenario {
    /// Every scenario, in the order a full run runs them.
    pub const ALL: [Scenario; 9] = [
        Scenario::WarmReads,
        Scenario::Mixed,
        Scenario::MixedScan,
        Scenario::Zipf08,
        Scenario::News,
        Scenario::Eviction,
        Scenario::Overflow,
        Scenario::Restart,
        Scenario::RamTier,
    ];

    /// The scenario's key in the JSON report.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::WarmReads => "warm_reads",
            Scenario::Mixed => "mixed",
            Scenario::MixedScan => "mixed_scan",
            Scenario::Zipf08 => "zipf08",
            Scenario::News => "news",
            Scenario::Eviction => "eviction",
            Scenario::Overflow => "overflow",
            Scenario::Restart => "restart",
            Scenario::RamTier => "ram_tier",
        }
    }

    /// The scenario called `name` (its JSON key; `-` may stand for `_`).
    pub fn from_name(name: &str) -> Option<Scenario> {
        let name = name.replace('-', "_");
        Scenario::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_names_round_trip() {
        for s in Scenario::ALL {
            assert_eq!(Scenario::from_name(s.name()), Some(s));
        }
        assert_eq!(Scenario::from_name("mixed-scan"), Some(Scenario::MixedScan));
        assert_eq!(Scenario::from_name("ram-tier"), Some(Scenario::RamTier));
        assert_eq!(Scenario::from_name("nope"), None);
    }
}
