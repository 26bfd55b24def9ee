//! A one-thread replay of `quire bench store`'s hit-ratio streams (mixed, with scans,
//! Zipf 0.8, news) through a real [`Store`], for iterating on the hit ratio quickly,
//! beside the yardsticks (exact LRU, W-TinyLFU, S3-FIFO) on the same streams: the threads' ops are
//! interleaved round-robin, as the exact-LRU reference replays them, so the figures do
//! not depend on scheduling. The bench's own multi-threaded figures stay the reference.
//!
//! Run through the `replay` example, [`run`] here:
//! `cargo run --release -p quire-bench --example replay [-- DIR [SEED]]`
//! (DIR defaults to the temp directory; `/dev/shm` keeps the volume in RAM).
//! `QUIRE_REPLAY_STREAMS=mixed,news` picks streams (default: all four).
//! `QUIRE_REPLAY_CARRY=0.6` sets `carry_share`; `QUIRE_REPLAY_ORACLE=1` never stores a
//! scan key (its get still misses and is counted), the most any admission rule could
//! save on the scan mix.
//!
//! Each line also says where the cap's bytes were, averaged over 16 samples of the
//! measured part ([`SpaceBreakdown`]), and what exact LRU scores with a cap of only the
//! live payload bytes (`lru@live`): the gap between that and `lru` is what the store
//! loses to space it does not fill with entries, the gap between `hit` and `lru@live`
//! what its policy wins back.

use std::path::Path;

use anyhow::Context as _;
use quire_store::{Engine, Options, SpaceBreakdown, Store};

use super::content;
use super::lru;
use super::mixed::{Versions, Worker};
use super::s3fifo::S3Fifo;
use super::tally::Tally;
use super::workload::{self, StreamSpec, Streams};
use super::wtinylfu::WTinyLfu;
use super::{Params, Scenario};

/// What one replay gave.
struct Replayed {
    hit: f64,
    /// [`PARTS`] of the cap summed over the samples, their cap, and the sample count.
    space: [f64; PARTS.len()],
    cap: f64,
    samples: u32,
    /// Scan keys stored (admitted), and asked for.
    scan_stored: u64,
    scan_gets: u64,
}

const SAMPLES: usize = 16;

/// Reads one part of the cap out of a breakdown.
type Part = fn(&SpaceBreakdown) -> u64;

/// The parts of the cap [`SpaceBreakdown`] tells apart, as printed. The first is the
/// live payload.
const PARTS: [(&str, Part); 8] = [
    ("live payload", |b| b.live_payload_bytes),
    ("entry headers", |b| b.live_overhead_bytes),
    ("sealed dead", |b| b.sealed_dead_bytes),
    ("sealed tail", |b| b.sealed_tail_bytes),
    ("open dead", |b| b.open_dead_bytes),
    ("open room", |b| b.open_room_bytes),
    ("region headers", |b| b.region_header_bytes),
    ("unregioned", |b| b.unregioned_bytes),
];

fn replay(store: &Store, streams: &Streams, p: &Params, keys: usize, tally: &Tally) -> Replayed {
    let oracle = std::env::var_os("QUIRE_REPLAY_ORACLE").is_some();
    let versions = Versions::new(keys);
    let mut w = Worker::new(store, &p.mixed_sizes, &versions, tally, "replay", 64);
    let mut out = Replayed {
        hit: 0.0,
        space: [0.0; PARTS.len()],
        cap: 0.0,
        samples: 0,
        scan_stored: 0,
        scan_gets: 0,
    };
    for (phase, counted) in [(&streams.warmup, false), (&streams.measured, true)] {
        if counted {
            w.stats = Default::default();
        }
        let longest = phase.iter().map(Vec::len).max().unwrap_or(0);
        let every = (longest / SAMPLES).max(1);
        for i in 0..longest {
            if counted && i % every == every - 1 {
                let b = store.space_breakdown();
                for (sum, (_, part)) in out.space.iter_mut().zip(PARTS) {
                    *sum += part(&b) as f64;
                }
                out.cap += b.cap_bytes as f64;
                out.samples += 1;
            }
            for thread in phase {
                let Some(&op) = thread.get(i) else { continue };
                if oracle && op.id >= workload::SCAN_BASE {
                    // What the mix would score if scan keys were never stored.
                    w.stats.gets += 1;
                    let _ = store.get(&content::key(op.id));
                    continue;
                }
                if counted && op.id >= workload::SCAN_BASE {
                    let before = store.stats().admitted;
                    w.run(op);
                    out.scan_gets += 1;
                    out.scan_stored += store.stats().admitted - before;
                    continue;
                }
                w.run(op);
            }
        }
    }
    out.hit = w.stats.hit_ratio();
    out
}

/// Replays the mixed and the mixed-with-scans streams of seed `seed` through a store
/// in `dir` and prints a line of figures for each. Options come from the environment
/// (see the module doc); a bad value there is an error.
pub fn run(dir: &Path, seed: u64) -> anyhow::Result<()> {
    let mut options = Options::default();
    if let Ok(c) = std::env::var("QUIRE_REPLAY_CARRY") {
        options.carry_share = c.parse().context("QUIRE_REPLAY_CARRY")?;
    }
    if let Ok(r) = std::env::var("QUIRE_REPLAY_REGION_KIB") {
        options.region_bytes = Some(r.parse::<u64>().context("QUIRE_REPLAY_REGION_KIB")? << 10);
    }
    let p = Params::new(false);
    let wanted = std::env::var("QUIRE_REPLAY_STREAMS").ok();
    for scenario in [
        Scenario::Mixed,
        Scenario::MixedScan,
        Scenario::Zipf08,
        Scenario::News,
    ] {
        if wanted.as_deref().is_some_and(|w| {
            !w.split(',')
                .any(|n| Scenario::from_name(n) == Some(scenario))
        }) {
            continue;
        }
        replay_mix(dir, &p, scenario, &p.stream_spec(scenario, seed), &options)?;
    }
    Ok(())
}

/// One mix: the replay through a fresh volume in `dir`, then its two lines.
fn replay_mix(
    dir: &Path,
    p: &Params,
    scenario: Scenario,
    spec: &StreamSpec,
    options: &Options,
) -> anyhow::Result<()> {
    let streams = workload::generate(spec);
    let lru = lru::simulate(p.mixed_cap, &streams, &p.mixed_sizes);
    let working_set: u64 = (0..spec.keys as u64)
        .map(|id| p.mixed_sizes.object_bytes(id))
        .sum();
    let held =
        |cap: u64| (spec.keys as u128 * u128::from(cap) / u128::from(working_set.max(1))) as usize;
    let wtinylfu = lru::replay(
        &mut WTinyLfu::new(p.mixed_cap, held(p.mixed_cap)),
        &streams,
        &p.mixed_sizes,
    );
    let s3fifo = lru::replay(&mut S3Fifo::new(p.mixed_cap), &streams, &p.mixed_sizes);
    let path = dir.join(format!("quire-replay-{}.vol", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let store = Store::open(&path, p.mixed_cap, options.clone())
        .with_context(|| format!("opening {}", path.display()))?;
    let tally = Tally::new();
    let r = replay(&store, &streams, p, spec.keys, &tally);
    let st = store.stats();
    drop(store);
    let _ = std::fs::remove_file(&path);
    anyhow::ensure!(tally.mismatches() == 0, "wrong bytes served");
    if tally.errors() > 0 {
        println!("errors: {}", tally.errors());
    }
    println!(
        "{:<10} hit {:.4}  lru {:.4}  w-tinylfu {:.4}  s3-fifo {:.4}  live/cap {:.3}  \
         used/cap {:.3}  admitted {}  rejected {}  evicted {}  carried {}",
        scenario.name(),
        r.hit,
        lru.hit_ratio(),
        wtinylfu.hit_ratio(),
        s3fifo.hit_ratio(),
        st.bytes_live as f64 / st.cap_bytes as f64,
        st.bytes_used as f64 / st.cap_bytes as f64,
        st.admitted,
        st.rejected,
        st.evicted,
        st.carried,
    );
    let live_cap = (r.space[0] / f64::from(r.samples.max(1))) as u64;
    let lru_live = lru::simulate(live_cap, &streams, &p.mixed_sizes);
    let wtinylfu_live = lru::replay(
        &mut WTinyLfu::new(live_cap, held(live_cap)),
        &streams,
        &p.mixed_sizes,
    );
    let shares: Vec<String> = PARTS
        .iter()
        .zip(r.space)
        .map(|((name, _), sum)| format!("{name} {:.4}", sum / r.cap.max(1.0)))
        .collect();
    println!(
        "           of cap: {}  | lru@live {:.4}  w-tinylfu@live {:.4}  scan keys stored {}/{}",
        shares.join("  "),
        lru_live.hit_ratio(),
        wtinylfu_live.hit_ratio(),
        r.scan_stored,
        r.scan_gets,
    );
    Ok(())
}
