//! A one-thread replay of `quire bench store`'s mixed streams (with and without scans)
//! through a real [`Store`], for iterating on the hit ratio quickly: the threads' ops are
//! interleaved round-robin, as the exact-LRU reference replays them, so the figures do
//! not depend on scheduling. The bench's own multi-threaded figures stay the reference.
//!
//! `cargo run --release -p quire-store --features bench --example replay [-- DIR [SEED]]`
//! (DIR defaults to the temp directory; `/dev/shm` keeps the volume in RAM).
//! `QUIRE_REPLAY_CARRY=0.6` sets `carry_share`; `QUIRE_REPLAY_ORACLE=1` never stores a
//! scan key (its get still misses and is counted), the most any admission rule could
//! save on the scan mix.
//!
//! Each line also says where the cap's bytes were, averaged over 16 samples of the
//! measured part ([`SpaceBreakdown`]), and what exact LRU scores with a cap of only the
//! live payload bytes (`lru@live`): the gap between that and `lru` is what the store
//! loses to space it does not fill with entries, the gap between `hit` and `lru@live`
//! what its policy wins back.

use std::path::PathBuf;

use quire_store::bench::lru;
use quire_store::bench::mixed::{Versions, Worker};
use quire_store::bench::tally::Tally;
use quire_store::bench::workload::{self, Streams};
use quire_store::bench::Params;
use quire_store::{Engine, Options, SpaceBreakdown, Store};

/// What one replay gave.
struct Replayed {
    hit: f64,
    /// Fields of [`SpaceBreakdown`] summed over the samples, and the sample count.
    space: [f64; 9],
    samples: u32,
    /// Scan keys stored (admitted), and asked for.
    scan_stored: u64,
    scan_gets: u64,
}

const SAMPLES: usize = 16;

fn fields(b: &SpaceBreakdown) -> [f64; 9] {
    [
        b.live_payload_bytes,
        b.live_overhead_bytes,
        b.sealed_dead_bytes,
        b.sealed_tail_bytes,
        b.open_dead_bytes,
        b.open_room_bytes,
        b.region_header_bytes,
        b.unregioned_bytes,
        b.cap_bytes,
    ]
    .map(|x| x as f64)
}

fn replay(store: &Store, streams: &Streams, p: &Params, keys: usize, tally: &Tally) -> Replayed {
    let oracle = std::env::var_os("QUIRE_REPLAY_ORACLE").is_some();
    let versions = Versions::new(keys);
    let mut w = Worker::new(store, &p.mixed_sizes, &versions, tally, "replay", 64);
    let mut out = Replayed {
        hit: 0.0,
        space: [0.0; 9],
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
                let f = fields(&store.space_breakdown());
                out.space.iter_mut().zip(f).for_each(|(s, x)| *s += x);
                out.samples += 1;
            }
            for thread in phase {
                let Some(&op) = thread.get(i) else { continue };
                if oracle && op.id >= workload::SCAN_BASE {
                    // What the mix would score if scan keys were never stored.
                    w.stats.gets += 1;
                    let _ = store.get(&quire_store::bench::content::key(op.id));
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

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let seed: u64 = args.next().map_or(1, |s| s.parse().expect("seed"));
    let mut options = Options::default();
    if let Ok(c) = std::env::var("QUIRE_REPLAY_CARRY") {
        options.carry_share = c.parse().expect("QUIRE_REPLAY_CARRY");
    }
    if let Ok(r) = std::env::var("QUIRE_REPLAY_REGION_KIB") {
        options.region_bytes = Some(r.parse::<u64>().expect("QUIRE_REPLAY_REGION_KIB") << 10);
    }
    let p = Params::new(false);
    for scan in [false, true] {
        let spec = p.mixed_spec(scan, seed);
        let streams = workload::generate(&spec);
        let lru = lru::simulate(p.mixed_cap, &streams, &p.mixed_sizes);
        let path = dir.join(format!("quire-replay-{}.vol", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let store = Store::open(&path, p.mixed_cap, options.clone()).expect("open");
        let tally = Tally::new();
        let r = replay(&store, &streams, &p, spec.keys, &tally);
        let hit = r.hit;
        let st = store.stats();
        drop(store);
        let _ = std::fs::remove_file(&path);
        assert_eq!(tally.mismatches(), 0, "wrong bytes served");
        if tally.errors() > 0 {
            println!("errors: {}", tally.errors());
        }
        println!(
            "{:<10} hit {:.4}  lru {:.4}  live/cap {:.3}  used/cap {:.3}  admitted {}  \
             rejected {}  evicted {}  carried {}",
            if scan { "mixed_scan" } else { "mixed" },
            hit,
            lru.hit_ratio(),
            st.bytes_live as f64 / st.cap_bytes as f64,
            st.bytes_used as f64 / st.cap_bytes as f64,
            st.admitted,
            st.rejected,
            st.evicted,
            st.carried,
        );
        let n = f64::from(r.samples.max(1));
        let cap = r.space[8] / n;
        let share = |i: usize| r.space[i] / n / cap;
        let live_cap = (r.space[0] / n) as u64;
        let lru_live = lru::simulate(live_cap, &streams, &p.mixed_sizes);
        println!(
            "           of cap: live payload {:.3}  entry headers {:.4}  sealed dead {:.3}  \
             sealed tail {:.4}  open dead {:.4}  open room {:.3}  region headers {:.5}  \
             unregioned {:.4}  | lru@live {:.4}  scan keys stored {}/{}",
            share(0),
            share(1),
            share(2),
            share(3),
            share(4),
            share(5),
            share(6),
            share(7),
            lru_live.hit_ratio(),
            r.scan_stored,
            r.scan_gets,
        );
    }
}
