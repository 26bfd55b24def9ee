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

use std::path::PathBuf;

use quire_store::bench::lru;
use quire_store::bench::mixed::{Versions, Worker};
use quire_store::bench::tally::Tally;
use quire_store::bench::workload::{self, Streams};
use quire_store::bench::Params;
use quire_store::{Engine, Options, Store};

fn replay(store: &Store, streams: &Streams, p: &Params, keys: usize, tally: &Tally) -> f64 {
    let oracle = std::env::var_os("QUIRE_REPLAY_ORACLE").is_some();
    let versions = Versions::new(keys);
    let mut w = Worker::new(store, &p.mixed_sizes, &versions, tally, "replay", 64);
    for (phase, counted) in [(&streams.warmup, false), (&streams.measured, true)] {
        if counted {
            w.stats = Default::default();
        }
        let longest = phase.iter().map(Vec::len).max().unwrap_or(0);
        for i in 0..longest {
            for thread in phase {
                let Some(&op) = thread.get(i) else { continue };
                if oracle && op.id >= workload::SCAN_BASE {
                    // What the mix would score if scan keys were never stored.
                    w.stats.gets += 1;
                    let _ = store.get(&quire_store::bench::content::key(op.id));
                    continue;
                }
                w.run(op);
            }
        }
    }
    w.stats.hit_ratio()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let seed: u64 = args.next().map_or(1, |s| s.parse().expect("seed"));
    let mut options = Options::default();
    if let Ok(c) = std::env::var("QUIRE_REPLAY_CARRY") {
        options.carry_share = c.parse().expect("QUIRE_REPLAY_CARRY");
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
        let hit = replay(&store, &streams, &p, spec.keys, &tally);
        let st = store.stats();
        drop(store);
        let _ = std::fs::remove_file(&path);
        assert_eq!(tally.mismatches(), 0, "wrong bytes served");
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
    }
}
