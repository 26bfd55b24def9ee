//! A one-thread replay of `quire bench store`'s mixed streams through a real store, for
//! iterating on the hit ratio quickly (see `quire_bench::store::replay`).
//!
//! `cargo run --release -p quire-bench --example replay [-- DIR [SEED]]`

use std::path::PathBuf;

use anyhow::Context as _;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().map_or_else(std::env::temp_dir, PathBuf::from);
    let seed: u64 = match args.next() {
        Some(s) => s.parse().with_context(|| format!("SEED {s:?}"))?,
        None => 1,
    };
    quire_bench::store::replay::run(&dir, seed)
}
