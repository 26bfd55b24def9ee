//! Render time per note of the bundled `examples/vault`: every note rendered for
//! the widest audience (so private and draft notes count too), `ROUNDS` times, each
//! render timed on its own; prints p50, p99 and max over all renders.
//!
//! Run: `cargo bench -p quire-vault --bench render` (an optimised build). The first
//! round is a warm-up and is not counted (it loads what renders load once, such as
//! the diagram renderer's fonts).

use std::path::Path;
use std::time::Instant;

use quire_vault::render::render;
use quire_vault::{Vault, Visibility};

/// Timed rounds over the whole vault.
const ROUNDS: usize = 20;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/vault");
    let vault = Vault::load(&root).expect("examples/vault loads");
    let n = vault.notes().len();
    let mut times_ns: Vec<u128> = Vec::with_capacity(n * ROUNDS);
    let mut bytes = 0usize;
    for round in 0..=ROUNDS {
        for i in 0..n {
            let t = Instant::now();
            let r = render(&vault, i, Visibility::Draft);
            let el = t.elapsed().as_nanos();
            if round > 0 {
                times_ns.push(el);
                bytes += r.html.len();
            }
        }
    }
    times_ns.sort_unstable();
    let q = |p: f64| {
        let k = ((times_ns.len() as f64 - 1.0) * p).round() as usize;
        times_ns[k] as f64 / 1000.0
    };
    println!(
        "render: {n} notes x {ROUNDS} rounds: p50 {:.1} us, p99 {:.1} us, max {:.1} us, {} HTML bytes per round",
        q(0.5),
        q(0.99),
        q(1.0),
        bytes / ROUNDS
    );
}
