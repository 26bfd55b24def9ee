//! The command line, as clap derive types: `quire <command> ...`. Today the one command
//! is `bench store`; `serve`, `proxy` and `purge` join as further [`Command`] variants
//! (and `bench` as further [`BenchCommand`] targets), each with its own args struct.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use quire_store::bench::Scenario;

/// quire: a page cache for content sites, with a publishing server built in.
#[derive(Debug, Parser)]
#[command(name = "quire", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a benchmark.
    #[command(subcommand)]
    Bench(BenchCommand),
}

/// What to benchmark.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Compare quire's memory-mapped store with the file-per-entry baseline (seed 002's
    /// tests: warm reads, realistic mix with and without scans, eviction sweep,
    /// overflow, warm restart; and quire's RAM tier off vs on). Exits non-zero if any hit
    /// returned wrong bytes.
    Store(BenchStoreArgs),
}

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
            ScenarioArg::Eviction => Scenario::Eviction,
            ScenarioArg::Overflow => Scenario::Overflow,
            ScenarioArg::Restart => Scenario::Restart,
            ScenarioArg::RamTier => Scenario::RamTier,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn bench_store_parses() {
        let cli = Cli::try_parse_from([
            "quire",
            "bench",
            "store",
            "--quick",
            "--json",
            "out.json",
            "--only",
            "mixed-scan",
        ])
        .expect("parses");
        let Command::Bench(BenchCommand::Store(args)) = cli.command;
        assert!(args.quick);
        assert_eq!(args.json, Some(PathBuf::from("out.json")));
        assert_eq!(args.only.map(Scenario::from), Some(Scenario::MixedScan));
        assert_eq!(args.dir, None);
        assert_eq!(args.seed, 1);
    }

    #[test]
    fn every_scenario_name_is_accepted_and_others_are_not() {
        for s in Scenario::ALL {
            let cli = Cli::try_parse_from(["quire", "bench", "store", "--only", s.name()])
                .expect("parses");
            let Command::Bench(BenchCommand::Store(args)) = cli.command;
            assert_eq!(args.only.map(Scenario::from), Some(s));
        }
        let cli =
            Cli::try_parse_from(["quire", "bench", "store", "--only", "ram-tier"]).expect("parses");
        let Command::Bench(BenchCommand::Store(args)) = cli.command;
        assert_eq!(args.only.map(Scenario::from), Some(Scenario::RamTier));
        assert!(Cli::try_parse_from(["quire", "bench", "store", "--only", "nope"]).is_err());
        assert!(Cli::try_parse_from(["quire", "bench"]).is_err());
    }
}
