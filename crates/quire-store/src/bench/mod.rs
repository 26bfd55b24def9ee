//! `quire bench store`: the published comparison of a memory-mapped cache engine with a
//! file-per-entry disk cache (warm reads by thread count, a mixed load's tail, eviction,
//! the cap), reproduced with quire's [`Store`](crate::Store) and the file-per-entry
//! [`FileStore`](crate::FileStore) run scenario by scenario in one process (compiled
//! with the `bench` feature).
//!
//! The scenarios ([`Scenario`]): warm reads across object sizes and thread counts; a
//! realistic Zipf mix of gets (cache-aside), puts and deletes over heavy-tailed sizes with
//! a working set twice the cap, with and without one-hit scans, its hit ratio read against
//! an exact LRU replaying the very same op streams; an eviction sweep; writing ten times
//! the cap while watching the disk; a warm restart; and quire alone with its RAM tier
//! off and on.
//!
//! Everything but [`run`](run::run) is generic over [`Engine`](crate::Engine):
//!
//! - [`content`]: keys, metadata, bodies and sizes as functions of (id, version); the
//!   byte checker.
//! - [`zipf`]: the Zipf sampler and the rank → key permutation.
//! - [`workload`]: pre-generated per-thread op streams.
//! - [`lru`]: the exact-LRU reference.
//! - [`histogram`]: latency histogram and percentiles.
//! - [`tally`]: mismatches and errors seen.
//! - [`warm`], [`mixed`], [`eviction`], [`restart`], [`ram_tier`]: the scenarios.
//! - [`machine`]: the machine and its state during the run.
//! - [`report`]: the results as serialisable data.
//! - [`run`](mod@run): parameters, scratch directories, and the run of both engines.

pub mod content;
pub mod eviction;
pub mod histogram;
pub mod lru;
pub mod machine;
pub mod mixed;
pub mod ram_tier;
pub mod report;
pub mod restart;
pub mod run;
pub mod tally;
pub mod warm;
pub mod workload;
pub mod zipf;

#[cfg(test)]
mod testing;

pub use report::Report;
pub use run::{run, BenchConfig, BenchError, Params};

/// The scenarios of `quire bench store`, named as in the JSON report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scenario {
    WarmReads,
    Mixed,
    MixedScan,
    Eviction,
    Overflow,
    Restart,
    RamTier,
}

impl Scenario {
    pub const ALL: [Scenario; 7] = [
        Scenario::WarmReads,
        Scenario::Mixed,
        Scenario::MixedScan,
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
